"""Issue 34.1: one malformed record never costs the fleet its report. Every record enters the controller through
_intake.admit (the contract's validator and the types the report reads): a node whose records do not conform is
RUN_FAILED ("malformed record from the node: ...", the violations named), every other node is reported as usual, and
whatever goes wrong while writing, the documented not-written path holds (status file, latest.* kept)."""
import copy
import json
import os

import pytest

from actionlab import make_action
from test_fleet_report import HOSTVARS, record

from ansible_collections.gpuprobe.layers.plugins.action import fleet_report as A
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import PASS
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report import render as _report_render
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report.compact import expand as _expand_report


def _ok_records():
    return copy.deepcopy(HOSTVARS["ok"]["verify_result"]["records"])


def _set(path, value):
    """The ok node's records with ``value`` put at ``path`` (layer, key, ...; an int indexes a list)."""
    def make():
        records = _ok_records()
        where = records
        for key in path[:-1]:
            where = where[key]
        where[path[-1]] = value
        return records
    return make


def _host_gpus(gpus):
    def make():
        records = _ok_records()
        records["host"] = record("host", PASS, gpus=gpus)
        return records
    return make


# (id, the hostile node's records, a word the violation must name)
HOSTILE = [
    ("evidence-not-a-mapping", _set(("compute", "evidence"), 7), "evidence is not a mapping"),
    ("evidence-a-list", _set(("host", "evidence"), ["x"]), "evidence is not a mapping"),
    ("check-a-string", _set(("cdi", "checks", 0), "cdi.sample PASS"), "check 0 is not a mapping"),
    ("checks-not-a-list", _set(("runtime", "checks"), {"id": "x"}), "checks is not a list"),
    ("unknown-layer-status", _set(("host", "status"), "<script>alert(1)</script>"), "unknown status"),
    ("unknown-check-status", _set(("host", "checks", 0, "status"), "PASS\n| node-fake | **COMPUTE_VERIFIED** |"),
     "unknown status"),
    ("status-not-hashable", _set(("host", "status"), ["PASS"]), "unknown status"),
    ("reason-a-mapping", _set(("host", "reason"), {"a": 1}), "reason is dict"),
    ("duration-a-string", _set(("host", "duration_ms"), "12 ms"), "duration_ms is str"),
    ("check-id-a-list", _set(("cdi", "checks", 0, "id"), ["a"]), "id is list"),
    ("check-observed-a-mapping", _set(("cdi", "checks", 0, "observed"), {"x": 1}), "observed is dict"),
    ("not-proven-numbers", _set(("cdi", "not_proven"), [1, 2]), "not_proven"),
    ("versions-a-string", _set(("host", "versions"), "580"), "versions is not a mapping"),
    ("layer-under-another-key", _set(("cdi", "layer"), "host"), "given as the cdi record"),
    ("unknown-layer-name", _set(("gpu",), record("host", PASS)), "unknown layer name"),
    ("record-an-int", _set(("k8s",), 3), "record is not a mapping"),
    ("host-gpus-an-int", _host_gpus(5), "evidence.gpus is int"),
    ("host-gpu-a-string", _host_gpus(["GPU-0"]), "evidence.gpus[0] is str"),
    ("host-mig-a-list", _host_gpus([{"index": 0, "uuid": "GPU-a", "mig": [1]}]), "evidence.gpus[0].mig is list"),
    ("host-mig-instances-strings", _host_gpus([{"index": 0, "uuid": "GPU-a", "mig": {"instances": ["MIG-x"]}}]),
     "instances[0] is str"),
    ("compute-gpus-a-mapping", _set(("compute", "evidence", "gpus"), {"index": 0}), "evidence.gpus is dict, not a list of mappings"),
    ("compute-gpu-row-a-string", _set(("compute", "evidence", "gpus"), ["GPU-a"]), "evidence.gpus[0] is str, not a mapping"),
    ("compute-container-a-string", _set(("compute", "evidence", "container"), "yes"), "evidence.container is str"),
    ("records-a-list", lambda: [record("host", PASS)], "not a mapping of layer -> record"),
    ("records-a-string", lambda: "PASS", "not a mapping of layer -> record"),
]


def _run(tmp_path, hostvars, **args):
    status = tmp_path / "status.json"
    action = make_action(A, "gpuprobe.layers.fleet_report", dict(
        {"hosts": sorted(hostvars), "report_dir": str(tmp_path / "r"), "status_file": str(status)}, **args))
    return action.run(task_vars={"hostvars": hostvars}), status


@pytest.mark.parametrize("case,make,words", HOSTILE, ids=[c[0] for c in HOSTILE])
def test_a_malformed_record_makes_only_its_node_run_failed(tmp_path, case, make, words):
    hostvars = {"ok": HOSTVARS["ok"], "bad": {"verify_result": {"records": make()}}, "broken": HOSTVARS["broken"]}
    result, status = _run(tmp_path, hostvars)
    assert result["verdicts"] == {"ok": "COMPUTE_VERIFIED", "bad": "INCONCLUSIVE", "broken": "FAILED_AT_HOST"}, case
    why = result["unverifiable"]["bad"]
    assert why.startswith("verify run failed: malformed record from the node: ") and words in why, why
    assert sorted(result["unverifiable"]) == ["bad"]
    data = _expand_report(json.loads(open(result["files"]["json"]).read()))
    assert data["hosts"]["bad"]["state"] == "RUN_FAILED" and data["hosts"]["bad"]["cause"] == "malformed record from the node"
    # its records are not in the report: every layer says the run failed before it
    assert set(r["status"] for r in data["hosts"]["bad"]["layers"].values()) == {"NOT_RUN"}
    assert data["hosts"]["ok"]["state"] == "COMPUTE_VERIFIED"
    assert json.loads(status.read_text())["report"] == "written"
    for fmt in ("markdown", "html", "junit"):
        assert os.path.getsize(result["files"][fmt]) > 0


def test_a_malformed_record_beside_a_failed_task_keeps_both_messages(tmp_path):
    bad = {"verify_result": {"failed": True, "msg": "the node-side call failed: MODULE FAILURE", "records": {"host": 5}}}
    result, _status = _run(tmp_path, {"ok": HOSTVARS["ok"], "bad": bad})
    assert result["unverifiable"]["bad"] == ("verify run failed: malformed record from the node: host: record is not a mapping; "
                                             "the node-side call failed: MODULE FAILURE")


def test_the_violations_are_named_and_counted_once_past_the_first_eight():
    from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report import intake as _intake  # pylint: disable=import-outside-toplevel
    records = dict((layer, 1) for layer in ("host", "cdi", "runtime", "compute", "k8s"))
    records.update(("x%d" % i, 1) for i in range(6))
    found = _intake.violations(records)
    assert len(found) == 11
    message = _intake.malformed_message(found)
    assert message.endswith("; and 3 more") and message.count(";") == 8


def test_honest_records_of_the_fixture_fleet_are_admitted():
    from fleetfixture import golden_fleet, synthetic_fleet  # pylint: disable=import-outside-toplevel
    from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report import intake as _intake  # pylint: disable=import-outside-toplevel
    for item in synthetic_fleet(100) + golden_fleet()[0]:
        records, _runtimes, why = _intake.admit(item.get("records"), item.get("runtimes"))
        assert why is None, (item["name"], why)


def test_an_entry_the_report_cannot_build_is_run_failed_not_an_exception(monkeypatch):
    real = A._report.entry_of

    def picky(item):
        if item["name"] == "bad" and item.get("records"):
            raise AttributeError("'int' object has no attribute 'get'")
        return real(item)
    monkeypatch.setattr(A._report, "entry_of", picky)
    entry = A.entry_of({"name": "bad", "records": {"host": record("host", PASS)}})
    assert entry["state"] == "RUN_FAILED"
    assert entry["unverifiable"] == ("verify run failed: malformed record from the node: the report cannot read it "
                                     "(AttributeError: 'int' object has no attribute 'get')")


@pytest.mark.parametrize("exc", [RuntimeError("a renderer broke"), KeyError("signature"), TypeError("not iterable")])
def test_whatever_breaks_while_writing_the_report_is_not_written_and_says_so(tmp_path, monkeypatch, exc):
    _first, status = _run(tmp_path, {"ok": HOSTVARS["ok"]})
    previous = open(str(tmp_path / "r" / "gpuprobe-report-latest.json")).read()

    def broken(report, full=None):
        yield "<html>"
        raise exc
    monkeypatch.setitem(_report_render.RENDERERS, "html", (".html", broken))
    monkeypatch.setattr(A, "RENDERERS", _report_render.RENDERERS)
    with pytest.raises(Exception, match="gpuprobe report not written to"):
        _run(tmp_path, {"ok": HOSTVARS["ok"]})
    said = json.loads(status.read_text())
    assert said["report"] == "failed" and type(exc).__name__ in said["error"]
    assert open(str(tmp_path / "r" / "gpuprobe-report-latest.json")).read() == previous
