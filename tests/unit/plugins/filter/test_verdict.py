"""Filters of gpuprobe.layers: they only wrap module_utils (verdict, NOT_RUN record, report diff, drill row)."""
import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpuprobe.layers.plugins.filter import drill_result, layer_gate, not_run_record
from ansible_collections.gpuprobe.layers.plugins.filter import node_verdict as node_verdict_plugin
from ansible_collections.gpuprobe.layers.plugins.filter import report_diff, report_diff_markdown, report_expand
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import FAIL, LayerBuilder, validate_record
from ansible_collections.gpuprobe.layers.plugins.module_utils._verdict.verdict import node_verdict

# every filter that takes records or reports, each from its own plugin file (its documentation is in it)
F = {}
for _plugin in (drill_result, layer_gate, node_verdict_plugin, not_run_record, report_diff, report_diff_markdown, report_expand):
    F.update(_plugin.FilterModule().filters())


def failed_host():
    b = LayerBuilder("host")
    b.add("host.nvml", FAIL, observed="no driver")
    return b.build()


def test_filter_names():
    assert sorted(F) == ["drill_result", "layer_gate", "node_verdict", "not_run_record", "report_diff", "report_diff_markdown",
                         "report_expand"]


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


def _rec(layer, status, **evidence):
    b = LayerBuilder(layer)
    b.add("%s.x" % layer, status)
    b.evidence = evidence
    return b.build()


@pytest.mark.parametrize("records,mode,expected", [
    ({"host": "PASS", "cdi": "PASS"}, "audit", "audit mode: no container is started"),
    ({"host": "FAIL", "cdi": "PASS"}, "full", "blocked by host FAIL"),
    ({"host": "FAIL", "cdi": "FAIL"}, "full", "blocked by host FAIL"),
    ({"host": "WARN", "cdi": "FAIL"}, "full", "blocked by cdi FAIL"),
    ({"host": "PASS"}, "full", "blocked: the cdi layer did not run (no record)"),
    ({"host": "PASS", "cdi": "PASS"}, "full", "blocked: the cdi layer resolved no device to inject"),
    ({"host": "PASS", "cdi": "PASS+dev"}, "full", ""),
    ({"host": "WARN", "cdi": "WARN+dev"}, "full", ""),
])
def test_layer_gate(records, mode, expected):
    built = {}
    for layer, status in records.items():
        if status.endswith("+dev"):
            built[layer] = _rec(layer, status[:-4], requested_devices=["gpuprobe.local/gpu=0"])
        else:
            built[layer] = _rec(layer, status)
    assert F["layer_gate"](built, mode) == expected


def test_layer_gate_reports_not_run_reason():
    records = {"host": F["not_run_record"]("host", "host_facts did not return a record: boom")}
    assert F["layer_gate"](records) == "blocked: the host layer did not run (host_facts did not return a record: boom)"


def test_report_diff_markdown():
    diff = F["report_diff"]({"hosts": {}}, {"hosts": {}})
    assert "No host changed." in F["report_diff_markdown"](diff)
    with pytest.raises(AnsibleFilterError):
        F["report_diff_markdown"]({"x": 1})


def test_node_verdict_carries_because_and_gpus_and_refuses_malformed_records():
    v = F["node_verdict"]({"host": failed_host()})
    assert v["because"] == [] and v["gpus"] == []
    broken = dict(failed_host(), signature=None)
    v = F["node_verdict"]({"host": broken})
    assert v["verdict"] == "INCONCLUSIVE" and v["reason"] == "malformed record: host: FAIL without a signature"


def test_report_expand_gives_every_host_whole():
    """issue 36.1: a verified host of the JSON report is written against the shape of its kind; the filter restores it."""
    import json  # pylint: disable=import-outside-toplevel
    from fleetfixture import synthetic_fleet  # pylint: disable=import-outside-toplevel
    from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report import fleet, jsonfile  # pylint: disable=import-outside-toplevel
    report = fleet.build_report(synthetic_fleet(30), "t")
    data = json.loads(jsonfile.render_json(report))
    assert "shapes" in data and any("patch" in e for e in data["hosts"].values())
    full = F["report_expand"](data)
    assert "shapes" not in full and json.dumps(full["hosts"], sort_keys=True) == json.dumps(report["hosts"], sort_keys=True)
    with pytest.raises(AnsibleFilterError):
        F["report_expand"]({"hosts": {"n": {"shape": "s9", "patch": []}}})
    with pytest.raises(AnsibleFilterError):
        F["report_expand"]("x")
