"""The Docker engine: when it last read daemon.json, and which images it has."""

from __future__ import annotations

import json
import shlex

from pyinfra.api import FactBase


class DockerConfigState(FactBase):
    """``{"config_mtime": int|None, "started": int|None}``: daemon.json's mtime and when dockerd
    last started (None when it is not running)."""

    def command(self):
        return (
            "stat -c %Y /etc/docker/daemon.json 2>/dev/null || echo none; "
            "ts=$(systemctl show docker.service -p ActiveEnterTimestamp --value 2>/dev/null); "
            'if [ -n "$ts" ] && [ "$(systemctl is-active docker.service)" = active ]; '
            'then date -d "$ts" +%s; else echo none; fi'
        )

    def process(self, output):
        values = [None if v.strip() == "none" else int(v) for v in output[-2:]]
        return {"config_mtime": values[0], "started": values[1]}


class DockerImageDigest(FactBase):
    """The registry digest (``sha256:...``) of a pulled image reference, or None when not pulled."""

    def requires_command(self, ref):
        return "docker"

    def command(self, ref):
        return (
            f"docker image inspect --format '{{{{json .RepoDigests}}}}' {shlex.quote(ref)} "
            f"2>/dev/null "
            "|| echo null"
        )

    def process(self, output):
        digests = json.loads(output[-1]) or []
        return digests[0].split("@", 1)[1] if digests else None


class DockerImageEnv(FactBase):
    """The environment a pulled image's config sets (``{"CUDA_VERSION": ..., ...}``), None when
    the image is not pulled."""

    def requires_command(self, ref):
        return "docker"

    def command(self, ref):
        return (
            f"docker image inspect --format '{{{{json .Config.Env}}}}' {shlex.quote(ref)} "
            "2>/dev/null || echo null"
        )

    def process(self, output):
        env = json.loads(output[-1])
        return None if env is None else dict(e.split("=", 1) for e in env if "=" in e)


class DockerEngine(FactBase):
    """The engine on the box: ``{"unit": bool (docker.service exists), "version": dockerd's
    version or ""}``."""

    def command(self):
        return (
            "systemctl cat docker.service >/dev/null 2>&1 && echo unit=yes || echo unit=no; "
            "echo \"version=$(dockerd --version 2>/dev/null | sed -n 's/^Docker version "
            "\\([^,]*\\).*/\\1/p')\""
        )

    def process(self, output):
        got = dict(line.split("=", 1) for line in output if "=" in line)
        return {"unit": got.get("unit") == "yes", "version": got.get("version", "").strip()}
