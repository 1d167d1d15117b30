"""What an operator asks first about a serving box."""

from __future__ import annotations

import shlex

from pyinfra.api import FactBase


class ServingStatus(FactBase[dict[str, str]]):
    """``{"unit": systemctl is-active, "health": HTTP code of /health, "gpu_mem": "used,
    total, temperature;..."}`` (MiB, MiB, °C per card)."""

    def command(self, unit, port):
        return (
            f"echo unit=$(systemctl is-active {shlex.quote(unit)} 2>/dev/null); "
            f"echo health=$(curl -s -o /dev/null -m 5 -w '%{{http_code}}' "
            f"http://127.0.0.1:{int(port)}/health); "
            "echo gpu_mem=$(nvidia-smi --query-gpu=memory.used,memory.total,temperature.gpu "
            "--format=csv,noheader,nounits "
            "2>/dev/null | tr '\\n' ';')"
        )

    def process(self, output) -> dict[str, str]:
        return dict(line.split("=", 1) for line in output if "=" in line)
