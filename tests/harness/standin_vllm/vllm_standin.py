#!/usr/bin/env python3
"""STAND-IN vLLM OpenAI server (laguna-kit test harness). Not vLLM; no model runs here.

Entrypoint of the stand-in image pushed as ``vllm/vllm-openai:<tag>`` to the harness registry.
Takes the same command line the kit gives the real image (``<model> --flag value ...``), and:
- refuses to start when the model or drafter folder lacks config.json (as vLLM does);
- "loads" for STANDIN_LOAD_SECONDS (default 2) before opening its port, prints vLLM-like boot
  lines (``GPU KV cache size: N tokens``), then serves /health, /v1/models, /v1/chat/completions,
  /v1/completions (streaming and usage; a token is a whitespace-separated word, so a prompt of
  "x " repeated N times is N tokens, as the upstream gate assumes) and /metrics (Prometheus,
  with speculative-decoding counters when a drafter is configured);
- reads faults at request time from ``standin-faults.json`` in the mounted model cache, so a test
  can make it fail: ``{"oom_prompt_over": N}`` kills the engine on a prompt over N tokens
  (/health then 503, the process exits: the Marlin-workspace OOM signature), and
  ``{"accept_rate": 0.0}`` plays a mismatched drafter, ``{"token_delay_s": 0.02}`` generates
  at that pace (so requests are in flight when a test restarts or drains a box),
  ``{"decode_tok_s": 200}`` the same as a speed (the figure the gate's benchmark measures;
  250 tok/s when neither is set, near the recipe's 282.5), and
  ``{"kv_cache_usage": 0.97}`` reports that KV-cache usage (an alert to fire);
- a chat prompt other than the smoke's "Reply with exactly: ..." is answered up to max_tokens,
  as a model writes the recipe's benchmark page (finish_reason "length");
- /metrics also has vLLM's scheduler gauges ``vllm:num_requests_running`` and
  ``vllm:num_requests_waiting`` (labels model_name, engine; the same in vLLM v0 and v1: vLLM's
  docs/design/metrics.md, vllm/v1/metrics/loggers.py), which the kit's release manager reads to
  let running requests end before a restart, and the V1 engine's other names a monitor reads,
  with their types and labels (vLLM v0.25.1 vllm/v1/metrics/loggers.py, docs/design/metrics.md):
  ``vllm:kv_cache_usage_perc`` (gauge, 0-1), ``vllm:request_success_total`` (counter, label
  finished_reason), histograms ``vllm:time_to_first_token_seconds``,
  ``vllm:inter_token_latency_seconds`` (one per engine step: several tokens under a drafter),
  ``vllm:request_time_per_output_token_seconds`` (one per request) and
  ``vllm:e2e_request_latency_seconds`` with vLLM's buckets.

Where each behaviour the kit relies on is in vLLM 0.25.1's own code (the wheel from PyPI):
- options: an unknown one ends the start, exit 2, "vllm serve: error: unrecognized arguments"
  (argparse; the list in vllm_0_25_1.FLAGS from vllm/engine/arg_utils.py,
  vllm/entrypoints/openai/cli_args.py, vllm/entrypoints/cli/serve.py);
- /health: 200 with an empty body, 503 once the engine is dead
  (vllm/entrypoints/serve/instrumentator/health.py);
- /v1/models: a ModelList of ModelCard {id, object "model", created, owned_by "vllm", root,
  parent, max_model_len, permission} (vllm/entrypoints/openai/engine/protocol.py);
- chat: message {role, content (null when the reply ends inside the thinking), reasoning,
  tool_calls} (vllm/entrypoints/openai/chat_completion/protocol.py, ChatMessage); usage
  {prompt_tokens, total_tokens, completion_tokens} (engine/protocol.py, UsageInfo), in a stream
  as the last chunk when stream_options.include_usage is set;
- metrics: the names and types in vllm_0_25_1.METRICS (vllm/v1/metrics/loggers.py,
  vllm/v1/spec_decode/metrics.py); the fast tier checks this file's /metrics against them
  (tests/unit/test_vllm_facts.py).
"""

import hashlib
import json
import os
import signal
import socket
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def parse_args(argv):
    args = {"model": None, "flags": {}, "switches": []}
    i = 0
    while i < len(argv):
        a = argv[i]
        if a.startswith("--"):
            if "=" in a:
                k, v = a[2:].split("=", 1)
                args["flags"][k] = v
            elif i + 1 < len(argv) and not argv[i + 1].startswith("--"):
                args["flags"][a[2:]] = argv[i + 1]
                i += 1
            else:
                args["switches"].append(a[2:])
        elif args["model"] is None:
            args["model"] = a
        i += 1
    return args


ARGS = parse_args(sys.argv[1:])
FLAGS = ARGS["flags"]
MODEL = ARGS["model"] or FLAGS.get("model")
SERVED = FLAGS.get("served-model-name", MODEL)
MAX_LEN = int(FLAGS.get("max-model-len", 262144))
SPEC = json.loads(FLAGS["speculative-config"]) if "speculative-config" in FLAGS else None
# Reasoning as vLLM's parser returns it (vllm-project/vllm's reasoning parsers): with
# --reasoning-parser and enable_thinking on (the recipe's --default-chat-template-kwargs), the text
# before the end-of-thinking marker goes to message.reasoning (the old reasoning_content name is
# gone) and message.content is null when max_tokens runs out inside the thinking.
REASONING = "reasoning-parser" in FLAGS
DEFAULT_KWARGS = json.loads(FLAGS.get("default-chat-template-kwargs", "{}"))
THINKING = (
    "The user wants one exact sentence back and nothing else, so I will not add any words before "
    "or "
    "after it, no punctuation changes, no markdown, and no explanation of what I am doing here."
).split()
CACHE = os.path.dirname(MODEL.rstrip("/")) if MODEL else "/"
STATE = {
    "dead": False,
    "drafts": 0,
    "draft_tokens": 0,
    "accepted": 0,
    "prompt_tokens": 0,
    "gen_tokens": 0,
    "running": 0,
    "in_kv": 0,
    "success": 0,
}
LOCK = threading.Lock()


class Histogram:
    """A Prometheus histogram as prometheus_client renders it (cumulative le buckets, +Inf, _sum,
    _count)."""

    def __init__(self, name, buckets):
        self.name, self.buckets = name, buckets
        self.counts, self.sum, self.count = [0] * len(buckets), 0.0, 0

    def observe(self, v):
        with LOCK:
            self.sum += v
            self.count += 1
            for i, b in enumerate(self.buckets):
                if v <= b:
                    self.counts[i] += 1

    def lines(self, labels):
        out = [f"# TYPE {self.name} histogram"]
        with LOCK:
            for b, c in zip(self.buckets, self.counts):
                out.append(f'{self.name}_bucket{{{labels},le="{float(b)}"}} {float(c)}')
            out.append(f'{self.name}_bucket{{{labels},le="+Inf"}} {float(self.count)}')
            out.append(f"{self.name}_sum{{{labels}}} {self.sum}")
            out.append(f"{self.name}_count{{{labels}}} {float(self.count)}")
        return out


# vLLM v1's bucket boundaries (vllm/v1/metrics/loggers.py)
TTFT = Histogram(
    "vllm:time_to_first_token_seconds",
    [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
     20.0, 40.0, 80.0, 160.0, 640.0, 2560.0],
)  # fmt: skip
ITL = Histogram(
    "vllm:inter_token_latency_seconds",
    [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
     20.0, 40.0, 80.0],
)  # fmt: skip
# Observed once per finished request: its decode time over its tokens after the first (vLLM
# v0.25.1 vllm/v1/metrics/stats.py update_from_finished_request: mean_time_per_output_token =
# decode_time / (num_generation_tokens - 1), 0 for a one-token answer; loggers.py observes it).
TPOT = Histogram(
    "vllm:request_time_per_output_token_seconds",
    [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
     20.0, 40.0, 80.0],
)  # fmt: skip
E2E = Histogram(
    "vllm:e2e_request_latency_seconds",
    [0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0,
     240.0, 480.0, 960.0, 1920.0, 7680.0],
)  # fmt: skip
# 250 tok/s: 500 tokens take 2 s, so a loaded machine's HTTP and JSON time (0.1-0.3 s seen with the
# suite running on 2 cores) moves the figure by under 15 %, inside min_decode_ratio's 0.8.
DEFAULT_DECODE_TOK_S = 250.0
KV_POOL = int(MAX_LEN * 1.04)  # the pool the boot log prints


def log(msg):
    print(f"INFO {time.strftime('%m-%d %H:%M:%S')} [standin] {msg}", flush=True)


def faults():
    try:
        with open(os.path.join(CACHE, "standin-faults.json")) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return {}


def count_tokens(text):
    return len(str(text).split())


def reply_for(prompt_text):
    marker = "Reply with exactly:"
    if marker in prompt_text:
        return prompt_text.split(marker, 1)[1].strip()
    return "Stand-in reply from the laguna-kit test harness."


def tokens_per_step() -> int:
    """Tokens one engine step gives a request: 1 without a drafter; with DFlash the accepted
    drafts + 1 (k=7 at the recipe's ~62 % acceptance: 5)."""
    if not SPEC:
        return 1
    k = int(SPEC.get("num_speculative_tokens", 1))
    return 1 + int(k * float(faults().get("accept_rate", 0.62)))


def account(gen_tokens):
    if not SPEC:
        return
    k = int(SPEC.get("num_speculative_tokens", 1))
    rate = float(faults().get("accept_rate", 0.62))
    with LOCK:
        drafts = max(1, gen_tokens // (k + 1))
        STATE["drafts"] += drafts
        STATE["draft_tokens"] += drafts * k
        STATE["accepted"] += int(drafts * k * rate)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *a):
        log(f'{self.address_string()} "{self.requestline}" {a[1] if len(a) > 1 else ""}')

    def send_json(self, obj, status=200):
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def error(self, status, message, kind="BadRequestError"):
        self.send_json(
            {"object": "error", "message": message, "type": kind, "param": None, "code": status},
            status,
        )

    def do_GET(self):
        if self.path == "/health":
            if STATE["dead"]:
                return self.send_json({"error": "engine dead"}, 503)
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif self.path == "/v1/models":
            self.send_json(
                {
                    "object": "list",
                    "data": [
                        {
                            "id": SERVED,
                            "object": "model",
                            "created": int(START),
                            "owned_by": "vllm",
                            "root": MODEL,
                            "parent": None,
                            "max_model_len": MAX_LEN,
                        }
                    ],
                }
            )
        elif self.path == "/metrics":
            with LOCK:
                s = dict(STATE)
            labels = f'engine="0",model_name="{SERVED}"'
            kv = faults().get("kv_cache_usage")
            kv = float(kv) if kv is not None else min(s["in_kv"] / KV_POOL, 1.0)
            lines = [
                "# TYPE vllm:num_requests_running gauge",
                f'vllm:num_requests_running{{engine="0",model_name="{SERVED}"}} {s["running"]}.0',
                "# TYPE vllm:num_requests_waiting gauge",
                f'vllm:num_requests_waiting{{engine="0",model_name="{SERVED}"}} 0.0',
                "# TYPE vllm:prompt_tokens_total counter",
                f'vllm:prompt_tokens_total{{model_name="{SERVED}"}} {s["prompt_tokens"]}.0',
                "# TYPE vllm:generation_tokens_total counter",
                f'vllm:generation_tokens_total{{model_name="{SERVED}"}} {s["gen_tokens"]}.0',
                "# TYPE vllm:kv_cache_usage_perc gauge",
                f"vllm:kv_cache_usage_perc{{{labels}}} {kv}",
                "# TYPE vllm:request_success_total counter",
                f'vllm:request_success_total{{{labels},finished_reason="length"}} {s["success"]}.0',
                *TTFT.lines(labels),
                *ITL.lines(labels),
                *TPOT.lines(labels),
                *E2E.lines(labels),
            ]
            if SPEC:
                lines += [
                    "# TYPE vllm:spec_decode_num_drafts_total counter",
                    f'vllm:spec_decode_num_drafts_total{{model_name="{SERVED}"}} {s["drafts"]}.0',
                    "# TYPE vllm:spec_decode_num_draft_tokens_total counter",
                    f'vllm:spec_decode_num_draft_tokens_total{{model_name="{SERVED}"}} '
                    f"{s['draft_tokens']}.0",
                    "# TYPE vllm:spec_decode_num_accepted_tokens_total counter",
                    f'vllm:spec_decode_num_accepted_tokens_total{{model_name="{SERVED}"}} '
                    f"{s['accepted']}.0",
                ]
            body = ("\n".join(lines) + "\n").encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        else:
            self.error(404, f"Not Found: {self.path}", "NotFoundError")

    def do_POST(self):
        try:
            req = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        except ValueError:
            return self.error(400, "invalid JSON body")
        if STATE["dead"]:
            return self.error(500, "EngineDeadError: engine core is dead", "InternalServerError")
        if self.path not in ("/v1/chat/completions", "/v1/completions"):
            return self.error(404, f"Not Found: {self.path}", "NotFoundError")
        with LOCK:
            STATE["running"] += 1
        try:
            if self.path == "/v1/chat/completions":
                text = "\n".join(str(m.get("content", "")) for m in req.get("messages", []))
                return self.complete(req, text, chat=True)
            prompt = req.get("prompt", "")
            text = prompt if isinstance(prompt, str) else " ".join(map(str, prompt))
            return self.complete(req, text, chat=False)
        finally:
            with LOCK:
                STATE["running"] -= 1

    def complete(self, req, text, chat):
        if req.get("model") != SERVED:
            return self.error(
                404, f"The model `{req.get('model')}` does not exist.", "NotFoundError"
            )
        prompt_tokens = count_tokens(text) + (4 if chat else 0)
        max_tokens = int(req.get("max_tokens") or 16)
        if prompt_tokens + max_tokens > MAX_LEN:
            return self.error(
                400,
                f"This model's maximum context length is {MAX_LEN} tokens. However, you "
                f"requested {prompt_tokens + max_tokens} tokens ({prompt_tokens} in the "
                f"messages, {max_tokens} in the completion).",
            )
        limit = faults().get("oom_prompt_over")
        if limit is not None and prompt_tokens > int(limit):
            log(
                "ERROR torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.12 GiB "
                "(standin: Marlin MoE workspace at long prefill)"
            )
            STATE["dead"] = True
            self.error(
                500, "EngineDeadError: engine core died (CUDA out of memory)", "InternalServerError"
            )
            threading.Timer(0.5, lambda: os._exit(1)).start()
            return
        words = reply_for(text).split() if chat else (["x"] * max_tokens)
        if chat and "Reply with exactly:" not in text:  # a page to write: up to max_tokens
            words = (words * (max_tokens // max(len(words), 1) + 1))[:max_tokens]
        kwargs = dict(DEFAULT_KWARGS, **(req.get("chat_template_kwargs") or {}))
        thought = (
            THINKING[:max_tokens] if chat and REASONING and kwargs.get("enable_thinking") else []
        )
        answer_room = max_tokens - len(thought)
        words = (
            (words * (max_tokens // max(len(words), 1) + 1))[:max_tokens]
            if not chat
            else words[: max(answer_room, 0)]
        )
        finish = "length" if len(thought) + len(words) >= max_tokens else "stop"
        out = " ".join(words) if words or not thought else None
        reasoning = " ".join(thought) if thought else None
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": len(thought) + len(words),
            "total_tokens": prompt_tokens + len(thought) + len(words),
        }
        with LOCK:
            STATE["prompt_tokens"] += prompt_tokens
            STATE["gen_tokens"] += len(thought) + len(words)
        account(len(thought) + len(words))
        pace = faults()
        # A default pace (250 tok/s), so the gate's decode figure is the stand-in's pace and
        # not this machine's load: the kit holds each release to the previous one's figure.
        delay = (
            float(pace["token_delay_s"])
            if "token_delay_s" in pace
            else 1.0 / float(pace.get("decode_tok_s") or DEFAULT_DECODE_TOK_S)
        )
        n_out = len(thought) + len(words)
        t_start = time.monotonic()
        with LOCK:
            STATE["in_kv"] += prompt_tokens + n_out
        try:
            return self.answer(req, chat, finish, out, reasoning, usage, delay, thought, words)
        finally:
            took = time.monotonic() - t_start
            TTFT.observe(delay)
            # vLLM observes the inter-token latency once per engine step of a request
            # (stats.py: inter_token_latencies_iter), however many tokens the step gave: with a
            # drafter a step gives the accepted drafts + 1, so the count is steps, not tokens
            per_step = tokens_per_step()
            for _ in range(-(-(n_out - 1) // per_step) if n_out > 1 else 0):
                ITL.observe(delay * per_step)
            TPOT.observe(delay if n_out > 1 else 0.0)
            E2E.observe(took)
            with LOCK:
                STATE["in_kv"] -= prompt_tokens + n_out
                STATE["success"] += 1

    def answer(self, req, chat, finish, out, reasoning, usage, delay, thought, words):
        rid = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex
        obj = "chat.completion" if chat else "text_completion"
        if not req.get("stream"):
            time.sleep(delay * (len(thought) + len(words)))
            choice = {"index": 0, "finish_reason": finish, "logprobs": None}
            message = {"role": "assistant", "content": out}
            if REASONING:
                message["reasoning"] = reasoning
            choice.update({"message": message} if chat else {"text": out})
            return self.send_json(
                {
                    "id": rid,
                    "object": obj,
                    "created": int(time.time()),
                    "model": SERVED,
                    "choices": [choice],
                    "usage": usage,
                }
            )
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        obj_chunk = "chat.completion.chunk" if chat else "text_completion"

        def event(choices, use=None):
            time.sleep(delay)
            payload = {
                "id": rid,
                "object": obj_chunk,
                "created": int(time.time()),
                "model": SERVED,
                "choices": choices,
            }
            if use is not None:
                payload["usage"] = use
            self.wfile.write(b"data: " + json.dumps(payload).encode() + b"\n\n")
            self.wfile.flush()

        for i, w in enumerate(thought if chat else []):
            event(
                [
                    {
                        "index": 0,
                        "delta": {"reasoning": (" " if i else "") + w},
                        "finish_reason": None,
                    }
                ]
            )
        for i, w in enumerate(words):
            piece = (" " if i else "") + w
            event(
                [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]
                if chat
                else [{"index": 0, "text": piece, "finish_reason": None}]
            )
        event(
            [{"index": 0, "delta": {}, "finish_reason": finish}]
            if chat
            else [{"index": 0, "text": "", "finish_reason": finish}]
        )
        if (req.get("stream_options") or {}).get("include_usage"):
            event([], usage)
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()


HELD = []  # the open lock files of this server's cards: held while it lives
LOCK_DIR = os.environ.get("STANDIN_GPU_LOCK_DIR", "/dev/shm")


def claim_gpus():
    """The cards CUDA_VISIBLE_DEVICES gives this server, as vLLM takes them: tensor parallel size
    N needs N visible cards ("World size (N) is larger than the number of available GPUs"), and
    each worker takes gpu_memory_utilization of its card, so a second server on a card already
    taken fails at startup with vLLM's own ValueError (vllm/v1/worker/gpu_worker.py: "Free memory
    on device (6.92/8.0 GiB) on startup is less than desired GPU memory utilization (0.9, 7.2
    GiB)"). A card taken = a lock held on <STANDIN_GPU_LOCK_DIR>/standin-gpu-<index>: on a box the
    box's /dev/shm, shared by every container run with --ipc=host, as the kit runs them; the fast
    tier gives each run a folder of its own (tests/unit/conftest.py), so a root harness run leaves
    nothing another user's fast tier opens."""
    import fcntl

    tp = int(FLAGS.get("tensor-parallel-size", 1))
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    cards = [c.strip() for c in visible.split(",") if c.strip()] if visible is not None else None
    if cards is not None and len(cards) < tp:
        print(
            f"ERROR [standin] ValueError: World size ({tp}) is larger than the number of "
            f"available GPUs ({len(cards)}) in this node.",
            flush=True,
        )
        sys.exit(1)
    gmu = float(FLAGS.get("gpu-memory-utilization", 0.92))
    for card in (cards or [str(i) for i in range(tp)])[:tp]:
        fh = open(os.path.join(LOCK_DIR, f"standin-gpu-{card}"), "w")
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            print(
                f"ERROR [standin] ValueError: Free memory on device cuda:{card} (2.95/23.56 GiB) "
                f"on startup is less than desired GPU memory utilization ({gmu}, "
                f"{23.56 * gmu:.2f} GiB). Decrease GPU memory utilization or reduce GPU memory "
                "used by other processes.",
                flush=True,
            )
            sys.exit(1)
        HELD.append(fh)
    log(f"GPUs {','.join(cards or [])} (CUDA_VISIBLE_DEVICES), tensor parallel size {tp}")


# What a first start compiles (torch.compile, inductor) and a later one loads from vLLM's cache
# (VLLM_CACHE_ROOT, default ~/.cache/vllm: torch_compile_cache/<hash>, the hash over vLLM's version
# and the model and compilation config: vllm/compilation/backends.py, vllm/config). Modelled:
# STANDIN_COMPILE_SECONDS on a miss, nothing on a hit; the port, host and served name are not in
# the hash (two replicas of one config share an entry's content).
COMPILE_S = float(os.environ.get("STANDIN_COMPILE_SECONDS", "2"))
NOT_HASHED = ("host", "port", "served-model-name")


def compiled():
    key = json.dumps(
        ["0.25.1-standin", MODEL, sorted((k, v) for k, v in FLAGS.items() if k not in NOT_HASHED),
         sorted(ARGS["switches"])]
    )  # fmt: skip
    root = os.environ.get("VLLM_CACHE_ROOT") or os.path.expanduser("~/.cache/vllm")
    entry = os.path.join(root, "torch_compile_cache", hashlib.sha256(key.encode()).hexdigest()[:10])
    t0 = time.monotonic()
    if os.path.isdir(entry):
        log(f"Directly load the compiled graph(s) from the cache {entry}, took "
            f"{time.monotonic() - t0:.1f} s")  # fmt: skip
        return
    time.sleep(COMPILE_S)
    try:
        os.makedirs(entry, exist_ok=True)
    except OSError as exc:  # no cache folder (a read-only root): compiled, not kept
        log(f"compile cache not written: {exc}")
    log(f"torch.compile takes {time.monotonic() - t0:.1f} s in total (cache {entry})")


def load_remote_code(path):
    """What transformers does under trust_remote_code for a checkpoint whose config names its own
    code (auto_map): dynamic_module_utils.init_hf_modules creates HF_MODULES_CACHE and its
    __init__.py (HF_MODULES_CACHE defaults to $HF_HOME/modules, HF_HOME to ~/.cache/huggingface:
    transformers/utils/hub.py). Under a read-only mount there: OSError [Errno 30]; vLLM exits."""
    with open(os.path.join(path, "config.json")) as fh:
        if not json.load(fh).get("auto_map"):
            return
    home = os.environ.get("HF_HOME") or os.path.expanduser("~/.cache/huggingface")
    modules = os.environ.get("HF_MODULES_CACHE") or os.path.join(home, "modules")
    os.makedirs(modules, exist_ok=True)
    open(os.path.join(modules, "__init__.py"), "a").close()
    log(f"checkpoint code cached in {modules}")


def refuse_unknown_flags():
    """As vLLM 0.25.1's argparse parser: an option it does not have ends the start (exit 2) before
    anything loads. Its options: vllm_0_25_1.FLAGS, read from the wheel; a boolean also takes
    --no-<name> (BooleanOptionalAction)."""
    from vllm_0_25_1 import FLAGS as REAL

    given = [f"--{k}" for k in [*FLAGS, *ARGS["switches"]]]
    unknown = [
        f for f in given if f not in REAL and not (f.startswith("--no-") and f"--{f[5:]}" in REAL)
    ]
    if unknown:
        print("usage: vllm serve [model_tag] [options]", file=sys.stderr)
        print(f"vllm serve: error: unrecognized arguments: {' '.join(unknown)}", file=sys.stderr)
        sys.exit(2)


def main():
    refuse_unknown_flags()
    # PID 1 in the container ignores SIGTERM unless it asks for it; vLLM shuts down on it.
    signal.signal(signal.SIGTERM, lambda *_: (log("shutting down (SIGTERM)"), os._exit(0)))
    for label, path in (("model", MODEL), ("speculative model", (SPEC or {}).get("model"))):
        if path and not os.path.isfile(os.path.join(path, "config.json")):
            print(
                f"ERROR [standin] {label} path {path} has no config.json: "
                f"OSError: Can't load the configuration of '{path}'",
                flush=True,
            )
            sys.exit(1)
    log(f"vLLM API server (standin) args: {json.dumps(sys.argv[1:])}")
    if "trust-remote-code" in ARGS["switches"]:
        load_remote_code(MODEL)
    claim_gpus()
    compiled()
    log(
        f"non-default args: model={MODEL} served_model_name={SERVED} max_model_len={MAX_LEN} "
        f"speculative_config={json.dumps(SPEC)}"
    )
    time.sleep(float(os.environ.get("STANDIN_LOAD_SECONDS", "2")))
    log("Model loading took 17.53 GiB memory (standin)")
    log(f"GPU KV cache size: {KV_POOL:,} tokens")
    log(f"Maximum concurrency for {MAX_LEN:,} tokens per request: 1.04x")
    host = FLAGS.get("host", "0.0.0.0")
    port = int(FLAGS.get("port", 8000))
    if ":" in host:  # "::" = dual stack, as uvicorn binds it

        class Server6(ThreadingHTTPServer):
            address_family = socket.AF_INET6

            def server_bind(self):
                self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
                super().server_bind()

        server = Server6((host, port), Handler)
    else:
        server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    log(f"Starting vLLM API server on http://{host}:{port}")
    server.serve_forever()


START = time.time()
if __name__ == "__main__":
    main()
