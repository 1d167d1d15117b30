# NVIDIA Container Toolkit from NVIDIA's apt repository (signed-by keyring, no apt-key), pinned
# and held; the docker runtime is configured only when daemon.json lacks it.
from pyinfra import host
from pyinfra.operations import files

from laguna_kit.operations.nvidia import nvidia_runtime_configured
from laguna_kit.operations.packages import apt_present

d = host.data
KEYRING = "/usr/share/keyrings/nvidia-container-toolkit-keyring.asc"  # apt reads armored .asc keys

files.download(
    name="NVIDIA repository signing key",
    src=d.nvidia_toolkit_key_url,
    dest=KEYRING,
    mode="644",
)
files.template(
    name="NVIDIA Container Toolkit apt source",
    src="files/nvidia-container-toolkit.list.j2",
    dest="/etc/apt/sources.list.d/nvidia-container-toolkit.list",
    repo=d.nvidia_toolkit_repo,
    keyring=KEYRING,
)
apt_present(
    name=f"NVIDIA Container Toolkit {d.nvidia_toolkit_version}, held",
    packages=[f"nvidia-container-toolkit={d.nvidia_toolkit_version}"],
    hold=True,
)
nvidia_runtime_configured(name="Docker knows the nvidia runtime (nvidia-ctk, only when missing)")
