#!/usr/bin/env bash
# Prepare this machine to run the kit and its test harness: Debian packages and the Python venv.
# Idempotent; needs root (apt) on Debian 12 or Ubuntu 22.04/24.04.
set -euo pipefail
cd "$(dirname "$0")/.."

HOST_PACKAGES=(
  python3 python3-venv              # the kit runs from a venv on the control machine
  openssh-client                    # ssh-keygen / ssh for the harness boxes
  debootstrap systemd-container     # harness: build and boot the Debian boxes
  iproute2 iputils-ping nftables    # harness: namespaces, veth links, packet tests
  docker.io docker-registry         # harness: build the stand-in image, serve the local registry
  apt-utils dpkg-dev gnupg curl     # harness: build and sign the stand-in apt repositories
  gcc                               # harness: stub ELF libraries of the stand-in driver
)

missing=()
for pkg in "${HOST_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup.sh: need root to install: ${missing[*]}" >&2
    exit 1
  fi
  echo "setup.sh: installing ${missing[*]}"
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

if [ ! -x .venv/bin/python ] || ! .venv/bin/python -c "import pyinfra" 2>/dev/null; then
  python3 -m venv .venv
fi
.venv/bin/pip install -q --disable-pip-version-check -r requirements.txt
echo "setup.sh: ready (.venv with $(.venv/bin/pyinfra --version 2>/dev/null | head -1))"
