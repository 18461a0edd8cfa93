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


def test_a_sweep_kernel_records_without_importing_torch():
    check = "import sys, matcomp.book.build.sweep; assert 'torch' not in sys.modules, 'torch imported'"
    result = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
