// The widget manager (@jupyter-widgets/html-manager 1.0.6) typesets a widget's label with MathJax 2's
// MathJax.Hub.Queue; the book serves MathJax 3, which has no Hub. Loaded after the page's MathJax configuration and
// before MathJax 3 starts (it is deferred): the configuration gets a Hub that hands the element to MathJax 3's
// typesetPromise, and MathJax 3, once ready, keeps it.
(function () {
  var config = window.MathJax = window.MathJax || {};
  var hub = {
    Queue: function () {
      for (var i = 0; i < arguments.length; i++) {
        var call = arguments[i];
        if (Array.isArray(call) && call[0] === "Typeset" && window.MathJax.typesetPromise) {
          window.MathJax.typesetPromise(call[2] ? [call[2]] : undefined);
        }
      }
    }
  };
  config.Hub = hub;
  config.startup = config.startup || {};
  var ready = config.startup.ready;
  config.startup.ready = function () {
    if (ready) { ready(); } else { window.MathJax.startup.defaultReady(); }
    window.MathJax.Hub = hub;
  };
})();
