"""Issue 43.2: only this run's records make a verdict. The controller issues the run id (verify_node) and knows when
the node's task started; a record that started before it (a replay, yesterday's honest records) or after now, each
beyond the allowed clock skew (record_limits.max_clock_skew), or that names another run's id, probe container,
self-built CDI kind or spec file, makes its node RUN_FAILED ("record of another run from the node: ..."), never its
verdict, in verify_node as the node's result arrives and in fleet_report for a result that names its run."""
import copy
import datetime
import time

import pytest

from test_fleet_report import HOSTVARS, record
from test_verify_node import Node, _action as verify_action, _passing, _tree, run as verify_run  # noqa: F401  pylint: disable=unused-import

from actionlab import make_action

from ansible_collections.gpuprobe.layers.plugins.action import fleet_report as A
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import PASS
from ansible_collections.gpuprobe.layers.plugins.module_utils._node import gate as _gate
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report import intake as _intake

RUN = "20260101000000-42"


def _at(record_, epoch):
    return dict(record_, started_at=_intake.iso_time(epoch))


def _ok(started=None):
    """The fixture fleet's verified records, each started at ``started`` (epoch seconds; default now), of run RUN."""
    records = copy.deepcopy(HOSTVARS["ok"]["verify_result"]["records"])
    records["runtime"]["evidence"].update(run_id=RUN, container={"name": "gpuprobe-%s-0a1b2c3d" % RUN})
    records["compute"]["evidence"]["container"]["container_name"] = "gpuprobe-%s-0a1b2c3d" % RUN
    return dict((layer, _at(r, started or time.time())) for layer, r in records.items())


class Sends(object):
    """A node whose node_layers call returns ``records``."""

    def __init__(self, records):
        self.records = records

    def __call__(self, module_name=None, module_args=None, task_vars=None, **_kwargs):
        return {"changed": False, "records": self.records}


def _host(started):
    return _at(record("host", PASS), started)


@pytest.mark.parametrize("age,limits,admitted", [
    (0, None, True),
    (200, None, True),                          # a node clock 200 s behind: within the default 300 s
    (200, {"max_clock_skew": 60}, False),
    (86400, None, False),                       # yesterday's honest records
    (time.time() - 1577836800, None, False),    # 2020-01-01
    (-3600, None, False),                       # from the future
], ids=["now", "200s-behind", "200s-behind-skew-60", "yesterday", "2020-01-01", "future"])  # stable ids for xdist's workers
def test_verify_node_binds_every_record_to_the_tasks_start(age, limits, admitted):
    args = {"mode": "audit", "k8s": False}
    if limits:
        args["record_limits"] = limits
    result = verify_run(verify_action(args), Sends({"host": _host(time.time() - age)}))
    if admitted:
        assert "failed" not in result and result["records"]["host"]["status"] == PASS
        return
    assert result["failed"] is True
    assert "record of another run from the node: host: started_at " in result["msg"], result["msg"]
    assert "is outside this run" in result["msg"] and result["records"]["host"]["status"] == "NOT_RUN"
    [item] = list(A.collect_hosts({"n1": {"verify_result": result}}, ["n1"], "verify_result", None, "gpuprobe_pins"))
    entry = A.entry_of(item)
    assert entry["state"] == "RUN_FAILED" and entry["cause"] == "record of another run from the node"


def test_a_record_without_a_time_is_not_this_runs():
    result = verify_run(verify_action({"mode": "audit", "k8s": False}), Sends({"host": dict(_host(time.time()), started_at="yesterday")}))
    assert "host: started_at 'yesterday' is not an ISO-8601 time with a zone" in result["msg"]


class OtherRun(Node):
    """A node whose probe stage returns ``probe_records`` as they are (another run's, or this run's made up)."""

    def _probe(self, p, check_mode=False):
        self.probes.append(p["run_id"])
        return {"records": self.probe_records, "spec_removed": None}


@pytest.mark.parametrize("change,words", [
    (lambda rt, c: rt["evidence"].update(run_id="20200101000000-1"), "runtime: evidence.run_id is '20200101000000-1'"),
    (lambda rt, c: rt["evidence"]["container"].update(name="gpuprobe-20200101000000-1-aa"), "evidence.container.name"),
    (lambda rt, c: c["evidence"]["container"].pop("container_name"), "a container ran (evidence.container.executed) but"),
    (lambda rt, c: c["evidence"]["container"].update(cdi_devices=["gpuprobe.local/gpu-20200101000000-1=0"]),
     "evidence.container.cdi_devices 'gpuprobe.local/gpu-20200101000000-1=0' is not of this run's kind"),
])
def test_a_probe_of_another_run_is_run_failed_never_verified(tree, monkeypatch, change, words):
    monkeypatch.setattr(_gate, "layer_gate", lambda records, mode: "")
    runtime = _passing("runtime", run_id=RUN, container={"name": "gpuprobe-%s-0a1b2c3d" % RUN})
    compute = _passing("compute", container={"executed": True, "cdi_devices": ["nvidia.com/gpu=0"],
                                             "container_name": "gpuprobe-%s-0a1b2c3d" % RUN})
    change(runtime, compute)
    result = verify_run(verify_action({"root": tree, "nvml": False, "k8s": False, "run_id": RUN}),
                        OtherRun(probe_records={"runtime": runtime, "compute": compute}))
    assert result["failed"] is True and words in result["msg"], result["msg"]
    assert "record of another run from the node" in result["msg"]
    assert result["verdict"]["verdict"] == "INCONCLUSIVE"
    assert result["records"]["compute"]["status"] == "NOT_RUN"


def test_the_same_probe_of_this_run_is_admitted(tree, monkeypatch):
    monkeypatch.setattr(_gate, "layer_gate", lambda records, mode: "")
    runtime = _passing("runtime", run_id=RUN, container={"name": "gpuprobe-%s-0a1b2c3d" % RUN})
    compute = _passing("compute", container={"executed": True, "cdi_devices": ["gpuprobe.local/gpu-%s=0" % RUN],
                                             "container_name": "gpuprobe-%s-0a1b2c3d" % RUN})
    result = verify_run(verify_action({"root": tree, "nvml": False, "k8s": False, "run_id": RUN}),
                        OtherRun(probe_records={"runtime": runtime, "compute": compute}))
    assert "record of another run" not in str(result.get("msg")), result.get("msg")
    assert result["records"]["compute"]["status"] == PASS


def test_the_self_built_spec_of_another_run_is_refused():
    spec = {"kind": "gpuprobe.local/gpu-20200101000000-1", "path": "/var/run/cdi/gpuprobe-20200101000000-1.yaml"}
    errors = _intake.spec_errors(spec, RUN)
    assert len(errors) == 2 and "kind" in errors[0] and "path" in errors[1]
    assert _intake.spec_errors({"kind": "gpuprobe.local/gpu-" + RUN, "path": "/run/cdi/gpuprobe-%s.yaml" % RUN}, RUN) == []
    out = _intake.screen({"records": {}, "spec": spec}, None, {"id": RUN, "started": time.time(), "self_built": True})
    assert out["failed"] and out["msg"].startswith("record of another run from the node: spec: kind ")
    # a spec the caller gave (not self-built) is the caller's
    assert "failed" not in _intake.screen({"records": {}, "spec": spec}, None, {"id": RUN, "started": time.time()})


def _report(tmp_path, hostvars):
    action = make_action(A, "gpuprobe.layers.fleet_report", {"hosts": sorted(hostvars), "report_dir": str(tmp_path)})
    return action.run(task_vars={"hostvars": hostvars})


def test_fleet_report_binds_a_result_to_the_run_it_names(tmp_path):
    started = time.time() - 60
    fresh = {"records": _ok(started + 1), "run_id": RUN, "run_started_at": _intake.iso_time(started)}
    replayed = dict(fresh, records=_ok(datetime.datetime(2020, 1, 1, tzinfo=datetime.timezone.utc).timestamp()))
    renamed = dict(fresh, run_id="20260101000000-43")
    result = _report(tmp_path, {"fresh": {"verify_result": fresh}, "replayed": {"verify_result": replayed},
                                "renamed": {"verify_result": renamed}, "old-style": HOSTVARS["ok"]})
    assert result["verdicts"]["fresh"] == result["verdicts"]["old-style"] == "COMPUTE_VERIFIED"
    for name, words in (("replayed", "host: started_at 2020-01-01T00:00:00.000000Z is outside this run"),
                        ("renamed", "runtime: evidence.run_id is '%s', not this run's '20260101000000-43'" % RUN)):
        assert result["verdicts"][name] == "INCONCLUSIVE"
        assert result["unverifiable"][name].startswith("verify run failed: record of another run from the node: ")
        assert words in result["unverifiable"][name], result["unverifiable"][name]


def test_epoch_of_reads_the_contracts_times_and_nothing_else():
    assert _intake.epoch_of("2020-01-01T00:00:00Z") == 1577836800
    assert _intake.epoch_of("2020-01-01T01:00:00.5+01:00") == 1577836800.5
    assert _intake.epoch_of(_intake.iso_time(1234.25)) == 1234.25
    for text in ("2020-01-01", "2020-13-01T00:00:00Z", "2020-01-01T00:00:00", None, 5, "x" * 4000):
        assert _intake.epoch_of(text) is None
