"""Every knob a host's data holds is checked against its declared shape (group_data/all.py) before
anything is planned with it: from the hosts file when it is read (knobs/hostsfile.py), from
`pyinfra --data` and group_data/<group>.py files at the top of each entry point (`refuse_bad`).
A misspelt knob is refused with the nearest real names, never silently ignored."""

from __future__ import annotations

import difflib
import typing

from .declared import PER_RUN, declared, shape_of
from .shapes import PROFILE_FIELDS


def _ssh_connector_fields() -> dict[str, type]:
    """pyinfra's own SSH connection data (ssh_key_password, ssh_forward_agent, ssh_config_file ...),
    read from the installed pyinfra so the file follows its version; the ones the kit's own fields
    set (address, port, user, key, known_hosts) are left to those."""
    from pyinfra.connectors.ssh import ConnectorData, connector_data_meta

    hints = typing.get_type_hints(ConnectorData)
    own = {"ssh_hostname", "ssh_port", "ssh_user", "ssh_key", "ssh_known_hosts_file"}
    return {k: hints.get(k, str) for k in connector_data_meta if k not in own}


SSH_FIELDS = _ssh_connector_fields()


def problem(name: str, value) -> str | None:
    """What is wrong with `value` for knob `name` (None: fine, or no knob of that name)."""
    shape = shape_of(name)
    return shape(value) if shape else None


def did_you_mean(key: str, names) -> str:
    close = difflib.get_close_matches(key, list(names), n=3, cutoff=0.75)
    return f" (did you mean {', '.join(close)}?)" if close else ""


def unknown_knob(key: str, table: str = "") -> str:
    """The refusal's words for a knob no table has, with the nearest real names (difflib)."""
    if key in PROFILE_FIELDS:
        hint = f" ({key} is a serving profile's value: set serving_overrides = {{{key} = ...}})"
    else:
        hint = did_you_mean(key, [*declared(), *PER_RUN])
    where = f" in {table}" if table else ""
    return f"unknown knob {key!r}{where}{hint}; knobs are listed in group_data/all.py"


def known_key(key: str) -> bool:
    """A knob, a per-run input, or pyinfra's own data (its connection data, global arguments)."""
    if key in declared() or key in PER_RUN or key in SSH_FIELDS or key == "laguna_roles":
        return True
    return key.startswith(("ssh_", "_"))


def refuse_bad(host) -> None:
    """At the top of an entry point: every knob of this host's data (hosts file, group data and
    `--data` alike) has its shape, else the run stops here, before any host is changed."""
    from pyinfra.api.exceptions import DeployError

    for source, keys in _data_sources(host):
        for key in keys:
            if not known_key(key):
                raise DeployError(
                    f"{host.name}: {source}: {unknown_knob(key)}; nothing was changed"
                )
    for name in [*declared(), *PER_RUN]:
        value = host.data.get(name)
        if value is None and name in PER_RUN:
            continue
        bad = problem(name, value)
        if bad:
            raise DeployError(f"{host.name}: knob {name} = {value!r} {bad}; nothing was changed")


def _data_sources(host):
    """Where a misspelt knob would otherwise be silently ignored: `--data` and the group_data/
    files of the host's groups (all.py is the declarations themselves)."""
    inventory = getattr(host, "inventory", None)
    if inventory is None:  # a host outside an inventory (tests): its data is all there is
        return
    yield "--data", list(inventory.get_override_data() or {})
    for group in getattr(host, "groups", []):
        name = getattr(group, "name", group)
        if name != "all":
            yield f"group_data/{name}.py", list(inventory.get_group_data(name) or {})
