# `pyinfra inventory.py tasks/rollback.py`: run the previous release again (or one by number:
# `--data rollback_to=3`), then validate it. Checkpoints and images of older releases are kept.
from pyinfra import host

from laguna_kit import fleet, knobtypes, rolls
from laguna_kit.operations.releases import release_rolled_back, release_validated
from laguna_kit.operations.server import deploy_locked

knobtypes.refuse_bad(host)  # every knob typed, --data too, before anything runs

if "gpu" in fleet.roles(host):  # a router-only host has no releases
    deploy_locked(
        name="One deploy or rollback at a time on this box",
        kit_dir=host.data.kit_dir,
        wait_s=host.data.deploy_lock_wait_s,
    )

    rolls.watch(host.state)
    behind_router = fleet.router_of(host.state.inventory) is not None
    release_rolled_back(
        name=(
            # behind a router: one box at a time, each gated before the next is drained, so the
            # fleet keeps serving; a failed gate stops the boxes after it
            f"{rolls.GATE_OP} after rolling back, one box at a time"
            if behind_router
            else "Roll back to the previous release"
            if host.data.get("rollback_to") is None
            else f"Roll back to release {host.data.rollback_to}"
        ),
        kit_dir=host.data.kit_dir,
        unit=host.data.unit_name,
        to=host.data.get("rollback_to"),
        gated=behind_router,
        _serial=behind_router,
    )
    release_validated(
        name=f"{rolls.GATE_OP} on the restored release",
        kit_dir=host.data.kit_dir,
        unit=host.data.unit_name,
        auto_rollback=False,
    )
