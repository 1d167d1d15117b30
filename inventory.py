# Which boxes `pyinfra inventory.py deploy.py` deploys to.
#
# - LAGUNA_HOSTS=/path/to/hosts.toml: your real GPU boxes (format: laguna_kit/knobs/hostsfile.py,
#   example: hosts.example.toml).
# - unset: ./hosts.toml in this checkout when there is one (git-ignored: your boxes), else the
#   local sandbox box that `scripts/sandbox.py up` (or scripts/demo.sh) brought up.
#
# Two groups: `gpu_boxes` (the serving boxes) and `routers` (the host with `roles = ["router"]`,
# the fleet's one endpoint; a GPU box can be both). Every other name starts with an underscore,
# since pyinfra turns any top-level list in this file into a host group.
import os as _os
import sys as _sys

_sys.path.insert(0, _os.path.dirname(_os.path.abspath(__file__)))

from laguna_kit.knobs import hostsfile as _hostsfile  # noqa: E402
from laguna_kit.run import unreachable as _unreachable  # noqa: E402

_SANDBOX_HOSTS = "/run/laguna-kit-harness/sandbox-hosts.toml"  # scripts/sandbox.py writes it
_here = _os.path.dirname(_os.path.abspath(__file__))
_path = _hostsfile.default_path(_os.environ, _here, _SANDBOX_HOSTS)
if _path is None:
    raise SystemExit(
        "inventory.py: no hosts. Write your boxes into hosts.toml in this folder (cp "
        "hosts.example.toml hosts.toml), or set LAGUNA_HOSTS=/path/to/hosts.toml, or bring up "
        "the local sandbox box first: sudo .venv/bin/python scripts/sandbox.py up "
        "(scripts/demo.sh does both)."
    )

try:
    _hosts = _hostsfile.load(_path)
except _hostsfile.HostsFileError as _exc:
    raise SystemExit(f"inventory.py: {_exc}") from None
_unreachable.register()  # a host SSH cannot reach: what to check, at the end of the run
gpu_boxes = _hostsfile.of_role(_hosts, "gpu")
routers = _hostsfile.of_role(_hosts, "router")
monitors = _hostsfile.of_role(_hosts, "monitor")
caches = _hostsfile.of_role(_hosts, "cache")

# `--limit` that matches no host here (a typo) would plan nothing and still ask to go on.
_unmatched = _hostsfile.unmatched_limits(
    _sys.argv,
    [n for n, _ in _hosts],
    {"gpu_boxes": gpu_boxes, "routers": routers, "monitors": monitors, "caches": caches},
)
if _unmatched:
    raise SystemExit(
        f"inventory.py: --limit {', '.join(_unmatched)} matches no host of {_path} (its hosts: "
        f"{', '.join(n for n, _ in _hosts)}; groups: gpu_boxes, routers, monitors, caches)"
    )
