# `pyinfra inventory.py tasks/logs.py [--data log_lines=500]`: the serving unit's journal (vLLM's
# own log; the first failure of a crash loop is in here). Reads only.
from pyinfra import host

from laguna_kit.operations.reports import journal_reported

journal_reported(
    name=f"Journal of {host.data.unit_name}",
    unit=host.data.unit_name,
    lines=int(host.data.get("log_lines", 200)),
)
