"""Every fact against recorded command output (tests/unit/facts/<module>.<Fact>/<case>.json)."""

import pytest
from pyinfra.api import StringCommand

from .fixtures import cases, load_class, plain, read

CASES = cases("facts")


@pytest.mark.parametrize("name, case, path", CASES, ids=[f"{n}/{c}" for n, c, _ in CASES])
def test_fact(name, case, path):
    doc = read(path)
    fact = load_class(name, "laguna_kit.facts")()
    command = fact.command(**doc.get("arg", {}))
    assert isinstance(command, (str, StringCommand))
    if "command" in doc:  # a command built of quoted pieces reads as the shell sees it
        assert str(command) == doc["command"]
    assert plain(fact.process(doc["output"])) == doc["fact"]


def test_every_fact_has_a_fixture():
    import inspect
    import pkgutil

    from pyinfra.api import FactBase

    import laguna_kit.facts as package

    have = {n for n, _, _ in CASES}
    for info in pkgutil.iter_modules(package.__path__):
        module = __import__(f"laguna_kit.facts.{info.name}", fromlist=["x"])
        for attr, obj in vars(module).items():
            if (
                inspect.isclass(obj)
                and issubclass(obj, FactBase)
                and obj.__module__ == module.__name__
            ):
                assert f"{info.name}.{attr}" in have, f"no fixture for fact {info.name}.{attr}"
