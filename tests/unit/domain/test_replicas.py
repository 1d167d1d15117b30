"""A box with gpu_count x k cards serves k replicas (issue 27): their names, cards and ports, the
unit each renders, the router's servers and the agent that answers for each, and a prune that
keeps what another replica runs."""

import os
import subprocess

import jinja2
import pytest

from laguna_kit import KIT_ROOT
from laguna_kit.domain import profiles, replicas
from laguna_kit.domain.profiles import render_release
from laguna_kit.knobs.declared import defaults

DIGEST = "sha256:" + "ab" * 32


def test_eight_cards_make_two_replicas_on_their_own_cards_ports_units_and_state():
    knobs = defaults()
    assert replicas.count_for(0, 8, 4) == 2
    assert replicas.count_for(0, 4, 4) == 1
    assert replicas.count_for(0, 12, 4) == 3
    assert replicas.count_for(0, 0, 4) == 1  # cards not counted: one (the pre-flight judges)
    assert replicas.count_for(1, 8, 4) == 1  # the owner keeps cards 4-7
    one, two = replicas.build(knobs, 2)
    assert (one.unit, one.container, one.port, one.devices, one.state_dir) == (
        "laguna-vllm.service",
        "vllm-laguna",
        8080,
        "0,1,2,3",
        "/opt/laguna-kit",
    )
    assert (two.unit, two.container, two.port, two.devices, two.state_dir) == (
        "laguna-vllm-2.service",
        "vllm-laguna-2",
        8081,
        "4,5,6,7",
        "/opt/laguna-kit/replicas/2",
    )


# The champion's unit as the kit renders it (group_data's defaults and DIGEST): a different hash
# means every box restarts on its next deploy after a kit upgrade. Replicas (0326c75) left it as
# it was; issue 38 changed it once on purpose (HF_MODULES_CACHE outside the read-only mount,
# vLLM's compile cache kept on the box): from 3bc4b6c4... to eaa9bad5..., and once more (docker
# started through laguna_gpu_devices.py, CUDA_DEVICE_ORDER=PCI_BUS_ID) to this.
BEFORE_REPLICAS = "8f3ad8d3fb94ae383792367cbf5f8c4ba34aaccf2a0db0df9ff5b52c4f4f817b"


def test_replica_one_of_a_four_card_box_renders_exactly_as_before():
    """A kit upgrade restarts no box that gains no replica: the same spec, the same unit."""
    knobs = defaults()
    (one,) = replicas.build(knobs, 1)
    spec, unit = render_release(replicas.knobs_for(knobs, one), DIGEST)
    assert (spec, unit) == render_release(knobs, DIGEST)
    assert spec["unit_sha256"] == BEFORE_REPLICAS
    argv = spec["argv"]
    assert argv[argv.index("-e") + 1] == "CUDA_VISIBLE_DEVICES=0,1,2,3"  # the recipe's, first


def test_replica_two_runs_on_cards_4_to_7_on_its_own_port_and_is_gated_there():
    knobs = defaults()
    two = replicas.build(knobs, 2)[1]
    spec, unit = render_release(replicas.knobs_for(knobs, two), DIGEST)
    argv = spec["argv"]
    assert "CUDA_VISIBLE_DEVICES=4,5,6,7" in argv and "CUDA_VISIBLE_DEVICES=0,1,2,3" not in argv
    assert argv[argv.index("--name") + 1] == "vllm-laguna-2"
    assert argv[argv.index("--port") + 1] == "8081"
    assert argv[argv.index("--tensor-parallel-size") + 1] == "4"
    assert spec["gate"]["url"] == "http://127.0.0.1:8081/v1"
    assert "vllm-laguna-2" in unit


def test_gpu_count_sets_the_tensor_parallel_size_and_the_cards():
    knobs = dict(defaults(), gpu_count=2)
    first, second = replicas.build(knobs, 2)
    assert (first.devices, second.devices) == ("0,1", "2,3")
    spec, _ = render_release(replicas.knobs_for(knobs, second), DIGEST)
    argv = spec["argv"]
    assert argv[argv.index("--tensor-parallel-size") + 1] == "2"
    assert "CUDA_VISIBLE_DEVICES=2,3" in argv
    # where the recipe has it: after --trust-remote-code, else first
    assert profiles.tensor_parallel(["--trust-remote-code", "--x"], 2) == [
        "--trust-remote-code",
        "--tensor-parallel-size",
        "2",
        "--x",
    ]
    assert profiles.tensor_parallel(["--x"], 4) == ["--tensor-parallel-size", "4", "--x"]


def test_an_owners_cards_or_tensor_parallel_size_is_refused_naming_the_knob():
    from laguna_kit.knobs import check

    said = check.problem("container_extra_env", {"CUDA_VISIBLE_DEVICES": "4,5,6,7"})
    assert "CUDA_VISIBLE_DEVICES" in said and "replicas_per_box" in said
    assert "gpu_count" in check.problem("vllm_extra_args", ["--tensor-parallel-size=8"])
    assert "gpu_count" in check.problem("vllm_common_args", ["-tp", "8"])
    assert check.problem("container_env", defaults()["container_env"]) is None
    assert check.problem("vllm_common_args", defaults()["vllm_common_args"]) is None


def test_ports_merge_into_ranges_an_nftables_set_accepts():
    """Boxes with one and two replicas behind one router: each port once, in ranges."""
    assert replicas.port_values([8080, 8080, 8081, 8091]) == ["8080-8081", "8091"]
    assert replicas.port_values([8091, 8080]) == ["8080", "8091"]
    knobs = defaults()
    assert replicas.ports(replicas.build(knobs, 1)) == "8080"
    assert replicas.ports(replicas.build(knobs, 2)) == "8080-8081"


def test_the_router_has_a_server_per_replica_each_naming_it_to_the_agent():
    """HAProxy's configuration manual, agent-send: "Make sure to include a '\\n' if you want to
    terminate your request with a newline" (the keyword's patch, haproxy mailing list msg20356):
    the config parser sends one newline for the two characters the kit writes."""
    text = jinja2.Template((KIT_ROOT / "files/haproxy.cfg.j2").read_text()).render(
        servers=[
            {"name": "box", "address": "100.64.0.2", "port": 8080, "maxconn": 4, "replica": 1},
            {"name": "box-r2", "address": "100.64.0.2", "port": 8081, "maxconn": 4, "replica": 2},
        ],
        binds=["ipv4@100.64.0.1"],
    )
    assert 'server box 100.64.0.2:8080 maxconn 4 agent-send "1\\n"' in text
    assert 'server box-r2 100.64.0.2:8081 maxconn 4 agent-send "2\\n"' in text


def test_the_agent_is_told_every_replicas_port_and_drain_marker():
    """The agent answers for the replica the router names (boxtools/routeragent.py; its tests
    run it over a socket): its unit hands it each replica's port and drain marker."""
    unit = jinja2.Template((KIT_ROOT / "files/laguna-router-agent@.service.j2").read_text()).render(
        kit_dir="/opt/laguna-kit",
        checks_dir="/run/laguna-router-agent",
        replicas=[(1, 8080, "/opt/laguna-kit/router-drain"), (2, 8081, "/x/2/router-drain")],
    )
    line = next(x for x in unit.splitlines() if x.startswith("ExecStart="))
    assert line == (
        "ExecStart=/usr/bin/python3 /opt/laguna-kit/bin/laguna_router_agent.py --checks-dir "
        "/run/laguna-router-agent --replica 1=8080:/opt/laguna-kit/router-drain "
        "--replica 2=8081:/x/2/router-drain"
    )
    assert "RuntimeDirectory=laguna-router-agent\n" in unit and "User=nobody" in unit


def test_the_firewall_takes_every_replicas_port_as_nft_loads_it(tmp_path):
    """Rendered for an 8-card box behind a router and a monitor, and for the router's host with a
    one-replica and a two-replica box: `nft -c` (a check, nothing loaded) accepts the ranges."""
    import shutil

    from laguna_kit.domain.firewall_rules import Guard

    from ..files.test_laguna_firewall_nft import RULES_BASE

    if not shutil.which("nft") or os.geteuid() != 0:
        pytest.skip("nft -c needs nft and root")
    from laguna_kit.operations.files import kit_file

    two = replicas.build(defaults(), 2)
    for kw in (
        dict(api_port=replicas.ports(two), fleet_router=True, monitor_ports=["8080-8081", 9100]),
        dict(
            guards=[Guard(replicas.port_values([8080, 8080, 8081, 8091]), ["root"], "HAProxy")],
            fleet_router=False,
        ),
    ):
        text = kit_file(
            "files/laguna-firewall.nft.j2",
            **dict(RULES_BASE, peers_glob=str(tmp_path / "none*.nft"), **kw),
        ).decode()
        assert "8080-8081" in text
        path = tmp_path / "rules.nft"
        path.write_text(text)
        check = subprocess.run(["nft", "-c", "-f", str(path)], capture_output=True, text=True)
        assert check.returncode == 0, check.stderr


def test_the_standin_vllm_refuses_cards_another_server_holds(tmp_path):
    """The harness's stand-in takes its cards as vLLM does, so two replicas given the same cards
    would fail on the harness as on a real box (tests/test_fleet_router.py's 8-card box relies on
    it)."""
    import sys
    import time

    standin = KIT_ROOT / "tests/harness/standin_vllm/vllm_standin.py"
    model = tmp_path / "Model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    env = dict(os.environ, STANDIN_LOAD_SECONDS="60", CUDA_VISIBLE_DEVICES="990,991,992,993")
    argv = [sys.executable, str(standin), str(model), "--tensor-parallel-size", "4", "--port", "0"]
    first = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 20
        while "tensor parallel size 4" not in (first.stdout.readline() or ""):
            assert time.monotonic() < deadline and first.poll() is None
        second = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=30)
        assert second.returncode == 1
        assert "Free memory on device cuda:990" in second.stdout, second.stdout
        other = dict(env, CUDA_VISIBLE_DEVICES="994,995")
        few = subprocess.run(argv, env=other, capture_output=True, text=True, timeout=30)
        assert few.returncode == 1 and "World size (4) is larger" in few.stdout, few.stdout
    finally:
        first.kill()
        first.wait()


def test_the_router_gets_a_backend_per_replica_from_each_boxs_cards(monkeypatch):
    from types import SimpleNamespace

    from laguna_kit.domain import fleet
    from laguna_kit.domain.hardware import Gpu
    from laguna_kit.facts.nvidia import NvidiaSmiGpus, PciGpus
    from laguna_kit.operations import router
    from laguna_kit.run import memo

    cards = {"gpu-8": 8, "gpu-4": 4}

    class Box(SimpleNamespace):
        def get_fact(self, cls):
            if cls is NvidiaSmiGpus:  # no driver yet: the PCI bus counts
                return {"ok": False, "gpus": []}
            assert cls is PciGpus
            return [Gpu("NVIDIA GeForce RTX 3090", 24576)] * cards[self.name]

    monkeypatch.setattr(memo, "fact", lambda h, cls, **kw: h.get_fact(cls))

    def box(name):
        return Box(name=name, data=dict(defaults(), laguna_roles=["gpu"]))

    monkeypatch.setattr(fleet, "tailnet_ips", lambda h: ["100.90.1.2", "fd7a:115c:a1e0::1"])
    servers = router.backends([box("gpu-8"), box("gpu-4")])
    assert [(s["name"], s["port"], s["replica"]) for s in servers] == [
        ("gpu-8", 8080, 1),
        ("gpu-8-r2", 8081, 2),
        ("gpu-4", 8080, 1),
    ]
    # the owner's choice wins over the count of cards
    capped = box("gpu-8")
    capped.data["replicas_per_box"] = 1
    assert [s["name"] for s in router.backends([capped])] == ["gpu-8"]
