"""laguna_kit/boxtools/release/system.py: a command that fails is a ReleaseError naming it and
what it said; unchecked, it is not."""

import pytest

from laguna_kit.boxtools.release import system


def test_a_failing_command_names_itself_and_its_error():
    with pytest.raises(system.ReleaseError, match=r"sh -c echo nope >&2; false failed: nope"):
        system.run("sh", "-c", "echo nope >&2; false")
    system.run("false", check=False)
    assert system.capture("echo", "hi") == "hi\n"
    assert system.succeeds("true") and not system.succeeds("false")
