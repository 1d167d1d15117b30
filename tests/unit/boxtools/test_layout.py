"""laguna_kit/boxtools/layout.py: the box's paths, each spelled once, under the kit's own
folders."""

from laguna_kit.boxtools import layout


def test_the_kits_paths_are_under_its_own_folders():
    paths = {
        k: v
        for k, v in vars(layout).items()
        if isinstance(v, str) and v.startswith("/") and not k.startswith("__")
    }
    mine = ("/run/laguna-kit", "/etc/laguna-kit", "/etc/systemd/system", "/run/laguna-router")
    outside = {k: v for k, v in paths.items() if not v.startswith(mine)}
    assert outside == {"TEXTFILE_DIR": "/var/lib/prometheus/node-exporter"}, outside
    assert layout.releases_dir("/opt/k") == "/opt/k/releases"
    assert layout.gate_result("/opt/k/replicas/2") == "/opt/k/replicas/2/state/last-gate.json"
    assert all(u.endswith(".service") for u in layout.KIT_LISTENERS)
