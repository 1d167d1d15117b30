"""The harness itself: real boxes, signed stand-in repos, stand-in hub and registry, clean
teardown."""

import hashlib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.harness import box as boxmod
from tests.harness import sandbox as sandboxmod
from tests.harness import servers, standin_hub
from tests.harness.errors import HarnessError

FIXTURES = Path(__file__).resolve().parent / "data" / "nvidia-smi" / "h200-x1"


def test_box_runs_systemd_sshd_and_nftables(make_box):
    b = make_box()
    assert b.run("ps -p 1 -o comm=").stdout.strip() == "systemd"
    state = b.run("systemctl is-system-running --wait", check=False).stdout.strip()
    assert state in ("running", "degraded"), b.run("systemctl --failed", check=False).stdout
    assert b.run("hostname").stdout.strip() == b.name
    b.run(
        "nft add table inet harness_probe && nft add chain inet harness_probe c '{ type filter "
        "hook input priority 0; }'"
    )
    assert "harness_probe" in b.run("nft list tables").stdout
    # A bare server: none of what the kit installs is there yet.
    assert b.run("dpkg -s docker.io nvidia-driver tailscale", check=False).returncode != 0


def test_box_reboots_like_a_server(make_box):
    b = make_box()
    b.run("touch /run/before-reboot")
    b.run("systemctl reboot", check=False)
    import time

    time.sleep(2)
    b.wait_ssh()
    assert b.run("test -e /run/before-reboot", check=False).returncode == 1, (
        "/run survived: no reboot happened"
    )
    assert b.run("ps -p 1 -o comm=").stdout.strip() == "systemd"


def _add_nvidia_repo(b, urls):
    b.run(
        f"curl -fsSL {urls['nvidia_key']} | gpg --dearmor -o "
        f"/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg"
        f" && echo 'deb [signed-by=/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg] "
        f"{urls['nvidia_repo']}/amd64 /' > /etc/apt/sources.list.d/nvidia-container-toolkit.list"
    )


def test_standin_repos_are_signed_and_install_through_apt(make_box, sandbox):
    b = make_box()
    urls = sandbox.servers.urls(b)
    # Without the key apt refuses the repository: the signature is real.
    b.run(f"echo 'deb {urls['nvidia_repo']}/amd64 /' > /etc/apt/sources.list.d/unsigned.list")
    out = b.run("apt-get update 2>&1", check=False).stdout
    assert "NO_PUBKEY" in out or "not signed" in out, out
    b.run("rm /etc/apt/sources.list.d/unsigned.list")
    _add_nvidia_repo(b, urls)
    # Two versions, related as the real packages are: the kit's pin alone does not resolve ...
    b.run("apt-get update -q")
    alone = b.run("apt-get install -s -q nvidia-container-toolkit=1.17.8-1 2>&1", check=False)
    assert alone.returncode != 0, alone.stdout
    assert (
        "Depends: nvidia-container-toolkit-base (= 1.17.8-1) but 1.18.0-1 is to be installed"
        in (alone.stdout)
    )
    # ... the four at one version do, and an unpinned install takes the newest.
    four = " ".join(
        f"{p}=1.17.8-1"
        for p in (
            "nvidia-container-toolkit",
            "nvidia-container-toolkit-base",
            "libnvidia-container-tools",
            "libnvidia-container1",
        )
    )
    assert b.run(f"apt-get install -s -q {four}", check=False).returncode == 0
    b.run("DEBIAN_FRONTEND=noninteractive apt-get install -y -q nvidia-container-toolkit")
    assert "NVIDIA Container Toolkit CLI version 1.18.0-1" in b.run("nvidia-ctk --version").stdout
    b.run('mkdir -p /etc/docker && echo \'{"log-driver": "journald"}\' > /etc/docker/daemon.json')
    b.run("nvidia-ctk runtime configure --runtime=docker")
    cfg = json.loads(b.run("cat /etc/docker/daemon.json").stdout)
    assert (
        cfg["log-driver"] == "journald"
        and cfg["runtimes"]["nvidia"]["path"] == "nvidia-container-runtime"
    )


def _install_driver(b, urls):
    """As NVIDIA's guide says for Debian 12: the CUDA repository, the branch pinning first."""
    repo = f"{urls['cuda_repo']}/debian12/x86_64/"
    b.run(
        f"curl -fsSL {repo}3bf863cc.pub -o /usr/share/keyrings/cuda.asc && echo 'deb "
        f"[signed-by=/usr/share/keyrings/cuda.asc] {repo} /' > /etc/apt/sources.list.d/cuda.list"
        " && apt-get update -q"
    )
    # Two branches in the repository: unpinned, apt takes 590.
    assert "Candidate: 590.48.01-1" in b.run("apt-cache policy nvidia-smi").stdout
    b.run(
        "DEBIAN_FRONTEND=noninteractive apt-get install -y -q nvidia-driver-pinning-580 && "
        "DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "
        "nvidia-kernel-dkms nvidia-driver-cuda"
    )


def test_standin_driver_needs_a_reboot_then_prints_real_formats(make_box, sandbox):
    b = make_box(gpus=boxmod.gpus(boxmod.RTX_3090, 3))
    _install_driver(b, sandbox.servers.urls(b))
    before = b.run("nvidia-smi", check=False)
    assert before.returncode != 0 and "couldn't communicate with the NVIDIA driver" in before.stdout
    b.run("systemctl reboot", check=False)
    import time

    time.sleep(2)
    b.wait_ssh()
    fields = (
        "index,name,memory.total,memory.used,memory.free,driver_version,pci.bus_id,uuid,compute_cap"
    )
    rows = (
        b.run(f"nvidia-smi --query-gpu={fields} --format=csv,noheader,nounits")
        .stdout.strip()
        .splitlines()
    )
    assert len(rows) == 3
    real = (FIXTURES / "query-gpu.csv").read_text().strip().split(", ")
    for row in rows:
        cols = row.split(", ")
        assert len(cols) == len(real)
        assert cols[1] == "NVIDIA GeForce RTX 3090" and cols[2] == "24576" and cols[8] == "8.6"
        assert re.fullmatch(r"GPU-[0-9a-f-]{36}", cols[7]) and re.fullmatch(
            r"[0-9A-F]{8}:[0-9A-F]{2}:00\.0", cols[6]
        )
    header = b.run(
        "nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv"
    ).stdout.splitlines()[0]
    assert header == (FIXTURES / "query-gpu-header.csv").read_text().splitlines()[0]
    listing = b.run("nvidia-smi -L").stdout.splitlines()
    assert re.fullmatch(r"GPU 0: NVIDIA GeForce RTX 3090 \(UUID: GPU-[0-9a-f-]{36}\)", listing[0])
    table = b.run("nvidia-smi").stdout
    assert "Driver Version: 580.95.05" in table and "CUDA Version: 13.0" in table
    assert table.count("24576MiB") == 3
    libs = b.run("ldconfig -p").stdout
    assert "libcuda.so.1 (libc6,x86-64)" in libs and "libnvidia-ml.so.1 (libc6,x86-64)" in libs


def test_standin_tailscale_joins_the_harness_tailnet(make_box, sandbox):
    b = make_box()
    urls = sandbox.servers.urls(b)
    b.run(
        f"curl -fsSL {urls['tailscale_pkgs']}/debian/bookworm.noarmor.gpg "
        "-o /usr/share/keyrings/tailscale-archive-keyring.gpg "
        f"&& "
        f"echo 'deb [signed-by=/usr/share/keyrings/tailscale-archive-keyring.gpg] "
        f"{urls['tailscale_pkgs']}/debian bookworm main'"
        " > /etc/apt/sources.list.d/tailscale.list && apt-get update -q && "
        "DEBIAN_FRONTEND=noninteractive apt-get install -y -q tailscale"
    )
    assert b.run("systemctl is-active tailscaled").stdout.strip() == "active"
    b.run("printf wrong-key > /root/bad && chmod 600 /root/bad")
    bad = b.run("tailscale up --auth-key=file:/root/bad", check=False)
    assert bad.returncode == 1 and "invalid key" in bad.stderr
    b.run(
        f"printf %s {b.tailscale_auth_key} > /root/ts && chmod 600 /root/ts && tailscale up "
        f"--auth-key=file:/root/ts"
    )
    assert b.run("tailscale ip -4").stdout.strip() == b.tailnet_v4
    assert b.tailnet_v4 in b.run("ip -br addr show tailscale0").stdout
    ping = boxmod.sh(
        "ip", "netns", "exec", boxmod.TAILNET_NS, "ping", "-c1", "-W2", b.tailnet_v4, check=False
    )
    assert ping.returncode == 0, ping.stdout + ping.stderr
    ping6 = boxmod.sh(
        "ip",
        "netns",
        "exec",
        boxmod.TAILNET_NS,
        "ping",
        "-6",
        "-c1",
        "-W2",
        b.tailnet_v6,
        check=False,
    )
    assert ping6.returncode == 0, ping6.stdout + ping6.stderr


def test_standin_hub_speaks_to_the_real_client(sandbox, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{servers.HUB_PORT}")
    from huggingface_hub import HfApi, hf_hub_download
    from huggingface_hub.errors import GatedRepoError

    api = HfApi(endpoint=f"http://127.0.0.1:{servers.HUB_PORT}", token=servers.HUB_TOKEN)
    info = api.model_info(
        standin_hub.TARGET_REPO, revision=standin_hub.TARGET_COMMIT, files_metadata=True
    )
    assert info.sha == standin_hub.TARGET_COMMIT
    shards = sorted(s.rfilename for s in info.siblings if s.rfilename.endswith(".safetensors"))
    assert shards == [f"model-{i:05d}-of-00015.safetensors" for i in range(1, 16)]
    shard = next(s for s in info.siblings if s.rfilename == shards[6])
    path = hf_hub_download(
        standin_hub.TARGET_REPO,
        shards[6],
        revision=standin_hub.TARGET_COMMIT,
        local_dir=tmp_path,
        token=servers.HUB_TOKEN,
        endpoint=f"http://127.0.0.1:{servers.HUB_PORT}",
    )
    assert hashlib.sha256(Path(path).read_bytes()).hexdigest() == shard.lfs.sha256
    assert os.path.getsize(path) == shard.size == shard.lfs.size
    index = json.loads(
        Path(
            hf_hub_download(
                standin_hub.TARGET_REPO,
                "model.safetensors.index.json",
                revision=standin_hub.TARGET_COMMIT,
                local_dir=tmp_path,
                token=servers.HUB_TOKEN,
                endpoint=f"http://127.0.0.1:{servers.HUB_PORT}",
            )
        ).read_text()
    )
    assert sorted(set(index["weight_map"].values())) == shards
    with pytest.raises(GatedRepoError):
        HfApi(endpoint=f"http://127.0.0.1:{servers.HUB_PORT}", token=False).model_info(
            standin_hub.TARGET_REPO
        )
    # Range requests resume a partial file.
    import httpx

    r = httpx.get(
        f"http://127.0.0.1:{servers.HUB_PORT}/{standin_hub.TARGET_REPO}/resolve/main/{shards[0]}",
        headers={"Range": "bytes=100-", "Authorization": f"Bearer {servers.HUB_TOKEN}"},
    )
    assert r.status_code == 206 and r.headers["Content-Range"].startswith("bytes 100-")
    assert r.headers["X-Repo-Commit"] == standin_hub.TARGET_COMMIT


def test_several_boxes_at_once_and_teardown_leaves_nothing(make_box, sandbox):
    a, b = make_box(), make_box(gpus=boxmod.gpus(boxmod.RTX_4080, 4))
    assert a.address != b.address
    assert a.run("hostname").stdout.strip() == a.name and b.run("hostname").stdout.strip() == b.name
    assert "16376" in b.run("cat /etc/standin-hardware/gpus.json").stdout
    root, ns = str(b.root), b.netns
    sandbox.remove_box(b)
    assert ns not in boxmod.sh("ip", "netns", "list").stdout
    assert root not in Path("/proc/mounts").read_text()
    procs = subprocess.run(
        ["pgrep", "-f", f"systemd-nspawn -D {root} "], capture_output=True, text=True
    ).stdout
    assert procs.strip() == ""
    assert not b.state_dir.exists()
    assert a.run("true").returncode == 0  # the other box is untouched


def test_prerequisite_errors_say_what_is_missing(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    real_which = shutil.which
    monkeypatch.setattr(
        shutil, "which", lambda t: None if t in ("systemd-nspawn", "debootstrap") else real_which(t)
    )
    with pytest.raises(HarnessError) as exc:
        sandboxmod.check_prerequisites()
    msg = str(exc.value)
    assert "must run as root" in msg
    assert "apt-get install debootstrap systemd-container" in msg
