# The kit's own tools on the box, in a venv: the verified downloader, the release manager and
# the validation gate (the gate runs on the box against 127.0.0.1, whatever the firewall says).
from pyinfra import host
from pyinfra.operations import files, pip

from laguna_kit.operations import apt_present

d = host.data

apt_present(name="python3-venv for the kit's tools", packages=["python3-venv"])
pip.packages(
    name=f"Tools venv: {', '.join(d.box_venv_packages)}",
    packages=d.box_venv_packages,  # written as pip freeze prints them, so a re-run compares equal
    virtualenv=f"{d.kit_dir}/venv",
    virtualenv_kwargs={"venv": True, "python": "python3"},
    extra_install_args=f"--index-url {d.pip_index_url}"
    + (f" --trusted-host {d.pip_trusted_host}" if d.pip_trusted_host else ""),
)
for src, dest in (("files/laguna_fetch.py", "laguna_fetch.py"), ("files/laguna_release.py", "laguna_release.py"),
                  ("laguna_kit/gate.py", "laguna_gate.py")):
    files.put(name=f"Tool {dest}", src=src, dest=f"{d.kit_dir}/bin/{dest}", mode="755")
