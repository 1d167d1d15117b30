"""The Docker engine (its version, when it last read daemon.json) and its images."""

from __future__ import annotations

import json
from typing import TypedDict

from pyinfra.api import FactBase, QuoteString, StringCommand

from ..boxtools.layout import DOCKER_RELOADED


class PulledImage(TypedDict):
    digest: str | None  # its registry digest ("sha256:..."), None for an image built here
    env: dict[str, str]  # the environment its config sets


class EngineState(TypedDict):
    unit: bool
    version: str
    config_mtime: int | None
    started: int | None
    reloaded: int | None
    cli: bool


class DockerImage(FactBase[PulledImage | None]):
    """A pulled image reference: ``{"digest": its registry digest ("sha256:...") or None,
    "env": the environment its config sets ({"CUDA_VERSION": ..., ...})}``, None when it is not
    pulled. One `docker image inspect` for both."""

    def requires_command(self, ref):
        return "docker"

    def command(self, ref):
        return StringCommand(
            "docker image inspect --format",
            QuoteString("{{json .RepoDigests}} {{json .Config.Env}}"),
            QuoteString(ref),
            "2>/dev/null || echo null",
        )

    def process(self, output) -> PulledImage | None:
        if output[-1].strip() == "null":
            return None
        digests, _, env = output[-1].partition(" ")
        digests, env = json.loads(digests) or [], json.loads(env) or []
        return {
            "digest": digests[0].split("@", 1)[1] if digests else None,
            "env": dict(e.split("=", 1) for e in env if "=" in e),
        }


# Touched by the kit after `systemctl reload docker` applied a daemon.json (operations/docker.py).
RELOADED = DOCKER_RELOADED


def digest_of(image: PulledImage | None) -> str | None:
    """The registry digest of a pulled image (None: not pulled, or built here)."""
    return image["digest"] if image else None


class DockerEngine(FactBase[EngineState]):
    """The engine on the box: ``{"unit": bool (docker.service exists), "version": dockerd's
    version or "", "config_mtime": daemon.json's mtime or None, "started": when dockerd last
    started, None when it is not running, "reloaded": when the kit last had it reload a
    daemon.json whose only change it can reload (registry-mirrors), or None, "cli": whether the
    ``docker`` command is on the PATH (Debian 13 packages it apart: docker-cli)}``."""

    def command(self):
        return (
            "systemctl cat docker.service >/dev/null 2>&1 && echo unit=yes || echo unit=no; "
            "echo \"version=$(dockerd --version 2>/dev/null | sed -n 's/^Docker version "
            "\\([^,]*\\).*/\\1/p')\"; "
            'echo "config_mtime=$(stat -c %Y /etc/docker/daemon.json 2>/dev/null)"; '
            "command -v docker >/dev/null 2>&1 && echo cli=yes || echo cli=no; "
            f'echo "reloaded=$(stat -c %Y {RELOADED} 2>/dev/null)"; '
            "ts=$(systemctl show docker.service -p ActiveEnterTimestamp --value 2>/dev/null); "
            'if [ -n "$ts" ] && [ "$(systemctl is-active docker.service)" = active ]; '
            'then echo "started=$(date -d "$ts" +%s)"; else echo started=; fi'
        )

    def process(self, output) -> EngineState:
        got = dict(line.split("=", 1) for line in output if "=" in line)

        def stamp(key: str) -> int | None:
            value = got.get(key, "").strip()
            return int(value) if value.isdigit() else None

        return {
            "unit": got.get("unit") == "yes",
            "version": got.get("version", "").strip(),
            "config_mtime": stamp("config_mtime"),
            "started": stamp("started"),
            "reloaded": stamp("reloaded"),
            "cli": got.get("cli") == "yes",
        }
