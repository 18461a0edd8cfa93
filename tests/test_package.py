import subprocess
import sys

import pytest

import matcomp


def test_shortcuts_resolve_on_first_use_and_unknown_names_fail():
    from matcomp.runs.store import get_or_train

    assert matcomp.get_or_train is get_or_train and "preset_config" in matcomp.__all__
    assert all(getattr(matcomp, name) is not None for name in matcomp.__all__)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        matcomp.nope


@pytest.mark.parametrize("module", ["matcomp.book.build.sweep", "matcomp.arguments"],
                         ids=["a sweep kernel records", "a script's options are read"])
def test_without_importing_torch(module):
    """The sweep's record in each kernel, and the scripts' options (``scripts/*.py`` answer a usage error in a fifth
    of a second, not the 2.5 s of loading PyTorch)."""
    check = f"import sys, {module}; assert 'torch' not in sys.modules, 'torch imported'"
    result = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
