"""docs/tool-versions.toml: every flag the kit passes to an external tool is listed there with the
version it arrived in, and is no newer than the oldest version a supported distribution ships,
unless the kit detects it on the box (and the detection is in the file that passes the flag)."""

import re
import shlex
import tomllib

import pytest

from laguna_kit import KIT_ROOT
from laguna_kit.domain import profiles
from laguna_kit.knobs.declared import defaults
from laguna_kit.operations import monitor

TABLE = tomllib.loads((KIT_ROOT / "docs/tool-versions.toml").read_text())
DISTROS = ("debian12", "debian13", "ubuntu2204", "ubuntu2404")
# A unit's program -> the table's tool name.
PROGRAMS = {
    "/usr/sbin/nginx": "nginx",
    "/usr/sbin/haproxy": "haproxy",
    "/usr/sbin/nft": "nft",
    "/usr/bin/docker": "docker",
    "/usr/bin/docker-registry": "docker-registry",
    "promtool": "promtool",
    "amtool": "amtool",
}
SHELL_ENDS = {"&&", "||", "|", ";", ">&2", "2>&1", "$$(", ")"}


def version(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", text)[:3])


def flags_after(words: list[str], tool: str) -> set[tuple[str, str]]:
    """(tool, flag) for each option word after the program, up to a shell operator; a --flag=value
    counts as --flag; the first word (a subcommand: `serve`, `check`) counts too."""
    out, first = set(), True
    for w in words:
        if w in SHELL_ENDS or w.startswith(("$$(", "$(")) or w.endswith(")"):
            break
        if w.startswith("-"):
            out.add((tool, w.split("=", 1)[0]))
        elif first and re.fullmatch(r"[a-z][a-z-]+", w):
            out.add((tool, w))
        first = False
    return out


def passed_flags() -> set[tuple[str, str]]:
    """The flags of the kit's own command lines: every unit's Exec lines, the vLLM container's
    `docker run`, Prometheus's and Alertmanager's arguments, the config checks."""
    found: set[tuple[str, str]] = set()
    lines = []
    for unit in sorted((KIT_ROOT / "files").glob("*.service*")):
        lines += [
            ln.split("=", 1)[1] for ln in unit.read_text().splitlines() if ln.startswith("Exec")
        ]
    lines += [c.replace("%s", "FILE") for c in monitor.CHECKS.values()]
    # A detected flag, `$(tool -h | grep -q X && echo X)`: X is the outer program's, and the
    # detection a command line of its own.
    detected = re.compile(r"\$?\$\(([^()]*?) && echo ([^()]*)\)")
    lines += [m.group(1) for line in lines for m in detected.finditer(line)]
    lines = [detected.sub(lambda m: m.group(2).strip("'\""), line) for line in lines]
    for line in lines:
        words = line.replace("'", " ").replace('"', " ").lstrip("-+").split()
        for i, w in enumerate(words):
            if w in PROGRAMS:
                found |= flags_after(words[i + 1 :], PROGRAMS[w])
    argv = profiles.render(defaults(), None).argv()
    image = argv.index(profiles.render(defaults(), None).image)
    found |= {("docker", a.split("=", 1)[0]) for a in argv[2:image] if a.startswith("-")}
    prom, am = (b.decode() for b in monitor.env_files("100.64.0.1", defaults()))
    for tool, text in (("prometheus", prom), ("alertmanager", am)):
        args = shlex.split(text.split("ARGS=", 1)[1])[0].split()
        found |= {(tool, a.split("=", 1)[0]) for a in args}
    return found


LISTED = {(f["tool"], f["flag"]): f for f in TABLE["flags"]}


def test_every_flag_the_kit_passes_is_in_the_table():
    found = passed_flags()
    assert {("nginx", "-e"), ("docker", "--gpus"), ("promtool", "--syntax-only")} <= found
    assert sorted(found - set(LISTED)) == []


@pytest.mark.parametrize("key", sorted(LISTED), ids=lambda k: f"{k[0]} {k[1]}")
def test_each_flag_is_in_the_oldest_supported_version_or_detected_on_the_box(key):
    entry = LISTED[key]
    tool = TABLE["tools"][entry["tool"]]
    assert set(DISTROS) <= set(tool), f"{entry['tool']}: a version per distribution"
    where = (KIT_ROOT / entry["where"]).read_text()
    assert entry["flag"] in where, f"{entry['where']} no longer passes {entry['flag']}"
    oldest = min(DISTROS, key=lambda d: version(tool[d]))
    if version(tool[oldest]) >= version(entry["since"]):
        return
    assert "detected" in entry, (
        f"{entry['tool']} {entry['flag']} arrived in {entry['since']}, but {oldest} ships "
        f"{tool[oldest]}: detect it on the box"
    )
    assert entry["detected"] in where, f"{entry['where']} does not run {entry['detected']!r}"


def test_the_known_gaps_are_the_ones_the_kit_detects():
    """Ubuntu 22.04's nginx 1.18.0 (no -e) and Prometheus 2.31.2 (no --syntax-only): the two the
    review found; nothing else is below its floor."""
    gaps = {
        k
        for k, e in LISTED.items()
        if min(version(TABLE["tools"][e["tool"]][d]) for d in DISTROS) < version(e["since"])
    }
    assert gaps == {("nginx", "-e"), ("promtool", "--syntax-only")}


@pytest.mark.parametrize("entry", TABLE["config"], ids=lambda e: f"{e['tool']} {e['key']}")
def test_each_config_key_near_the_floor_is_in_the_oldest_supported_version(entry):
    tool = TABLE["tools"][entry["tool"]]
    assert entry["key"] in (KIT_ROOT / entry["where"]).read_text(), entry["where"]
    assert min(version(tool[d]) for d in DISTROS) >= version(entry["since"]), entry


def test_every_unit_directive_is_in_the_oldest_supported_systemd():
    units = [
        p
        for p in (KIT_ROOT / "files").iterdir()
        if p.suffix in (".service", ".timer", ".socket", ".conf", ".j2") and "nginx" not in p.name
    ]
    used = {
        m
        for p in units
        for m in re.findall(r"^([A-Z][A-Za-z]+)=", p.read_text(), re.M)
        if "[Unit]" in p.read_text() or "[Service]" in p.read_text()
    }
    known = TABLE["systemd_directives"]
    assert {"DynamicUser", "StartLimitIntervalSec"} <= used
    assert sorted(used - set(known)) == []
    floor = min(version(TABLE["tools"]["systemctl"][d]) for d in DISTROS)
    assert {d: v for d, v in known.items() if version(v) > floor} == {}
