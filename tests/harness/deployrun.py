"""Run the kit the way an operator does (`pyinfra -y --json inventory.py <deploy>`) against
boxes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from laguna_kit import KIT_ROOT

from .box import TAILNET_NS
from .paths import run_dir

PYINFRA = str(Path(sys.executable).with_name("pyinfra"))


@dataclass
class DeployResult:
    returncode: int
    stdout: str
    stderr: str
    report: dict | None

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def changed(self, host: str | None = None) -> list[str]:
        """Names of operations that changed something (on `host`, or on any host)."""
        if not self.report:
            return []
        ops = self.report["results"]["operations"]
        return [op["name"] for op in ops if (host in op["success"] if host else op["success"])]

    @property
    def totals(self) -> dict:
        """pyinfra's own result counts: hosts, success (= changed), error, no_change."""
        return (self.report or {}).get("results", {}).get("totals", {})

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    def explain(self) -> str:
        return (
            f"exit {self.returncode}\n--- stderr (tail)\n{self.stderr[-4000:]}\n"
            f"--- stdout (tail)\n{self.stdout[-2000:]}"
        )


def deploy_command(
    sandbox,
    boxes,
    deploy: str = "deploy.py",
    data: dict | None = None,
    args: list[str] = (),
    env: dict | None = None,
    via_tailnet: bool = False,
    interactive: bool = False,
) -> tuple[list[str], dict]:
    """The operator's command line and environment for `deploy` on `boxes` (harness data on top).

    `via_tailnet`: run from the namespace that plays the other tailnet nodes, to the boxes' tailnet
    addresses (a control machine on the tailnet; it reaches nothing else of the harness).
    `interactive`: as an operator types it, without -y (pyinfra then asks before it executes and
    after a host fails) and without --json.
    """
    hosts = sandbox.write_hosts(
        run_dir() / f"hosts-{'-'.join(b.name for b in boxes)}.toml",
        boxes,
        data,
        via_tailnet=via_tailnet,
    )
    full_env = dict(os.environ, LAGUNA_HOSTS=str(hosts), **sandbox.env())
    full_env.update(env or {})
    prefix = ["ip", "netns", "exec", TAILNET_NS] if via_tailnet else []
    mode = [] if interactive else ["-y", "--json"]
    return [*prefix, PYINFRA, *mode, *args, "inventory.py", deploy], full_env


def result_of(returncode: int, stdout: str, stderr: str) -> DeployResult:
    report = None
    try:
        report = json.loads(stdout) if stdout.strip() else None
    except json.JSONDecodeError:
        pass
    return DeployResult(returncode, stdout, stderr, report)


def run_deploy(
    sandbox,
    boxes,
    deploy: str = "deploy.py",
    data: dict | None = None,
    args: list[str] = (),
    env: dict | None = None,
    timeout: float = 900,
    via_tailnet: bool = False,
) -> DeployResult:
    cmd, full_env = deploy_command(sandbox, boxes, deploy, data, args, env, via_tailnet)
    try:
        proc = subprocess.run(
            cmd, cwd=KIT_ROOT, capture_output=True, text=True, env=full_env, timeout=timeout
        )
    except subprocess.TimeoutExpired as exc:  # say where the run stood, not only that it did
        err = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else ""
        raise AssertionError(
            f"the deploy ran over {timeout} s; its log's last lines:\n{err[-4000:]}"
        ) from None
    return result_of(proc.returncode, proc.stdout, proc.stderr)


def start_deploy(sandbox, boxes, deploy: str = "deploy.py", **kw) -> subprocess.Popen:
    """The same run in the background, for drills that interrupt it; collect it with wait_deploy."""
    cmd, full_env = deploy_command(sandbox, boxes, deploy, **kw)
    return subprocess.Popen(
        cmd, cwd=KIT_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=full_env
    )


def run_deploy_watching(
    sandbox, boxes, on_line, deploy: str = "deploy.py", timeout: float = 900, **kw
) -> DeployResult:
    """The same run, calling on_line(line) for each line of pyinfra's log as it is printed: for
    drills that act when the run reaches a point (release a held download once the wait for it
    is printed), rather than guess how long a step takes."""
    import threading

    proc = start_deploy(sandbox, boxes, deploy, **kw)
    out: list[str] = []
    reader = threading.Thread(target=lambda: out.append(proc.stdout.read()), daemon=True)
    reader.start()
    killer = threading.Timer(timeout, proc.kill)
    killer.start()
    err: list[str] = []
    try:
        for line in proc.stderr:
            err.append(line)
            on_line(line)
        proc.wait()
    finally:
        killer.cancel()
        reader.join(timeout=30)
    return result_of(proc.returncode, "".join(out), "".join(err))


def wait_deploy(proc: subprocess.Popen, timeout: float = 900) -> DeployResult:
    out, err = proc.communicate(timeout=timeout)
    return result_of(proc.returncode, out, err)


PROMPT = b"Press enter to execute..."


def run_deploy_on_a_terminal(
    sandbox, boxes, deploy: str = "deploy.py", timeout: float = 1500, **kw
) -> tuple[DeployResult, int]:
    """The run as an operator types it at a terminal (no -y, a pty) who presses Enter at every
    prompt pyinfra shows: (its result, with the terminal's text as stdout; how many prompts)."""
    cmd, full_env = deploy_command(sandbox, boxes, deploy, interactive=True, **kw)
    return typed(cmd, KIT_ROOT, full_env, timeout)


def typed(cmd: list[str], cwd, env: dict, timeout: float = 1500) -> tuple[DeployResult, int]:
    """`cmd` run on a terminal (a pty) by someone who presses Enter at every prompt pyinfra
    shows: (its result, with the terminal's text as stdout; how many prompts)."""
    import pty
    import select
    import time

    master, slave = pty.openpty()
    proc = subprocess.Popen(
        cmd, cwd=cwd, stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True
    )
    os.close(slave)
    out, prompts, deadline = b"", 0, time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 1)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # the terminal closed: the run ended
                    break
                if not chunk:
                    break
                out += chunk
                while out.count(PROMPT) > prompts:
                    prompts += 1
                    os.write(master, b"\n")
            elif proc.poll() is not None:
                break
        else:
            proc.kill()
    finally:
        proc.wait(30)
        os.close(master)
    return result_of(proc.returncode, out.decode(errors="replace"), ""), prompts
