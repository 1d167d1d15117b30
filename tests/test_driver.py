"""tasks/driver.py, tasks/container_toolkit.py, tasks/docker.py: a bare box becomes a GPU container
host."""

import json


def test_bare_box_converges_with_reboot_then_changes_nothing(make_box, deploy):
    b = make_box()
    first = deploy(b)
    assert first.ok, first.explain()
    assert "NVIDIA driver loaded (reboot when allowed)" in " ".join(first.changed(b.name)), (
        "no reboot happened"
    )
    # The driver is loaded and sees the four cards.
    rows = b.run(
        "nvidia-smi --query-gpu=name,memory.total --format=csv,noheader"
    ).stdout.splitlines()
    assert rows == ["NVIDIA GeForce RTX 3090, 24576 MiB"] * 4
    held = b.run("apt-mark showhold").stdout.split()
    assert {"nvidia-driver", "nvidia-container-toolkit"} <= set(held)
    assert "blacklist nouveau" in b.run("cat /etc/modprobe.d/laguna-blacklist-nouveau.conf").stdout
    src = b.run("cat /etc/apt/sources.list.d/nvidia-container-toolkit.list").stdout
    assert "signed-by=/usr/share/keyrings/nvidia-container-toolkit-keyring.asc" in src
    assert b.run(
        "ls /etc/apt/trusted.gpg.d/ /etc/apt/trusted.gpg 2>/dev/null | grep -ci nvidia", check=False
    ).stdout.strip() in ("", "0"), "no apt-key style trust"
    cfg = json.loads(b.run("cat /etc/docker/daemon.json").stdout)
    assert (
        cfg["runtimes"]["nvidia"]["path"] == "nvidia-container-runtime"
        and cfg["storage-driver"] == "vfs"
    )
    runtimes = b.run("docker info --format '{{json .Runtimes}}'").stdout
    assert "nvidia" in runtimes, "dockerd was not restarted after nvidia-ctk changed daemon.json"
    # A GPU container starts through the toolkit's hook.
    b.run("docker pull -q vllm/vllm-openai:v0.25.1", timeout=300)
    b.run(
        "docker run --rm --gpus all --entrypoint python3 vllm/vllm-openai:v0.25.1 -c 'print(1)'",
        timeout=300,
    )
    assert b.run("cat /run/standin-nvidia/hook-calls").stdout.strip()

    second = deploy(b)
    assert second.ok, second.explain()
    assert second.changed() == [], f"second run changed: {second.changed()}"


def test_reboot_needed_but_not_allowed_stops_with_instructions(make_box, deploy):
    b = make_box()
    res = deploy(b, data={"nvidia_allow_reboot": False})
    assert not res.ok
    assert "the NVIDIA driver is installed but not loaded" in res.output
    assert "set nvidia_allow_reboot=True" in res.output
    assert b.run("dpkg-query -W -f='${Status}' nvidia-driver").stdout == "hold ok installed"
    # The operator reboots by hand; the re-run then converges without rebooting again.
    b.run("systemctl reboot", check=False)
    import time

    time.sleep(2)
    b.wait_ssh()
    res = deploy(b, data={"nvidia_allow_reboot": False})
    assert res.ok, res.explain()
    assert not any("reboot" in name for name in res.changed())
