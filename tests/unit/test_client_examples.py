"""docs/reference.md's API examples work as written: the curl commands and the OpenAI SDK example,
run word for word against the stand-in vLLM server (tests/harness/standin_vllm, started here on
loopback with the kit's own serving arguments: thinking on by default, vLLM's reasoning parser),
and the command-line clients send the router's key and session header."""

import json
import os
import re
import shlex
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from laguna_kit import KIT_ROOT

from . import standin_vllm


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """The stand-in with the champion's vLLM arguments, its cache in a temporary folder."""
    with standin_vllm.serving(tmp_path_factory.mktemp("hf-cache")) as address:
        yield address


def api_blocks(lang: str) -> list[str]:
    text = (KIT_ROOT / "docs" / "reference.md").read_text()
    section = text.split("\n## API\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(rf"```{lang}\n(.*?)```", section, re.S)


def curl_commands() -> list[str]:
    lines = api_blocks("sh")[0].replace("\\\n", " ").splitlines()
    return [line for line in lines if line.startswith("curl ")]


def test_the_examples_are_where_the_test_reads_them():
    assert len(curl_commands()) >= 3 and len(api_blocks("python")) == 1


@pytest.mark.parametrize("command", curl_commands())
def test_each_documented_curl_answers(served, command):
    out = subprocess.run(
        shlex.split(command.replace("BOX:8080", served)) + ["-sS", "--max-time", "20"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    body = json.loads(out)
    if "/chat/completions" in command:
        message = body["choices"][0]["message"]
        assert message["content"] == "Laguna serving is healthy.", body
    else:
        assert [m["id"] for m in body["data"]] == ["laguna"]


def test_the_sdk_example_streams_the_answer(served):
    code = api_blocks("python")[0].replace("http://ROUTER:8090", f"http://{served}")
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    assert out.strip() == "Laguna serving is healthy."


@pytest.mark.parametrize("keys_env", ["LAGUNA_API_KEYS", ""])
def test_the_deploys_client_snippet_runs_as_printed(served, keys_env):
    """The end of a deploy prints Python for a client (laguna_kit/run/summary.py): pasted as it
    is, with the key's variable set, it answers (the router's key or a box's no key)."""
    from laguna_kit.run import summary

    text = summary.client_snippet(f"http://{served}/v1", "laguna", keys_env)
    assert text[0].startswith("--> A client")
    out = subprocess.run(
        [sys.executable, "-c", "\n".join(text[1:])],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, LAGUNA_API_KEY="k" * 32),
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "Laguna serving is healthy."


def test_the_short_answer_without_room_ends_in_the_thinking(served):
    """Why the docs give room: the recipe's thinking default with max_tokens 32 (the old example)
    returns the thinking and no answer."""
    import httpx

    r = httpx.post(
        f"http://{served}/v1/chat/completions",
        json={
            "model": "laguna",
            "messages": [{"role": "user", "content": "Reply with exactly: hi"}],
            "max_tokens": 32,
        },
    ).json()
    message = r["choices"][0]["message"]
    assert message["content"] is None and message["reasoning"]


class Capture(BaseHTTPRequestHandler):
    seen: list = []

    def log_message(self, *a):
        pass

    def reply(self, body: dict):
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        Capture.seen.append(dict(self.headers))
        self.reply({"data": [{"id": "laguna", "max_model_len": 204800}]})

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        Capture.seen.append(dict(self.headers))
        self.reply({"choices": [{"message": {"content": "ok"}}]})


def test_the_smoke_script_sends_the_routers_key_and_session():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Capture)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    Capture.seen = []
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        key = "k" * 32
        proc = subprocess.run(
            [sys.executable, str(KIT_ROOT / "scripts/smoke_test.py"), url, "--session", "s-1"],
            capture_output=True,
            text=True,
            timeout=60,
            env=dict(os.environ, LAGUNA_API_KEY=key),
        )
        assert proc.returncode == 0, proc.stderr
    finally:
        server.shutdown()
    assert len(Capture.seen) == 2
    for headers in Capture.seen:
        assert headers["Authorization"] == f"Bearer {key}"
        assert headers["X-Session-Id"] == "s-1"


@pytest.mark.parametrize(
    "args, why",
    [
        (["--session-header", "X-Id\r\nHost: evil"], "--session-header"),
        (["--api-key", "a b"], "--api-key holds spaces"),
    ],
)
def test_client_headers_are_refused_when_they_could_split_a_request(args, why):
    proc = subprocess.run(
        [sys.executable, str(KIT_ROOT / "scripts/smoke_test.py"), "http://127.0.0.1:9/v1", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode != 0 and why in proc.stderr


def test_the_smoke_test_against_a_dead_url_says_what_to_check_in_one_message():
    """Issue 40: a dead URL, or one without /v1, ended in a 64-line httpx traceback; under the
    system's python3 the script found no jinja2."""
    import subprocess
    import sys

    from laguna_kit import KIT_ROOT

    for python in (sys.executable, "python3"):
        out = subprocess.run(
            [python, str(KIT_ROOT / "scripts/smoke_test.py"), "http://127.0.0.1:9"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
        assert "cannot reach http://127.0.0.1:9" in out.stderr
        assert "ends in /v1" in out.stderr and "tailscale status" in out.stderr
