"""Filters of gpuprobe.layers: they only wrap module_utils (verdict, NOT_RUN record, report diff, drill row)."""
import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpuprobe.layers.plugins.filter.verdict import FilterModule
from ansible_collections.gpuprobe.layers.plugins.module_utils._result import FAIL, LayerBuilder, validate_record
from ansible_collections.gpuprobe.layers.plugins.module_utils._verdict import node_verdict

F = FilterModule().filters()


def failed_host():
    b = LayerBuilder("host")
    b.add("host.nvml", FAIL, observed="no driver")
    return b.build()


def test_filter_names():
    assert sorted(F) == ["drill_result", "node_verdict", "not_run_record", "report_diff"]


@pytest.mark.parametrize("records", [None, {}, {"host": None}, {"runtime": None, "host": "PLACEHOLDER"}])
def test_node_verdict_equals_the_verdict_function(records):
    if records and records.get("host") == "PLACEHOLDER":
        records = dict(records, host=failed_host())
    expected = node_verdict(dict((k, v) for k, v in (records or {}).items() if v))
    assert F["node_verdict"](records) == expected


def test_node_verdict_of_failed_host():
    assert F["node_verdict"]({"host": failed_host()})["verdict"] == "FAILED_AT_HOST"


def test_node_verdict_rejects_non_mapping():
    with pytest.raises(AnsibleFilterError):
        F["node_verdict"](["host"])


def test_not_run_record_is_a_valid_record():
    record = F["not_run_record"]("runtime", "blocked by host FAIL")
    assert record["status"] == "NOT_RUN" and record["reason"] == "blocked by host FAIL"
    assert validate_record(record) == []


@pytest.mark.parametrize("layer,reason", [("gpu", "x"), ("host", ""), ("host", None)])
def test_not_run_record_refuses_bad_input(layer, reason):
    with pytest.raises(AnsibleFilterError):
        F["not_run_record"](layer, reason)


def test_report_diff_and_drill_result():
    old = {"generated_at": "a", "hosts": {"n": {"verdict": "COMPUTE_VERIFIED", "signature": None, "layers": {}}}}
    new = {"generated_at": "b", "hosts": {"n": {"verdict": "FAILED_AT_HOST", "signature": "host.nvml", "layers": {}}}}
    assert F["report_diff"](old, new)["verdicts"] == {"COMPUTE_VERIFIED -> FAILED_AT_HOST": 1}
    with pytest.raises(AnsibleFilterError):
        F["report_diff"](old, "x")
    row = F["drill_result"]({"host": failed_host()}, "full", {"predicted_layer": None}, "n")
    assert (row["match"], row["observed_verdict"], row["host"]) == (False, "FAILED_AT_HOST", "n")
