"""Run the kit the way an operator does (`pyinfra -y --json inventory.py <deploy>`) against boxes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from laguna_kit.settings import KIT_ROOT

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
    def output(self) -> str:
        return self.stdout + self.stderr

    def explain(self) -> str:
        return f"exit {self.returncode}\n--- stderr (tail)\n{self.stderr[-4000:]}\n--- stdout (tail)\n{self.stdout[-2000:]}"


def run_deploy(sandbox, boxes, deploy: str = "deploy.py", data: dict | None = None, args: list[str] = (),
               env: dict | None = None, timeout: float = 900) -> DeployResult:
    hosts = sandbox.write_hosts(run_dir() / f"hosts-{'-'.join(b.name for b in boxes)}.toml", boxes, data)
    full_env = dict(os.environ, LAGUNA_HOSTS=str(hosts), **sandbox.env())
    full_env.update(env or {})
    proc = subprocess.run([PYINFRA, "-y", "--json", *args, "inventory.py", deploy], cwd=KIT_ROOT,
                          capture_output=True, text=True, env=full_env, timeout=timeout)
    report = None
    try:
        report = json.loads(proc.stdout) if proc.stdout.strip() else None
    except json.JSONDecodeError:
        pass
    return DeployResult(proc.returncode, proc.stdout, proc.stderr, report)
