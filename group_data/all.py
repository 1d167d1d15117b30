# The kit's knobs: every version, path, port and flag the deploy uses is defined here, once.
# Values are the upstream recipe's measured ones (../shared/seed); each line says why.
# Override per host in your hosts file ([host.data]) or with `pyinfra --data key=value`.
# Serving flags live in the profile table in laguna_kit/profiles.py, selected by `serving_mode`.

# --- hardware the champion was measured on -------------------------------------------------
gpu_count = 4  # TP4: the champion shards the model over exactly four GPUs
gpu_min_memory_mib = 24000  # 24 GB cards (RTX 3090: 24576 MiB); 17.53 GiB/GPU weights + KV + graphs
min_ram_mib = 16384  # a floor for four vLLM workers loading shards; the recipe states no figure, so this only catches broken boxes
min_shm_mib = 2048  # with --ipc=host the host's /dev/shm carries NCCL and shm_broadcast; the recipe's 16g is a ceiling

# --- NVIDIA driver ----------------------------------------------------------------------------
nvidia_driver_branch = "535"  # Debian 12 non-free ships the 535 branch; Ubuntu uses nvidia-driver-<branch>-server
nvidia_allow_reboot = False  # a driver install needs a reboot; the kit reboots only when you allow it
debian_mirror = "http://deb.debian.org/debian"  # where Debian's non-free driver packages come from
debian_mirror_keyring = ""  # empty: the system's Debian archive keyring signs the mirror

# --- NVIDIA Container Toolkit -----------------------------------------------------------------
nvidia_toolkit_repo = "https://nvidia.github.io/libnvidia-container/stable/deb"  # NVIDIA's own apt repo
nvidia_toolkit_key_url = "https://nvidia.github.io/libnvidia-container/gpgkey"  # its signing key (armored)
nvidia_toolkit_version = "1.17.8-1"  # pinned: a toolkit upgrade rewrites runtime hooks under running GPUs

# --- Docker -----------------------------------------------------------------------------------
docker_package = "docker.io"  # the distribution's engine: same channel on Debian 12 and Ubuntu 22.04/24.04
docker_daemon_config = {}  # merged into /etc/docker/daemon.json (never replaces keys others wrote)
docker_group_users = []  # login users to add to the docker group (root-equivalent: opt in by name)

# --- image ------------------------------------------------------------------------------------
vllm_image = "vllm/vllm-openai:v0.25.1"  # the exact vLLM release the champion was measured on

# --- checkpoints ------------------------------------------------------------------------------
model_dir = "/models"  # holds both checkpoint folders; mounted read-only into the container
target_repo = "poolside/Laguna-S-2.1-INT4"  # the INT4 target with calibrated FP8 KV
target_revision = "4bbfc285f2f8b3b6b526274c133b7b17aae6c8cb"  # pinned with the drafter below: never mix
drafter_repo = "poolside/Laguna-S-2.1-DFlash-INT4"  # the precision-matched DFlash drafter
drafter_revision = "5e07c246915c86dc6920fead03d019989224f2ba"  # pinned together with target_revision
checkpoint_free_margin_gib = 10  # ~85 GB of checkpoints plus this, free before the first byte
hf_endpoint = "https://huggingface.co"  # the hub (a mirror or the harness stand-in elsewhere)
pip_index_url = "https://pypi.org/simple"  # where the box-side downloader venv gets huggingface_hub
pip_trusted_host = ""  # only for a plain-HTTP index (a local mirror); PyPI itself needs none
hf_token_env = "HF_TOKEN"  # the control machine's environment variable holding the hub token
hf_hub_version = "2.4.0"  # huggingface_hub in the box-side downloader venv (same pin as requirements.txt)
checkpoint_rehash = False  # True re-hashes every file once (suspected bit rot); normally a stat record is trusted
download_workers = 4  # files fetched in parallel per checkpoint (15 target shards)

# --- service ----------------------------------------------------------------------------------
serving_mode = "champion"  # a row of laguna_kit/profiles.py: champion | context-first | speed-128k
api_port = 8080  # the recipe's public port; upstream maps 8080 -> vLLM's 8000
served_model_name = "laguna"  # what clients ask for in "model"
kit_dir = "/opt/laguna-kit"  # releases, state and the downloader venv on the box

# --- validation -------------------------------------------------------------------------------
ready_timeout_s = 900  # model load ~124 s plus graph capture; production-stack allows ~10 min
gate_prompt_tokens = 190000  # the recipe's fresh near-limit prompt (190,002 tokens measured)
gate_max_tokens = 32  # the recipe's gate generation length
gate_timeout_s = 300  # the recipe's gate client timeout
skip_validation = False  # only for debugging a box: a deploy without the gate proves nothing
