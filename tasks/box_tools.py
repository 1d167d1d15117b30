# The kit's own tools on the box, in a venv: the verified downloader, the release manager and
# the validation gate (the gate runs on the box against 127.0.0.1, whatever the firewall says).
# One package (laguna_kit/boxtools) under <kit_dir>/lib, a launcher per tool under <kit_dir>/bin,
# all judged by one command (files_synced).
from pyinfra import host

from laguna_kit.domain.box_commands import box_tool_files, earlier_files
from laguna_kit.operations.files import files_synced
from laguna_kit.operations.packages import apt_present, venv_packages
from laguna_kit.operations.server import deploy_locked

d = host.data

apt_present(name="python3-venv for the kit's tools", packages=["python3-venv"])
venv_packages(
    name=f"Tools venv: {', '.join(d.box_venv_packages)}",
    venv=f"{d.kit_dir}/venv",
    packages=d.box_venv_packages,
    install_args=f"--index-url {d.pip_index_url}"
    + (f" --trusted-host {d.pip_trusted_host}" if d.pip_trusted_host else ""),
)
files_synced(
    name="Box tools and their launchers",
    files=box_tool_files(d.kit_dir),
    removed=earlier_files(d.kit_dir),
)
# A first deploy takes the lock here, now that its tool is on the box; later runs hold it already.
deploy_locked(
    name="One deploy at a time on this box (from here on a first deploy)",
    kit_dir=d.kit_dir,
    wait_s=d.deploy_lock_wait_s,
)
