"""The fleet report written one host at a time (issue 24) says, byte for byte, what the report says when it is one
dict in memory: every file of the golden set (tests/unit/fixtures/report/golden/, written by the report code of
dca6054 and again after issue 36 changed the formats, see make_golden.py there) for the golden fleet, from
build_report in memory and from the fleet_report action, which reads each node's records back from its spool file and
writes each rendering as it is made."""
import copy
import datetime
import json
import lzma
import os
import sys
import types

import pytest

from actionlab import make_action

from ansible_collections.gpuprobe.layers.plugins.action import fleet_report as A
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report import fleet as F
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report import jsonfile as J
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report import files as W
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report import render as V
from ansible_collections.gpuprobe.layers.plugins.plugin_utils import _spool

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "fixtures", "report")
sys.path.insert(0, FIXTURES)

import make_golden as G  # noqa: E402  pylint: disable=wrong-import-position,wrong-import-order
from fleetfixture import golden_fleet  # noqa: E402  pylint: disable=wrong-import-position,wrong-import-order

FORMATS = ("json", "markdown", "html", "junit")


@pytest.fixture(autouse=True)
def _frozen_clock(monkeypatch):
    G.freeze(monkeypatch.setattr)


def _golden(fmt):
    with lzma.open(os.path.join(FIXTURES, "golden", "gpuprobe-report" + G.SUFFIXES[fmt] + ".xz")) as f:
        return f.read()


def _same(fmt, data):
    """Assert byte equality with the golden file, saying where they part."""
    want = _golden(fmt)
    if data != want:
        at = next((i for i, (a, b) in enumerate(zip(data, want)) if a != b), min(len(data), len(want)))
        pytest.fail("%s differs from the golden file at byte %d (%d vs %d bytes): %r != %r" % (
            fmt, at, len(data), len(want), data[max(at - 80, 0):at + 80], want[max(at - 80, 0):at + 80]))


@pytest.mark.parametrize("fmt", FORMATS)
def test_build_report_in_memory_says_what_it_said_before(fmt):
    _same(fmt, G.renderings(G.golden_report())[fmt].encode("utf-8"))


def test_golden_entries_are_plain_json():
    """The action keeps each full entry as JSON between counting it and writing it: an entry made of anything but
    JSON's own types could be rendered otherwise once read back."""
    report = G.golden_report()
    for entry in report["hosts"].values():
        assert json.loads(json.dumps(entry)) == entry


def _hostvars(monkeypatch, tmp_path, keep=()):
    """The golden fleet as the verify play leaves it in hostvars: each verify_result spooled to a file of the run
    (those of ``keep`` kept in the result), the pins, the drill rows of the first two hosts."""
    from ansible import constants as C  # pylint: disable=import-outside-toplevel
    monkeypatch.setattr(C, "DEFAULT_LOCAL_TMP", str(tmp_path / "run-tmp"))
    hosts, drills = golden_fleet(G.k8s_record())
    hostvars = {}
    for item in hosts:
        if item.get("unreachable"):
            result = {"unreachable": True, "msg": item["unreachable"]}
        elif item.get("error"):
            result = {"failed": True, "msg": item["error"]}
        else:
            result = {"changed": False, "run_id": "r1", "records": copy.deepcopy(item["records"])}
            if item.get("runtimes"):
                result["runtimes"] = copy.deepcopy(item["runtimes"])
            if item["name"] not in keep:
                assert _spool.spool(result, item["name"], "r1") is None and "records" not in result
        hostvars[item["name"]] = {"verify_result": result, "gpuprobe_pins": item["pins"]}
    hostvars["gpu-a"]["drill_rows"] = [drills[0]]
    hostvars["gpu-b"]["drill_rows"] = [drills[1]]
    return hostvars, ["gpu-a", "gpu-b"] + sorted(set(hostvars) - {"gpu-a", "gpu-b"}, reverse=True)


class _At(datetime.datetime):
    @classmethod
    def now(cls, tz=None):
        return datetime.datetime(2026, 12, 3, 12, 0, 0, tzinfo=tz)


def _run(monkeypatch, tmp_path, hostvars, names, check_mode=False):
    monkeypatch.setattr(A, "datetime", types.SimpleNamespace(datetime=_At, timezone=datetime.timezone))
    action = make_action(A, "gpuprobe.layers.fleet_report", {
        "hosts": names, "report_dir": str(tmp_path / "reports"), "run": G.RUN, "drills_var": "drill_rows",
        "status_file": str(tmp_path / "status.json")}, check_mode)
    return action.run(task_vars={"hostvars": hostvars, "ansible_version": {"full": "9.9.9"}})


def _returned(report):
    """What the action returns from a report (in memory) besides files and changed."""
    return {"generated_at": report["generated_at"], "summary": report["summary"], "counts": report["counts"],
            "drift": report["drift"], "verdicts": dict((n, e["verdict"]) for n, e in report["hosts"].items()),
            "signatures": dict((n, e["signature"]) for n, e in report["hosts"].items()),
            "summary_lines": F.summary_lines(report),
            "unverifiable": dict((n, e["unverifiable"]) for n, e in report["hosts"].items() if e["unverifiable"]),
            "failing": A.failing_hosts(report, False, os.path.join("X", "gpuprobe-report.html")), "drills": report["drills"]}


@pytest.mark.parametrize("keep", [(), ("gpu-c", "gpu-h200-0024.dc1.example.com")])
def test_the_action_writes_the_golden_files_one_host_at_a_time(monkeypatch, tmp_path, keep):
    hostvars, names = _hostvars(monkeypatch, tmp_path, keep)
    result = _run(monkeypatch, tmp_path, hostvars, names)
    assert sorted(result["files"]) == sorted(FORMATS)
    for fmt in FORMATS:
        with open(result["files"][fmt], "rb") as f:
            _same(fmt, f.read())
        with open(str(tmp_path / "reports" / ("gpuprobe-report-latest" + G.SUFFIXES[fmt])), "rb") as f:
            _same(fmt, f.read())
    want = _returned(G.golden_report())
    want["failing"] = dict((n, why.replace(os.path.join("X", "gpuprobe-report.html"), result["files"]["html"]))
                           for n, why in want["failing"].items())
    assert dict((k, result[k]) for k in want) == want
    status = json.loads(open(str(tmp_path / "status.json")).read())
    assert status["unverifiable"] == want["unverifiable"]
    # the status file's verdicts are of the hosts that were checked (issue 36.3: a host that could not be is in its own list)
    assert status["verdicts"] == dict((n, v) for n, v in want["verdicts"].items() if n not in want["unverifiable"])
    assert dict(status["unreachable"], **status["run_failed"]) == want["unverifiable"]
    assert all(why.startswith("host unreachable") for why in status["unreachable"].values())
    # nothing of the report's own temporary file is left in the run's temp dir (only the spooled records)
    assert os.listdir(str(tmp_path / "run-tmp")) == [_spool.SUBDIR]


def test_an_unreadable_spool_file_is_said_as_before(monkeypatch, tmp_path):
    """A node whose spool file is gone could not be verified, with the message collect_hosts gives it; every file
    says it as build_report's report in memory does."""
    hostvars, names = _hostvars(monkeypatch, tmp_path)
    gone = "gpu-h200-0000.dc1.example.com"
    os.unlink(_spool.records_path(hostvars[gone]["verify_result"]))
    result = _run(monkeypatch, tmp_path, hostvars, names)
    assert result["unverifiable"][gone].startswith("verify run failed: the records of this node were kept in ")
    assert gone in result["failing"]
    in_memory = F.build_report(A.collect_hosts(hostvars, names, "verify_result", None, "gpuprobe_pins"), "2026-12-03T12:00:00Z",
                               run=G.RUN, drills=A.collect_drills(hostvars, names, "drill_rows"))
    assert in_memory["hosts"][gone]["unverifiable"] == result["unverifiable"][gone]
    for fmt, text in G.renderings(in_memory).items():
        with open(result["files"][fmt], "rb") as f:
            assert f.read() == text.encode("utf-8"), fmt


def test_check_mode_keeps_no_entry_and_returns_the_same(monkeypatch, tmp_path):
    hostvars, names = _hostvars(monkeypatch, tmp_path)
    result = _run(monkeypatch, tmp_path, hostvars, names, check_mode=True)
    assert result["files"] == {} and not os.path.exists(str(tmp_path / "reports"))
    assert result["verdicts"] == _returned(G.golden_report())["verdicts"]


def test_a_rendering_that_fails_midway_leaves_the_previous_set(tmp_path):
    W.write_report_set(str(tmp_path), "gpuprobe-report", "20261202T000000Z", {".json": "old", ".md": "old md"})

    def broken():
        yield "x" * 200000
        raise OSError("the disk is full")
    with pytest.raises(OSError, match="disk is full"):
        W.write_report_set(str(tmp_path), "gpuprobe-report", "20261203T000000Z", {".json": iter(["new"]), ".md": broken()})
    assert open(str(tmp_path / "gpuprobe-report-latest.json")).read() == "old"
    assert sorted(os.listdir(str(tmp_path))) == ["gpuprobe-report-20261202T000000Z", "gpuprobe-report-latest",
                                                 "gpuprobe-report-latest.json", "gpuprobe-report-latest.md"]


def test_a_report_store_failure_fails_the_report_saying_why(monkeypatch, tmp_path):
    hostvars, names = _hostvars(monkeypatch, tmp_path)

    def full(self, name, entry, line=None):
        raise OSError("No space left on device")
    monkeypatch.setattr(_spool.EntrySpool, "put", full)
    with pytest.raises(Exception, match="not written to .*No space left on device"):
        _run(monkeypatch, tmp_path, hostvars, names)
    status = json.loads(open(str(tmp_path / "status.json")).read())
    assert status["report"] == "failed" and status["unverifiable"] == _returned(G.golden_report())["unverifiable"]
    assert not os.path.exists(str(tmp_path / "reports"))


def test_the_renderings_in_pieces_join_to_the_renderings():
    report = G.golden_report()
    for fmt, (_suffix, chunks) in V.RENDERERS.items():
        assert "".join(chunks(report)) == G.renderings(report)[fmt]
    empty = F.build_report([], "t")
    assert V.render_junit(empty) == '<?xml version="1.0" encoding="UTF-8"?>\n<testsuites name="gpuprobe fleet report t" ' \
                                    'tests="0" failures="0" errors="0" skipped="0" />\n'
    assert J.render_json(empty).count('"hosts": {}') == 1
