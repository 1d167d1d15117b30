# `pyinfra inventory.py tasks/stop.py`: stop serving now. The unit stays installed and enabled,
# so a reboot or `pyinfra inventory.py deploy.py` serves again. Behind a fleet router the box is
# drained first (the release manager waits for its running requests) and stays drained until a
# deploy's gate passes. A router-only host has nothing to stop. Every replica of the box stops.
from pyinfra import host
from pyinfra.facts.systemd import SystemdStatus
from pyinfra.operations import server, systemd

from laguna_kit.domain import fleet, replicas
from laguna_kit.domain.box_commands import release_command
from laguna_kit.knobs import check

check.refuse_bad(host)  # every knob typed, --data too, before anything runs

if "gpu" in fleet.roles(host):
    for r in replicas.of(host):
        if host.get_fact(SystemdStatus, services=[r.unit]).get(r.unit):
            server.shell(
                name=f"Stop {r.unit} (drained at the fleet router first, if there is one)",
                commands=[
                    release_command(host.data.kit_dir, r.unit, "stop", state_dir=r.state_dir)
                ],
            )
        systemd.service(name=f"{r.unit} stopped", service=r.unit, running=False)
