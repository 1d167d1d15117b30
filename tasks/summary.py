# The last step: what the summary at the end of the run shows for this host (its endpoint on the
# tailnet, the router's, the release and its gate's figures beside the recipe's), read now.
from pyinfra import host, logger

from laguna_kit.domain import fleet, replicas
from laguna_kit.domain.profiles import profile_of
from laguna_kit.operations.reports import deploy_summarized

d = host.data
# A run limited to some boxes (--limit) leaves the router as it is: it learns of an added box, or
# forgets a removed one, only in a run it is part of.
router = fleet.router_of(host.state.inventory)
outside = (
    router is not None and "gpu" in fleet.roles(host) and not host.state.is_host_in_limit(router)
)
if outside:
    logger.warning(
        f"{host.name}: the fleet's router {router.name} is not in this run (--limit): it adds or "
        f"drops boxes only in a run it is part of: add `--limit routers` to this command"
    )
profile = profile_of(d)
deploy_summarized(
    name="Summary: endpoints, release, the gate's figures",
    kit_dir=d.kit_dir,
    unit=d.unit_name,
    api_port=d.api_port,
    router_port=d.router_port,
    recipe={
        "gate_prompt_tokens": profile.get("gate_prompt_tokens"),
        "gate_s": profile.get("recipe_gate_s"),
        "decode_tok_s": profile.get("recipe_decode_tok_s"),
    },
    keys_env=d.router_api_keys_env,
    session_header=d.router_session_header,
    router_outside=router.name if outside else "",
    replica_ports=[r.port for r in replicas.of(host)] if "gpu" in fleet.roles(host) else None,
    served_model=d.served_model_name,
)
