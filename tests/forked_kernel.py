"""The tests' Jupyter kernels, forked from a process that has already imported what the chapters import: a chapter's
cells run as in a fresh kernel, without the 6 to 8 s of imports (PyTorch, transformers, cvxpy, the library) that
each of the tests' 30-odd kernels would pay again.

The top-level ``conftest.py`` starts one ``serve`` process a test worker and points ``$JUPYTER_PATH`` at a
``python3`` kernel spec whose command is ``launch``: every kernel the tests start (nbmake, papermill, a sweep's
points, JupyterLab) asks that process for a fork. The fork takes the kernel's arguments, environment, folder and
standard streams, and runs ipykernel as ``python -m ipykernel_launcher`` would. A fresh kernel is started instead,
as by the default spec, where no such process answers, or where the kernel's environment differs from the one
the imports saw in a variable read at import (threads, paths, ``PYTHON*``).

    python tests/forked_kernel.py serve SOCKET BOOK   # imports, then forks a kernel per connection on SOCKET
    python tests/forked_kernel.py launch -f CONNECTION_FILE   # a kernel spec's command
"""

from __future__ import annotations

import ast
import atexit
import importlib
import json
import os
import random
import re
import signal
import socket
import sys
import threading
from pathlib import Path

ENV_ADDRESS = "MATCOMP_KERNEL_FORKS"  # the socket of this test worker's serve process
INLINE = "module://matplotlib_inline.backend_inline"  # what ipykernel sets $MPLBACKEND to before a kernel's imports
READ_AT_IMPORT = re.compile(r"^(?!PYTHONBREAKPOINT$)"  # read at each breakpoint() (Ray's driver sets it)
                            r"(OMP_|MKL_|OPENBLAS_|KMP_|GOMP_|PYTHON|TORCH|PYTORCH|CUDA|HF_|TRANSFORMERS|MPL|LD_)")
STREAMS = (0, 1, 2)


def notebook_imports(book: Path) -> list[str]:
    """The modules the code cells of ``book``'s notebooks import, in order (the magics' cells left out)."""
    modules: dict[str, None] = {}
    for path in sorted(book.glob("*.ipynb")):
        for cell in json.loads(path.read_text())["cells"]:
            source = "".join(cell["source"]) if cell["cell_type"] == "code" else ""
            try:
                tree = ast.parse(source)
            except SyntaxError:
                continue
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    modules.update(dict.fromkeys(alias.name for alias in node.names))
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    modules[node.module] = None
    return list(modules)


def import_time_environment(env: dict[str, str]) -> dict[str, str]:
    """The variables of ``env`` that a module may read when imported (a fork keeps what they were then)."""
    return {name: value for name, value in env.items() if READ_AT_IMPORT.match(name)}


def path_folders(env: dict[str, str]) -> list[str]:
    """The folders ``env``'s ``$PYTHONPATH`` puts first on a new interpreter's path."""
    return [folder for folder in env.get("PYTHONPATH", "").split(os.pathsep) if folder]


def differences(requested: dict[str, str], imported_with: dict[str, str]) -> list[tuple[str, str]]:
    """The import-time variables whose values differ between ``requested`` and ``imported_with``; a ``$PYTHONPATH``
    whose every folder is on this process's path already is none (the fork puts them first, as Python would)."""
    changed = set(import_time_environment(requested).items()) ^ set(import_time_environment(imported_with).items())
    on_path = {str(Path(folder).resolve()) for folder in sys.path if folder}
    if all(str(Path(folder).resolve()) in on_path for folder in path_folders(requested)):
        changed = {(name, value) for name, value in changed if name != "PYTHONPATH"}
    return sorted(changed)


def other_threads() -> list[str]:
    """The names of this process's threads besides the main one that a fork would miss: jemalloc's background
    thread (pyarrow's allocator, imported by pandas) is not among them, since jemalloc restarts it in a fork as it
    does in Redis's forks."""
    names = [(Path("/proc/self/task") / task / "comm").read_text().strip() for task in os.listdir("/proc/self/task")
             if int(task) != os.getpid()]
    return [name for name in names if name != "jemalloc_bg_thd"]


def serve(address: str, book: Path) -> None:
    """Import what ``book``'s notebooks import, then fork a kernel for each launcher that connects to ``address``;
    the socket is bound first, so a launcher that comes early waits for the imports rather than missing them."""
    del sys.path[0]  # this file's folder: a kernel's path is python -m ipykernel_launcher's
    imported_with = import_time_environment(os.environ)
    os.environ.setdefault("MPLBACKEND", INLINE)  # as ipykernel would; its inline module is loaded by the kernel
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(address)
    listener.listen(64)
    for module in ["ipykernel.kernelapp", *notebook_imports(book)]:
        try:
            importlib.import_module(module)
        except Exception:  # noqa: BLE001 - the kernel that imports it says what is wrong, in its cell
            pass
    alone = threading.active_count() == 1 and not other_threads()  # a fork copies no thread: none may be needed
    if not alone:
        print(f"threads {other_threads()} after the imports: every kernel starts fresh", flush=True)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the forks are reaped as they end; none is left a zombie
    while True:
        connection, _ = listener.accept()
        message, fds, _, _ = socket.recv_fds(connection, 1 << 16, len(STREAMS))
        while not message.endswith(b"\n"):  # a long environment may come in several pieces
            message += connection.recv(1 << 16) or b"\n"
        request = json.loads(message)
        changed = differences(request["env"], imported_with)
        if not alone or changed or len(fds) != len(STREAMS):
            print(f"a fresh kernel for {request['cwd']}: {changed or 'no fork'}", flush=True)
            connection.sendall(b"fresh\n")
        else:
            sys.stdout.flush(), sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                listener.close()
                run_kernel(connection, request, fds)
            connection.sendall(f"{pid}\n".encode())
            print(f"kernel {pid} forked for {request['cwd']}", flush=True)
        for fd in fds:
            os.close(fd)
        connection.close()


def run_kernel(connection: socket.socket, request: dict, fds: list[int]) -> None:
    """In the fork: take the launcher's streams, folder, environment and arguments, run ipykernel, and end when it
    ends or when the launcher does (its socket closes); never returns into ``serve``."""
    code = 1
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the kernel waits for its own subprocesses
        for fd, stream in zip(fds, STREAMS):
            os.dup2(fd, stream)
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        for folder in map(os.path.abspath, reversed(path_folders(request["env"]))):
            sys.path[:] = [folder] + [entry for entry in sys.path if entry != folder]
        parent = request["env"].get("JPY_PARENT_PID")  # read when ipykernel was imported here, so passed again
        sys.argv = request["argv"] + ([f"--IPKernelApp.parent_handle={parent}"] if parent else [])
        random.seed()  # a fresh kernel's generators are seeded anew; a fork's would repeat the server's
        if "numpy" in sys.modules:
            sys.modules["numpy"].random.seed()
        threading.Thread(target=lambda: connection.recv(1) or os._exit(1), daemon=True).start()
        from ipykernel.kernelapp import launch_new_instance

        launch_new_instance()
        code = 0
    except SystemExit as end:
        code = end.code if isinstance(end.code, int) else 1
    except BaseException:  # noqa: BLE001 - said on the kernel's stderr, as a fresh kernel would
        import traceback

        traceback.print_exc()
    finally:
        atexit._run_exitfuncs()  # what ending the interpreter runs, here where the fork ends
        sys.stdout.flush(), sys.stderr.flush()
        os._exit(code)


def launch(argv: list[str]) -> None:
    """A kernel spec's command: ask this worker's serve process for a fork with ``argv`` and wait for it to end,
    passing it the signals the kernel's manager sends (an interrupt, a termination); else a fresh kernel."""
    address = os.environ.get(ENV_ADDRESS)
    if address:
        try:
            server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            server.connect(address)
            request = {"argv": ["ipykernel_launcher", *argv], "env": dict(os.environ), "cwd": os.getcwd()}
            socket.send_fds(server, [json.dumps(request).encode() + b"\n"], list(STREAMS))
            answer = server.makefile().readline().strip()
        except OSError:
            answer = "fresh"
        if answer != "fresh":
            wait_for_fork(server, int(answer))
    os.execv(sys.executable, [sys.executable, "-m", "ipykernel_launcher", *argv])


def wait_for_fork(server: socket.socket, pid: int) -> None:
    """Pass the manager's signals to the fork ``pid`` until it ends (its end closes ``server``); end it if this
    process's parent, the manager, goes first."""
    for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(number, lambda n, _: os.kill(pid, n))
    manager = os.getppid()
    server.settimeout(1.0)
    while True:
        try:
            if not server.recv(1):
                sys.exit(0)
        except TimeoutError:
            if os.getppid() != manager:
                os.kill(pid, signal.SIGKILL)
                sys.exit(1)


def start_server(address: Path, book: Path, log=None):
    """A ``serve`` process for ``address`` and ``book`` in a session of its own (its forks are in its process
    group), once its socket is bound: a launcher that came before would start a fresh kernel."""
    import subprocess
    import time

    server = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "serve", str(address), str(book)],
                              stdin=subprocess.DEVNULL, stdout=log, stderr=log and subprocess.STDOUT,
                              start_new_session=True)
    for _ in range(300):
        if address.exists() or server.poll() is not None:
            break
        time.sleep(0.01)
    if not address.exists():
        server.kill()
        raise RuntimeError(f"the kernel fork server did not bind {address} (exit {server.poll()})")
    return server


def kernel_spec(folder: Path) -> Path:
    """A ``python3`` kernel spec in ``folder``/kernels whose command is ``launch``, for ``$JUPYTER_PATH``; its
    other fields those of the installed spec. Returns ``folder``."""
    from jupyter_client.kernelspec import KernelSpecManager

    installed = KernelSpecManager().get_kernel_spec("python3").to_dict()
    spec = folder / "kernels" / "python3"
    spec.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, str(Path(__file__).resolve()), "launch", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(json.dumps({**installed, "argv": command}, indent=1))
    return folder


if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"] and len(sys.argv) == 4:
        serve(sys.argv[2], Path(sys.argv[3]))
    elif sys.argv[1:2] == ["launch"]:
        launch(sys.argv[2:])
    else:
        sys.exit("usage: forked_kernel.py serve SOCKET BOOK | launch -f CONNECTION_FILE")
