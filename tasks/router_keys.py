# The fleet's API keys come from the control machine (router_api_keys_env / router_api_keys_file):
# a router without one would answer anyone on the tailnet, so the run refuses first.
# A router that is no GPU box has no pre-flight: its own missing input (the tailnet's auth key) is
# named here too, before any change.
from pyinfra import host

from laguna_kit.domain import fleet
from laguna_kit.facts.network import TailscaleStatus
from laguna_kit.operations.router import router_keys_present
from laguna_kit.run import memo, operator_inputs

router_keys_present(
    name="The fleet's API keys are set on this machine",
    env=host.data.router_api_keys_env,
    file=host.data.router_api_keys_file,
    early_problem=None
    if "gpu" in fleet.roles(host)  # its pre-flight names it with the rest
    else operator_inputs.tailnet_problem(
        memo.fact(host, TailscaleStatus), host.data.tailscale_auth_key_env
    ),
)
