"""The end of a deploy: per box what the operator wants to know next (its endpoint on the
tailnet, the router's, the release and mode that serve, the gate's figures beside the recipe's,
the next command to try), printed after the step times (stderr: `--json` stays parseable).

Operations record what they read at execution (operations/reports.py: deploy_summarized); a run
that failed before that records nothing for the box, and the summary says so."""

from __future__ import annotations

import sys

from ..domain.fleet import host_port

RECORDS: dict[str, dict] = {}  # host name -> what deploy_summarized read there


def _url(address: str, port: int) -> str:
    return f"http://{host_port(address, port)}/v1"


def _figure(value, unit: str) -> str:
    return f"{value} {unit}" if value not in (None, "") else "-"


def figures(gate: dict, recipe: dict) -> str:
    """The gate's figures beside the recipe's: decode over the recipe's benchmark shape, the long
    prompt's time to first token, DFlash acceptance."""
    lc, df = gate.get("long_context") or {}, gate.get("dflash") or {}
    bench = gate.get("benchmark") or {}
    if bench:
        decode = (
            f"decode {_figure(bench.get('decode_tok_s'), 'tok/s')} over "
            f"{bench.get('output_tokens', '-')} tokens (recipe "
            f"{_figure(recipe.get('decode_tok_s'), 'tok/s')} over 500)"
        )
    else:
        decode = "decode not measured (gate_bench_tokens = 0)"
    return (
        f"{decode}, time to first token at {lc.get('prompt_tokens', '-')} prompt tokens "
        f"{_figure(lc.get('prefill_s'), 's')}"
        + (f", DFlash acceptance {df['acceptance']:.1%}" if "acceptance" in df else "")
    )


def box_lines(name: str, r: dict, router_url: str | None = None) -> list[str]:
    out = [f"  {name}:"]
    addresses = r.get("tailnet") or []
    if r.get("gpu"):
        current = r.get("current") or {}
        gate = r.get("gate") or {}
        release = r.get("release")
        endpoint = _url(addresses[0], r["api_port"]) if addresses else None
        out.append(
            f"    endpoint    {endpoint or '(not on the tailnet yet)'}"
            + (f"  (also {', '.join(addresses[1:])})" if len(addresses) > 1 else "")
        )
        more = (r.get("replica_ports") or [])[1:]  # a box with 8 cards: its other replicas
        if more and addresses:
            out.append(
                "    replicas    "
                + ", ".join(f"{n} {_url(addresses[0], p)}" for n, p in enumerate(more, start=2))
                + " (each its own release and gate; tasks/status.py)"
            )
        out.append(
            f"    release     {release if release is not None else '-'}, mode "
            f"{current.get('mode', '-')}, image {current.get('image', '-')}"
        )
        if gate.get("release") == release and gate.get("passed"):
            lc, recipe = gate.get("long_context") or {}, r["recipe"]
            out.append(
                f"    gate        passed {gate.get('time', '')}: {lc.get('prompt_tokens', '-')} "
                f"prompt tokens (recipe {recipe.get('gate_prompt_tokens', '-')}), "
                f"+{lc.get('completion_tokens', '-')} generated in "
                f"{_figure(lc.get('elapsed_s'), 's')} (recipe {_figure(recipe.get('gate_s'), 's')})"
            )
            out.append("    figures     " + figures(gate, recipe))
        elif gate.get("release") == release and gate:
            out.append(f"    gate        FAILED: {gate.get('error', 'see tasks/logs.py')}")
        else:
            out.append("    gate        not run for this release (skip_validation?)")
        if r.get("router_outside") and r.get("routed") is not True:
            said = "does not send to it yet" if r.get("routed") is False else "may not send to it"
            out.append(
                f"    router      {r['router_outside']} was not in this run and {said}: run "
                f"the same command with `--limit {name} --limit routers`"
            )
        if endpoint:
            out.append(
                f"    try         .venv/bin/python scripts/smoke_test.py {endpoint}"
                + (f"   (the fleet: {router_url})" if router_url else "")
            )
    if r.get("router"):
        url = _url(addresses[0], r["router_port"]) if addresses else None
        out.append(
            f"    router      {url or '(not on the tailnet yet)'} for the whole fleet "
            f"(Authorization: Bearer <one of {r['keys_env']}>, "
            f"{r['session_header']} keeps a session on one box)"
        )
        if url:
            out.append(
                f"    try         .venv/bin/python scripts/smoke_test.py {url} --api-key KEY "
                "--session demo"
            )
    return out


def lines(records: dict[str, dict], hosts: list[str]) -> list[str]:
    router = next((r for r in records.values() if r.get("router") and r.get("tailnet")), None)
    router_url = _url(router["tailnet"][0], router["router_port"]) if router else None
    out = ["--> Summary:"]
    for name in hosts:
        if name in records:
            out += box_lines(name, records[name], router_url)
        else:
            out.append(
                f"  {name}: the run stopped before the end (its error is above); "
                "re-run the same command to go on"
            )
    box = next((r for r in records.values() if r.get("gpu") and r.get("tailnet")), None)
    model = next((r["model"] for r in records.values() if r.get("model")), None)
    if router_url and router and model:
        out += client_snippet(router_url, model, router["keys_env"])
    elif box and model:
        out += client_snippet(_url(box["tailnet"][0], box["api_port"]), model, "")
    return out


def client_snippet(base_url: str, model: str, keys_env: str) -> list[str]:
    """Python for a client on the tailnet (the OpenAI SDK), ready to paste: the fleet's endpoint
    with a key from the environment, or a box's, which needs none."""
    key = (
        'os.environ["LAGUNA_API_KEY"],  # one of the keys in ' + keys_env
        if keys_env
        else '"unused",  # the box asks for no key (the SDK wants one)'
    )
    return [
        "--> A client (Python, OpenAI SDK: pip install openai; on a machine of the tailnet):",
        "import os",
        "from openai import OpenAI",
        "",
        f'client = OpenAI(base_url="{base_url}", api_key={key}',
        ")",
        "reply = client.chat.completions.create(",
        f'    model="{model}",',
        '    messages=[{"role": "user", "content": "Reply with exactly: Laguna serving is '
        'healthy."}],',
        "    max_tokens=2048,  # room for the thinking before the answer",
        ")",
        "print(reply.choices[0].message.content)",
    ]


def report(hosts: list[str]) -> None:
    if RECORDS:
        print("\n".join(lines(RECORDS, hosts)), file=sys.stderr)
