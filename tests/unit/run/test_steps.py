"""laguna_kit/run/steps.py: each step's wall time on each host, from its first operation's start
to its last one's end (overlapping work shows as it is)."""

from types import SimpleNamespace

from laguna_kit.run import steps


def test_a_steps_span_runs_from_its_first_start_to_its_last_end(monkeypatch):
    monkeypatch.setattr(steps, "STEP_OF", {"op1": "tasks/a.py", "op2": "tasks/a.py"})
    monkeypatch.setattr(steps, "SPANS", {})
    monkeypatch.setattr(steps, "STARTED", {})
    box = SimpleNamespace(name="b1")
    clock = iter([10.0, 11.0, 12.0, 15.0])
    monkeypatch.setattr(steps.time, "time", lambda: next(clock))
    steps.Timer.operation_host_start(None, box, "op1")  # 10
    steps.Timer.operation_host_start(None, box, "op2")  # 11
    steps.Timer.operation_host_success(None, box, "op1")  # ends 12
    steps.Timer.operation_host_error(None, box, "op2")  # ends 15
    got = steps.table()["b1"]
    assert got["steps"] == {"tasks/a.py": 5.0} and got["spans"]["tasks/a.py"] == [10.0, 15.0]
    assert (got["first_start"], got["last_end"]) == (10.0, 15.0)
    steps.Timer.operation_host_success(None, box, "not-a-step")  # an operation of no step
    assert list(steps.table()) == ["b1"]
