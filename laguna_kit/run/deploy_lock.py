"""One deploy at a time on a box: this run takes the box's lock (boxtools/lock.py) over each SSH
connection it holds, again after a reconnect (a reboot, the firewall's new connection), or stops
naming who holds it. Taking the lock changes the box, so it is no fact: the operation that needs
it runs the lock tool itself, as pyinfra runs a fact's command (the host's sudo and su
arguments), and reports no change."""

from __future__ import annotations

import shlex
import weakref
from typing import TypedDict

from pyinfra.api import OperationError, StringCommand
from pyinfra.api.arguments import CONNECTOR_ARGUMENT_KEYS, pop_global_arguments

from ..domain.box_commands import LOCK_HOLDER, tool_command
from . import ssh_connection

_LOCKED_OVER: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # host -> SSH transport


class LockAnswer(TypedDict):
    held: bool  # this run holds it
    busy: str  # who does, when another run
    tools: bool  # the lock tool is on the box (not before a first deploy's box tools)


def command(kit_dir: str, holder: str, wait: int) -> str:
    launcher = shlex.quote(f"{kit_dir}/bin/laguna_lock.py")
    acquire = tool_command(
        kit_dir, "laguna_lock.py", "acquire", "--holder", holder, "--wait", int(wait)
    )
    return f"if [ -x {launcher} ]; then {acquire}; else echo no-tools; fi; true"


def parse(output: list[str]) -> LockAnswer:
    text = " ".join(output).strip()
    if text == "no-tools":
        return {"held": False, "busy": "", "tools": False}
    return {
        "held": text == "held",
        "busy": text.removeprefix("busy: ") if text != "held" else "",
        "tools": True,
    }


def ask(host, kit_dir: str, wait_s: int) -> LockAnswer:
    """Run the lock tool on `host` with the host's connector arguments (sudo, su) as pyinfra
    runs a fact's command."""
    arguments, _ = pop_global_arguments(host.state, host, {})
    executor = {k: v for k, v in arguments.items() if k in CONNECTOR_ARGUMENT_KEYS}
    _, output = host.run_shell_command(
        StringCommand(command(kit_dir, LOCK_HOLDER, wait_s)),
        print_output=False,
        print_input=False,
        **executor,
    )
    return parse(output.stdout_lines)


def hold(host, kit_dir: str, wait_s: int) -> None:
    """This run holds the box's deploy lock (again after a reconnect), or fails naming who."""
    transport = ssh_connection.transport(host)
    if transport is not None and _LOCKED_OVER.get(host) is transport:
        return  # taken over this very connection already: it lasts as long as the connection
    got = ask(host, kit_dir, wait_s)
    if got["busy"]:
        raise OperationError(
            f"{host.name}: another deploy is running on this box: {got['busy']}. "
            "Re-run when it has finished; nothing was changed by this run"
        )
    if got["held"] and transport is not None:
        _LOCKED_OVER[host] = transport
