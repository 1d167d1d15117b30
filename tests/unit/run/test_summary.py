"""laguna_kit/run/summary.py: the end of a deploy names, per box, the endpoint, the release and
mode, the gate's figures beside the recipe's, and the next command; the router's endpoint too."""

from laguna_kit.run import summary

GATE = {
    "passed": True,
    "release": 3,
    "time": "2026-12-05T21:00:00+0000",
    "long_context": {
        "prompt_tokens": 190002,
        "completion_tokens": 32,
        "elapsed_s": 74.1,
        "prefill_s": 71.9,
        "decode_tok_s": 268.4,
    },
    "dflash": {"acceptance": 0.6213},
    "benchmark": {"output_tokens": 500, "wall_s": 1.79, "decode_tok_s": 279.3},
}
RECIPE = {"gate_prompt_tokens": 190000, "gate_s": 73.6, "decode_tok_s": 282.5}
ROUTER = {
    "gpu": False,
    "router": True,
    "tailnet": ["100.64.0.9"],
    "router_port": 8090,
    "api_port": 8080,
    "recipe": {},
    "keys_env": "LAGUNA_API_KEYS",
    "session_header": "X-Session-Id",
}


def box(**over):
    return dict(
        {
            "gpu": True,
            "router": False,
            "tailnet": ["100.101.102.103", "fd7a:115c:a1e0::1"],
            "api_port": 8080,
            "router_port": 8090,
            "recipe": RECIPE,
            "release": 3,
            "current": {"mode": "champion", "image": "vllm/vllm-openai:v0.25.1"},
            "gate": GATE,
        },
        **over,
    )


def test_a_served_box_shows_its_endpoint_release_and_figures_beside_the_recipes():
    text = "\n".join(summary.lines({"gpu-1": box()}, ["gpu-1"]))
    assert "endpoint    http://100.101.102.103:8080/v1  (also fd7a:115c:a1e0::1)" in text
    assert "release     3, mode champion, image vllm/vllm-openai:v0.25.1" in text
    assert "190002 prompt tokens (recipe 190000)" in text
    assert "in 74.1 s (recipe 73.6 s)" in text
    assert "decode 279.3 tok/s over 500 tokens (recipe 282.5 tok/s over 500)" in text
    assert "time to first token at 190002 prompt tokens 71.9 s" in text
    assert "DFlash acceptance 62.1%" in text
    assert (
        "try         .venv/bin/python scripts/smoke_test.py http://100.101.102.103:8080/v1" in text
    )


def test_a_box_with_two_replicas_names_the_second_ones_endpoint():
    text = "\n".join(summary.lines({"gpu-8": box(replica_ports=[8080, 8081])}, ["gpu-8"]))
    assert "endpoint    http://100.101.102.103:8080/v1" in text
    assert "replicas    2 http://100.101.102.103:8081/v1 (each its own release and gate" in text
    one = "\n".join(summary.lines({"gpu-1": box(replica_ports=[8080])}, ["gpu-1"]))
    assert "replicas" not in one


def test_a_fleet_names_the_routers_endpoint_on_each_box_and_its_own_line():
    records = {
        "gpu-1": box(),
        "router": ROUTER,
    }
    text = "\n".join(summary.lines(records, ["gpu-1", "router"]))
    assert "(the fleet: http://100.64.0.9:8090/v1)" in text
    assert "router      http://100.64.0.9:8090/v1 for the whole fleet" in text
    assert "LAGUNA_API_KEYS" in text and "--api-key KEY --session demo" in text


def test_a_failed_gate_a_box_off_the_tailnet_and_a_stopped_run_are_said():
    failed = box(gate={"passed": False, "release": 3, "error": "DFlash acceptance 0.0%"})
    text = "\n".join(summary.lines({"a": failed, "b": box(tailnet=[])}, ["a", "b", "c"]))
    assert "gate        FAILED: DFlash acceptance 0.0%" in text
    assert "endpoint    (not on the tailnet yet)" in text
    assert "c: the run stopped before the end" in text
    v6 = "\n".join(summary.lines({"a": box(tailnet=["fd7a:115c:a1e0::1"])}, ["a"]))
    assert "http://[fd7a:115c:a1e0::1]:8080/v1" in v6


def test_a_box_deployed_without_its_router_says_how_to_add_it():
    text = "\n".join(
        summary.lines({"gpu-4": box(router_outside="router", routed=False)}, ["gpu-4"])
    )
    assert "router      router was not in this run and does not send to it yet" in text
    assert "`--limit gpu-4 --limit routers`" in text
    quiet = "\n".join(
        summary.lines({"gpu-4": box(router_outside="router", routed=True)}, ["gpu-4"])
    )
    assert "was not in this run" not in quiet


def test_the_routers_backends_are_read_when_it_is_not_in_the_run():
    from laguna_kit import KIT_ROOT

    from ..fixtures import operation_output, read

    case = read(
        KIT_ROOT / "tests/unit/operations/reports.deploy_summarized/router-not-in-the-run.json"
    )
    summary.RECORDS.clear()
    operation_output("reports.deploy_summarized", case)
    record = summary.RECORDS.pop("box")
    assert record["router_outside"] == "rtr" and record["routed"] is False
    assert record["tailnet"] == ["100.101.102.103", "fd7a:115c:a1e0::1"]  # IPv4 first
    servers = case["inventory"][0]["facts"]["router.RouterStatus"]
    list(servers.values())[0]["servers"].append({"name": "box", "status": "UP"})
    operation_output("reports.deploy_summarized", case)
    assert summary.RECORDS.pop("box")["routed"] is True


def test_the_end_of_a_deploy_prints_a_client_for_the_fleet_or_the_box():
    fleet = {
        "gpu-1": box(model="laguna"),
        "router": ROUTER,
    }
    text = "\n".join(summary.lines(fleet, ["gpu-1", "router"]))
    assert (
        'OpenAI(base_url="http://100.64.0.9:8090/v1", api_key=os.environ["LAGUNA_API_KEY"]' in text
    )
    assert "one of the keys in LAGUNA_API_KEYS" in text and 'model="laguna"' in text
    alone = "\n".join(summary.lines({"gpu-1": box(model="fast")}, ["gpu-1"]))
    assert 'base_url="http://100.101.102.103:8080/v1", api_key="unused"' in alone
    assert 'model="fast"' in alone
    off = "\n".join(summary.lines({"gpu-1": box(tailnet=[])}, ["gpu-1"]))
    assert "A client" not in off  # no address to give yet
