"""Many connection probes at once: a dropped packet costs a probe its whole timeout, so a test
that checks that a dozen ports answer no one took most of a minute one probe after another."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor


def none_answer(probes: dict) -> None:
    """Each probe (label -> a call saying whether its connection was answered), all at once;
    fails naming every one that was answered."""
    with ThreadPoolExecutor(max_workers=16) as pool:
        answered = dict(zip(probes, pool.map(lambda f: f(), probes.values())))
    assert not any(answered.values()), [label for label, yes in answered.items() if yes]
