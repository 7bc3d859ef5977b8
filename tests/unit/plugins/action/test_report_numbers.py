"""Issue 43.4: numbers a report can hold. The intake refuses every number of a node's records that is not finite or is
beyond 64 bits (and a negative duration): that node is RUN_FAILED ("malformed record from the node: ..."), every other
node is reported, and every JSON file of the run (the report, the status file, the spool) is strict JSON, read by
Node.js's JSON.parse as a real consumer."""
import copy
import json
import math
import shutil
import subprocess

import pytest

from actionlab import make_action
from test_fleet_report import HOSTVARS

from ansible_collections.gpuprobe.layers.plugins.action import fleet_report as A
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.limits import measure
from ansible_collections.gpuprobe.layers.plugins.plugin_utils import _spool
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report import intake as _intake
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report.jsonfile import render_json


def _ok(path, value):
    records = copy.deepcopy(HOSTVARS["ok"]["verify_result"]["records"])
    where = records
    for key in path[:-1]:
        where = where[key]
    where[path[-1]] = value
    return records


HUGE = 10 ** 4000
CASES = [
    ("duration-4000-digits", ("host", "duration_ms"), HUGE, "host: duration_ms is an integer of 13288 bits, beyond the 64-bit range"),
    ("duration-nan", ("compute", "duration_ms"), float("nan"), "compute: duration_ms is nan, not a finite number"),
    ("duration-negative", ("cdi", "duration_ms"), -5.0, "cdi: duration_ms is -5.0, not a duration (below 0)"),
    ("evidence-infinity", ("host", "evidence", "temperature"), float("inf"), "host: evidence.temperature is inf, not a finite number"),
    ("gpu-index-huge", ("compute", "evidence", "gpus", 0, "index"), 1 << 64, "compute: evidence.gpus[0].index is an integer of 65 bits"),
    ("float-huge", ("runtime", "evidence", "wall_ms"), 1e300, "runtime: evidence.wall_ms is 1e+300, beyond the 64-bit range"),
    ("check-number", ("cdi", "checks", 0, "hint"), float("-inf"), "cdi: checks[0].hint is -inf"),
]


def _strict(text):
    def refuse(constant):
        raise ValueError("not strict JSON: %s" % constant)
    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize("case,path,value,words", CASES, ids=[c[0] for c in CASES])
def test_a_number_the_report_cannot_hold_makes_only_its_node_run_failed(tmp_path, case, path, value, words):
    hostvars = {"ok": HOSTVARS["ok"], "bad": {"verify_result": {"records": _ok(path, value)}}}
    status = tmp_path / "status.json"
    action = make_action(A, "gpuprobe.layers.fleet_report", {"hosts": sorted(hostvars), "report_dir": str(tmp_path / "r"),
                                                             "status_file": str(status), "metrics_file": str(tmp_path / "m.prom")})
    result = action.run(task_vars={"hostvars": hostvars})
    assert result["verdicts"] == {"ok": "COMPUTE_VERIFIED", "bad": "INCONCLUSIVE"}, case
    why = result["unverifiable"]["bad"]
    assert why.startswith("verify run failed: malformed record from the node: ") and words in why, why
    assert _strict(status.read_text())["report"] == "written"
    assert _strict(open(result["files"]["json"]).read())["hosts"]["bad"]["state"] == "RUN_FAILED"


def test_honest_numbers_at_the_edges_are_admitted():
    records = _ok(("host", "evidence", "inode"), (1 << 64) - 1)
    records["host"]["evidence"].update(offset=-(1 << 63), ratio=1.5e19, zero=0.0)
    assert _intake.admit(records)[2] is None


def test_a_huge_int_is_measured_without_converting_it_to_text():
    assert measure({"x": 10 ** 5000})["bytes"] > 5000  # str() of it raises ValueError in Python >= 3.11


def test_no_json_file_of_the_collection_takes_nan():
    with pytest.raises(ValueError):
        render_json({"hosts": {}, "x": float("nan")})
    with pytest.raises(ValueError):
        A.write_status("/nonexistent/never-written.json", {"x": float("inf")})
    result = {"records": {"host": {"duration_ms": float("nan")}}}
    assert "records stay in the result" in _spool.spool(result, "n1", "r1")
    # the inventory's own values (pins) are the operator's: their NaN becomes text, not a broken report
    assert A._plain({"pin": float("nan")}) == {"pin": "NaN"}  # pylint: disable=protected-access


@pytest.mark.skipif(shutil.which("node") is None, reason="Node.js is not installed")
def test_the_json_report_of_a_fleet_with_hostile_numbers_is_read_by_node_js(tmp_path):
    hostvars = {"ok": HOSTVARS["ok"]}
    for i, (case, path, value, _words) in enumerate(CASES):
        hostvars["bad-%d-%s" % (i, case)] = {"verify_result": {"records": _ok(path, value)}}
    status = tmp_path / "status.json"
    action = make_action(A, "gpuprobe.layers.fleet_report", {"hosts": sorted(hostvars), "report_dir": str(tmp_path / "r"),
                                                             "status_file": str(status)})
    result = action.run(task_vars={"hostvars": hostvars})
    script = ("const fs = require('fs'); const read = (f) => JSON.parse(fs.readFileSync(f, 'utf8'));"
              " console.log(Object.keys(read(process.argv[1]).hosts).length, read(process.argv[2]).hosts);")
    out = subprocess.run(["node", "-e", script, result["files"]["json"], str(status)], capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [str(len(hostvars))] * 2
    assert math.isclose(len(result["unverifiable"]), len(CASES))
