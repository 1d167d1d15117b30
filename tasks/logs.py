# `pyinfra inventory.py tasks/logs.py [--data log_lines=500]`: the serving unit's journal (vLLM's
# own log; the first failure of a crash loop is in here); on the router, HAProxy's (its requests,
# and each box going down, up or into drain). Reads only.
from pyinfra import host

from laguna_kit.boxtools.layout import ROUTER_UNIT
from laguna_kit.domain import fleet, replicas
from laguna_kit.knobs import check
from laguna_kit.operations.reports import journal_reported

check.refuse_bad(host)  # every knob typed, --data too, before anything runs

lines = int(host.data.get("log_lines", 200))
if "gpu" in fleet.roles(host):
    for r in replicas.of(host):  # each replica's unit (replica 1: unit_name)
        journal_reported(name=f"Journal of {r.unit}", unit=r.unit, lines=lines)
if "router" in fleet.roles(host):
    journal_reported(name=f"Journal of {ROUTER_UNIT}", unit=ROUTER_UNIT, lines=lines)
