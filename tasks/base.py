# What every later step fetches with: a minimal install may lack curl, ca-certificates and gnupg
# (Debian's minimal images do). Installed only when missing.
from laguna_kit.operations.packages import apt_present

apt_present(
    name="curl, ca-certificates, gnupg (key and repository downloads)",
    packages=["curl", "ca-certificates", "gnupg"],
)
