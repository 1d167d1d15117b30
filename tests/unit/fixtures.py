"""Run the kit's facts and operations against JSON fixtures, without a host (pyinfra's own model:
tests/facts/<module>.<Fact>/<case>.json and tests/operations/<module>.<op>/<case>.json).

Fact case:      {"arg": {kwargs}, "command": "...", "output": [lines], "fact": value}
                ("command" is optional: only where the command's exact text matters)
Operation case: {"args": {kwargs}, "facts": {"<module>.<Fact>": value, or {"k=v,k2=v2": value}
                 for a fact asked with arguments}, "data": {host data}, "env": {control env},
                 "executing": bool (default true), "inventory": [{"name", "data", "facts"}]
                 (the other hosts of the run, for fleet operations; data on top of group_data),
                 "state": {attributes of the run's state}}; a fact whose value is
                 {"__fails__": why} fails its host as pyinfra does when it cannot be read.
                and one of "commands": [...], "noop": "text the no-op starts with",
                "exception": {"name": "OperationError", "message": "text it contains"}.
Commands are compared as strings; an upload as {"upload": dest}, one fed a secret on stdin as
{"command": ..., "stdin": true}, a Python step as
{"function": true}.
"""

from __future__ import annotations

import dataclasses
import importlib
import io
import json
from pathlib import Path
from types import SimpleNamespace

from pyinfra.api import FileUploadCommand, FunctionCommand, StringCommand
from pyinfra.context import ctx_host, ctx_state

from laguna_kit.domain import hardware, hub, profiles
from laguna_kit.knobs import declared
from laguna_kit.run import memo

HERE = Path(__file__).resolve().parent


def cases(kind: str) -> list[tuple[str, str, Path]]:
    """(module.Name, case, path) of every fixture under facts/ or operations/."""
    out = []
    for folder in sorted(p for p in (HERE / kind).iterdir() if p.is_dir() and "." in p.name):
        for path in sorted(folder.glob("*.json")):
            out.append((folder.name, path.stem, path))
    return out


def plain(value):
    """Dataclasses (hardware.Gpu) as dicts, so a fixture can state any fact value as JSON."""
    if dataclasses.is_dataclass(value):
        return dataclasses.asdict(value)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def load_class(name: str, package: str):
    module, _, attr = name.partition(".")
    return getattr(importlib.import_module(f"{package}.{module}"), attr)


# Fact values an operation reads as objects, not JSON.
def _gpus(values):
    return [hardware.Gpu(**g) for g in values]


def _releases(value):
    """A current release given as "rendered:<digest>" is exactly what the default knobs render."""
    spec = (value.get("current") or {}).get("spec")
    if isinstance(spec, str) and spec.startswith("rendered:"):
        current = dict(
            value["current"], spec=profiles.render_release(declared.defaults(), spec[9:])[0]
        )
        return dict(value, current=current)
    return value


FACT_TYPES = {
    "nvidia.NvidiaSmiGpus": lambda v: dict(v, gpus=_gpus(v["gpus"])),
    "nvidia.PciGpus": _gpus,
    "releases.ReleaseState": _releases,
}

ARG_TYPES = {
    "ckpt": lambda v: hub.Checkpoint(
        v["repo"], v["commit"], tuple(hub.HubFile(**f) for f in v["files"])
    ),
    "ckpts": lambda v: [ARG_TYPES["ckpt"](c) for c in v],
    "knobs": lambda v: dict(declared.defaults(), **v),
    "files": lambda v: [(text.encode(), dest, mode) for text, dest, mode in v],
}


class Data(dict):
    def __getattr__(self, key):
        return self.get(key)


class FakeHost:
    """What an operation sees of `host`: facts from the fixture, no-ops recorded."""

    name = "box"

    def __init__(self, facts: dict, data: dict, state):
        self.facts, self.data, self.state = facts, Data(data), state
        self.noops: list[str] = []
        self.current_op_global_arguments: dict = {}

    def get_fact(self, cls, *args, **kwargs):
        key = f"{cls.__module__.rsplit('.', 1)[-1]}.{cls.__name__}"
        if key not in self.facts:
            raise AssertionError(f"the fixture has no fact {key} (asked with {kwargs})")
        value = self.facts[key]
        if isinstance(value, dict) and "__fails__" in value:
            # what pyinfra does when a host cannot answer a fact (a lost connection, a reboot):
            # the host fails in the run's state and the fact gives its default
            self.state.failed_hosts.add(self)
            return cls().default()
        if kwargs:
            arg_key = ",".join(f"{k}={v}" for k, v in sorted(kwargs.items()))
            if not isinstance(value, dict) or arg_key not in value:
                raise AssertionError(f"the fixture has no {key} for {arg_key}")
            value = value[arg_key]
        return FACT_TYPES.get(key, lambda v: v)(value) if value is not None else None

    def noop(self, text: str) -> None:
        self.noops.append(text)

    def log(self, *args, **kwargs) -> None:
        pass

    def get_temp_filename(self, seed, temp_directory=None):
        return f"{temp_directory or '/tmp'}/pyinfra-temp"


def command_json(cmd):
    if isinstance(cmd, StringCommand) and cmd.connector_arguments.get("_stdin"):
        return {"command": str(cmd), "stdin": True}  # a secret's text is never in a fixture
    if isinstance(cmd, FileUploadCommand):
        return {"upload": cmd.dest}
    if isinstance(cmd, FunctionCommand):
        return {"function": True}
    return str(cmd)


def run_operation(name: str, case: dict):
    """(commands, noops) of the operation for the fixture's facts, arguments and data."""
    commands, noops = operation_output(name, case)
    return [command_json(c) for c in commands], noops


def operation_output(name: str, case: dict):
    """(command objects, noops): uploads still hold their content."""
    op = load_class(name, "laguna_kit.operations")
    args = {k: ARG_TYPES[k](v) if k in ARG_TYPES else v for k, v in case.get("args", {}).items()}
    memo.forget_all()
    state = SimpleNamespace(
        is_executing=case.get("executing", True),
        config=SimpleNamespace(DIFF=False),
        cwd=str(declared.KIT_ROOT),
        # what the run remembered so far ("laguna_failed_gates": boxes whose gate failed)
        **{k: set(v) if isinstance(v, list) else v for k, v in case.get("state", {}).items()},
    )
    host = FakeHost(case.get("facts", {}), case.get("data", {}), state)
    state.inventory = []
    for other in case.get("inventory", []):
        h = FakeHost(other.get("facts", {}), dict(declared.defaults(), **other["data"]), state)
        h.name = other["name"]
        state.inventory.append(h)
    # pyinfra's own sets of hosts (named in the fixture: "failed_hosts": ["gpu-1"]); every host of
    # the inventory connected at the start unless the fixture says which did
    hosts = {h.name: h for h in state.inventory}
    named = {k: case.get("state", {}).get(k) for k in ("failed_hosts", "activated_hosts")}
    active = case.get("state", {}).get("active_hosts")  # the run's hosts (--limit) not failed
    state.active_hosts = {host} | (
        set(hosts.values()) if active is None else {hosts[n] for n in active if n in hosts}
    )
    state.failed_hosts = {hosts[n] for n in named["failed_hosts"] or ()}
    state.activated_hosts = (
        set(hosts.values())
        if named["activated_hosts"] is None
        else {hosts[n] for n in named["activated_hosts"]}
    )
    with ctx_state.use(state), ctx_host.use(host):
        commands = list(op._inner(**args))
    return commands, host.noops


def upload_text(cmd) -> str | None:
    """The text an upload sends when it is in memory (tests of secrets read it)."""
    src = cmd.src
    return src.getvalue() if isinstance(src, io.StringIO) else None


def read(path: Path) -> dict:
    return json.loads(path.read_text())


def case(name: str) -> dict:
    """An operation fixture by its path under operations/ ("router.router_configured/x.json")."""
    return json.loads((HERE / "operations" / name).read_text())


def uploads(name, doc):
    """{dest: bytes} of the files an operation writes: uploads, and private files fed on stdin."""
    commands, _ = operation_output(name, doc)
    out = {}
    for c in commands:
        if isinstance(c, FileUploadCommand):
            out[c.dest.removesuffix(".laguna-new")] = c.src.getvalue()
        elif isinstance(c, StringCommand) and c.connector_arguments.get("_stdin") is not None:
            dest = str(c).rsplit("> ", 1)[1].removesuffix(".laguna-new")
            out[dest] = c.connector_arguments["_stdin"].encode()
    return out


def fleet_hosts(roles: dict[str, list[str]], data: dict | None = None) -> dict[str, FakeHost]:
    """Hosts of one hosts file by name, each with its roles and the default knobs (no facts):
    what a rule or plan built from the fleet's roles sees."""
    state = SimpleNamespace(inventory=[], is_executing=True)
    out = {}
    for name, its_roles in roles.items():
        h = FakeHost({}, dict(declared.defaults(), laguna_roles=its_roles, **(data or {})), state)
        h.name = name
        state.inventory.append(h)
        out[name] = h
    return out
