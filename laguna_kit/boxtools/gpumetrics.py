"""laguna-gpu-metrics: what a monitor needs from a box that no distribution exporter gives, as
Prometheus text for node exporter's textfile collector (run by laguna-gpu-metrics.timer):

- per GPU, from `nvidia-smi --query-gpu`: temperature, power and its limit, memory used and total,
  utilisation, SM clock, the clock event (throttle) reasons, uncorrected ECC errors, fan;
- Xid errors the driver logged since boot (the kernel log's "NVRM: Xid" lines);
- the serving release: its number and mode, whether its last gate passed, its recorded decode
  figure (the alert compares the live speed with it);
- the free space of the model folder and Docker's root.

What nvidia-smi does (driver 580; real output in tests/data/nvidia-smi/h200-x1/gpu-metrics): an
unknown field fails the whole query with exit 2 and `Field "<name>" is not a valid field to
query.`, so a field an older driver lacks is dropped and the query asked again, never every metric
lost; `[N/A]` (or `[Not Supported]`) is what a card lacks (an RTX 3090 has no ECC, an H200 no
fan): that sample is left out. The file is replaced whole (rename), so a scrape never reads half.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys

from .layout import REPLICAS
from .release.store import Store

MIB = 1 << 20


def active(v: str) -> float:
    return 1.0 if v == "Active" else 0.0


def percent(v: str) -> float:
    return float(v) / 100


# nvidia-smi field -> (metric, help, the value in the metric's unit)
FIELDS = {
    "temperature.gpu": ("laguna_gpu_temperature_celsius", "GPU core temperature", float),
    "power.draw": ("laguna_gpu_power_watts", "board power draw", float),
    "enforced.power.limit": ("laguna_gpu_power_limit_watts", "enforced power limit", float),
    "memory.used": (
        "laguna_gpu_memory_used_bytes",
        "framebuffer memory used",
        lambda v: float(v) * MIB,
    ),
    "memory.total": (
        "laguna_gpu_memory_total_bytes",
        "framebuffer memory",
        lambda v: float(v) * MIB,
    ),
    "utilization.gpu": ("laguna_gpu_utilization_ratio", "busy time, 0-1", percent),
    "clocks.sm": ("laguna_gpu_sm_clock_hertz", "SM clock", lambda v: float(v) * 1e6),
    "clocks_event_reasons.active": (
        "laguna_gpu_clock_event_reasons",
        "active clock event (throttle) reasons, NVML bit mask (1 = idle)",
        lambda v: float(int(v, 16)),
    ),
    "clocks_event_reasons.hw_thermal_slowdown": (
        "laguna_gpu_hw_thermal_slowdown",
        "1 while the hardware slows the clocks for heat",
        active,
    ),
    "clocks_event_reasons.sw_thermal_slowdown": (
        "laguna_gpu_sw_thermal_slowdown",
        "1 while the driver slows the clocks for heat",
        active,
    ),
    "clocks_event_reasons.sw_power_cap": (
        "laguna_gpu_power_capped",
        "1 while the power limit holds the clocks down",
        active,
    ),
    "ecc.errors.uncorrected.volatile.total": (
        "laguna_gpu_ecc_uncorrected_errors",
        "uncorrected ECC errors since the driver loaded",
        float,
    ),
    "fan.speed": ("laguna_gpu_fan_ratio", "fan speed, 0-1 of its maximum", percent),
}
LABEL_FIELDS = ["index", "uuid", "name"]
MISSING = {"[N/A]", "N/A", "[Not Supported]", "[Unknown Error]", ""}
BAD_FIELD = re.compile(r'Field "([^"]+)" is not a valid field to query')
XID = re.compile(r"NVRM: Xid \(([^)]*)\): (\d+)")


def escape(value: str) -> str:
    """A label value as Prometheus's text format needs it (whatever the card or the box says)."""
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def labels(pairs: dict) -> str:
    return ",".join(f'{k}="{escape(v)}"' for k, v in pairs.items())


def query(run, fields: list[str]) -> tuple[list[str], list[list[str]]]:
    """(the fields the driver accepted, a row per GPU): a field it calls invalid is dropped and
    the query asked again; any other failure raises."""
    fields = list(fields)
    while True:
        code, out = run(
            ["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"]
        )
        if code == 0:
            rows = [
                [c.strip() for c in line.split(",")] for line in out.splitlines() if line.strip()
            ]
            return fields, [r for r in rows if len(r) == len(fields)]
        m = BAD_FIELD.search(out)
        if code == 2 and m and m.group(1) in fields and m.group(1) not in LABEL_FIELDS:
            fields.remove(m.group(1))
            continue
        raise RuntimeError(f"nvidia-smi failed (exit {code}): {out.strip()[:200]}")


def gpu_lines(run) -> list[str]:
    wanted = LABEL_FIELDS + list(FIELDS)
    try:
        fields, rows = query(run, wanted)
    except (RuntimeError, OSError) as exc:
        return [
            "# HELP laguna_gpu_query_ok 1 when nvidia-smi answered the last query",
            "# TYPE laguna_gpu_query_ok gauge",
            "laguna_gpu_query_ok 0",
            f"# {escape(str(exc))[:200]}",
        ]
    out = [
        "# HELP laguna_gpu_query_ok 1 when nvidia-smi answered the last query",
        "# TYPE laguna_gpu_query_ok gauge",
        "laguna_gpu_query_ok 1",
    ]
    for field, (metric, help_text, convert) in FIELDS.items():
        if field not in fields:
            continue
        samples = []
        for row in rows:
            value = row[fields.index(field)]
            if value in MISSING:
                continue
            try:
                number = convert(value)
            except ValueError:
                continue
            ident = {"gpu": row[0], "uuid": row[1], "name": row[2]}
            samples.append(f"{metric}{{{labels(ident)}}} {number:g}")
        if samples:
            out += [f"# HELP {metric} {help_text}", f"# TYPE {metric} gauge", *samples]
    return out


def xid_lines(run) -> list[str]:
    """Xid errors since boot, by code (the kernel log; nothing when it cannot be read)."""
    code, text = run(["journalctl", "-k", "-b", "-o", "cat", "--no-pager", "--grep", "NVRM: Xid"])
    if code not in (0, 1):  # 1: no match
        return []
    counts: dict[str, int] = {}
    for m in XID.finditer(text):
        counts[m.group(2)] = counts.get(m.group(2), 0) + 1
    out = [
        "# HELP laguna_gpu_xid_errors Xid errors the NVIDIA driver logged since boot, by code",
        "# TYPE laguna_gpu_xid_errors gauge",
        "laguna_gpu_xid_errors_all " + str(sum(counts.values())),
    ]
    out += [f'laguna_gpu_xid_errors{{xid="{c}"}} {n}' for c, n in sorted(counts.items())]
    return out


def replica_dirs(kit_dir: str) -> list[tuple[int, str]]:
    """(replica number, its state folder): replica 1's is kit_dir, replica n's under replicas/n."""
    extra = os.path.join(kit_dir, REPLICAS)
    try:
        more = sorted(int(n) for n in os.listdir(extra) if n.isdigit() and int(n) > 1)
    except OSError:
        more = []
    return [(1, kit_dir)] + [(n, os.path.join(extra, str(n))) for n in more]


def release_lines(kit_dir: str) -> list[str]:
    """Each replica's serving release, its last gate and its decode figure (a replica past the
    first labelled replica="n")."""
    info, gates, decodes = [], [], []
    for replica, state_dir in replica_dirs(kit_dir):
        rel = Store(kit_dir, "", state_dir)  # the release manager's own layout
        meta = rel.current_meta()
        n = meta.get("number")
        if not isinstance(n, int):
            continue
        perf = rel.perf(n) or {}
        gate = rel.gate_result()
        ident = labels(
            {
                "release": n,
                "mode": meta.get("mode", ""),
                **({"replica": replica} if replica > 1 else {}),
            }
        )
        passed = 1 if gate.get("release") == n and gate.get("passed") else 0
        info.append(f"laguna_release_info{{{ident}}} 1")
        gates.append(f"laguna_gate_passed{{{ident}}} {passed}")
        decode = perf.get("decode_tok_s")
        if isinstance(decode, (int, float)):
            decodes.append(f"laguna_release_decode_tok_s{{{ident}}} {decode:g}")
    if not info:
        return []
    out = [
        "# HELP laguna_release_info the serving release and its mode",
        "# TYPE laguna_release_info gauge",
        *info,
        "# HELP laguna_gate_passed 1 when the serving release passed its last gate",
        "# TYPE laguna_gate_passed gauge",
        *gates,
    ]
    if decodes:
        out += [
            "# HELP laguna_release_decode_tok_s the serving release's decode figure from its gate",
            "# TYPE laguna_release_decode_tok_s gauge",
            *decodes,
        ]
    return out


def disk_lines(paths: list[str]) -> list[str]:
    out = []
    for path in paths:
        try:
            st = os.statvfs(path)
        except OSError:
            continue
        if st.f_blocks:
            out.append(
                f'laguna_path_avail_ratio{{path="{escape(path)}"}} {st.f_bavail / st.f_blocks:.4f}'
            )
    if out:
        out = [
            "# HELP laguna_path_avail_ratio free space (unprivileged) of the kit's folders",
            "# TYPE laguna_path_avail_ratio gauge",
            *out,
        ]
    return out


def run_command(cmd: list[str]) -> tuple[int, str]:
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
    except FileNotFoundError:
        return 127, f"{cmd[0]}: not found"
    except subprocess.TimeoutExpired:
        return 124, f"{cmd[0]}: no answer in 20 s"
    return p.returncode, p.stdout + p.stderr


def collect(run, kit_dir: str, paths: list[str]) -> str:
    return (
        "\n".join(gpu_lines(run) + xid_lines(run) + release_lines(kit_dir) + disk_lines(paths))
        + "\n"
    )


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="the .prom file in node exporter's textfile folder")
    p.add_argument("--kit-dir", default="/opt/laguna-kit")
    p.add_argument(
        "--path", action="append", default=[], help="a folder whose free space to report"
    )
    args = p.parse_args(argv)
    text = collect(run_command, args.kit_dir, args.path)
    tmp = f"{args.out}.laguna-new"
    with open(tmp, "w") as fh:
        fh.write(text)
    os.chmod(tmp, 0o644)
    os.replace(tmp, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
