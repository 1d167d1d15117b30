# `pyinfra inventory.py tasks/status.py`: unit state, release, digest, GPU memory, endpoint health,
# last gate result, the running release's figures beside the recipe's, a drain at the fleet
# router; on the router: each box as the router sees it. Reads only. One report per replica, then
# the fleet's table (a row per box and replica) at the end of the run.
from pyinfra import host

from laguna_kit.boxtools.layout import ROUTER_ADMIN_SOCKET, ROUTER_UNIT
from laguna_kit.domain import fleet, replicas
from laguna_kit.domain.profiles import profile_of
from laguna_kit.knobs import check
from laguna_kit.operations.reports import router_reported, serving_reported
from laguna_kit.run import status_table

check.refuse_bad(host)  # every knob typed, --data too, before anything runs
status_table.register()  # the fleet's table, a row per box and replica, at the end of the run

if "gpu" in fleet.roles(host):
    serving = replicas.of(host)
    for r in serving:
        serving_reported(
            name="Serving status" + (f" ({r.label}, GPUs {r.devices})" if len(serving) > 1 else ""),
            kit_dir=host.data.kit_dir,
            unit=r.unit,
            port=r.port,
            recipe={"decode_tok_s": profile_of(host.data).get("recipe_decode_tok_s")},
            state_dir=r.state_dir,
            replica=r.number,
            model_dir=host.data.model_dir,
        )
if "router" in fleet.roles(host):
    router_reported(
        name="Router status",
        unit=ROUTER_UNIT,
        admin_socket=ROUTER_ADMIN_SOCKET,
        port=host.data.router_port,
    )
