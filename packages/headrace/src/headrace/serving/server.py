"""Start a real Triton Inference Server on loopback ports: the binary from `nvidia-pytriton` (or a system install),
a backend directory with the Python backend and headrace's generic backend, a bounded readiness wait."""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

BACKEND_NAME = "headrace"
# What Triton runs for a model with `backend: "headrace"`: the generic backend's model.py, one file in the package
# (headrace/serving/model.py; backend/model.py in the repository links to it, and the Docker image copies it).
BACKEND_MODEL_PY = resources.files("headrace.serving").joinpath("model.py").read_text()


EXIT_TIMEOUT_S = 5
"""How long a stopping tritonserver waits for in-flight requests and open client connections
(`--exit-timeout-secs`, Triton's default 30) before it exits anyway: an idle keep-alive client holds a stop that
long. `stop()` waits longer than that, then removes the shared-memory regions of the Python backends, which a
server that exited this way (or was killed) leaves behind."""
MEMORY_POOL_ARGS = ("--cuda-memory-pool-byte-size=0:536870912", "--pinned-memory-pool-byte-size=536870912")
"""The server memory pools `headrace serve` and the Docker image start with: Python-backend models hand GPU outputs
to the server through the CUDA pool (64 MB per GPU by default; 8 instances' batches of 32 images hold 154 MB). A
machine without a GPU skips them (docs/serving.md)."""
_REGION_MARK = "_backend_shm_region_"  # Triton's Python backends name their shared memory triton_<backend>..._<uuid>


class ServerError(RuntimeError):
    """The server could not be found, did not start, or did not become ready in time."""


@dataclass
class ServerFiles:
    """Where a Triton install keeps what the Python backend needs."""

    tritonserver: Path
    python_backend: Path  # folder with libtriton_python.so and triton_python_backend_utils.py
    stub: Path            # triton_python_backend_stub for this Python version
    library_dirs: tuple[Path, ...] = ()  # where the copied backend and stub find their bundled libraries


def find_server(python_version: str | None = None) -> ServerFiles:
    """The server binary and Python backend files: from the `nvidia-pytriton` wheel, else from /opt/tritonserver
    (NVIDIA's container image) or $TRITONSERVER_ROOT."""
    version = python_version or f"{sys.version_info.major}.{sys.version_info.minor}"
    roots = []
    try:
        import importlib.util

        spec = importlib.util.find_spec("pytriton")
        if spec is not None and spec.submodule_search_locations:
            roots.append(Path(next(iter(spec.submodule_search_locations))) / "tritonserver")
    except (ImportError, ValueError):
        pass
    roots += [Path(p) for p in (os.environ.get("TRITONSERVER_ROOT"), "/opt/tritonserver") if p]
    for root in roots:
        binary, backend = root / "bin" / "tritonserver", root / "backends" / "python"
        if not (binary.is_file() and (backend / "libtriton_python.so").is_file()):
            continue
        for stub in (root / "python_backend_stubs" / version / "triton_python_backend_stub",
                     backend / "triton_python_backend_stub"):
            if stub.is_file():
                bundled = root.parent.parent / "nvidia_pytriton.libs"  # the wheel's RPATH target
                return ServerFiles(binary, backend, stub, (bundled,) if bundled.is_dir() else ())
        raise ServerError(f"{root} has no triton_python_backend_stub for Python {version}")
    raise ServerError("no Triton server found: `pip install --no-deps nvidia-pytriton` (see README), or set "
                      "TRITONSERVER_ROOT to a Triton install")


def stub_paths() -> list[str]:
    """Folders this process imports from that the stub would not see: the entries of PYTHONPATH (the stub's embedded
    Python ignores the variable) and the folders holding headrace and headrace_kernels."""
    import importlib.util

    paths = [str(Path(p).absolute()) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    for package in ("headrace", "headrace_kernels"):
        spec = importlib.util.find_spec(package)
        if spec is not None and spec.submodule_search_locations:
            paths.append(str(Path(next(iter(spec.submodule_search_locations))).parent))
    return list(dict.fromkeys(paths))


def backend_model_py(paths: list[str] | tuple[str, ...] = ()) -> str:
    """The headrace backend's model.py: BACKEND_MODEL_PY, with `paths` put first on sys.path before the import."""
    return with_import_paths(BACKEND_MODEL_PY, paths)


def with_import_paths(source: str, paths: list[str] | tuple[str, ...]) -> str:
    """A Python-backend model.py's `source` (a docstring, then no `__future__` import) with `paths` put first on
    sys.path before its imports: the stub's embedded Python ignores PYTHONPATH (`stub_paths()`)."""
    if not paths:
        return source
    doc, body = source.split("\n\n", 1)
    return (f"{doc}\n\nimport sys\n\n# where the process that started the server found its packages (the stub ignores "
            f"PYTHONPATH)\nsys.path[:0] = [p for p in {list(paths)!r} if p not in sys.path]\n\n{body}")


def make_backend_directory(target: Path, files: ServerFiles) -> Path:
    """A --backend-directory: python/ (the Python backend and the stub of this Python) and headrace/ (the generic
    pipeline backend, a Python-based backend run by the same stub, seeing this process's import folders). The files
    are copied (about 3 MB): Triton refuses a Python-based backend whose libtriton_python.so resolves outside the
    backend directory."""
    python_dir = target / "python"
    python_dir.mkdir(parents=True, exist_ok=True)
    for source in (files.python_backend / "libtriton_python.so",
                   files.python_backend / "triton_python_backend_utils.py", files.stub):
        copy = python_dir / source.name
        if not copy.exists():
            shutil.copy2(source, copy)
    headrace_dir = target / BACKEND_NAME
    headrace_dir.mkdir(exist_ok=True)
    (headrace_dir / "model.py").write_text(backend_model_py(stub_paths()))
    return target


def free_port() -> int:
    """A loopback TCP port that is free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class TritonServer:
    """A running tritonserver; `http_url` / `grpc_url` are host:port as tritonclient takes them."""

    process: subprocess.Popen
    http_port: int
    grpc_port: int
    metrics_port: int
    log_path: Path
    workdir: tempfile.TemporaryDirectory | None = field(default=None, repr=False)
    exit_timeout: float = EXIT_TIMEOUT_S

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def http_url(self) -> str:
        return f"127.0.0.1:{self.http_port}"

    @property
    def grpc_url(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}/metrics"

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def log_tail(self, lines: int = 40) -> str:
        """The log's error lines, then its last `lines` lines: what to show when the server stopped."""
        return _tail(self.log(), lines)

    def is_ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://{self.http_url}/v2/health/ready", timeout=1) as reply:
                return reply.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def stop(self, timeout: float | None = None) -> int | None:
        """SIGTERM the server (it unloads models, calling finalize()), SIGKILL it after `timeout` (by default its
        exit timeout and 10 s to unload); its Python stubs are killed by PID if any outlive it, and the shared-memory
        regions of its Python backends removed if it left them (as a killed server does, and one that exits at
        its exit timeout). Returns the exit code."""
        atexit.unregister(self.stop)
        timeout = self.exit_timeout + 10 if timeout is None else timeout
        children = child_pids(self.process.pid)
        regions = backend_regions([self.process.pid, *children])
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        for pid in children:
            _kill_if_alive(pid)
        for path in regions:
            try:
                os.unlink(path)
            except OSError:
                pass  # removed by the server as it stopped
        if self.workdir is not None:
            self.workdir.cleanup()
            self.workdir = None
        return self.process.returncode

    def __enter__(self) -> TritonServer:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def child_pids(pid: int) -> list[int]:
    """The PIDs of a process's children (Linux /proc), so that stubs can be stopped by their own id."""
    pids = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            pids += [int(p) for p in (task / "children").read_text().split()]
        except OSError:
            continue
    return pids


def backend_regions(pids: list[int]) -> list[str]:
    """The shared-memory files of Triton's Python backends that these processes (a server and its stubs) have
    mapped (Linux /proc): removed by the server as it stops cleanly, left behind when it is killed."""
    paths: set[str] = set()
    for pid in pids:
        try:
            maps = Path(f"/proc/{pid}/maps").read_text()
        except OSError:
            continue
        for line in maps.splitlines():
            fields = line.split(maxsplit=5)  # address, perms, offset, device, inode, path (where there is one)
            path = fields[5] if len(fields) == 6 else ""
            if path.startswith("/dev/shm/triton_") and _REGION_MARK in path and not path.endswith(" (deleted)"):
                paths.add(path)
    return sorted(paths)


def _kill_if_alive(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def server_environment(files: ServerFiles, python: str | None = None) -> dict[str, str]:
    """The environment the stub needs: this interpreter's bin/ first on PATH (the stub imports packages through the
    first `python3` there), its libpython's folder and the server's bundled libraries on LD_LIBRARY_PATH."""
    env = dict(os.environ)
    bin_dir = str(Path(python or sys.executable).absolute().parent)
    env["PATH"] = os.pathsep.join([bin_dir, env.get("PATH", "")])
    libdirs = [sysconfig.get_config_var("LIBDIR") or "", *map(str, files.library_dirs), env.get("LD_LIBRARY_PATH", "")]
    env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in libdirs if p)
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def with_memory_pools(extra_args: tuple[str, ...]) -> tuple[str, ...]:
    """`extra_args` (tritonserver options) with those of MEMORY_POOL_ARGS that they do not set themselves."""
    named = {arg.split("=", 1)[0] for arg in extra_args}
    return (*extra_args, *(pool for pool in MEMORY_POOL_ARGS if pool.split("=", 1)[0] not in named))


def start_server(model_repository: str | os.PathLike, http_port: int | None = None, grpc_port: int | None = None,
                 metrics_port: int | None = None, timeout: float = 120.0, log_file: str | os.PathLike | None = None,
                 extra_args: tuple[str, ...] = (), python: str | os.PathLike | None = None) -> TritonServer:
    """Start tritonserver on 127.0.0.1 serving `model_repository` and wait (at most `timeout` s) until
    /v2/health/ready answers; on failure the process is killed by PID and ServerError carries the log's tail.
    Ports left as None are picked free. The models' Python is this interpreter's environment, or `python`
    (another virtual environment's interpreter of the same Python version)."""
    repository = Path(model_repository).resolve()
    if not repository.is_dir():
        raise ServerError(f"model repository {repository} is not a folder")
    files = find_server()
    picked = http_port is None or grpc_port is None or metrics_port is None
    attempts = 3 if picked else 1
    last_error: ServerError | None = None
    for _ in range(attempts):
        workdir = tempfile.TemporaryDirectory(prefix="headrace-triton-")
        backends = make_backend_directory(Path(workdir.name) / "backends", files)
        ports = [p if p is not None else free_port() for p in (http_port, grpc_port, metrics_port)]
        log_path = Path(log_file) if log_file is not None else Path(workdir.name) / "tritonserver.log"
        command = [str(files.tritonserver), f"--model-repository={repository}", f"--backend-directory={backends}",
                   "--http-address=127.0.0.1", f"--http-port={ports[0]}", "--grpc-address=127.0.0.1",
                   f"--grpc-port={ports[1]}", "--metrics-address=127.0.0.1", f"--metrics-port={ports[2]}",
                   "--allow-sagemaker=false", "--allow-vertex-ai=false", *extra_args]
        exit_timeout = _exit_timeout(extra_args)
        if exit_timeout is None:
            exit_timeout = EXIT_TIMEOUT_S
            command.append(f"--exit-timeout-secs={EXIT_TIMEOUT_S}")
        with open(log_path, "wb") as log:
            process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                       env=server_environment(files, python), cwd=workdir.name)
        server = TritonServer(process, *ports, log_path, workdir, exit_timeout)
        try:
            _wait_ready(server, timeout)
            atexit.register(server.stop)  # never leave a server behind when the caller forgets stop()
            return server
        except BaseException as exc:
            if not isinstance(exc, ServerError):  # e.g. Ctrl-C while waiting
                server.stop(timeout=5)
                raise
            text = server.log()
            server.stop(timeout=5)
            last_error = exc
            if "Address already in use" not in text and "address already in use" not in text:
                break
    raise last_error


def _exit_timeout(args: tuple[str, ...]) -> float | None:
    """The `--exit-timeout-secs` the caller gave tritonserver (as one `--option=value` argument or two), else None."""
    for i, arg in enumerate(args):
        name, _, value = arg.partition("=")
        if name == "--exit-timeout-secs":
            if not value and i + 1 < len(args):
                value = args[i + 1]
            try:
                return float(value)
            except ValueError:
                return None  # tritonserver refuses it and says why
    return None


def _wait_ready(server: TritonServer, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            text = server.log()
            reason = _start_error(text)
            raise ServerError(f"tritonserver exited with code {server.process.returncode} before it was ready"
                              f"{': ' + reason if reason else ''}:\n{_tail(text)}")
        if server.is_ready():
            return
        time.sleep(0.1)
    raise ServerError(f"tritonserver was not ready after {timeout:.0f} s (killed):\n{server.log_tail()}")


def _start_error(text: str) -> str:
    """The first reason the log gives for not starting, on one line ('' if none): a model that did not load, or a
    command-line option tritonserver rejected (it then prints its whole usage, which would bury the reason)."""
    for line in text.splitlines():
        if line[:1] == "E" and line[1:5].isdigit() and ("failed to load" in line or "Poll failed" in line):
            message = line.split("] ", 1)[-1].strip().strip('"')
            return message.split("\\n", 1)[0][:300]
        if "tritonserver: " in line and ("option" in line or "argument" in line):
            return line.split("tritonserver: ", 1)[1].strip()[:300]
    return ""


def _tail(text: str, lines: int = 40) -> str:
    """The log's error lines (why a model failed to load, cut to 800 characters each), then its last lines; with no
    error line, its first lines too (an option tritonserver refused is named above the usage text it prints)."""
    every = text.splitlines()
    errors = [line[:800] for line in every if line[:1] == "E" and line[1:5].isdigit()][:6]
    tail = "\n".join(every[-lines:])
    if errors:
        return "\n".join(errors) + "\n...\n" + tail
    return "\n".join(every[:5]) + "\n...\n" + tail if len(every) > lines else tail
