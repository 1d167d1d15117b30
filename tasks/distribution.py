# A host without GPUs (router, monitor, cache) has no pre-flight: its distribution is still checked
# before anything on it changes (a GPU box's pre-flight says it with the rest).
from laguna_kit.operations.server import distribution_supported

distribution_supported(name="A distribution the kit supports")
