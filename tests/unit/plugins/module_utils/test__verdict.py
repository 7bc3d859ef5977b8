import pytest

from ansible_collections.gpuprobe.layers.plugins.module_utils import _result as R
from ansible_collections.gpuprobe.layers.plugins.module_utils._verdict import compute_points_to, node_verdict


def rec(layer, status, signature=None, points_to=None, evidence=None, reason=None):
    return {"layer": layer, "status": status, "reason": reason or (None if status == R.PASS else "because"),
            "checks": [], "evidence": evidence or {}, "not_proven": [], "versions": {},
            "started_at": "x", "duration_ms": 0.0,
            "signature": signature or ("%s.sig" % layer if status == R.FAIL else None),
            "points_to": points_to or (layer if status == R.FAIL else None)}


INJECTED = {"container": {"executed": True, "cdi_devices": ["gpuprobe.local/gpu=0"]}}


def full(**statuses):
    out = {}
    for layer in R.ORDERED_LAYERS:
        st = statuses.get(layer, R.PASS)
        out[layer] = rec(layer, st, evidence=INJECTED if layer == "compute" else None)
    return out


def test_all_pass_with_cdi_injection_is_compute_verified():
    v = node_verdict(full())
    assert v["verdict"] == "COMPUTE_VERIFIED" and v["signature"] is None


@pytest.mark.parametrize("failing,expected", [
    (("host",), "FAILED_AT_HOST"),
    (("cdi", "compute"), "FAILED_AT_CDI"),
    (("runtime", "compute"), "FAILED_AT_RUNTIME"),
    (("compute",), "FAILED_AT_COMPUTE"),
    (("host", "cdi", "runtime", "compute"), "FAILED_AT_HOST"),
])
def test_first_fail_in_order_wins(failing, expected):
    v = node_verdict(full(**{layer: R.FAIL for layer in failing}))
    assert v["verdict"] == expected
    assert v["signature"] == "%s.sig" % failing[0]


def test_compute_pass_without_cdi_injection_is_not_verified():
    records = full()
    records["compute"]["evidence"] = {"container": {"executed": True, "cdi_devices": []}}
    assert node_verdict(records)["verdict"] == "INCONCLUSIVE"


def test_not_run_layers_make_inconclusive_with_reasons():
    records = {"host": rec("host", R.PASS), "cdi": rec("cdi", R.PASS),
               "runtime": rec("runtime", R.NOT_RUN, reason="podman not installed")}
    v = node_verdict(records)
    assert v["verdict"] == "INCONCLUSIVE"
    assert "runtime: podman not installed" in v["reason"] and "compute: no record" in v["reason"]


def test_empty_records_inconclusive():
    assert node_verdict({})["verdict"] == "INCONCLUSIVE"
    assert node_verdict(None)["verdict"] == "INCONCLUSIVE"


def test_warn_does_not_fail_but_runtime_warn_still_verifies():
    records = full(host=R.WARN, runtime=R.WARN)
    assert node_verdict(records)["verdict"] == "COMPUTE_VERIFIED"


def test_compute_fail_points_to_from_record():
    records = full(compute=R.FAIL)
    records["compute"]["points_to"] = "runtime"
    assert node_verdict(records)["points_to"] == "runtime"


@pytest.mark.parametrize("container,host,expected", [
    (R.FAIL, R.PASS, "runtime"),
    (R.FAIL, R.FAIL, "host"),
    (R.FAIL, R.NOT_RUN, "compute"),
    (R.PASS, R.PASS, None),
])
def test_compute_points_to(container, host, expected):
    assert compute_points_to(container, host) == expected
