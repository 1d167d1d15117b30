# NVIDIA Container Toolkit from NVIDIA's apt repository (signed-by keyring, no apt-key): its four
# packages pinned to one version together and held (installing the first alone at a version older
# than the repository's newest does not resolve); the docker runtime is configured only when
# daemon.json lacks it.
from pyinfra import host

from laguna_kit.domain.package_sources import toolkit_packages
from laguna_kit.operations.files import files_synced, kit_file
from laguna_kit.operations.nvidia import dev_char_links_present, nvidia_runtime_configured
from laguna_kit.operations.packages import apt_present

d = host.data
KEYRING = "/usr/share/keyrings/nvidia-container-toolkit-keyring.asc"  # apt reads armored .asc keys

files_synced(
    name="NVIDIA Container Toolkit apt source and its signing key",
    fetched=[(d.nvidia_toolkit_key_url, KEYRING, "644")],
    files=[
        (
            kit_file(
                "files/apt-source.list.j2",
                task="tasks/container_toolkit.py",
                what="NVIDIA's container toolkit repository",
                url=f"{d.nvidia_toolkit_repo}/$(ARCH)",
                suite="/",
                components="",
                keyring=KEYRING,
            ),
            "/etc/apt/sources.list.d/nvidia-container-toolkit.list",
            "644",
        ),
        (
            kit_file("files/71-laguna-nvidia-dev-char.rules"),
            "/etc/udev/rules.d/71-laguna-nvidia-dev-char.rules",
            "644",
        ),
    ],
)
apt_present(
    name=f"NVIDIA Container Toolkit {d.nvidia_toolkit_version} (its four packages), held",
    packages=toolkit_packages(d.nvidia_toolkit_version),
    hold=True,
)
nvidia_runtime_configured(name="Docker knows the nvidia runtime (nvidia-ctk, only when missing)")
# A reload of systemd's units must not take the GPUs from the running container
# (NVIDIA/nvidia-docker#1730):
# the /dev/char links NVIDIA recommends first (CDI would need Docker 25+; Debian 12 ships 20.10).
dev_char_links_present(
    name="/dev/char links for the GPU device nodes (a systemd reload keeps GPUs)"
)
