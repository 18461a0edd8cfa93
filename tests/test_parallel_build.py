"""The build's parallel execution (``matcomp.book.build.parallel_build``): it fills the cache MyST-NB reads with
the notebooks MyST-NB would execute, leaves out those its patterns exclude, and stands aside when asked."""

import subprocess
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest
from jupyter_cache import get_cache

from matcomp.book.build.executed import build_wrote
from matcomp.book.build.parallel_build import ENV_SERIAL, execute_ahead


def notebook(path: Path, value: int, also: str = "") -> Path:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(f"import os\nprint({value}, os.getpid())\n{also}")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)
    return path


def sphinx_env(tmp_path: Path, names: list[str], excluded=()) -> SimpleNamespace:
    config = SimpleNamespace(execution_mode="cache", execution_cache_path=str(tmp_path / "cache"),
                             execution_excludepatterns=list(excluded), execution_timeout=120,
                             execution_allow_errors=False)
    return SimpleNamespace(mystnb_config=config,
                           doc2path=lambda name: tmp_path / f"{name}.{'ipynb' if name in names else 'md'}")


@pytest.mark.slow
def test_the_notebooks_myst_nb_would_execute_are_executed_into_its_cache_two_at_a_time(tmp_path, monkeypatch):
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)  # the notebooks' repository
    writes = "open('b.out', 'w').write('b')"  # in its own folder, as MyST-NB runs it: a write into the repository
    paths = {name: notebook(tmp_path / f"{name}.ipynb", i, writes if name == "b" else "")
             for i, name in enumerate(["a", "b", "c"])}
    env = sphinx_env(tmp_path, list(paths), excluded=["**/c.ipynb"])
    execute_ahead(None, env, [*paths, "page"])  # a page that is not a notebook is not executed
    cache = get_cache(env.mystnb_config.execution_cache_path)
    # the write is noted beside each chapter the build executed with it (which of them wrote cannot be told)
    assert [build_wrote(paths[name], Path(cache.path)) for name in "abc"] == [["?? b.out"], ["?? b.out"], None]
    for name, expected in (("a", "0 "), ("b", "1 ")):
        record = cache.match_cache_notebook(nbformat.read(paths[name], as_version=4))  # what MyST-NB asks
        outputs = cache.get_cache_bundle(record.pk).nb.cells[0].outputs
        assert outputs[0]["text"].startswith(expected)
    pids = {cache.get_cache_bundle(cache.match_cache_notebook(nbformat.read(p, as_version=4)).pk).nb.cells[0]
            .outputs[0]["text"].split()[1] for p in (paths["a"], paths["b"])}
    assert len(pids) == 2  # two kernels
    with pytest.raises(KeyError):  # excluded: MyST-NB leaves it unexecuted, and so does the build
        cache.match_cache_notebook(nbformat.read(paths["c"], as_version=4))


def test_it_stands_aside_when_serial_is_asked_or_the_mode_is_not_cache(tmp_path, monkeypatch):
    paths = [notebook(tmp_path / f"{name}.ipynb", i) for i, name in enumerate(["a", "b"])]
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    monkeypatch.setenv(ENV_SERIAL, "1")
    execute_ahead(None, sphinx_env(tmp_path, ["a", "b"]), ["a", "b"])
    monkeypatch.delenv(ENV_SERIAL)
    env = sphinx_env(tmp_path, ["a", "b"])
    env.mystnb_config.execution_mode = "auto"
    execute_ahead(None, env, ["a", "b"])
    assert not (tmp_path / "cache").exists() and all(p.exists() for p in paths)
