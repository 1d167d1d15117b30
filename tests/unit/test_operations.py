"""Every operation: facts and arguments in, commands or a no-op out, no host
(tests/unit/operations/<module>.<op>/<case>.json)."""

import pytest

from .fixtures import cases, read, run_operation

CASES = cases("operations")


@pytest.mark.parametrize("name, case, path", CASES, ids=[f"{n}/{c}" for n, c, _ in CASES])
def test_operation(name, case, path, monkeypatch):
    doc = read(path)
    for key, value in doc.get("env", {}).items():
        monkeypatch.setenv(key, value)
    if "exception" in doc:
        with pytest.raises(Exception) as exc:
            run_operation(name, doc)
        assert type(exc.value).__name__ == doc["exception"]["name"]
        assert doc["exception"]["message"] in str(exc.value)
        return
    commands, noops = run_operation(name, doc)
    if "noop" in doc:
        assert commands == [] and any(n.startswith(doc["noop"]) for n in noops), (commands, noops)
    else:
        assert commands == doc["commands"]


def test_every_operation_has_a_fixture():
    import pkgutil

    import laguna_kit.operations as package

    have = {n for n, _, _ in CASES}
    for info in pkgutil.iter_modules(package.__path__):
        module = __import__(f"laguna_kit.operations.{info.name}", fromlist=["x"])
        for attr, obj in vars(module).items():
            if hasattr(obj, "_inner") and getattr(obj._inner, "__module__", "") == module.__name__:
                assert f"{info.name}.{attr}" in have, f"no fixture for operation {info.name}.{attr}"


def test_the_reboot_wait_after_the_driver_is_the_knob(monkeypatch):
    """nvidia_reboot_timeout_s reaches the wait (a server with many GPUs may POST for minutes)."""
    from laguna_kit import KIT_ROOT
    from laguna_kit.knobs.declared import defaults
    from laguna_kit.run import reboot

    from .fixtures import HERE, operation_output

    case = read(HERE / "operations/nvidia.nvidia_driver_loaded/reboot-allowed.json")
    case["args"]["reboot_timeout"] = 1800
    waited = []
    monkeypatch.setattr(reboot, "wait_for_reboot", lambda host, timeout: waited.append(timeout))
    commands, _ = operation_output("nvidia.nvidia_driver_loaded", case)
    commands[-1].function(None, None)
    assert waited == [1800]
    assert defaults()["nvidia_reboot_timeout_s"] == 600
    driver_task = (KIT_ROOT / "tasks/driver.py").read_text()
    assert "reboot_timeout=d.nvidia_reboot_timeout_s" in driver_task
