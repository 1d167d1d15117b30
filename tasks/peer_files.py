# A GPU box of a fleet serves its verified checkpoint folders, read-only, to the fleet's other GPU
# boxes over the tailnet, so the fleet fetches each file from the hub once (laguna_kit/
# distribution.py; the fetch hashes every byte whatever its source). The server is the
# distribution's nginx under the kit's own unit and configuration; the stock nginx.service of a
# package the kit installed is masked before the install (its postinst would start the default
# site on port 80; invoke-rc.d skips a masked unit), one the owner had is left as it is. The
# kit's firewall lets the fleet's GPU boxes alone reach the port. Without another GPU box (or with
# peer_fetch off, or offline) the kit's server and its addresses go.
from pyinfra import host
from pyinfra.facts.deb import DebPackages
from pyinfra.operations import server

from laguna_kit.boxtools.layout import (
    FIREWALL_FILE_PEERS,
    FIREWALL_RULES,
    PEER_FILES_CONFIG,
    PEER_FILES_UNIT,
    UNIT_DIR,
)
from laguna_kit.domain import fleet, peer_fetch_plan
from laguna_kit.domain.hub import HubError, source_checkpoint
from laguna_kit.knobs.declared import checkpoint_pairs
from laguna_kit.operations.checkpoints import RUN_DIR
from laguna_kit.operations.files import kit_file
from laguna_kit.operations.firewall import fleet_peers_allowed
from laguna_kit.operations.packages import apt_present
from laguna_kit.operations.systemd import service_running, unit_installed, unit_removed
from laguna_kit.run import memo

d = host.data
UNIT = f"{UNIT_DIR}/{PEER_FILES_UNIT}"
NGINX = ("nginx", "nginx-core", "nginx-light", "nginx-full", "nginx-extras")

if peer_fetch_plan.peer_files_on(host):
    folders = []
    for repo, revision in checkpoint_pairs(d):
        try:
            folders.append(source_checkpoint(d, repo, revision).folder)
        except HubError:
            continue  # the pre-flight already refused this host with the hub's reason
    if not any(p in (memo.fact(host, DebPackages) or {}) for p in NGINX):
        server.shell(
            name="nginx comes for its binary alone: its stock service stays off (masked)",
            commands=["systemctl mask nginx.service"],
        )
    apt_present(name="nginx (the distribution's)", packages=["nginx"])
    unit_installed(
        name="Checkpoint file server for the fleet: its unit and configuration",
        unit=PEER_FILES_UNIT,
        files=[
            (kit_file("files/laguna-peer-files.service.j2", config=PEER_FILES_CONFIG), UNIT, "644"),
            (
                kit_file(
                    "files/peer-files-nginx.conf.j2",
                    port=d.peer_files_port,
                    model_dir=d.model_dir,
                    folders=folders,
                    run_dir=RUN_DIR,
                ),
                PEER_FILES_CONFIG,
                "644",
            ),
        ],
    )
    service_running(name="Checkpoint file server running", service=PEER_FILES_UNIT)
    fleet_peers_allowed(
        role="peers",
        name="The checkpoint file server answers the fleet's GPU boxes alone",
        kit_dir=d.kit_dir,
        rules=FIREWALL_RULES,
        peers_file=FIREWALL_FILE_PEERS,
    )
elif "gpu" in fleet.roles(host) and any(p in (memo.fact(host, DebPackages) or {}) for p in NGINX):
    # (without nginx there is no server of the kit's to remove, and no file to read each run)
    unit_removed(
        name="No other GPU box (or peer fetch off): the checkpoint file server goes (nginx stays)",
        unit=PEER_FILES_UNIT,
        paths=[UNIT, PEER_FILES_CONFIG],
        also=[FIREWALL_FILE_PEERS],
    )
