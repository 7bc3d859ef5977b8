"""Issue 34.5: a per-node cap on what one node may return, where its records enter the controller (verify_node, as the
result arrives; fleet_report, as the records are read back). Above any limit (bytes of JSON in all, checks in one
record, characters in one string) the node is RUN_FAILED with the sizes named, its records dropped before they are
spooled, kept or rendered: the spool and the reports never hold more than the cap. Just under every limit a node is
reported as usual; the node-side modules cut an honest node's long strings (never a status) so that it stays under."""
import json
import os

import pytest

from test_fleet_report import HOSTVARS, record
from test_verify_node import _action as verify_action, run as verify_run

from actionlab import make_action

from ansible_collections.gpuprobe.layers.plugins.action import fleet_report as A
from ansible_collections.gpuprobe.layers.plugins.plugin_utils import _spool
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import PASS, LayerBuilder

LIMITS = {"max_bytes": 400000, "max_checks": 50, "max_string": 1000}


def _host(checks=1, string=10, blobs=0):
    """A conforming host record: ``checks`` checks, a string of ``string`` characters, ``blobs`` strings of 900."""
    b = LayerBuilder("host")
    for i in range(checks):
        b.add("host.sample.%d" % i, PASS, observed="x")
    b.evidence = {"text": "s" * string, "blobs": ["b" * 900] * blobs}
    return b.build()


def _report(tmp_path, records, limits=None):
    hostvars = {"ok": HOSTVARS["ok"], "big": {"verify_result": {"records": records}}}
    args = {"hosts": sorted(hostvars), "report_dir": str(tmp_path)}
    if limits:
        args["record_limits"] = limits
    return make_action(A, "gpuprobe.layers.fleet_report", args).run(task_vars={"hostvars": hostvars})


@pytest.mark.parametrize("name,under,over,words", [
    ("max_string", {"string": 1000}, {"string": 1001}, "1,001 characters in one string (record_limits.max_string: 1,000)"),
    ("max_checks", {"checks": 50}, {"checks": 51}, "51 checks in one record (record_limits.max_checks: 50)"),
    ("max_bytes", {"blobs": 300}, {"blobs": 460}, "bytes of JSON in all (record_limits.max_bytes: 400,000)"),
])
def test_just_under_the_cap_is_reported_and_just_over_is_run_failed_with_the_sizes(tmp_path, name, under, over, words):
    ok = _report(tmp_path / "under", {"host": _host(**under)}, LIMITS)
    assert "big" not in ok["unverifiable"], (name, ok["unverifiable"])
    assert ok["verdicts"]["big"] == "INCONCLUSIVE" and ok["verdicts"]["ok"] == "COMPUTE_VERIFIED"
    big = _report(tmp_path / "over", {"host": _host(**over)}, LIMITS)
    why = big["unverifiable"]["big"]
    assert why.startswith("verify run failed: malformed record from the node: over the cap: ") and words in why, why
    assert big["verdicts"]["ok"] == "COMPUTE_VERIFIED"
    data = json.loads(open(big["files"]["json"]).read())
    assert data["hosts"]["big"]["state"] == "RUN_FAILED" and data["hosts"]["big"]["cause"] == "malformed record from the node"


def test_the_reports_never_hold_more_than_the_cap(tmp_path):
    """The defaults: a node sending 40 MB of evidence and one sending 20,000 checks cost their own row, a few KB."""
    huge = _host()
    huge["evidence"]["text"] = "x" * (40 << 20)
    many = _host(checks=20001)
    hostvars = {"ok": HOSTVARS["ok"], "huge": {"verify_result": {"records": {"host": huge}}},
                "many": {"verify_result": {"records": {"host": many}}}}
    result = make_action(A, "gpuprobe.layers.fleet_report", {"hosts": sorted(hostvars), "report_dir": str(tmp_path)}).run(
        task_vars={"hostvars": hostvars})
    assert "bytes of JSON in all (record_limits.max_bytes: 33,554,432)" in result["unverifiable"]["huge"]
    assert "characters in one string (record_limits.max_string: 65,536)" in result["unverifiable"]["huge"]
    assert "20,001 checks in one record (record_limits.max_checks: 10,000)" in result["unverifiable"]["many"]
    for path in result["files"].values():
        assert os.path.getsize(path) < 300000, (path, os.path.getsize(path))


def test_a_failed_task_message_is_capped_too(tmp_path):
    hostvars = {"ok": HOSTVARS["ok"], "loud": {"verify_result": {"failed": True, "msg": "MODULE FAILURE " + "y" * 200000}}}
    result = make_action(A, "gpuprobe.layers.fleet_report", {"hosts": sorted(hostvars), "report_dir": str(tmp_path)}).run(
        task_vars={"hostvars": hostvars})
    assert len(result["unverifiable"]["loud"]) < 66000 and "characters kept]" in result["unverifiable"]["loud"]


def test_a_spool_file_over_the_cap_is_not_read(tmp_path, monkeypatch):
    spooled = tmp_path / "n-records.json"
    spooled.write_text(json.dumps({"host": "big", "run_id": "r", "records": {"host": _host(string=5000)}}))
    result = {"records_file": str(spooled), "run_id": "r", "layer_status": {"host": PASS}}

    def refuse(*_args, **_kwargs):
        raise AssertionError("a spool file over the cap was read")
    monkeypatch.setattr(A, "unspool", refuse)
    [item] = list(A.collect_hosts({"big": {"verify_result": result}}, ["big"], "verify_result", None, "gpuprobe_pins",
                                  limits=dict(LIMITS, max_bytes=2000)))
    assert item["records"] is None and item["error"].startswith("malformed record from the node: over the cap: its spool file holds ")


class Sends(object):
    """A node whose node_layers call returns ``records`` (and nothing else happens on it)."""

    def __init__(self, records):
        self.records = records

    def __call__(self, module_name=None, module_args=None, task_vars=None, **_kwargs):
        return {"changed": False, "records": self.records}


@pytest.mark.parametrize("records,words", [
    ({"host": _host(string=70000)}, "70,000 characters in one string"),
    ({"host": _host(checks=10001)}, "10,001 checks in one record"),
    ({"host": dict(_host(), evidence=5)}, "host: evidence is not a mapping"),
    ({"host": dict(_host(), status="<b>PASS</b>")}, "host: unknown status"),
])
def test_verify_node_drops_what_is_over_the_cap_before_it_is_spooled(tmp_path, monkeypatch, records, words):
    from ansible import constants as C  # pylint: disable=import-outside-toplevel
    monkeypatch.setattr(C, "DEFAULT_LOCAL_TMP", str(tmp_path))
    result = verify_run(verify_action({"mode": "audit", "k8s": False, "spool": True}), Sends(records))
    assert result["failed"] is True and words in result["msg"], result["msg"]
    assert result["msg"].startswith("the node-side call (gpuprobe.layers.node_layers) failed: malformed record from the node: ")
    assert result["layer_status"]["host"] == "NOT_RUN"
    assert os.path.getsize(_spool.records_path(result)) < 20000
    [item] = list(A.collect_hosts({"n1": {"verify_result": result}}, ["n1"], "verify_result", None, "gpuprobe_pins"))
    assert item["error"] == result["msg"]
    entry = A.entry_of(item)
    assert entry["state"] == "RUN_FAILED" and entry["cause"] == "malformed record from the node"


def test_verify_node_refuses_limits_that_are_not_positive_integers():
    with pytest.raises(Exception, match="record_limits: max_checks must be a positive integer"):
        verify_run(verify_action({"mode": "audit", "record_limits": {"max_checks": 0}}), Sends({}))


def test_the_node_cuts_an_honest_nodes_long_strings_and_never_a_status():
    from ansible_collections.gpuprobe.layers.plugins.module_utils._common.limits import (  # pylint: disable=import-outside-toplevel
        DEFAULT_LIMITS, cap_strings, over_limits)
    from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report import intake as _intake  # pylint: disable=import-outside-toplevel
    host = _host()
    host["evidence"]["text"] = "t" * 300000
    host["evidence"]["lines"] = ["l" * 70000, "short"]
    host["checks"][0]["observed"] = "o" * 100000
    out = {"records": {"host": host}, "probes": [{"runtime": "podman", "records": {"compute": record("compute", PASS)}}]}
    assert cap_strings({"records": out["records"], "probes": out["probes"]}) == 3
    limit = DEFAULT_LIMITS["max_string"]
    assert len(host["evidence"]["text"]) == limit and host["evidence"]["text"].endswith("of 300000 characters kept]")
    assert len(host["evidence"]["lines"][0]) <= limit and host["evidence"]["lines"][1] == "short"
    assert host["checks"][0]["status"] == PASS and len(host["checks"][0]["observed"]) <= limit
    assert over_limits(out) == []
    assert _intake.admit(out["records"])[2] is None
