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
    # Said up front, while pyinfra plans (before it asks to go on): the reboot, and why.
    assert "this deploy will reboot the box: no NVIDIA driver answers" in first.stderr
    # The driver is loaded and sees the four cards.
    rows = b.run(
        "nvidia-smi --query-gpu=name,memory.total --format=csv,noheader"
    ).stdout.splitlines()
    assert rows == ["NVIDIA GeForce RTX 3090, 24576 MiB"] * 4
    # R580 from the CUDA repository (which also holds 590): pinned first, every piece held.
    assert "Driver Version: 580.95.05" in b.run("nvidia-smi").stdout
    held = set(b.run("apt-mark showhold").stdout.split())
    assert {
        "nvidia-driver-pinning-580",
        "nvidia-kernel-dkms",
        "nvidia-driver-cuda",
        "nvidia-smi",
        "libcuda1",
        "libnvidia-ml1",
        "nvidia-persistenced",
    } <= held, held
    # The toolkit's four packages at the pinned version, although the repository has a newer one.
    assert "1.18.0-1" in b.run("apt-cache policy nvidia-container-toolkit-base").stdout
    toolkit = (
        "nvidia-container-toolkit",
        "nvidia-container-toolkit-base",
        "libnvidia-container-tools",
        "libnvidia-container1",
    )
    versions = b.run("dpkg-query -W -f='${Package} ${Version}\\n' " + " ".join(toolkit)).stdout
    assert sorted(versions.split("\n")[:-1]) == sorted(f"{p} 1.17.8-1" for p in toolkit), versions
    assert set(toolkit) <= held
    assert (
        b.run("dpkg-query -W -f='${Status}' linux-headers-amd64").stdout == "install ok installed"
    )
    assert "nvidia-driver " not in b.run("dpkg -l | awk '{print $2\" \"}'").stdout
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


def test_a_reboot_without_leave_is_refused_before_any_change(make_box, deploy):
    """A bare box needs a reboot after its driver install: without nvidia_allow_reboot the
    pre-flight says so, naming the knob, before the first change (not after the driver)."""
    b = make_box()
    before = b.run("dpkg -l | md5sum; ls /etc/apt/sources.list.d").stdout
    res = deploy(b, data={"nvidia_allow_reboot": False})
    assert not res.ok
    assert "pre-flight refused" in res.output and "this deploy must reboot the box" in res.output
    assert "Set nvidia_allow_reboot = true" in res.output
    assert "Nothing on the box was changed" in res.output
    assert res.changed() == []
    assert b.run("dpkg -l | md5sum; ls /etc/apt/sources.list.d").stdout == before
    assert "laguna_kit" not in b.run("nft list tables").stdout


DRIVER_535 = {"version": "535.261.03", "cuda": "12.2"}  # a driver a .run left, too old for CUDA 13


def test_a_535_driver_is_refused_before_any_change_and_checked_again_before_serving(
    make_box, deploy, sandbox
):
    b = make_box(driver=DRIVER_535)
    before = b.run("dpkg -l | md5sum; ls /etc/apt/sources.list.d").stdout
    res = deploy(b)
    assert not res.ok
    assert (
        "found NVIDIA driver 535.261.03 (CUDA 12.2) at /usr/local/nvidia/bin/nvidia-smi"
        in res.output
    )
    assert "requires CUDA >= 13.0 (cuda>=13.0)" in res.output, res.explain()
    assert "nvidia_driver_replace = true" in res.output
    assert (
        res.changed() == []
        and b.run("dpkg -l | md5sum; ls /etc/apt/sources.list.d").stdout == before
    )

    # When the registry cannot be read, a tag is not pulled (issue 37 #4: a mirror or the
    # fleet's cache could swap it unchecked): refused before any change, naming the way out.
    res = deploy(b, data={"image_registry": "http://127.0.0.1:9"})
    assert not res.ok and res.changed() == []
    assert "cannot read vllm/vllm-openai:v0.25.1 from http://127.0.0.1:9" in res.output
    assert 'pin the image by digest (vllm_image = "vllm/vllm-openai@sha256:' in res.output
    assert b.run("docker image ls -q", check=False).stdout.strip() == ""
    # Pinned by digest it is pulled (Docker checks the digest), and checked before the unit
    # starts; the stand-in toolkit's hook would refuse the container as the real one does.
    from laguna_kit.domain.images import image_info

    digest = image_info(sandbox.host_data(b)["image_registry"], "vllm/vllm-openai:v0.25.1").digest
    pinned = f"vllm/vllm-openai@{digest}"
    res = deploy(b, data={"image_registry": "http://127.0.0.1:9", "vllm_image": pinned})
    assert not res.ok
    assert f"cannot read {pinned} from http://127.0.0.1:9" in res.output
    assert (
        "requires CUDA >= 13.0 (cuda>=13.0), the driver 535.261.03 supports CUDA 12.2" in res.output
    )
    assert b.run("test -e /etc/systemd/system/laguna-vllm.service", check=False).returncode != 0
    run = b.run(
        f"docker run --rm --gpus all --entrypoint true {pinned}",
        check=False,
        timeout=120,
    )
    assert run.returncode != 0
    assert (
        "nvidia-container-cli: requirement error: unsatisfied condition: cuda>=13.0, please "
        "update your driver to a newer version"
    ) in run.stderr, run.stderr


def test_a_working_r580_driver_that_no_package_installed_is_kept(make_box, deploy, sandbox):
    """A brownfield box: the owner's driver (no package), and the owner's Tailscale repository in
    a deb822 .sources file with a keyring of their own (the kit's tailscale.list beside it, with
    another Signed-By, would make every `apt-get update` fail)."""
    b = make_box(driver={"version": "580.95.05", "cuda": "13.0"})
    pkgs = sandbox.host_data(b)["tailscale_pkgs_url"]
    b.run(
        "install -d /etc/apt/keyrings && curl -fsS -o /etc/apt/keyrings/owner-tailscale.gpg "
        f"{pkgs}/debian/bookworm.noarmor.gpg && printf 'Types: deb\\nURIs: {pkgs}/debian\\n"
        "Suites: bookworm\\nComponents: main\\n"
        "Signed-By: /etc/apt/keyrings/owner-tailscale.gpg\\n' "
        "> /etc/apt/sources.list.d/tailscale.sources"
    )
    res = deploy(b)
    assert res.ok, res.explain()
    assert "Tailscale's repository is already configured" in res.output
    assert b.run("test -e /etc/apt/sources.list.d/tailscale.list", check=False).returncode != 0
    assert b.run("apt-get update -q 2>&1").stdout.count("Conflicting") == 0
    assert "keeping the working NVIDIA driver 580.95.05 (CUDA 13.0" in res.output
    packages = b.run("dpkg-query -W -f='${Package}\\n'").stdout.split()
    driver = [
        p
        for p in packages
        if p.startswith(("nvidia-kernel", "nvidia-smi", "nvidia-driver", "libcuda", "libnvidia-ml"))
    ]
    assert driver == [], driver
    for listing in ("laguna-cuda.list", "cuda-debian12-x86_64.list"):
        assert b.run(f"test -e /etc/apt/sources.list.d/{listing}", check=False).returncode != 0
    assert (
        json.loads(b.run("curl -s http://127.0.0.1:8080/v1/models").stdout)["data"][0]["id"]
        == "laguna"
    )
    again = deploy(b)
    assert again.ok and again.changed() == [], again.changed()


def test_the_bundled_repository_shape_and_a_cuda_keyring_installed_later(make_box, deploy, sandbox):
    """NVIDIA's repository may ship nvidia-smi, libcuda1, NVML and persistenced inside
    nvidia-driver-cuda (Provides + Conflicts): the kit asks for the documented pair only, finds the
    pieces by their files and holds what dpkg installed. Its apt source is cuda-keyring's own, so
    an owner installing cuda-keyring afterwards keeps `apt-get update` working."""
    from tests.harness import nvidia_repos

    b = make_box()
    urls = sandbox.servers.urls(b)
    res = deploy(b, "tests/deploys/driver.py", data={"nvidia_cuda_repo": urls["cuda_repo_bundled"]})
    assert res.ok, res.explain()
    assert "Driver Version: 580.95.05" in b.run("nvidia-smi").stdout
    status = b.run("dpkg-query -W -f='${Package} ${Status}\\n'").stdout
    assert "nvidia-smi install" not in status and "libcuda1 install" not in status, status
    held = set(b.run("apt-mark showhold").stdout.split())
    assert {"nvidia-driver-pinning-580", "nvidia-kernel-dkms", "nvidia-driver-cuda"} <= held
    assert "firmware-nvidia-gsp" in held, "what dpkg installed at the driver's version is held"
    repo = f"{urls['cuda_repo_bundled']}/debian12/x86_64/"
    line = f"deb [signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] {repo} /\n"
    assert b.run("cat /etc/apt/sources.list.d/cuda-debian12-x86_64.list").stdout == line
    armored = b.run("grep -c 'BEGIN PGP' /usr/share/keyrings/cuda-archive-keyring.gpg", check=False)
    assert armored.stdout.strip() == "0", "apt reads a .gpg keyring only in binary form"
    # the owner installs NVIDIA's cuda-keyring afterwards (as NVIDIA's guide says to)
    key = (sandbox.servers.package_root / "harness-key.gpg").read_bytes()
    deb = nvidia_repos.cuda_keyring(b.root / "root", repo, key)
    installed = b.run(f"dpkg -i /root/{deb.name} && apt-get update", check=False, timeout=180)
    assert installed.returncode == 0, installed.stdout[-2000:] + installed.stderr[-2000:]
    assert "Conflicting values" not in installed.stderr
    again = deploy(
        b, "tests/deploys/driver.py", data={"nvidia_cuda_repo": urls["cuda_repo_bundled"]}
    )
    assert again.ok and again.changed() == [], again.changed()
    assert "is already configured (cuda-keyring): using it" in again.output
