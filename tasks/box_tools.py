# The kit's own tools on the box, in a venv: the verified downloader, the release manager and
# the validation gate (the gate runs on the box against 127.0.0.1, whatever the firewall says).
# One package (laguna_kit/boxtools) under <kit_dir>/lib, a launcher per tool under <kit_dir>/bin.
from pyinfra import host
from pyinfra.operations import files, pip

from laguna_kit.boxcli import BOX_TOOLS, package_files
from laguna_kit.operations.packages import apt_present
from laguna_kit.operations.server import deploy_locked

d = host.data
lib = f"{d.kit_dir}/lib"

apt_present(name="python3-venv for the kit's tools", packages=["python3-venv"])
pip.packages(
    name=f"Tools venv: {', '.join(d.box_venv_packages)}",
    packages=d.box_venv_packages,  # written as pip freeze prints them, so a re-run compares equal
    virtualenv=f"{d.kit_dir}/venv",
    virtualenv_kwargs={"venv": True, "python": "python3"},
    extra_install_args=f"--index-url {d.pip_index_url}"
    + (f" --trusted-host {d.pip_trusted_host}" if d.pip_trusted_host else ""),
)
for src, rel in package_files():
    files.put(name=f"Box tools: {rel}", src=src, dest=f"{lib}/boxtools/{rel}", mode="644")
for launcher, module in BOX_TOOLS.items():
    files.template(
        name=f"Tool {launcher}",
        src="files/boxtool.py.j2",
        dest=f"{d.kit_dir}/bin/{launcher}",
        module=module,
        lib=lib,
        mode="755",
    )
# A first deploy takes the lock here, now that its tool is on the box; later runs hold it already.
deploy_locked(
    name="One deploy at a time on this box (from here on a first deploy)",
    kit_dir=d.kit_dir,
    wait_s=d.deploy_lock_wait_s,
)
