# The ~10 GB image pull needs only Docker: it runs box-side while the later steps go on
# (tasks/image.py waits for it). With a fleet image cache (roles = ["cache"]), after the cache
# holds the image, so no layer leaves the registry twice. The cache host runs this step too, with
# nothing to do: pyinfra orders operations by every host's sequence, and so the boxes' wait comes
# after the cache host started its warming (tasks/registry_cache.py).
from pyinfra import host

from laguna_kit.domain import fleet, images
from laguna_kit.operations.docker import image_pull_started
from laguna_kit.operations.imagecache import cache_warm_waited

d = host.data
cache = fleet.cache_of(host.state.inventory)
info, _ = images.info_or_reason(d.image_registry, d.vllm_image)  # (the pre-flight said why not)
cache_warm_waited(
    name="The fleet's image cache holds the image before the boxes pull it",
    kit_dir=cache.data.kit_dir if cache is not None else d.kit_dir,
    image=d.vllm_image,
    digest=images.expected_digest(d.vllm_image, info),
)
if "gpu" in fleet.roles(host):
    image_pull_started(name=f"Pull of {d.vllm_image} started on the box", ref=d.vllm_image)
