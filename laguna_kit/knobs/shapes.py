"""What each knob's value must be before it reaches a config file, a unit, an nft rule or a shell.

group_data/all.py gives each knob its value; this table gives it a type. A value from the hosts
file (checked when the file is read) or from `pyinfra --data` (checked at the top of each entry
point: `refuse_bad`) that does not parse is refused, naming the knob and the value, before any
host is contacted or changed. The templates and command builders then only see parsed values.
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


def overrides() -> Check:
    """serving_overrides: profile values by name, each a number or None."""
    from ..domain.profiles import PROFILE_FIELDS

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
    r"[a-z0-9]+([._-][a-z0-9]+)*(:[0-9]{1,5})?(/[a-z0-9]+([._-][a-z0-9]+)*)*:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}",
    "an image reference repository:tag",
)
DEB_NAME = pattern(r"[a-z0-9][a-z0-9+.-]{1,63}", "a Debian package name")
USER = pattern(r"[a-z_][a-z0-9_-]{0,31}", "a user name")
HOSTNAME = pattern(r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?", "a host name", empty_ok=True)
TAG = pattern(r"tag:[A-Za-z0-9][A-Za-z0-9-]{0,62}", "a Tailscale tag (tag:name)")
PIN = pattern(r"[A-Za-z0-9][A-Za-z0-9._-]*==[A-Za-z0-9][A-Za-z0-9.+!-]*", "a name==version pin")
NO_CONTROL = text()
EMAIL = pattern(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+", "an email address", empty_ok=True)

# Each replica's cards and tensor parallel size (laguna_kit/domain/replicas.py, profiles.render).
CARDS, CARDS_BY = ("CUDA_VISIBLE_DEVICES",), "gpu_count and replicas_per_box (each replica's cards)"
TP_ARGS = ("--tensor-parallel-size", "-tp")


CHECKS: dict[str, Check] = {
    # preflight
    "gpu_count": integer(1, 64),
    "replicas_per_box": integer(0, 8),
    "gpu_min_memory_mib": integer(0, 1 << 22),
    "min_ram_mib": integer(0, 1 << 30),
    "min_shm_mib": integer(0, 1 << 30),
    # driver
    "nvidia_driver_branch": pattern(r"[0-9]{3,4}", "a driver branch number such as 580"),
    "nvidia_driver_open": flag(),
    "nvidia_driver_replace": flag(),
    "nvidia_allow_reboot": flag(),
    "nvidia_reboot_timeout_s": integer(60, 7200),
    "nvidia_cuda_repo": url(),
    # container toolkit
    "nvidia_toolkit_repo": url(),
    "nvidia_toolkit_key_url": url(),
    "nvidia_toolkit_version": pattern(r"[0-9][A-Za-z0-9.+~-]{0,63}", "a Debian version"),
    # docker
    "docker_package": DEB_NAME,
    "docker_daemon_config": json_like(),
    "docker_group_users": listof(USER),
    # box tools
    "deploy_lock_wait_s": integer(0, 86400),
    "pip_index_url": url(),
    "pip_trusted_host": pattern(
        r"[A-Za-z0-9.-]+(:[0-9]{1,5})?|\[[0-9A-Fa-f:.]+\](:[0-9]{1,5})?",
        "a host name or address",
        empty_ok=True,
    ),
    "box_venv_packages": listof(PIN),
    # models
    "model_dir": box_path(),
    "target_repo": REPO,
    "target_revision": REVISION,
    "drafter_repo": REPO,
    "drafter_revision": REVISION,
    "checkpoint_free_margin_gib": integer(0, 1 << 40),
    "hf_endpoint": url(),
    "hf_token_env": ENV_NAME,
    "checkpoint_rehash": flag(),
    "download_workers": integer(1, 64),
    "download_retries": integer(0, 100),
    "download_backoff_max_s": integer(0, 3600),
    "download_read_timeout_s": integer(1, 3600),
    "peer_fetch": flag(),
    "registry_cache_port": PORT,
    "registry_cache_upstream": url(),
    "registry_cache_dir": box_path(),
    "peer_files_port": PORT,
    "peer_wait_s": integer(1, 3600),
    "peer_stall_s": integer(1, 3600),
    "checkpoint_mirror": NO_CONTROL,  # a folder on the control machine, never on a box's shell
    # image
    "vllm_image": IMAGE,
    "image_registry": url(),
    # service
    "serving_mode": pattern(r"[a-z0-9][a-z0-9-]{0,31}", "a mode name"),
    "api_port": PORT,
    "api_bind": address(),
    "served_model_name": pattern(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}", "a model name"),
    "kit_dir": box_path(),
    "container_name": pattern(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}", "a container name"),
    "unit_name": pattern(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,120}\.service", "a .service unit name"),
    "shm_size": pattern(r"[0-9]{1,6}[bkmg]?", "a size such as 16g"),
    "start_limit_burst": integer(1, 1000),
    "start_limit_interval_s": integer(1, 86400),
    "container_env": kit_sets(mapping(ENV_NAME, NO_CONTROL), CARDS, CARDS_BY),
    "container_network_env": mapping(ENV_NAME, NO_CONTROL),
    "vllm_common_args": kit_sets(listof(NO_CONTROL), TP_ARGS, "gpu_count"),
    "serving_profiles": profiles(),
    "serving_overrides": overrides(),
    "vllm_extra_args": kit_sets(listof(NO_CONTROL), TP_ARGS, "gpu_count"),
    "container_extra_env": kit_sets(mapping(ENV_NAME, NO_CONTROL), CARDS, CARDS_BY),
    "force_unsafe": flag(),
    # tailscale and firewall
    "tailscale_pkgs_url": url(),
    "tailscale_repo": url(empty_ok=True),
    "tailscale_key_url": url(empty_ok=True),
    "tailscale_auth_key_env": ENV_NAME,
    "tailscale_hostname": HOSTNAME,
    "tailscale_tags": listof(TAG),
    "firewall_open_ports": listof(pattern(r"(tcp|udp)/[0-9]{1,5}", "tcp/PORT or udp/PORT")),
    "firewall_close_listeners": flag(),
    "ssh_tailnet_only": flag(),
    "firewall_confirm_timeout_s": integer(5, 3600),
    # router
    "router_port": PORT,
    "router_metrics_port": PORT,
    "router_agent_port": PORT,
    "router_api_keys_env": ENV_NAME,
    "router_api_keys_file": NO_CONTROL,  # a file on the control machine
    "router_session_header": HEADER,
    "router_timeout_s": integer(1, 86400),
    "router_queue_timeout_s": integer(1, 86400),
    "router_check_interval_ms": integer(100, 60000),
    "router_drain_timeout_s": integer(0, 86400),
    # monitor
    "node_exporter_port": PORT,
    "prometheus_port": PORT,
    "alertmanager_port": PORT,
    "monitor_scrape_interval_s": integer(1, 3600),
    "monitor_retention_days": integer(1, 3650),
    "gpu_metrics_interval_s": integer(1, 3600),
    "alert_box_down_for_s": integer(0, 86400),
    "alert_kv_cache_usage": number(0, 1),
    "alert_waiting_requests": integer(0, 100000),
    "alert_gpu_temp_c": integer(30, 120),
    "alert_gpu_memory_ratio": number(0, 1),
    "alert_disk_free_ratio": number(0, 1),
    "alert_decode_ratio": number(0, 1),
    "alert_webhook_url": url(empty_ok=True),
    "alert_email_to": EMAIL,
    "alert_email_from": EMAIL,
    "alert_smarthost": pattern(r"[A-Za-z0-9.-]+:[0-9]{1,5}", "host:port", empty_ok=True),
    # validate
    "ready_timeout_s": integer(1, 86400),
    "gate_max_tokens": integer(1, 1 << 20),
    "gate_timeout_s": integer(1, 86400),
    "dflash_min_acceptance": number(0, 1),
    "gate_bench_tokens": integer(0, 4096),
    "min_decode_ratio": number(0, 1),
    "force_slower": flag(),
    "keep_releases": integer(2, 1000),
    "skip_validation": flag(),
    # per-run operator inputs (hostsfile.EXTRA_KNOBS)
    "rollback_to": integer(1, 1 << 30),
    "log_lines": integer(1, 1 << 20),
}


def problem(name: str, value) -> str | None:
    """What is wrong with `value` for knob `name` (None: fine, or a knob this table lacks)."""
    check = CHECKS.get(name)
    return check(value) if check else None


class KnobError(ValueError):
    pass


def refuse_bad(host) -> None:
    """At the top of an entry point: every knob of this host's data (hosts file, group data and
    `--data` alike) has its type, else the run stops here, before any host is changed."""
    from pyinfra.api.exceptions import DeployError

    for source, keys in _data_sources(host):
        for key in keys:
            if not _known_key(key):
                from .declared import defaults
                from .hostsfile import unknown_knob

                raise DeployError(
                    f"{host.name}: {source}: {unknown_knob(key, defaults())}; nothing was changed"
                )
    for name in CHECKS:
        value = host.data.get(name)
        if value is None and name in ("rollback_to", "log_lines"):
            continue
        bad = problem(name, value)
        if bad:
            raise DeployError(f"{host.name}: knob {name} = {value!r} {bad}; nothing was changed")


def _data_sources(host):
    """Where a misspelt knob would otherwise be silently ignored: `--data` and the group_data/
    files of the host's groups (all.py is the defaults themselves)."""
    inventory = getattr(host, "inventory", None)
    if inventory is None:  # a host outside an inventory (tests): its data is all there is
        return
    yield "--data", list(inventory.get_override_data() or {})
    for group in getattr(host, "groups", []):
        name = getattr(group, "name", group)
        if name != "all":
            yield f"group_data/{name}.py", list(inventory.get_group_data(name) or {})


def _known_key(key: str) -> bool:
    from .hostsfile import SSH_FIELDS

    # CHECKS holds every knob of group_data/all.py and the per-run inputs (a test keeps it so).
    if key in CHECKS or key in SSH_FIELDS or key == "laguna_roles":
        return True
    # pyinfra's own: its connection data (ssh_hostname ...) and global arguments (_sudo ...).
    return key.startswith(("ssh_", "_"))
