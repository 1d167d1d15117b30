"""A deploy cut right after it wrote a file, before its reaction to that file ran: the state an
operator's Ctrl-C, a dropped connection or a dead laptop leaves between the two.

A harness-only wrapper (/usr/local/sbin/systemctl, found before /usr/bin/systemctl on root's
PATH) holds the reaction command that matches a pattern until the test has killed the run; the
held command then ends without running, as it would have with its SSH session gone. Nothing of
the kit's code path changes."""

from __future__ import annotations

import shlex
import time
from contextlib import contextmanager

from .deployrun import result_of, start_deploy

HOLD = "/run/laguna-harness/hold"  # the pattern (grep -E) of the command held
HELD = "/run/laguna-harness/held"  # a command is being held
CUT = "/run/laguna-harness/cut"  # the run was killed: the held command ends unrun
WRAPPER = f"""#!/bin/sh
# laguna harness (tests/harness/cut_runs.py): holds a reaction of the kit's until the run is cut
if [ -e {HOLD} ] && printf '%s ' "$@" | grep -qE "$(cat {HOLD})"; then
  touch {HELD}
  while [ -e {HOLD} ]; do sleep 0.2; done
  [ -e {CUT} ] && exit 1
fi
exec /usr/bin/systemctl "$@"
"""


@contextmanager
def holding(box, pattern: str):
    """While inside: `systemctl <args>` on `box` matching `pattern` waits (HELD says it does)."""
    box.run(
        f"mkdir -p /run/laguna-harness && rm -f {HELD} {CUT} && "
        f"printf %s {shlex.quote(pattern)} > {HOLD} && "
        f"cat > /usr/local/sbin/systemctl <<'EOF'\n{WRAPPER}EOF\n"
        "chmod 755 /usr/local/sbin/systemctl"
    )
    try:
        yield
    finally:
        box.run(f"touch {CUT}; rm -f {HOLD}; sleep 0.5; rm -f /usr/local/sbin/systemctl {CUT}")


def cut_after_write(sandbox, boxes, held_on, pattern: str, timeout: float = 600, **kw):
    """Deploy `boxes` (start_deploy's arguments in `kw`) until `held_on` reaches the reaction
    matching `pattern`, then kill the run (SIGKILL: no handler of pyinfra's or the kit's runs).
    Returns the killed run's result; its held reaction never ran."""
    with holding(held_on, pattern):
        proc = start_deploy(sandbox, boxes, **kw)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and proc.poll() is None:
            if held_on.run(f"test -e {HELD}", check=False).returncode == 0:
                break
            time.sleep(1)
        reached = proc.poll() is None
        proc.kill()
        out, err = proc.communicate(timeout=60)
    result = result_of(proc.returncode, out, err)
    assert reached, f"the run ended before {pattern!r} on {held_on.name}:\n{result.explain()}"
    return result
