"""Facts read once per run and box, until one of this run's operations changes something there.

pyinfra 3.10 caches no fact: a converged re-run asked `dpkg -l` eleven times and nvidia-smi six.
`fact(host, Fact, **kwargs)` answers from this run's memory of the host; that memory is dropped
when an operation on the host ran a command (or failed), judged as the next operation starts,
and when execution starts after a confirmed plan (without -y: the plan may be minutes old).

Two rules keep it true:
- only facts that nothing but this run's operations change are read this way (installed
  packages, the OS, the driver's view, files the kit writes, the pulled image); never what a
  box-side unit moves while the run goes on (a download's progress, an image pull's state) or
  what an operation polls;
- an operation reads them before its first command (the memory is dropped between operations,
  not within one).
"""

from __future__ import annotations

import weakref
from typing import Any, TypeVar

from pyinfra.api import FactBase
from pyinfra.api.state import BaseStateCallback

T = TypeVar("T")

_MEMORY: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # host -> {key: value}
_LAST_OP: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # host -> op hash


def fact(host, cls: type[FactBase[T]], **kwargs: Any) -> T:
    """host.get_fact(cls, **kwargs), from this run's memory when nothing changed since."""
    _watch(host.state)
    memory = _MEMORY.setdefault(host, {})
    key = (cls, repr(sorted(kwargs.items())))
    if key not in memory:
        memory[key] = host.get_fact(cls, **kwargs)
    return memory[key]


def store(host, cls: type[FactBase[T]], value: T, **kwargs: Any) -> None:
    """What an operation just read afresh (host.get_fact), for the operations after it: dropped
    like the rest when an operation changes something on the host."""
    _watch(host.state)
    _MEMORY.setdefault(host, {})[(cls, repr(sorted(kwargs.items())))] = value


def forget(host) -> None:
    _MEMORY.pop(host, None)


def forget_all() -> None:
    """A fresh memory (each fixture test is a run of its own)."""
    _MEMORY.clear()
    _LAST_OP.clear()


def _changed(state, host, op_hash) -> bool:
    """Whether the operation ran a command on `host` or failed there (unknown counts as yes)."""
    try:
        meta = state.get_op_data_for_host(host, op_hash).operation_meta
        return not meta.is_complete() or meta.did_error() or meta.did_change()
    except (KeyError, AttributeError, RuntimeError):
        return True


class Forget(BaseStateCallback):
    @staticmethod
    def operation_host_start(state, host, op_hash):
        previous = _LAST_OP.get(host)
        if previous is None:
            # Without -y the plan was shown and confirmed: what it read may be minutes old.
            if getattr(state, "check_for_changes", False):
                forget(host)
        elif _changed(state, host, previous):
            forget(host)
        if op_hash in state.ops.get(host, {}):
            _LAST_OP[host] = op_hash


def _watch(state) -> None:
    handlers = getattr(state, "callback_handlers", None)
    if handlers is None:  # the fast tier's stand-in state: one operation, nothing to forget
        return
    if not any(isinstance(h, Forget) for h in handlers):
        state.add_callback_handler(Forget())
