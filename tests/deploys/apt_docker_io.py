# Test deploy: ask for docker.io through the kit's apt operation, whatever is installed (the
# removal guard's drill: apt must never remove what the owner installed).
from laguna_kit.operations.packages import apt_present

apt_present(name="docker.io (guard drill)", packages=["docker.io"])
