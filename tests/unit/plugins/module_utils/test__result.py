import pytest

from ansible_collections.gpuprobe.layers.plugins.module_utils._common import result as R


CAT = {"host.a": {"title": "a", "fail": "a failed", "next": "look at a"},
       "host.b": {"title": "b", "fail": "b failed", "next": "look at b"}}


@pytest.mark.parametrize("statuses,expected", [
    ([], R.NOT_RUN),
    ([R.NOT_RUN, R.NOT_RUN], R.NOT_RUN),
    ([R.PASS, R.NOT_RUN], R.PASS),
    ([R.PASS, R.WARN], R.WARN),
    ([R.WARN, R.FAIL, R.PASS], R.FAIL),
])
def test_rollup_status(statuses, expected):
    checks = [R.make_check("host.a", s) for s in statuses]
    assert R.rollup_status(checks) == expected


def test_builder_fail_sets_reason_signature_and_catalogue_hint():
    b = R.LayerBuilder("host", CAT)
    b.add("host.a", R.PASS, subject="x")
    b.add("host.b", R.FAIL, subject="/dev/nvidia-uvm", expected="char 238:0", observed="absent")
    rec = b.build()
    assert rec["status"] == R.FAIL
    assert rec["signature"] == "host.b"
    assert rec["points_to"] == "host"
    assert rec["reason"] == "host.b: /dev/nvidia-uvm (observed absent, expected char 238:0)"
    assert rec["checks"][1]["hint"] == "look at b"
    assert rec["checks"][0]["hint"] is None
    assert R.validate_record(rec) == []


def test_builder_refuses_undocumented_check_id():
    b = R.LayerBuilder("host", CAT)
    with pytest.raises(KeyError):
        b.add("host.undocumented", R.PASS)


def test_builder_pass_has_no_signature_and_lists_not_proven():
    b = R.LayerBuilder("cdi", None)
    b.add("cdi.x", R.PASS)
    rec = b.build()
    assert rec["status"] == R.PASS and rec["signature"] is None and rec["reason"] is None
    assert "that the node has a working GPU" in rec["not_proven"]
    assert rec["started_at"].endswith("Z") and rec["duration_ms"] >= 0


def test_not_run_requires_reason():
    with pytest.raises(ValueError):
        R.not_run("runtime", "")
    rec = R.not_run("runtime", "blocked by cdi FAIL")
    assert rec["status"] == R.NOT_RUN and rec["reason"] == "blocked by cdi FAIL"
    assert rec["checks"] == []
    assert R.validate_record(rec) == []


def test_unknown_status_and_layer_rejected():
    with pytest.raises(ValueError):
        R.make_check("host.a", "OK")
    with pytest.raises(ValueError):
        R.LayerBuilder("gpu")


@pytest.mark.parametrize("mutate,error", [
    (lambda r: r.pop("checks"), "missing key checks"),
    (lambda r: r.update(status="GOOD"), "unknown status 'GOOD'"),
    (lambda r: r.update(status=R.FAIL, reason=None), "status FAIL without a reason"),
    (lambda r: r.update(status=R.FAIL, reason="x", signature=None), "FAIL without a signature"),
    (lambda r: r.update(checks=[R.make_check("host.a", R.FAIL)]), "PASS record holds a FAIL check"),
])
def test_validate_record_finds_violations(mutate, error):
    b = R.LayerBuilder("host")
    b.add("host.a", R.PASS)
    rec = b.build()
    mutate(rec)
    assert error in R.validate_record(rec)


def test_not_run_checks_of_a_pass_or_warn_layer_are_not_proven():
    for status in (R.PASS, R.WARN):
        b = R.LayerBuilder("runtime")
        b.add("runtime.device_node.present", status, subject="/dev/nvidia0")
        b.add("runtime.hook.effect", R.NOT_RUN, subject="createContainer /usr/bin/nvidia-ctk",
              observed="not observable from inside")
        record = b.build()
        assert record["status"] == status
        assert record["not_proven"][-1] == ("not checked: runtime.hook.effect createContainer /usr/bin/nvidia-ctk "
                                            "(not observable from inside)")
        assert R.validate_record(record) == []
        record["not_proven"] = record["not_proven"][:-1]
        assert R.validate_record(record) == ["NOT_RUN check(s) runtime.hook.effect missing from not_proven"]


def test_a_check_that_is_not_a_mapping_is_a_violation():
    b = R.LayerBuilder("host")
    b.add("host.x", R.PASS)
    record = b.build()
    record["checks"].append(7)
    assert R.validate_record(record) == ["check 1 is not a mapping"]
