"""laguna_kit/boxtools/unitclock.py: systemctl's timestamps read to the
microsecond (seconds only where a systemd prints no more), "n/a" as none."""

from laguna_kit.boxtools.unitclock import since_epoch


def test_timestamps_with_and_without_microseconds_and_unset():
    assert since_epoch("Mon 2026-12-07 10:32:31.123456 UTC") == 1796639551.123456
    assert since_epoch("Mon 2026-12-07 10:32:31 UTC") == 1796639551.0
    assert since_epoch("n/a") is None and since_epoch("") is None
    assert since_epoch("Mon 2026-12-07 10:32:31 CET") is None  # not UTC: not trusted
