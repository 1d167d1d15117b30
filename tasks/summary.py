# The last step: what the summary at the end of the run shows for this host (its endpoint on the
# tailnet, the router's, the release and its gate's figures beside the recipe's), read now.
from pyinfra import host

from laguna_kit.operations.reports import deploy_summarized

d = host.data
profile = dict(d.serving_profiles[d.serving_mode], **(d.serving_overrides or {}))
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
)
