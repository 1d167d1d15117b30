"""laguna_kit/boxtools/gate/failure.py: the gate's log line on stderr, stamped."""

import re

from laguna_kit.boxtools.gate.failure import GateFailure, log


def test_the_log_line_is_stamped_and_on_stderr(capsys):
    log("ready after 3 s")
    captured = capsys.readouterr()
    assert captured.out == "" and re.fullmatch(
        r"\[gate \d\d:\d\d:\d\d\] ready after 3 s\n", captured.err
    )
    assert issubclass(GateFailure, Exception)
