"""laguna_kit/run/deploy_lock.py: the lock tool's command and its three answers (the cases were
the DeployLock fact's fixtures, when taking a lock was wrongly a fact)."""

import json

import pytest

from laguna_kit import KIT_ROOT
from laguna_kit.run import deploy_lock

CASES = sorted((KIT_ROOT / "tests/unit/run/deploy_lock").glob("*.json"))


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_the_lock_tools_answers(path):
    doc = json.loads(path.read_text())
    if "command" in doc:
        assert deploy_lock.command(**doc["arg"]) == doc["command"]
    assert deploy_lock.parse(doc["output"]) == doc["answer"]


def test_three_answers_are_kept():
    assert len(CASES) == 3
