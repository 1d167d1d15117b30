"""What pyinfra lacks for this kit, grouped by job:

- run/: the pyinfra run machinery (steps and their times, Ctrl-C, the SSH connection, the run's
  memory of facts, a roll's failed gates, what the operator must give, progress, the summary);
- knobs/: every knob declared once (group_data/all.py: its value, shape and why), checked, and the
  hosts file;
- domain/: what is served and how, from knobs and facts (serving profiles, replicas, package
  sources, GPUs, the image, the hub, the fleet, monitoring, the peer-fetch plan, the box tools'
  command lines): no pyinfra operation;
- facts/ and operations/: pyinfra facts and operations by domain, with matching names;
- boxtools/: the tools that run on the box (standard library, shipped by tasks/box_tools.py).
"""

from pathlib import Path

KIT_ROOT = Path(__file__).resolve().parent.parent  # the checkout: deploy.py, files/, group_data/
