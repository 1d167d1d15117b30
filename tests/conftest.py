"""Fixtures: one harness (servers) per test session, boxes made on demand and always torn down."""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tests.harness import box as boxmod  # noqa: E402
from tests.harness.deployrun import run_deploy  # noqa: E402
from tests.harness.sandbox import Sandbox  # noqa: E402

RTX_3090 = boxmod.RTX_3090


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the marks
def pytest_collection_modifyitems(config, items):
    """In a parallel run (scripts/test.sh: pytest-xdist, --dist loadgroup) the tests that share a
    module-scoped fixture (a served box, a fleet) go to one worker together, in file order; every
    other test goes wherever a worker is free. xdist hands out the biggest groups first."""
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        shared = sorted(
            name
            for name, defs in (info.name2fixturedefs.items() if info else ())
            if defs and defs[-1].scope == "module"
        )
        if shared:
            item.add_marker(pytest.mark.xdist_group(f"{item.module.__name__}:{'+'.join(shared)}"))


@pytest.fixture(scope="session")
def sandbox():
    sb = Sandbox().start()
    yield sb
    sb.stop()


@pytest.fixture
def make_box(sandbox):
    """make_box(gpus=boxmod.gpus(RTX_3090, 4), ...) -> a fresh booted box, destroyed after the
    test."""
    made = []

    def _make(**kw):
        b = sandbox.add_box(**kw)
        made.append(b)
        return b

    yield _make
    for b in made:
        sandbox.remove_box(b)


@pytest.fixture
def deploy(sandbox):
    """deploy(boxes, deploy="deploy.py", data=..., args=[...]) -> DeployResult."""

    def _deploy(boxes, deploy="deploy.py", **kw):
        return run_deploy(sandbox, boxes if isinstance(boxes, list) else [boxes], deploy, **kw)

    return _deploy
