"""laguna_kit/run/operator_inputs.py: what a first deploy will need from the operator is named by
the pre-flight, before the first change (the tailnet's auth key; leave to reboot)."""

from laguna_kit.domain.images import CudaRequirement
from laguna_kit.run.operator_inputs import reboot_problem, reboot_reason, tailnet_problem

NO_DRIVER = {"ok": False, "message": "nvidia-smi not installed", "cuda": ""}
R535 = {"ok": True, "message": "", "cuda": "12.2"}
R580 = {"ok": True, "message": "", "cuda": "13.0"}
CUDA13 = CudaRequirement(cuda_version="13.0.1", require="cuda>=13.0")


def test_a_box_without_a_driver_will_be_rebooted_and_is_refused_without_leave():
    why = reboot_reason(NO_DRIVER, CUDA13, False, "580")
    assert "R580" in why and "nvidia-smi not installed" in why
    refused = reboot_problem(why, allowed=False)
    assert "Set nvidia_allow_reboot = true" in refused
    assert reboot_problem(why, allowed=True) is None


def test_a_working_driver_that_meets_the_image_needs_no_reboot():
    assert reboot_reason(R580, CUDA13, False, "580") is None
    assert reboot_reason(R535, None, True, "580") is None  # requirement unread: judged after pull
    # Too old and not to be replaced: the pre-flight refuses it for that (driver_problems).
    assert reboot_reason(R535, CUDA13, False, "580") is None
    assert "replaced by R580" in reboot_reason(R535, CUDA13, True, "580")


def test_an_unjoined_box_needs_the_auth_key_variable():
    env = {"TS_AUTHKEY": "tskey-auth-x"}
    assert tailnet_problem({}, "TS_AUTHKEY", env) is None
    assert tailnet_problem({"BackendState": "Running"}, "TS_AUTHKEY", {}) is None
    said = tailnet_problem({"BackendState": "NeedsLogin"}, "TS_AUTHKEY", {})
    assert "export TS_AUTHKEY=tskey-auth-" in said
    assert "TS_AUTHKEY" in tailnet_problem({}, "TS_AUTHKEY", {"TS_AUTHKEY": ""})
