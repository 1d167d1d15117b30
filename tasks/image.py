# The pinned vLLM image; its digest goes into the release. Old images are kept for rollback
# (the kit never prunes: `docker image prune` is the operator's call). Before anything serves, the
# image's own CUDA requirement is checked against the driver, as the container toolkit will.
# The pull itself started in tasks/docker.py, box-side; this waits for it.
from pyinfra import host

from laguna_kit.domain import images
from laguna_kit.operations.docker import image_digest_checked, image_present
from laguna_kit.operations.nvidia import image_cuda_checked

d = host.data
image_present(name=f"Image {d.vllm_image}", ref=d.vllm_image)
info, _ = images.info_or_reason(d.image_registry, d.vllm_image)  # (the pre-flight said why not)
image_digest_checked(
    name="The image is the one its registry names (a mirror cannot swap it)",
    ref=d.vllm_image,
    # a reference pinned by digest is its own expectation (Docker checks the pull against it)
    expected=images.expected_digest(d.vllm_image, info),
    registry=d.image_registry,
)
image_cuda_checked(
    name="The driver meets the image's CUDA requirement (NVIDIA_REQUIRE_CUDA)",
    ref=d.vllm_image,
)
