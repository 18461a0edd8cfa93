"""The tests' forked kernels (``tests/forked_kernel.py``) run a notebook as a fresh kernel does, answer an
interrupt, end with their launcher, and give way to a fresh kernel where the environment read at import differs."""

import os
import signal
import sys
import time
from pathlib import Path

import forked_kernel  # beside this file (pytest puts a test's folder on the path)
import nbformat
import pytest
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient

CELLS = [
    "import os, random, sys\nimport matplotlib.pyplot as plt",
    "print(os.getcwd(), os.environ['MATCOMP_TEST_VALUE'], sys.argv[1:2], sys.path)",
    "plt.plot([0, 1], [1, 0]); plt.title('drawn inline')",  # shown at the cell's end only if the backend is hooked
    "print(random.random())",
    "os.getppid()",
]


def notebook() -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in CELLS])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


@pytest.fixture
def forks(tmp_path, monkeypatch):
    """A fork server of its own, whose imports are those of a folder holding the notebook above; the kernel spec
    pointing at it on ``$JUPYTER_PATH``. Yields the server's process."""
    book = tmp_path / "book"
    book.mkdir()
    nbformat.write(notebook(), (book / "probe").with_suffix(".ipynb"))
    monkeypatch.delenv(forked_kernel.ENV_ADDRESS, raising=False)
    monkeypatch.delenv("JUPYTER_PATH", raising=False)
    folder = forked_kernel.kernel_spec(tmp_path / "spec")
    address = tmp_path / "forks.sock"
    server = forked_kernel.start_server(address, book)
    monkeypatch.setenv("JUPYTER_PATH", str(folder))
    monkeypatch.setenv(forked_kernel.ENV_ADDRESS, str(address))
    monkeypatch.setenv("MATCOMP_TEST_VALUE", "set by the test")
    yield server
    os.killpg(server.pid, signal.SIGTERM)
    server.wait()


def outputs(nb: nbformat.NotebookNode, cwd: Path) -> list[list[dict]]:
    NotebookClient(nb, kernel_name="python3", timeout=60, resources={"metadata": {"path": str(cwd)}}).execute()
    return [[{k: v for k, v in o.items() if k != "execution_count"} for o in cell.outputs] for cell in nb.cells]


def test_a_forked_kernel_runs_a_notebook_as_a_fresh_kernel_does_in_its_own_folder_and_environment(forks, tmp_path,
                                                                                                monkeypatch):
    forked, again = outputs(notebook(), tmp_path), outputs(notebook(), tmp_path)
    monkeypatch.delenv(forked_kernel.ENV_ADDRESS)
    fresh = outputs(notebook(), tmp_path)
    assert forked[1] == fresh[1] and forked[1][0]["text"].startswith(f"{tmp_path} set by the test ['-f']")
    assert forked[2][-1]["output_type"] == "display_data" and "image/png" in forked[2][-1]["data"]
    assert forked[2] == fresh[2]  # the same figure, byte for byte
    assert forked[3] != again[3]  # each fork's generators seeded anew, as a fresh kernel's are
    parents = {run[4][0]["data"]["text/plain"] for run in (forked, again, fresh)}
    assert int(forked[4][0]["data"]["text/plain"]) == forks.pid and len(parents) == 2  # forked twice, then fresh


def started(tmp_path) -> tuple[KernelManager, object]:
    manager = KernelManager(kernel_name="python3")
    manager.start_kernel(cwd=str(tmp_path))
    client = manager.client()
    client.start_channels()
    client.wait_for_ready(timeout=60)
    return manager, client


def printed(client, code: str) -> str:
    """What ``code`` prints in the kernel of ``client``."""
    said: list[str] = []
    client.execute_interactive(code, timeout=60, output_hook=lambda m: said.append(m["content"].get("text", "")))
    return "".join(said)


def test_an_interrupt_reaches_the_fork_and_killing_its_launcher_ends_it(forks, tmp_path):
    manager, client = started(tmp_path)
    try:
        fork = int(printed(client, "import os; print(os.getpid())"))
        assert manager.provisioner.pid != fork and printed(client, "print(os.getppid())") == f"{forks.pid}\n"
        # its error would make the kernel abort what comes next while it settles (ipykernel's stop_on_error): under
        # load the next request came within that and printed nothing
        client.execute("import time; time.sleep(60)", stop_on_error=False)
        time.sleep(1)
        manager.interrupt_kernel()
        reply = client.get_shell_msg(timeout=20)["content"]
        assert reply["status"] == "error" and reply["ename"] == "KeyboardInterrupt"
        assert printed(client, "print(1 + 1)") == "2\n"  # the kernel lives on after its interrupt
        os.kill(manager.provisioner.pid, signal.SIGKILL)  # the launcher, as a killed manager's kernel goes
        for _ in range(50):
            if not Path(f"/proc/{fork}").exists():
                break
            time.sleep(0.1)
        assert not Path(f"/proc/{fork}").exists(), "the fork outlived its launcher"
    finally:
        client.stop_channels()
        manager.cleanup_resources()


def test_a_kernel_whose_import_time_environment_differs_starts_fresh(forks, tmp_path, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "3" if os.environ.get("OMP_NUM_THREADS") != "3" else "4")
    manager, client = started(tmp_path)
    try:
        assert int(printed(client, "import os; print(os.getpid())")) == manager.provisioner.pid  # no fork
    finally:
        manager.shutdown_kernel(now=True)
        client.stop_channels()


def test_only_what_is_read_at_import_and_a_path_the_imports_did_not_see_need_a_fresh_kernel(tmp_path):
    imported_with = {"OMP_NUM_THREADS": "1", "PATH": "/bin"}
    on_path = next(folder for folder in sys.path if folder and Path(folder).is_dir())
    same = {**imported_with, "PATH": "/usr/bin", "MATCOMP_PRESET": "cpu", "PYTHONBREAKPOINT": "ray.util.rpdb.x",
            "PYTHONPATH": on_path}
    assert forked_kernel.differences(same, imported_with) == []
    assert forked_kernel.differences({**same, "OMP_NUM_THREADS": "2"}, imported_with) == [
        ("OMP_NUM_THREADS", "1"), ("OMP_NUM_THREADS", "2")]
    assert forked_kernel.differences({**same, "PYTHONPATH": f"{on_path}:{tmp_path}"}, imported_with) == [
        ("PYTHONPATH", f"{on_path}:{tmp_path}")]  # a folder the imports never saw: its modules may differ
