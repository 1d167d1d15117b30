"""laguna_kit/boxtools/release/cli.py: laguna_release.py's commands as an operator types them."""

import json

from laguna_kit.boxtools import release
from laguna_kit.boxtools.release import drain

from .on_disk import incoming


def test_undrain_kit_ends_a_drain_a_cut_run_left_not_an_operators(fleet_box):
    cli = ["--kit-dir", fleet_box.kit_dir, "undrain", "--kit"]
    drain.mark_drained(fleet_box, "release 2 starting")  # a run cut between drain and restart
    assert release.main(cli) == 0 and fleet_box.drained() is None
    drain.mark_drained(fleet_box, "maintenance", by="operator")
    assert release.main(cli) == 0 and fleet_box.drained()["by"] == "operator"


def test_state_list_and_a_refusal_as_the_deploy_and_an_operator_see_them(box, capsys):
    base = ["--kit-dir", box.kit_dir]
    incoming(box)
    assert release.main([*base, "install-incoming"]) == 0
    capsys.readouterr()
    assert release.main([*base, "state", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["current"]["number"] == 1
    assert release.main([*base, "list"]) == 0
    assert capsys.readouterr().out.startswith("*    1  ")
    assert release.main([*base, "activate", "7"]) == 2
    assert "laguna-release: no release 7" in capsys.readouterr().err
    assert release.main([*base, "drain"]) == 2  # no router here: nothing to drain
