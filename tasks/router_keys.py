# The fleet's API keys come from the control machine (router_api_keys_env / router_api_keys_file):
# a router without one would answer anyone on the tailnet, so the run refuses first.
from pyinfra import host

from laguna_kit.operations.router import router_keys_present

router_keys_present(
    name="The fleet's API keys are set on this machine",
    env=host.data.router_api_keys_env,
    file=host.data.router_api_keys_file,
)
