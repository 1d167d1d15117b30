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
