#!/usr/bin/env python3
"""Dry run: print the container command a serving mode renders to (from group_data's profile table).
usage: print_command.py [--mode champion|context-first|speed-128k] [--unit]"""

import argparse
import os
import shlex
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from laguna_kit.domain import profiles
from laguna_kit.knobs import declared  # noqa: E402

p = argparse.ArgumentParser(description=__doc__)
p.add_argument("--mode")
p.add_argument("--unit", action="store_true", help="print the whole systemd unit instead")
a = p.parse_args()
knobs = declared.defaults()
if a.mode:
    knobs["serving_mode"] = a.mode
try:
    serving = profiles.render(knobs)
except profiles.ProfileError as exc:
    sys.exit(str(exc))
if a.unit:
    print(profiles.render_release(knobs, None)[1].replace("@RELEASE@", "(next)"), end="")
else:
    print(" \\\n  ".join(shlex.quote(x) for x in serving.argv()))
    for note in serving.derived:
        print(f"# derived (not published upstream): {note}")
