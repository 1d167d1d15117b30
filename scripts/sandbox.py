#!/usr/bin/env python3
"""The local sandbox: real Debian boxes under systemd-nspawn that the kit deploys to over SSH.

  sandbox.py run -- CMD...   bring up the servers and one box, run CMD with LAGUNA_HOSTS set,
                             tear down
  sandbox.py up              bring them up and wait (Ctrl-C tears down); deploy from another
                             shell with LAGUNA_HOSTS unset: inventory.py finds the sandbox
  sandbox.py clean           remove boxes a killed run left behind
Needs root and the packages scripts/setup.sh installs.
"""

import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tests.harness import sandbox  # noqa: E402
from tests.harness.errors import HarnessError  # noqa: E402


def main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    try:
        if argv[0] == "run":
            cmd = argv[2:] if argv[1:2] == ["--"] else argv[1:]
            return sandbox.run_in_sandbox(cmd)
        if argv[0] == "clean":
            sandbox.check_prerequisites()
            sandbox.cleanup_stale()
            return 0
        if argv[0] == "up":
            sb = sandbox.Sandbox().start()
            try:
                b = sb.add_box("sandbox1")
                sb.write_hosts(sandbox.SANDBOX_HOSTS)
                print(f"sandbox box {b.name} at {b.address}; hosts file {sandbox.SANDBOX_HOSTS}")
                env_file = sandbox.SANDBOX_HOSTS.with_name("sandbox.env")
                env_file.touch(mode=0o600)
                env_file.write_text("".join(f"export {k}={v}\n" for k, v in sb.env().items()))
                print(
                    f"deploy from another shell:  . {env_file} && .venv/bin/pyinfra inventory.py "
                    f"deploy.py"
                )
                print(f"({env_file} (0600) holds the stand-in hub token and tailnet auth key)")
                signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
                while True:
                    time.sleep(3600)
            except KeyboardInterrupt:
                return 0
            finally:
                sb.stop()
    except HarnessError as exc:
        print(f"sandbox: {exc}", file=sys.stderr)
        return 2
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
