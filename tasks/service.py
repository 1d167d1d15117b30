# The champion (or the chosen serving_mode) as a numbered release: the systemd unit rendered from
# files/laguna-vllm.service.j2 and the profile table, installed and started only when it changed.
from pyinfra import host

from laguna_kit.operations.releases import release_deployed
from laguna_kit.settings import knobs_of

release_deployed(
    name=f"Serving release ({host.data.serving_mode}) is the running one",
    knobs=knobs_of(host.data),
    kit_dir=host.data.kit_dir,
    unit=host.data.unit_name,
)
