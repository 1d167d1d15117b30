"""The run's memory of read-only facts (laguna_kit/run/memo.py): read once, forgotten after an
operation that ran a command or failed, and after a confirmed plan."""

from types import SimpleNamespace

from pyinfra.api.operation import OperationMeta
from pyinfra.connectors.util import CommandOutput

from laguna_kit.run import memo


class Fact:
    pass


class Other:
    pass


class State:
    def __init__(self, check_for_changes=False):
        self.callback_handlers, self.check_for_changes, self.ops = [], check_for_changes, {}

    def add_callback_handler(self, handler):
        self.callback_handlers.append(handler)

    def get_op_data_for_host(self, host, op_hash):
        return self.ops[host][op_hash]

    def run_op(self, host, op_hash, commands=(), success=True):
        """An operation starting then ending on `host`, as pyinfra reports it to callbacks."""
        meta = OperationMeta(op_hash, None)
        self.ops.setdefault(host, {})[op_hash] = SimpleNamespace(operation_meta=meta)
        for handler in self.callback_handlers:
            handler.operation_host_start(self, host, op_hash)
        meta.set_complete(success, list(commands), CommandOutput([]))


class Host:
    def __init__(self, state):
        self.state, self.asked = state, []

    def get_fact(self, cls, **kwargs):
        self.asked.append((cls.__name__, kwargs))
        return f"{cls.__name__} #{len(self.asked)}"


def test_the_same_fact_is_asked_once_until_something_changes():
    state = State()
    host = Host(state)
    assert memo.fact(host, Fact) == memo.fact(host, Fact) == "Fact #1"
    assert memo.fact(host, Fact, path="/a") == "Fact #2"  # other arguments, other answer
    assert memo.fact(host, Fact, path="/a") == "Fact #2"
    state.run_op(host, "op1")  # no command: a no-op
    state.run_op(host, "op2")
    assert memo.fact(host, Fact) == "Fact #1"
    state.run_op(host, "op3", commands=["apt-get install -y x"])
    assert memo.fact(host, Fact) == "Fact #1"  # within the changing operation: still its view
    state.run_op(host, "op4")  # the next operation starts: the change is seen
    assert memo.fact(host, Fact) == "Fact #3"
    assert len(host.asked) == 3


def test_a_failed_operation_is_taken_as_a_change():
    state = State()
    host = Host(state)
    memo.fact(host, Fact)
    state.run_op(host, "op1", commands=["false"], success=False)
    state.run_op(host, "op2")
    assert memo.fact(host, Fact) == "Fact #2"


def test_hosts_are_remembered_apart():
    state = State()
    a, b = Host(state), Host(state)
    memo.fact(a, Fact)
    memo.fact(b, Other)
    state.run_op(a, "op1", commands=["touch /x"])
    state.run_op(a, "op2")
    state.run_op(b, "op1")
    state.run_op(b, "op2")
    assert memo.fact(b, Other) == "Other #1" and memo.fact(a, Fact) == "Fact #2"


def test_what_a_confirmed_plan_read_is_read_again_when_execution_starts():
    state = State(check_for_changes=True)  # pyinfra without -y: a plan, a prompt, then execution
    host = Host(state)
    memo.fact(host, Fact)
    state.run_op(host, "op1")
    assert memo.fact(host, Fact) == "Fact #2"
    state.run_op(host, "op2")
    assert memo.fact(host, Fact) == "Fact #2"  # from then on as with -y


def test_with_yes_the_prepare_phase_reads_are_kept():
    state = State(check_for_changes=False)
    host = Host(state)
    memo.fact(host, Fact)  # module-level code of a task file, before any operation ran
    state.run_op(host, "op1")
    assert memo.fact(host, Fact) == "Fact #1"
