"""The hosts file: which boxes to deploy to and how to reach them, one TOML table per box.

    [[hosts]]
    name = "gpu-1"                 # what pyinfra calls the host (defaults to address)
    address = "192.0.2.10"         # SSH address
    user = "root"                  # SSH user (default root)
    port = 22                      # SSH port (default 22)
    key = "~/.ssh/id_ed25519"      # SSH private key (default: your agent / ~/.ssh)
    sudo = true                    # a non-root user: every command through sudo (passwordless)
    sudo_user = "root"             # sudo's target user (default root)
    roles = ["gpu"]                # "gpu": a serving box (default); "router": the fleet's router
                                   # (a small tailnet node: ["router"]; a GPU box too: both);
                                   # "monitor": Prometheus + Alertmanager (often with "router")
                                   # "cache": the fleet's pull-through image cache (same)
    ssh_config_file = "~/.ssh/config"   # any of pyinfra's SSH connection data, verbatim (a jump
                                        # host: ProxyJump in that file, which pyinfra honours)
    [hosts.data]                   # per-host overrides of group_data/all.py knobs
    nvidia_allow_reboot = true

    [data]                         # fleet-wide overrides (every host), under each [hosts.data]
    serving_overrides = {gpu_memory_utilization = 0.86}

Errors name the file, the host and the field, before any host is contacted: a misspelt knob in
[hosts.data] would otherwise be silently ignored and the default used.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import os
import re
import tomllib
from pathlib import Path

from . import shapes
from .check import SSH_FIELDS, did_you_mean, problem, unknown_knob
from .declared import PER_RUN, defaults

CONNECTION_FIELDS = {
    "name": str,
    "address": str,
    "user": str,
    "port": int,
    "key": str,
    "known_hosts": str,
    "sudo": bool,
    "sudo_user": str,
    "data": dict,
    "roles": list,
}
ROLES = ("gpu", "router", "monitor", "cache")


# Names seen in other tools' inventories that pyinfra 3.x does not have, with the way it does it.
NOT_PYINFRA = {
    "ssh_proxy_command": "pyinfra has no ssh_proxy_command: put ProxyCommand (or ProxyJump) in an "
    'ssh config file and set ssh_config_file = "/path/to/it" (pyinfra honours both)',
    "ssh_proxy_jump": "pyinfra has no ssh_proxy_jump: put ProxyJump in an ssh config file and set "
    'ssh_config_file = "/path/to/it"',
    "password": "the SSH password is ssh_password (better: a key)",
}
# A host's name goes into nft files, haproxy.cfg and log lines; its address and user into SSH.
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,62}")


def unmatched_limits(argv: list[str], names: list[str], groups: dict) -> list[str]:
    """The `--limit` values of pyinfra's command line that name no host, group or glob match
    (pyinfra takes a host name, a group name or a glob; several flags, or commas, add up)."""
    values, take = [], False
    for arg in argv:
        if take:
            values.append(arg)
        elif arg.startswith("--limit="):
            values.append(arg.split("=", 1)[1])
        take = arg == "--limit"
    out = []
    for value in (v for raw in values for v in raw.split(",") if v):
        if value not in groups and not fnmatch.filter(names, value):
            out.append(value)
    return out


def default_path(environ, checkout: str, sandbox: str) -> str | None:
    """The hosts file: LAGUNA_HOSTS, else hosts.toml in the checkout, else the sandbox's (None:
    none of them)."""
    if environ.get("LAGUNA_HOSTS"):
        return environ["LAGUNA_HOSTS"]
    for path in (os.path.join(checkout, "hosts.toml"), sandbox):
        if os.path.exists(path):
            return path
    return None


def _check_address(where: str, address: str) -> None:
    """An address with a colon is an IPv6 address, nothing else (a port has its own field)."""
    if ":" not in address:
        return
    try:
        ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        host, _, port = address.rpartition(":")
        hint = (
            f'; a port is its own field: address = "{host}", port = {port}'
            if port.isdigit()
            else ""
        )
        raise HostsFileError(f"{where}: address {address!r} is not an address{hint}") from None


def _check_key(where: str, entry: dict) -> None:
    """The key file exists before any connection (pyinfra's own failure is a traceback)."""
    path = os.path.expanduser(entry["key"])
    if not os.path.isfile(path):
        user = entry.get("user", "root")
        raise HostsFileError(
            f"{where}: key {entry['key']!r}: no such file ({path}). Make one (ssh-keygen -t "
            f"ed25519 -f {path}) and put its public half on the box (ssh-copy-id -i {path}.pub "
            f"{user}@{entry['address']}), or leave `key` out to use your SSH agent and ~/.ssh"
        )


ADDRESS_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9.-]{0,252}|[0-9A-Fa-f:.]+(%[A-Za-z0-9_.-]+)?")
USER_RE = re.compile(r"[a-z_][a-z0-9_.-]{0,31}")


class HostsFileError(ValueError):
    pass


def _check_fields(where: str, entry: dict) -> None:
    """Every field of a [[hosts]] entry is the kit's or pyinfra's SSH data, of its type."""
    for key, value in entry.items():
        if key in NOT_PYINFRA:
            raise HostsFileError(f"{where}: {key}: {NOT_PYINFRA[key]}")
        want = CONNECTION_FIELDS.get(key) or SSH_FIELDS.get(key)
        if want is None:
            hint = did_you_mean(key, [*CONNECTION_FIELDS, *SSH_FIELDS])
            raise HostsFileError(
                f"{where}: unknown field {key!r}{hint}; allowed: {sorted(CONNECTION_FIELDS)} "
                f"and pyinfra's SSH data {sorted(SSH_FIELDS)}"
            )
        if not _has_type(value, want):
            shown = "(hidden)" if "password" in key else repr(value)
            raise HostsFileError(
                f"{where}: {key} must be {want.__name__}, got {type(value).__name__} {shown}"
            )
        if key in SSH_FIELDS and isinstance(value, str) and shapes.NO_CONTROL(value):
            raise HostsFileError(f"{where}: {key} holds a control character")


def load(path: str | Path) -> list[tuple[str, dict]]:
    """pyinfra's (name, data) pairs for every host in the file."""
    path = Path(path).expanduser()
    try:
        # utf-8-sig: an editor's byte order mark (Notepad's) is no TOML; CRLF lines are
        doc = tomllib.loads(path.read_text(encoding="utf-8-sig"))
    except FileNotFoundError:
        raise HostsFileError(f"hosts file {path} does not exist") from None
    except OSError as exc:
        raise HostsFileError(f"hosts file {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise HostsFileError(
            f"hosts file {path} is not UTF-8 text: save it as UTF-8 (your editor's Save as)"
        ) from None
    except tomllib.TOMLDecodeError as exc:
        raise HostsFileError(f"hosts file {path} is not valid TOML: {exc}") from None
    entries = doc.get("hosts")
    if (
        not entries
        or not isinstance(entries, list)
        or not all(isinstance(e, dict) for e in entries)
    ):
        raise HostsFileError(f"hosts file {path} has no [[hosts]] entries")
    unknown_top = set(doc) - {"hosts", "data"}
    if unknown_top:
        raise HostsFileError(
            f"hosts file {path}: unknown top-level keys {sorted(unknown_top)}; expected [[hosts]] "
            "and an optional [data] table of fleet-wide knobs"
        )
    fleet = doc.get("data", {})
    if not isinstance(fleet, dict):
        raise HostsFileError(f"hosts file {path}: data must be a table ([data]) of knobs")
    _check_knobs(f"hosts file {path}, [data]", fleet, table="[data]")
    out, seen = [], set()
    for i, entry in enumerate(entries, 1):
        where = f"hosts file {path}, host #{i}"
        _check_fields(where, entry)
        roles = entry.get("roles", ["gpu"])
        if not roles or any(r not in ROLES for r in roles) or len(set(roles)) != len(roles):
            raise HostsFileError(
                f"{where}: roles must be a non-empty list of {', '.join(map(repr, ROLES))}, "
                f"got {roles!r}"
            )
        if "address" not in entry:
            raise HostsFileError(f"{where}: missing 'address'")
        for key, shape, what in (
            ("address", ADDRESS_RE, "a host name or IP address"),
            ("name", NAME_RE, "a name of letters, digits, . _ : - (at most 63)"),
            ("user", USER_RE, "a user name"),
            ("sudo_user", USER_RE, "a user name"),
        ):
            if key in entry and not shape.fullmatch(entry[key]):
                raise HostsFileError(f"{where}: {key} {entry[key]!r} is not {what}")
        for key in ("key", "known_hosts"):
            if key in entry and shapes.NO_CONTROL(entry[key]):
                raise HostsFileError(f"{where}: {key} {entry[key]!r} holds a control character")
        _check_address(where, entry["address"])
        if "key" in entry:
            _check_key(where, entry)
        name = entry.get("name", entry["address"])
        if not NAME_RE.fullmatch(name):
            raise HostsFileError(
                f"{where}: the address {name!r} cannot be the host's name: give it a name"
            )
        if name in seen:
            raise HostsFileError(f"{where}: duplicate host name {name!r}")
        seen.add(name)
        data = dict(fleet, **entry.get("data", {}))
        _check_knobs(where, data)
        for key in SSH_FIELDS:
            if key in entry:
                value = entry[key]
                data[key] = os.path.expanduser(value) if key.endswith("_file") else value
        data.update(
            laguna_roles=list(roles),
            ssh_hostname=entry["address"],
            ssh_user=entry.get("user", "root"),
            ssh_port=int(entry.get("port", 22)),
        )
        if "key" in entry:
            data["ssh_key"] = os.path.expanduser(entry["key"])
        if "known_hosts" in entry:
            data["ssh_known_hosts_file"] = os.path.expanduser(entry["known_hosts"])
        if entry.get("sudo"):  # pyinfra's global arguments, as host data
            data["_sudo"] = True
        if "sudo_user" in entry:
            data["_sudo_user"] = entry["sudo_user"]
        out.append((name, data))
    for role in ("router", "monitor", "cache"):
        if sum(role in d["laguna_roles"] for _, d in out) > 1:
            raise HostsFileError(f"hosts file {path}: more than one host has the role '{role}'")
    return out


def of_role(hosts: list[tuple[str, dict]], role: str) -> list[tuple[str, dict]]:
    return [(n, d) for n, d in hosts if role in d["laguna_roles"]]


def _has_type(value, want: type) -> bool:
    """TOML's value is of the type `want` (a bool is no number; an int does for a float)."""
    if isinstance(value, bool):
        return want is bool
    return isinstance(value, want) or (want is float and isinstance(value, int))


def _check_knobs(where: str, data: dict, table: str = "[hosts.data]") -> None:
    known = defaults()
    for key, value in data.items():
        if key in PER_RUN:
            want = PER_RUN[key][0]
        elif key in known:
            want = type(known[key])
        else:
            raise HostsFileError(f"{where}: {unknown_knob(key, table)}")
        if not _has_type(value, want):
            raise HostsFileError(
                f"{where}: knob {key} must be {want.__name__} like its default, "
                f"got {type(value).__name__} {value!r}"
            )
        bad = problem(key, value)
        if bad:
            raise HostsFileError(f"{where}: knob {key} = {value!r} {bad}")
    # Values each fine alone can still make no serving profile (a mode name, an unsafe combination).
    from ..domain.profiles import ProfileError, render

    try:
        render(dict(known, **data))
    except ProfileError as exc:
        raise HostsFileError(f"{where}: {exc}") from None
