# The pinned vLLM image; its digest goes into the release. Old images are kept for rollback
# (the kit never prunes: `docker image prune` is the operator's call). Before anything serves, the
# image's own CUDA requirement is checked against the driver, as the container toolkit will.
# The pull itself started in tasks/docker.py, box-side; this waits for it.
from pyinfra import host

from laguna_kit.operations.docker import image_present
from laguna_kit.operations.nvidia import image_cuda_checked

image_present(name=f"Image {host.data.vllm_image}", ref=host.data.vllm_image)
image_cuda_checked(
    name="The driver meets the image's CUDA requirement (NVIDIA_REQUIRE_CUDA)",
    ref=host.data.vllm_image,
)
