"""The test command's setting, for every test and every chapter it executes (kernels inherit the
environment): the smoke preset unless MATCOMP_PRESET says otherwise, and one thread a process (the
models are small; a second thread only contends with the other test workers and kernels).

The tests run on every core (pytest-xdist; the run store's locks keep two workers from training one
run twice); those that start Ray share one worker. Executing a chapter is slow (``pytest -m "not
slow"`` leaves every chapter out). The book build test executes the chapters with widgets and those
that write files (``build_executed``), so nbmake does not execute those a second time. Every kernel the
tests start is forked from a process that has imported what the chapters import (``tests/forked_kernel.py``)."""

import importlib.util
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path

import pytest

os.environ.setdefault("MATCOMP_PRESET", "smoke")
os.environ.setdefault("OMP_NUM_THREADS", "1")

ROOT = Path(__file__).resolve().parent
WRITERS = ["book/progress", "book/width_depth"]  # the chapters that write files: progress caches, a sweep


def executed_by_build() -> list[str]:
    """The chapters the book build test executes: those with widgets (their saved state is checked) and
    those that write files (the repository must be unchanged after the build)."""
    widgets = [f"book/{p.stem}" for p in sorted((ROOT / "book").glob("*.ipynb"))
               if "matcomp.book.widgets" in p.read_text()]
    return widgets + [w for w in WRITERS if w not in widgets]


@pytest.fixture
def build_executed() -> list[str]:
    return executed_by_build()


@pytest.fixture
def local_ray():
    """A local Ray instance (2 CPUs) for the Ray tests, started once for the run of them on their worker (a start
    takes 10 to 20 s) and shut down after the last of their group (``pytest_runtest_teardown``)."""
    ray = pytest.importorskip("ray")
    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    return ray


def ray_group(item) -> bool:
    """Whether ``item`` is of the Ray tests' xdist group (``test_prepare.py``, ``test_sweep.py``), which pytest-xdist
    hands to one worker as one batch."""
    marker = item is not None and item.get_closest_marker("xdist_group")
    return bool(marker) and marker.args[:1] == ("ray",)


def pytest_runtest_teardown(item, nextitem):
    """Ray shut down after the last test of its group, not at the end of the session: idle, its processes took a
    tenth of a core for the minutes of tests after them."""
    if ray_group(item) and not ray_group(nextitem) and "ray" in sys.modules:
        sys.modules["ray"].shutdown()


def pytest_collection_modifyitems(config, items):
    built = {f"{name}.ipynb" for name in executed_by_build()}
    kept, skipped = [], []
    for item in items:
        path = Path(str(item.path))
        if path.suffix == ".ipynb":
            item.add_marker(pytest.mark.slow)
            if path.relative_to(ROOT).as_posix() in built:
                skipped.append(item)
                continue
        kept.append(item)
    if skipped:
        config.hook.pytest_deselected(items=skipped)
    # the files with slow tests, and the chapters, first, the many short tests after them: pytest-xdist hands tests
    # out in this order (the Ray group, the largest, first of all), so the short ones fill the workers' ends rather
    # than a chapter started last keeping one worker busy alone; a file's tests stay together (its module-scoped
    # fixtures, a Ray instance, are set up once)
    slow_files = {item.path for item in kept if item.get_closest_marker("slow")}
    items[:] = sorted(kept, key=lambda item: item.path not in slow_files)


def forked_kernel_module():
    spec = importlib.util.spec_from_file_location("forked_kernel", ROOT / "tests" / "forked_kernel.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


KERNEL_FORKS = pytest.StashKey[tuple]()  # this process's fork server and its folder


def pytest_collection_finish(session):
    """Where this process runs a chapter or another slow test, its kernels are forked from one process that has
    imported what the chapters import (``tests/forked_kernel.py``): it starts now and imports while the first
    tests run."""
    if session.config.option.collectonly or not any(item.get_closest_marker("slow") for item in session.items):
        return
    forks = forked_kernel_module()
    folder = forks.kernel_spec(Path(tempfile.mkdtemp(prefix="matcomp-kernels-")))
    with (folder / "serve.log").open("w") as log:
        server = forks.start_server(folder / "forks.sock", ROOT / "book", log)
    os.environ["JUPYTER_PATH"] = os.pathsep.join(filter(None, [str(folder), os.environ.get("JUPYTER_PATH")]))
    os.environ[forks.ENV_ADDRESS] = str(folder / "forks.sock")
    session.config.stash[KERNEL_FORKS] = (server, folder)


def pytest_unconfigure(config):
    server, folder = config.stash.get(KERNEL_FORKS, (None, None))
    if server is not None:
        os.killpg(server.pid, signal.SIGTERM)  # the server, and any fork of it a test left running
        server.wait()
        shutil.rmtree(folder, ignore_errors=True)
