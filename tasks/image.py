# The pinned vLLM image; its digest goes into the release. Old images are kept for rollback
# (the kit never prunes: `docker image prune` is the operator's call).
from pyinfra import host

from laguna_kit.operations.docker import image_present

image_present(name=f"Image {host.data.vllm_image}", ref=host.data.vllm_image)
