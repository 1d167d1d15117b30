"""The box on the tailnet."""

from __future__ import annotations

from pyinfra.api import FactBase

from . import sections


class TailscaleStatus(FactBase):
    """``tailscale status --json`` (BackendState, Self.TailscaleIPs), or {} when tailscaled is not
    up."""

    def requires_command(self):
        return "tailscale"

    @staticmethod
    def default():
        return {}

    def command(self):
        return "tailscale status --json 2>/dev/null || echo '{}'"

    def process(self, output):
        return sections.load_json(output)
