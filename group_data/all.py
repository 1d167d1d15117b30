# The kit's knobs: every version, path, port and flag the deploy uses is declared here, once:
#
#     name: <its shape> = <the recipe's value>  # why
#
# The shape (laguna_kit/knobs/shapes.py) is what a value must be before it reaches a config
# file, a unit, an nft rule or a shell: a value from a hosts file or `pyinfra --data` that does
# not fit is refused, naming the knob, before any host is contacted. Values are the upstream
# recipe's measured ones (tests/data/champion-facts.md, with its source); each line says why.
# Override per host in your hosts file ([hosts.data], or [data] for every host) or with
# `pyinfra --data key=value`. One section per task file (tasks/<name>.py), in deploy.py's order.
from laguna_kit.knobs.shapes import (  # pyinfra takes no imported name for a knob
    CALENDAR,
    CONTAINER_NAME,
    DEB_NAME,
    DEBIAN_VERSION,
    DRIVER_BRANCH,
    EMAIL,
    ENV_NAME,
    HEADER,
    HOST_OR_ADDRESS,
    HOSTNAME,
    IMAGE,
    MODE_NAME,
    MODEL_NAME,
    NO_CONTROL,
    OPEN_PORTS,
    OWNER_ARGS,
    OWNER_ENV,
    PIN,
    PORT,
    REPO,
    REVISION,
    SHM_SIZE,
    SMARTHOST,
    TAG,
    TAILNET_PEER,
    UNIT_NAME,
    USER,
    address,
    box_path,
    flag,
    integer,
    json_like,
    listof,
    mapping,
    number,
    overrides,
    profiles,
    url,
)

# Serving flags live in `serving_profiles` (the only place they are set), picked by `serving_mode`.
# laguna_kit/domain/profiles.py turns a profile into the unit and adds these itself, from the knobs named:
#   docker run: --rm --name <container_name> --gpus all --ipc=host --shm-size=<shm_size>
#     --network host --log-driver none -v <model_dir>:/root/.cache/huggingface:ro
#     -e HF_MODULES_CACHE=/tmp/hf_modules (the checkpoint's code, outside the read-only mount),
#     -v <compile_cache_dir>/<container_name>/<image digest>:/root/.cache/vllm (vLLM's compile cache)
#     -e CUDA_VISIBLE_DEVICES=<the replica's gpu_count cards>, -e KEY=VALUE for each of
#     container_env + container_extra_env; the image as repo@digest
#   vLLM: the target's path in the container (positional), --host <api_bind> --port <api_port>,
#     vllm_common_args with --tensor-parallel-size <gpu_count> after their first flag, then from the profile --max-model-len, --gpu-memory-utilization,
#     --max-num-seqs, --max-num-batched-tokens (each left out when None), --speculative-config
#     (dflash_tokens), --served-model-name <served_model_name>, and vllm_extra_args last.

# --- preflight: the hardware the champion was measured on ------------------------------------
gpu_count: integer(1, 64) = 4  # TP4: the champion shards the model over exactly four GPUs (the tensor parallel size; each replica's cards)
replicas_per_box: integer(0, 8) = 0  # 0: one replica per gpu_count cards the box has (8 cards: two, on ports api_port and api_port + 1); a number: that many, the other cards left to you
gpu_min_memory_mib: integer(0, 1 << 22) = 24000  # 24 GB cards (RTX 3090: 24576 MiB); 17.53 GiB/GPU weights + KV + graphs
min_ram_mib: integer(0, 1 << 30) = 16384  # a floor for four vLLM workers loading shards; the recipe states no figure, so this only catches broken boxes
min_shm_mib: integer(0, 1 << 30) = 2048  # with --ipc=host the host's /dev/shm carries NCCL and shm_broadcast; the recipe's 16g is a ceiling

# --- driver: NVIDIA driver ----------------------------------------------------------------------
nvidia_driver_branch: DRIVER_BRANCH = "580"  # R580: the v0.25.1 image is CUDA 13 (driver >= 580); GeForce cards get no CUDA forward compatibility
nvidia_driver_open: flag() = False  # the open kernel modules instead of the proprietary ones (an RTX 3090 works with both at R580)
nvidia_driver_replace: flag() = False  # install the kit's driver over a working one too old for the image (else the pre-flight refuses, naming both)
nvidia_allow_reboot: flag() = False  # a driver install needs a reboot; the kit reboots only when you allow it
nvidia_reboot_timeout_s: integer(60, 7200) = 600  # how long the reboot after the driver may take: servers with many GPUs can POST for minutes
nvidia_cuda_repo: url() = "https://developer.download.nvidia.com/compute/cuda/repos"  # NVIDIA's CUDA repository: Debian 12's and 13's only source of R580 (laguna_kit/domain/package_sources.py)

# --- container_toolkit: NVIDIA Container Toolkit -----------------------------------------------
nvidia_toolkit_repo: url() = "https://nvidia.github.io/libnvidia-container/stable/deb"  # NVIDIA's own apt repo
nvidia_toolkit_key_url: url() = "https://nvidia.github.io/libnvidia-container/gpgkey"  # its signing key (armored)
nvidia_toolkit_version: DEBIAN_VERSION = "1.17.8-1"  # pinned: a toolkit upgrade rewrites runtime hooks under running GPUs

# --- docker: the engine ------------------------------------------------------------------------
docker_package: DEB_NAME = "docker.io"  # the distribution's engine: same channel on Debian 12/13 and Ubuntu 22.04/24.04
docker_daemon_config: json_like() = {}  # merged into /etc/docker/daemon.json (never replaces keys others wrote)
docker_group_users: listof(USER) = []  # login users to add to the docker group (root-equivalent: opt in by name)

# --- box_tools: the kit's downloader, release manager and gate on the box ---------------------
deploy_lock_wait_s: integer(0, 86400) = 600  # a second deploy of the same box waits this long for the first, then fails naming it
pip_index_url: url() = "https://pypi.org/simple"  # where the box-side downloader venv gets huggingface_hub
pip_trusted_host: HOST_OR_ADDRESS = ""  # only for a plain-HTTP index (a local mirror); PyPI itself needs none
box_venv_packages: listof(PIN) = ["huggingface_hub==2.4.0", "httpx==0.29.0"]  # the box-side tools' venv (pins as requirements.txt)

# --- models: the checkpoints -------------------------------------------------------------------
model_dir: box_path() = "/models"  # holds both checkpoint folders; mounted read-only into the container
target_repo: REPO = "poolside/Laguna-S-2.1-INT4"  # the INT4 target with calibrated FP8 KV
target_revision: REVISION = "4bbfc285f2f8b3b6b526274c133b7b17aae6c8cb"  # pinned with the drafter below: never mix
drafter_repo: REPO = "poolside/Laguna-S-2.1-DFlash-INT4"  # the precision-matched DFlash drafter
drafter_revision: REVISION = "5e07c246915c86dc6920fead03d019989224f2ba"  # pinned together with target_revision
checkpoint_free_margin_gib: integer(0, 1 << 40) = 10  # the checkpoints (~80 GB: target 72-77, drafter 2.1; the recipe asks ~85 free) plus this, free before the first byte
hf_endpoint: url() = "https://huggingface.co"  # the hub (a mirror or the harness stand-in elsewhere)
hf_token_env: ENV_NAME = "HF_TOKEN"  # the control machine's environment variable holding the hub token
checkpoint_rehash: flag() = False  # True re-hashes every file once (suspected bit rot); normally a stat record is trusted
download_workers: integer(1, 64) = 4  # files fetched in parallel per checkpoint (15 target shards)
download_retries: integer(0, 100) = 5  # attempts per file without progress (a stall, a reset, a 5xx) before the deploy fails; huggingface_hub's own downloader uses 5
download_backoff_max_s: integer(0, 3600) = 60  # the longest pause between two attempts (1, 2, 4 ... s)
download_read_timeout_s: integer(1, 3600) = 60  # a transfer silent this long is resumed (huggingface_hub's default download timeout is 10 s; the hub's CDN can pause longer)
checkpoint_scrub_schedule: CALENDAR = "Sun *-*-* 04:00:00"  # re-hash every verified file (a flipped bit is quarantined, never offered to peers; an alert): ~4-5 s per GB on one loaded core here (BENCHMARKS.md); "" = never
peer_fetch: flag() = True  # a fleet's boxes fetch each checkpoint file from a peer that has it verified (over the tailnet) before the hub: the checkpoints come from the hub once per fleet, not once per box
peer_files_port: PORT = 8092  # on each GPU box of a fleet: its verified checkpoint folders, read-only (nginx), for fleet members alone
peer_wait_s: integer(1, 3600) = 60  # a box waits this long for the box assigned a file to show it is fetching, before fetching it from the hub itself
peer_stall_s: integer(1, 3600) = 15  # a peer silent this long mid-file is left: the transfer resumes from the bytes on disk from another peer or the hub
checkpoint_mirror: NO_CONTROL = ""  # offline boxes: a folder on the control machine from scripts/mirror_checkpoints.py; "" = the hub

# --- image: the vLLM image ----------------------------------------------------------------------
vllm_image: IMAGE = "vllm/vllm-openai:v0.25.1"  # the exact vLLM release the champion was measured on
image_registry: url() = "https://registry-1.docker.io"  # where vllm_image's config (its CUDA requirement) is read before the pull

# --- service: the serving unit and its modes -----------------------------------------------------
serving_mode: MODE_NAME = "champion"  # a row of serving_profiles: champion | context-first | speed-128k
api_port: PORT = 8080  # the recipe's public port; vLLM listens on it directly (host network, nftables guard)
api_bind: address() = "::"  # dual stack, so the tailnet's IPv4 and IPv6 addresses both answer (the firewall decides who)
served_model_name: MODEL_NAME = "laguna"  # what clients ask for in "model"
kit_dir: box_path() = "/opt/laguna-kit"  # releases, state, the downloader venv and the kit's box-side scripts
compile_cache_dir: box_path() = "/var/cache/laguna-kit/vllm-compile"  # vLLM's compile cache, a folder per replica and image: a restart or a rollback loads instead of compiling again; pruned with the image
container_name: CONTAINER_NAME = "vllm-laguna"  # the recipe's container name; the unit removes a stale one before start
unit_name: UNIT_NAME = "laguna-vllm.service"  # systemd owns restarts (the container has no Docker restart policy)
shm_size: SHM_SIZE = "16g"  # the recipe's --shm-size (it has no effect beside --ipc=host, kept to match the recipe)
start_limit_burst: integer(1, 1000) = 3  # crash loop: systemd gives up after this many failures in start_limit_interval_s ...
start_limit_interval_s: integer(1, 86400) = 600  # ... so the first failure's log is still at the top of journalctl
# CUDA_VISIBLE_DEVICES (the recipe's 0,1,2,3) is set by the kit, first: each replica's own gpu_count cards
container_env: OWNER_ENV = {  # the rest of the recipe's environment, exactly
    "VLLM_ENABLE_CUDA_COMPATIBILITY": "0",  # use the host driver, not the image's compat libs
    "VLLM_USE_DEEP_GEMM": "0",  # DeepGEMM kernels are not for Ampere
    "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",  # less fragmentation at 200K prefill
}
container_network_env: mapping(ENV_NAME, NO_CONTROL) = {  # derived, not in the recipe: a one-box TP4 needs no interface but loopback
    "NCCL_SOCKET_IFNAME": "lo",  # NCCL's bootstrap sockets on loopback
    "GLOO_SOCKET_IFNAME": "lo",  # Gloo's (torch.distributed CPU groups) likewise
    "VLLM_HOST_IP": "127.0.0.1",  # vLLM's own address for its distributed setup (vllm/envs.py)
}
vllm_common_args: OWNER_ARGS = [  # every mode: the recipe's fixed flags (parsers, MoE backend)
    "--trust-remote-code",  # Laguna's model code ships with the checkpoint
    # here the kit puts --tensor-parallel-size <gpu_count>: the recipe's TP4 over the four 24 GB cards
    "--pipeline-parallel-size", "1",
    "--enable-auto-tool-choice",  # tool calls parsed: all three of these flags together
    "--tool-call-parser", "poolside_v1",
    "--reasoning-parser", "poolside_v1",
    "--moe-backend", "marlin",  # Marlin INT4 MoE kernels on Ampere
    "--disable-custom-all-reduce",  # PCIe 3090s without NVLink
    "--default-chat-template-kwargs", '{"enable_thinking": true}',
]
serving_profiles: profiles() = {  # the recipe's three modes; None = the flag is left out (vLLM's default)
    "champion": {  # 200K, up to 282.5 tok/s; proven with a fresh 190,002-token prompt + generation
        "max_model_len": 204800,  # 200K; KV pool 212,822 tokens (1.04x concurrency)
        "gpu_memory_utilization": 0.87,  # headroom for Marlin MoE + DFlash buffers (0.90 OOMed)
        "max_num_seqs": 4,  # graph reservation 0.43 GiB vs 0.74 GiB at 8: a memory lever
        "max_num_batched_tokens": 2048,  # prefill workspace; the 4096 chunk OOMed at ~180K
        "dflash_tokens": 7,  # DFlash k=7; acceptance collapsed beyond ~5 positions at k=15
        "gate_prompt_tokens": 190000,  # the recipe's fresh near-limit gate
        "recipe_decode_tok_s": 282.5,  # measured: 500 tokens in 1.770 s (client wall, non-streaming)
        "recipe_gate_s": 73.6,  # measured: the 190,002-token gate prompt plus 32 tokens
        "derived": [],
    },
    "context-first": {  # 256K without DFlash, 88.9 tok/s flat, KV pool 390,566
        "max_model_len": None,  # native 262,144: no cap
        "gpu_memory_utilization": None,  # vLLM's default (0.92), as published
        "max_num_seqs": 8,
        "max_num_batched_tokens": None,  # not published: vLLM's default
        "dflash_tokens": None,  # no speculative decoding
        "gate_prompt_tokens": 250000,  # derived: near the 262,144 limit, like the champion's gate
        "recipe_decode_tok_s": 88.9,  # measured, flat
        "recipe_gate_s": None,  # not published
        "derived": ["gate_prompt_tokens", "marlin and --disable-custom-all-reduce kept (not stated)"],
    },
    "speed-128k": {  # the prior speed build and the recipe's rollback: 149.9-259.7 tok/s, pool 160,335
        "max_model_len": 131072,  # derived: "128K" read as 131,072 (not stated)
        "gpu_memory_utilization": 0.88,
        "max_num_seqs": 8,
        "max_num_batched_tokens": 4096,
        "dflash_tokens": 7,
        "gate_prompt_tokens": 120000,  # derived: near the 131,072 limit
        "recipe_decode_tok_s": 259.7,  # measured 149.9-259.7 by prompt; the best
        "recipe_gate_s": None,  # not published
        "derived": ["max_model_len", "gate_prompt_tokens"],
    },
}
serving_overrides: overrides() = {}  # e.g. {"gpu_memory_utilization": 0.86}: one value of the chosen mode changed, the rest kept (shown as not the recipe's)
vllm_extra_args: OWNER_ARGS = []  # extra vLLM flags; the seed's proven-unsafe ones are refused unless forced
container_extra_env: OWNER_ENV = {}  # extra container env; the graph-estimate switch is refused unless forced
force_unsafe: flag() = False  # accept flags the recipe saw crash (gmu >= 0.90 with DFlash, estimate off, ...)

# --- tailscale and firewall: the tailnet-only endpoint ------------------------------------------
tailscale_pkgs_url: url() = "https://pkgs.tailscale.com/stable"  # Tailscale's apt repositories: <this>/<os-release ID> <codename> main
tailscale_repo: url(empty_ok=True) = ""  # override of the repository URL; "" = derived from the box's os-release
tailscale_key_url: url(empty_ok=True) = ""  # override of its signing key's URL; "" = <repo>/<codename>.noarmor.gpg
tailscale_auth_key_env: ENV_NAME = "TS_AUTHKEY"  # the control machine's env var with an auth key (used only to join)
tailscale_hostname: HOSTNAME = ""  # empty: the box's hostname
tailscale_tags: listof(TAG) = []  # e.g. ["tag:gpu"]: limit who reaches the port in Tailscale ACLs, not here
firewall_open_ports: OPEN_PORTS = []  # e.g. ["tcp/9100", "udp/5353"]: the owner's services that stay reachable off the tailnet
firewall_close_listeners: flag() = False  # True: let the first load cut the owner's listeners the pre-check named (they answer on the tailnet only)
ssh_tailnet_only: flag() = False  # opt-in: new SSH connections only over tailscale0; loaded only by a run that is itself connected over the tailnet
firewall_confirm_timeout_s: integer(5, 3600) = 60  # with ssh_tailnet_only: new rules revert to the previous table unless a fresh SSH login confirms them

# --- router: the fleet's one endpoint (the host with roles = ["router"] in the hosts file) --------
router_port: PORT = 8090  # where clients call the fleet (tailnet only); 8080 stays each box's own port, so a GPU box can be the router too
router_metrics_port: PORT = 8405  # HAProxy's Prometheus exporter (/metrics) and stats page (/stats), tailnet only
router_agent_port: PORT = 8091  # on each box: answers the router's agent check with ready/drain (the kit drains a box before restarting it)
router_api_keys_env: ENV_NAME = "LAGUNA_API_KEYS"  # the control machine's env var with the fleet's API keys (comma or space separated)
router_api_keys_file: NO_CONTROL = ""  # or a file on the control machine, one key per line ("" = the env var only)
router_session_header: HEADER = "X-Session-Id"  # same value, same box (its prefix cache is warm); without it requests go round robin
router_timeout_s: integer(1, 86400) = 600  # silence allowed on a response: a 200K prefill comes before the first token (~1 min on the champion)
router_queue_timeout_s: integer(1, 86400) = 600  # how long a request waits at the router for a free box slot (maxconn = the box's max_num_seqs)
router_check_interval_ms: integer(100, 60000) = 1000  # health and agent checks: a dead box is out after 2 failures (~2 s), back after 2 passes
router_drain_timeout_s: integer(0, 86400) = 300  # before a kit restart: how long a drained box's running requests may take to finish (= the gate's client timeout)

# --- image cache: the fleet's pull-through registry on the host with roles = ["cache"] -----------
registry_cache_port: PORT = 5000  # Debian's docker-registry as a pull-through cache of registry_cache_upstream; the GPU boxes' Docker pulls through it (first mirror), tailnet, fleet GPU boxes alone
registry_cache_upstream: url() = "https://registry-1.docker.io"  # the registry it caches: Docker Hub, where vllm_image is (Docker uses a mirror for Docker Hub images only)
registry_cache_dir: box_path() = "/var/lib/laguna-kit/registry-cache"  # on the cache host: the cached layers (~10 GB for the image; a blob is kept 7 days after it was first fetched from upstream, then fetched again: the registry's proxy default, registry/proxy/proxyblobstore.go)

# --- monitor: Prometheus + Alertmanager on the host with roles = ["monitor"] (tasks/monitor.py) ---
node_exporter_port: PORT = 9100  # node exporter (the distribution's) on every host, with the kit's GPU and release metrics; only the monitor reaches it
prometheus_port: PORT = 9090  # on the monitor host, bound to its tailnet address
alertmanager_port: PORT = 9093  # on the monitor host, bound to its tailnet address (no cluster port)
monitor_operators: listof(TAILNET_PEER) = []  # tailnet addresses or tags (e.g. ["tag:ops"]) that reach Prometheus and Alertmanager; no other peer does (Alertmanager's API shows receivers and takes silences)
monitor_local_users: listof(USER) = []  # users on the monitor host besides root and Prometheus's that may reach its ports (e.g. ["grafana"])
metrics_relay_port: PORT = 9180  # on each GPU box: vLLM's /metrics alone, relayed for the monitor (which never reaches the API port)
monitor_scrape_interval_s: integer(1, 3600) = 15  # Prometheus's default; an alert needs a scrape or two plus its wait
monitor_retention_days: integer(1, 3650) = 30  # how long the monitor keeps its time series
gpu_metrics_interval_s: integer(1, 3600) = 15  # how often laguna-gpu-metrics.timer asks nvidia-smi on each box
alert_box_down_for_s: integer(0, 86400) = 30  # vLLM of a box not answering scrapes this long: alert
alert_kv_cache_usage: number(0, 1) = 0.95  # KV cache fuller than this for 5 min: alert (requests start to queue)
alert_waiting_requests: integer(0, 100000) = 4  # more requests waiting than this for 5 min (max_num_seqs: a box's worth): alert
alert_gpu_temp_c: integer(30, 120) = 85  # a card hotter than this for 2 min (a 3090 slows itself near 90): alert
alert_gpu_memory_ratio: number(0, 1) = 0.98  # a card's memory fuller than this (vLLM takes 0.87 by design): alert
alert_disk_free_ratio: number(0, 1) = 0.10  # model_dir or Docker's root with less free than this: alert
alert_metrics_stale_s: integer(60, 86400) = 300  # the kit's GPU/release/disk textfile not rewritten for this long (20 x gpu_metrics_interval_s): its collector is dead, alert
alert_decode_ratio: number(0, 1) = 0.7  # live decode below this x the release's recorded figure for 15 min: alert
alert_webhook_url: url(empty_ok=True) = ""  # Alertmanager POSTs alerts here (JSON; Slack/ntfy/Matrix bridges take it); "" = none
alert_email_to: EMAIL = ""  # and/or mails them to this address ("" = no mail)
alert_email_from: EMAIL = ""  # the sender of those mails
alert_smarthost: SMARTHOST = ""  # the SMTP server for them, host:port

# --- validate: the gate ------------------------------------------------------------------------
ready_timeout_s: integer(1, 86400) = 900  # model load ~124 s plus graph capture; production-stack allows ~10 min
gate_max_tokens: integer(1, 1 << 20) = 32  # the recipe's gate generation length
gate_timeout_s: integer(1, 86400) = 300  # the recipe's gate client timeout
dflash_min_acceptance: number(0, 1) = 0.2  # far below a matched drafter; a mismatched one accepted 0 of 8,449 drafts
gate_bench_tokens: integer(0, 4096) = 500  # the recipe's benchmark shape (short prompt, 500 tokens, temperature 0: 282.5 tok/s), recorded per release; 0 = none
min_decode_ratio: number(0, 1) = 0.8  # a new release decoding below this x the previous passing release's (same box, same mode) fails its gate and rolls back
force_slower: flag() = False  # accept, for this run, a release that min_decode_ratio refuses (its figure then becomes the one to hold)
keep_releases: integer(2, 1000) = 3  # after a passing gate, older releases go, with the images and checkpoint revisions only they used (the current one and the rollback target always stay)
skip_validation: flag() = False  # only for debugging a box: a deploy without the gate proves nothing
