"""files/laguna-registry-cache.service.j2: a URL knob (percent-encoded, as URLs are) reaches the
unit's Description= as text, never as a systemd specifier (issue 37 #11: "%h" would be the
unit's home folder)."""

import re

from laguna_kit.operations.files import kit_file


def test_a_percent_in_the_upstream_is_no_specifier():
    text = kit_file(
        "files/laguna-registry-cache.service.j2",
        upstream="https://mirror.example/%h/%2Fv2",
        config="/etc/laguna-kit/registry-cache.json",
        storage="/var/lib/laguna-kit/registry-cache",
    ).decode()
    line = next(x for x in text.splitlines() if x.startswith("Description="))
    assert "https://mirror.example/%%h/%%2Fv2" in line
    assert not re.search(r"(?<!%)%(?!%)", line.replace("%%", ""))


def test_a_cache_that_panics_while_the_upstream_is_away_keeps_trying():
    """Issue 38 #6: docker-registry 2.8 in proxy mode panics at start when Docker Hub does not
    answer; with systemd's default start limit it stayed down after five tries."""
    text = kit_file(
        "files/laguna-registry-cache.service.j2",
        upstream="https://registry-1.docker.io",
        config="/etc/laguna-kit/registry-cache.json",
        storage="/var/lib/laguna-kit/registry-cache",
    ).decode()
    unit = text.split("[Service]")[0]
    assert "StartLimitIntervalSec=0" in unit.splitlines()
    assert "Wants=network-online.target" in unit and "network-online.target" in unit
    assert "Restart=always" in text.splitlines()
