"""laguna_kit/boxtools/names.py: names from outside stay inside the folder (the refusals before
anything is written: boxtools/fetch/test_run.py)."""

import pytest

from laguna_kit.boxtools import names


def test_a_symlink_cannot_lead_a_name_outside(tmp_path):
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "sub").symlink_to("/etc")
    with pytest.raises(names.UnsafeName, match="leads outside"):
        names.inside(str(tmp_path / "ckpt"), "sub/passwd")
    assert names.inside(str(tmp_path / "ckpt"), "model.safetensors").endswith(
        "/ckpt/model.safetensors"
    )


@pytest.mark.parametrize("name", [".laguna-verified.json", ".laguna-partial/x", "sub/ok.json"])
def test_the_kits_own_record_names_are_reserved_at_the_top_only(name):
    if name.startswith(".laguna-"):
        with pytest.raises(names.UnsafeName, match="collides with the kit's own records"):
            names.safe_name(name)
    else:
        assert names.safe_name(name) == name
