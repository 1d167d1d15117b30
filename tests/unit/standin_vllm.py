"""The stand-in vLLM (tests/harness/standin_vllm) on loopback for the fast tier: started with the
kit's own serving arguments for the champion (thinking on by default, vLLM's reasoning parser,
DFlash), its checkpoints as empty folders in a temporary cache."""

import os
import socket
import subprocess
import sys
import time
from contextlib import contextmanager

from laguna_kit import KIT_ROOT
from laguna_kit.domain.profiles import CONTAINER_CACHE, render
from laguna_kit.knobs.declared import defaults

STANDIN = KIT_ROOT / "tests/harness/standin_vllm/vllm_standin.py"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def serving(cache, knobs: dict | None = None):
    """'127.0.0.1:<port>' while the stand-in serves; `cache` a folder for its checkpoints."""
    knobs = knobs or defaults()
    for repo in (knobs["target_repo"], knobs["drafter_repo"]):
        folder = cache / repo.split("/")[-1]
        folder.mkdir(exist_ok=True)
        (folder / "config.json").write_text("{}")
    port = free_port()
    args = [a.replace(CONTAINER_CACHE, str(cache)) for a in render(knobs).vllm_args]
    args[args.index("--host") + 1] = "127.0.0.1"
    args[args.index("--port") + 1] = str(port)
    proc = subprocess.Popen(
        [sys.executable, str(STANDIN), *args],
        env=dict(os.environ, STANDIN_LOAD_SECONDS="0"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                assert proc.poll() is None, "the stand-in vLLM ended at start"
                time.sleep(0.1)
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(10)
