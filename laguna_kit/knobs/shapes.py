"""The shapes a knob's value may take before it reaches a config file, a unit, an nft rule or a
shell: group_data/all.py declares each knob with its shape (`name: <shape> = value  # why`), and
knobs/check.py refuses a value from the hosts file or `pyinfra --data` that does not fit, naming
the knob and the value, before any host is contacted or changed. The templates and command
builders then only see values of their shape.

A shape is a function of the value: None when it fits, else what is wrong with it.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable

# A knob's check: None when the value is fine, else what is wrong with it.
Check = Callable[[object], "str | None"]

MAX_TEXT = 4096  # no knob is longer; a longer value is a mistake or an attack


def _text_problem(value) -> str | None:
    if not isinstance(value, str):
        return f"must be a string, got {type(value).__name__}"
    if len(value) > MAX_TEXT:
        return f"is {len(value)} characters long (at most {MAX_TEXT})"
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
        return "holds a control character (a newline would start a line of its own)"
    return None


def text() -> Check:
    """Free text without control characters (it is quoted wherever it goes)."""
    return _text_problem


def pattern(regex: str, what: str, empty_ok: bool = False) -> Check:
    compiled = re.compile(regex)

    def check(value):
        if empty_ok and value == "":
            return None
        bad = _text_problem(value)
        if bad:
            return bad
        if not compiled.fullmatch(value):
            return f"is not {what}"
        return None

    return check


def box_path() -> Check:
    """An absolute path on the box of plain characters: it goes unquoted into units, nft files and
    the router agent's `[ -e ... ]` test, so a space or a quote would change their meaning."""

    def check(value):
        bad = pattern(r"/[A-Za-z0-9._/+-]*", "an absolute path of letters, digits, . _ - + /")(
            value
        )
        if bad:
            return bad
        if any(part in (".", "..") for part in value.split("/")) or "//" in value:
            return "is not a plain absolute path (no '.', '..' or '//')"
        if value != "/" and value.endswith("/"):
            return "ends with '/'"
        return None

    return check


def url(empty_ok: bool = False) -> Check:
    """http(s)://host[:port][/path]: it goes into apt source lines, curl commands and clients."""
    return pattern(
        r"https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[A-Za-z0-9._~%+=,@:/-]*)?|"
        r"https?://\[[0-9A-Fa-f:.]+\](:[0-9]{1,5})?(/[A-Za-z0-9._~%+=,@:/-]*)?",
        "an http(s):// URL of plain characters (no spaces, quotes or query)",
        empty_ok,
    )


def integer(low: int, high: int) -> Check:
    def check(value):
        if isinstance(value, bool) or not isinstance(value, int):
            return f"must be an integer, got {type(value).__name__}"
        if not low <= value <= high:
            return f"must be between {low} and {high}"
        return None

    return check


def number(low: float, high: float) -> Check:
    def check(value):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return f"must be a number, got {type(value).__name__}"
        if not low <= value <= high:
            return f"must be between {low} and {high}"
        return None

    return check


def flag() -> Check:
    return lambda value: None if isinstance(value, bool) else "must be true or false"


def address() -> Check:
    """An IP address literal (an address to bind)."""

    def check(value):
        bad = _text_problem(value)
        if bad:
            return bad
        try:
            ipaddress.ip_address(value)
        except ValueError:
            return "is not an IP address"
        return None

    return check


def either(*checks: Check, what: str) -> Check:
    """One of the shapes (the first that fits); else `what` the value must be."""

    def check(value):
        if any(c(value) is None for c in checks):
            return None
        return _text_problem(value) or f"is not {what}"

    return check


def listof(item: Check, max_items: int = 256) -> Check:
    def check(value):
        if not isinstance(value, list):
            return f"must be a list, got {type(value).__name__}"
        if len(value) > max_items:
            return f"has {len(value)} items (at most {max_items})"
        for i, v in enumerate(value):
            bad = item(v)
            if bad:
                return f"item {i} ({v!r}) {bad}"
        return None

    return check


def mapping(key: Check, value: Check) -> Check:
    def check(obj):
        if not isinstance(obj, dict):
            return f"must be a table, got {type(obj).__name__}"
        for k, v in obj.items():
            bad = key(k)
            if bad:
                return f"key {k!r} {bad}"
            bad = value(v)
            if bad:
                return f"value of {k!r} {bad}"
        return None

    return check


def kit_sets(check: Check, names: tuple[str, ...], by: str) -> Check:
    """`check`, and none of `names` (a list's items or a table's keys): the kit sets them itself
    (`by` says from what), and a second value would silently lose to the kit's or win over it."""

    def inner(value):
        bad = check(value)
        if bad:
            return bad
        items = [str(v).split("=", 1)[0] for v in value] if isinstance(value, list) else value
        present = [n for n in names if n in items]
        if present:
            return f"sets {present[0]}, which the kit sets from {by}: leave it out"
        return None

    return inner


def json_like() -> Check:
    """A JSON value (Docker's daemon.json): it is written with json.dumps, never formatted."""

    def check(value, depth=0):
        if depth > 16:
            return "is nested too deeply"
        if value is None or isinstance(value, (bool, int, float)):
            return None
        if isinstance(value, str):
            return None if len(value) <= MAX_TEXT else "holds an overlong string"
        if isinstance(value, list):
            return next(filter(None, (check(v, depth + 1) for v in value)), None)
        if isinstance(value, dict):
            for k, v in value.items():
                if not isinstance(k, str):
                    return "has a key that is not a string"
                bad = check(v, depth + 1)
                if bad:
                    return bad
            return None
        return f"holds a {type(value).__name__}"

    return check


def profiles() -> Check:
    """serving_profiles: each mode a table of numbers or None, and its `derived` notes."""
    name = pattern(r"[a-z0-9][a-z0-9-]{0,31}", "a mode name of lowercase letters, digits and -")

    def check(value):
        if not isinstance(value, dict) or not value:
            return "must be a non-empty table of modes"
        for mode, row in value.items():
            bad = name(mode)
            if bad:
                return f"mode {mode!r} {bad}"
            if not isinstance(row, dict):
                return f"mode {mode!r} must be a table"
            for k, v in row.items():
                if k == "derived":
                    bad = listof(text())(v)
                elif v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
                    bad = "must be a number or None"
                else:
                    bad = None
                if bad:
                    return f"mode {mode!r}: {k} {bad}"
        return None

    return check


# What a serving profile sets (serving_overrides changes these, one by one).
PROFILE_FIELDS = (
    "max_model_len",
    "gpu_memory_utilization",
    "max_num_seqs",
    "max_num_batched_tokens",
    "dflash_tokens",
    "gate_prompt_tokens",
)


def overrides() -> Check:
    """serving_overrides: profile values by name, each a number or None."""

    def check(value):
        if not isinstance(value, dict):
            return "must be a table of profile values"
        for k, v in value.items():
            if k not in PROFILE_FIELDS:
                return f"has {k!r}, not a profile value (one of {', '.join(PROFILE_FIELDS)})"
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
                return f"{k} must be a number or None"
        return None

    return check


# The shapes shared by several knobs.
ENV_NAME = pattern(r"[A-Za-z_][A-Za-z0-9_]{0,127}", "an environment variable name")
PORT = integer(1, 65535)
# RFC 9110 field names are tokens; the router's is written into haproxy.cfg, so only the
# characters real header names use.
HEADER = pattern(r"[A-Za-z0-9][A-Za-z0-9-]{0,63}", "an HTTP header name (letters, digits, -)")
REPO = pattern(
    r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}", "a hub repo id (owner/name)"
)
# A pinned commit, or a branch or tag the hub resolves (its answer must then be a commit).
REVISION = pattern(
    r"[0-9a-f]{40}|[A-Za-z0-9][A-Za-z0-9._-]{0,127}", "a 40-hex commit, or a branch or tag name"
)
IMAGE = pattern(
    r"[a-z0-9]+([._-][a-z0-9]+)*(:[0-9]{1,5})?(/[a-z0-9]+([._-][a-z0-9]+)*)*"
    r"(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}(@sha256:[0-9a-f]{64})?|@sha256:[0-9a-f]{64})",
    "an image reference repository:tag or repository@sha256:<64 hex>",
)
DEB_NAME = pattern(r"[a-z0-9][a-z0-9+.-]{1,63}", "a Debian package name")
USER = pattern(r"[a-z_][a-z0-9_-]{0,31}", "a user name")
HOSTNAME = pattern(r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?", "a host name", empty_ok=True)
TAG = pattern(r"tag:[A-Za-z0-9][A-Za-z0-9-]{0,62}", "a Tailscale tag (tag:name)")
# a tailnet peer named by its address or by a tag the tailnet gives it
TAILNET_PEER = either(address(), TAG, what="a tailnet address or a Tailscale tag (tag:name)")
PIN = pattern(r"[A-Za-z0-9][A-Za-z0-9._-]*==[A-Za-z0-9][A-Za-z0-9.+!-]*", "a name==version pin")
NO_CONTROL = text()
EMAIL = pattern(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+", "an email address", empty_ok=True)

# Each replica's cards and tensor parallel size (laguna_kit/domain/replicas.py, profiles.render).
CARDS, CARDS_BY = ("CUDA_VISIBLE_DEVICES",), "gpu_count and replicas_per_box (each replica's cards)"
TP_ARGS = ("--tensor-parallel-size", "-tp")
DRIVER_BRANCH = pattern(r"[0-9]{3,4}", "a driver branch number such as 580")
DEBIAN_VERSION = pattern(r"[0-9][A-Za-z0-9.+~-]{0,63}", "a Debian version")
HOST_OR_ADDRESS = pattern(
    r"[A-Za-z0-9.-]+(:[0-9]{1,5})?|\[[0-9A-Fa-f:.]+\](:[0-9]{1,5})?",
    "a host name or address",
    empty_ok=True,
)
MODE_NAME = pattern(r"[a-z0-9][a-z0-9-]{0,31}", "a mode name")
MODEL_NAME = pattern(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}", "a model name")
CONTAINER_NAME = pattern(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}", "a container name")
UNIT_NAME = pattern(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,120}\.service", "a .service unit name")
SHM_SIZE = pattern(r"[0-9]{1,6}[bkmg]?", "a size such as 16g")
# a systemd calendar event (systemd.time(7)): "Sun *-*-* 04:00:00", "daily", "Mon..Fri 03:00"
CALENDAR = pattern(
    r"[A-Za-z0-9 *:,./~-]{1,64}", "a systemd calendar event (daily, Sun 04:00)", empty_ok=True
)
SMARTHOST = pattern(r"[A-Za-z0-9.-]+:[0-9]{1,5}", "host:port", empty_ok=True)
OPEN_PORTS = listof(pattern(r"(tcp|udp)/[0-9]{1,5}", "tcp/PORT or udp/PORT"))
# The owner's container environment and vLLM flags: anything but what the kit sets itself.
OWNER_ENV = kit_sets(mapping(ENV_NAME, NO_CONTROL), CARDS, CARDS_BY)
OWNER_ARGS = kit_sets(listof(NO_CONTROL), TP_ARGS, "gpu_count")
