"""The fleet_report action plugin: collecting hostvars, writing atomically, and a full run() through the
real ActionBase with a real Task (no module is executed: the plugin never needs a connection)."""
import json
import os

import pytest

from accounted import accounted
from actionlab import make_action

from ansible_collections.gpuprobe.layers.plugins.action import fleet_report as A
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report import files as W
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import LayerBuilder, PASS, FAIL, not_run
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report.compact import expand as _expand_report


def record(layer, status, check_id=None, **evidence):
    b = LayerBuilder(layer)
    b.add(check_id or "%s.sample" % layer, status, observed="x")
    if layer == "compute" and status == PASS:  # a verified compute record binds the container's driver to the host's
        b.add("compute.driver.binding", PASS, "container", observed="cuDriverGetVersion = NVML; libcuda sha256 = the driver root's")
        lib = {"sha256": "a" * 64}
        name = "libcuda.so.580.159.04"
        evidence = dict(evidence, driver_binding={
            "host": {"driver_version": "580.159.04", "cuda_driver_api": 13000, "libcuda": lib,
                     "libraries": {name: dict(lib, name=name)}},
            "runs": [{"where": "container", "status": PASS, "cuda_driver_api": 13000, "libcuda": lib, "libraries": [
                {"path": "/usr/lib/libcuda.so.1", "host_name": name, "sha256": lib["sha256"], "status": PASS}]}]})
    if layer == "runtime" and status == PASS:  # the probe file looked at again after the run (issue 42)
        b.add("runtime.probe.unchanged", PASS, "gpuprobe-t", observed="unchanged")
    if layer == "host" and status == PASS:  # NVML's view of the driver (what the binding was computed against)
        evidence = dict(evidence, nvml={"driver_version": "580.159.04", "cuda_driver_version_int": 13000})
    b.evidence = evidence
    return b.build()


HOSTVARS = {
    "ok": {"verify_result": {"records": {
        "host": record("host", PASS), "cdi": accounted(record("cdi", PASS), ["a=0"]), "runtime": record("runtime", PASS, "runtime.mount.present"),
        "compute": record("compute", PASS, container={"executed": True, "cdi_devices": ["a=0"]},
                          gpus=[{"index": 0, "uuid": "GPU-a", "model": None, "expected": True, "seen_in_container": True,
                                 "ordinal": 0, "status": PASS, "signature": None, "reason": None}])}},
           "gpuprobe_pins": {"driver_version": "580.159.04"}},
    "broken": {"verify_result": {"records": {"host": record("host", FAIL), "runtime": not_run("runtime", "blocked by host FAIL")}}},
    "gone": {"verify_result": {"unreachable": True, "msg": "Failed to connect to the host via ssh"}},
    "crashed": {"verify_result": {"failed": True, "msg": "the node-side call (gpuprobe.layers.node_layers) failed: MODULE FAILURE",
                                  "records": {"host": not_run("host", "the node-side call failed")}}},
    "drilled": {"gpuprobe_drill_records": {"host": record("host", PASS)}},
    "skipped": {"verify_result": {"skipped": True}},
    "silent": {},
}


def test_collect_hosts_marks_hosts_without_records():
    hosts = A.collect_hosts(HOSTVARS, ["ok", "gone", "crashed", "silent", "skipped", "not-in-inventory"], "verify_result",
                            None, "gpuprobe_pins")
    by = dict((h["name"], h) for h in hosts)
    assert by["ok"]["pins"] == {"driver_version": "580.159.04"} and by["ok"]["error"] is None
    assert by["ok"]["records"]["host"]["status"] == PASS
    assert by["gone"]["unreachable"] == "Failed to connect to the host via ssh" and by["gone"]["records"] is None
    # a failed node-side call: the task's message is the error, its NOT_RUN records are kept
    assert by["crashed"]["error"].endswith("node_layers) failed: MODULE FAILURE")
    assert by["crashed"]["records"]["host"]["status"] == "NOT_RUN" and by["crashed"]["unreachable"] is None
    assert by["silent"]["error"] == A.NO_RECORD
    assert by["skipped"]["error"] == A.NO_RECORD
    assert by["not-in-inventory"]["error"] == A.NO_RECORD


def test_collect_hosts_reads_records_var_instead_of_the_result():
    hv = dict(HOSTVARS, drilled=dict(HOSTVARS["drilled"], verify_result=HOSTVARS["crashed"]["verify_result"]))
    by = dict((h["name"], h) for h in A.collect_hosts(hv, ["drilled", "ok"], "verify_result", "gpuprobe_drill_records",
                                                      "gpuprobe_pins"))
    # the drills' records, not the last drill's verify_result
    assert by["drilled"]["records"]["host"]["status"] == PASS and by["drilled"]["error"] is None
    assert by["ok"]["error"] == A.NO_RECORD


def test_collect_hosts_marks_hosts_that_left_the_run():
    hv = dict(HOSTVARS, lost={"verify_result": {"records": {"host": record("host", PASS),
                                                            "cdi": not_run("cdi", "not selected in this run (tags)")}}})
    hosts = A.collect_hosts(hv, ["ok", "lost", "gone"], "verify_result", None, "gpuprobe_pins", active={"ok"})
    by = dict((h["name"], h) for h in hosts)
    assert by["ok"]["error"] is None
    # the layers that ran are kept, the placeholders are dropped (they would say "not selected")
    assert by["lost"]["error"] == A.LOST and sorted(by["lost"]["records"]) == ["host"]
    assert by["gone"]["unreachable"] and by["gone"]["error"] is None


@pytest.mark.parametrize("umask,mode", [(0o022, 0o644), (0o077, 0o600), (0o027, 0o640)])
def test_write_atomic_replaces_and_follows_the_umask(tmp_path, umask, mode):
    path = str(tmp_path / "r.json")
    old = os.umask(umask)
    try:
        W.write_atomic(path, "one")
        W.write_atomic(path, "two")
    finally:
        os.umask(old)
    assert open(path).read() == "two"
    assert os.listdir(str(tmp_path)) == ["r.json"]
    assert os.stat(path).st_mode & 0o777 == mode


def test_write_atomic_failure_keeps_old_file(tmp_path, monkeypatch):
    path = str(tmp_path / "r.json")
    W.write_atomic(path, "old")

    def boom(src, dst):
        raise OSError("disk full")
    monkeypatch.setattr(W.os, "replace", boom)
    with pytest.raises(OSError):
        W.write_atomic(path, "new")
    assert open(path).read() == "old"
    assert os.listdir(str(tmp_path)) == ["r.json"]

# Ansible's plugin loader is initialised once for the whole session in tests/conftest.py.


def _action(args, check_mode=False):
    return make_action(A, "gpuprobe.layers.fleet_report", args, check_mode)


def test_run_writes_every_format_and_returns_summary(tmp_path):
    names = ["ok", "broken", "gone", "crashed", "silent"]
    action = _action({"hosts": names, "report_dir": str(tmp_path), "run": {"mode": "full"}})
    result = action.run(task_vars={"hostvars": HOSTVARS})
    assert result["changed"] is True
    assert sorted(result["files"]) == ["html", "json", "junit", "markdown"]
    assert result["verdicts"] == {"broken": "FAILED_AT_HOST", "crashed": "INCONCLUSIVE", "gone": "INCONCLUSIVE",
                                  "ok": "COMPUTE_VERIFIED", "silent": "INCONCLUSIVE"}
    assert result["summary"]["unreachable"] == 1
    data = _expand_report(json.loads(open(result["files"]["json"]).read()))
    assert data["schema_version"] == 4 and data["run"]["mode"] == "full"
    assert data["hosts"]["broken"]["layers"]["runtime"]["reason"] == "blocked by host FAIL"
    assert data["hosts"]["broken"]["layers"]["cdi"]["status"] == "NOT_RUN"
    # issue 22.4: the host's error once (unverifiable), its layers say only that the run failed before them
    assert data["hosts"]["silent"]["layers"]["host"]["reason"] == "verify run failed before this layer"
    assert data["hosts"]["silent"]["unverifiable"].startswith("verify run failed: no verify record")
    assert data["hosts"]["gone"]["state"] == "UNREACHABLE" and data["hosts"]["silent"]["state"] == "RUN_FAILED"
    latest = _expand_report(json.loads(open(str(tmp_path / "gpuprobe-report-latest.json")).read()))
    assert latest == data
    # a second run in the same second gets its own timestamped files
    again = action.run(task_vars={"hostvars": HOSTVARS})
    assert again["files"]["json"] != result["files"]["json"]
    assert os.path.exists(again["files"]["json"]) and os.path.exists(result["files"]["json"])


def test_run_in_check_mode_writes_nothing(tmp_path):
    action = _action({"hosts": ["ok"], "report_dir": str(tmp_path / "r")}, check_mode=True)
    result = action.run(task_vars={"hostvars": HOSTVARS})
    assert result["changed"] is False and result["files"] == {}
    assert not os.path.exists(str(tmp_path / "r"))
    assert result["verdicts"] == {"ok": "COMPUTE_VERIFIED"}


def test_run_with_drills(tmp_path):
    hv = {"n1": dict(HOSTVARS["broken"], gpuprobe_drill_rows=[{"variant": "full", "match": True}])}
    action = _action({"hosts": ["n1"], "report_dir": str(tmp_path), "drills_var": "gpuprobe_drill_rows",
                      "basename": "gpuprobe-drills", "formats": ["json", "markdown"]})
    result = action.run(task_vars={"hostvars": hv})
    assert result["drills"] == [{"variant": "full", "match": True}]
    assert sorted(os.listdir(str(tmp_path)))[0].startswith("gpuprobe-drills-2")
    assert "Fault drills: predicted vs observed" in open(result["files"]["markdown"]).read()


def test_run_rejects_unknown_format(tmp_path):
    action = _action({"hosts": ["ok"], "report_dir": str(tmp_path), "formats": ["pdf"]})
    with pytest.raises(Exception, match="pdf"):
        action.run(task_vars={"hostvars": HOSTVARS})


SUFFIXES = (".json", ".md", ".html", ".junit.xml")


def _texts(tag):
    return dict((sfx, "%s%s" % (tag, sfx)) for sfx in SUFFIXES)


def _latest(directory, base="gpuprobe-report"):
    """What a reader of <base>-latest<suffix> gets, per suffix (None: absent or dangling)."""
    out = {}
    for sfx in SUFFIXES:
        path = directory / (base + "-latest" + sfx)
        out[sfx] = path.read_text() if path.exists() else None
    return out


def _flat_previous(directory):
    """The layout of the previous version: regular gpuprobe-report-latest.* files."""
    for sfx in SUFFIXES:
        (directory / ("gpuprobe-report-latest" + sfx)).write_text("previous" + sfx)


def _tree(directory):
    out = {}
    for root, dirs, files in os.walk(str(directory)):
        for name in dirs + files:
            path = os.path.join(root, name)
            rel = os.path.relpath(path, str(directory))
            out[rel] = ("link", os.readlink(path)) if os.path.islink(path) else (
                ("dir",) if os.path.isdir(path) else ("file", open(path).read()))
    return out


@pytest.mark.parametrize("umask,file_mode,dir_mode", [(0o022, 0o644, 0o755), (0o077, 0o600, 0o700)])
def test_write_report_set_layout_and_modes(tmp_path, umask, file_mode, dir_mode):
    old = os.umask(umask)
    try:
        run1, files1 = W.write_report_set(str(tmp_path), "gpuprobe-report", "20261203T000000Z", _texts("one"))
        run2, files2 = W.write_report_set(str(tmp_path), "gpuprobe-report", "20261203T000000Z", _texts("two"))
    finally:
        os.umask(old)
    assert run1 == str(tmp_path / "gpuprobe-report-20261203T000000Z")
    assert run2 == str(tmp_path / "gpuprobe-report-20261203T000000Z-2")   # same second: its own directory
    assert files2 == dict((sfx, os.path.join(run2, "gpuprobe-report" + sfx)) for sfx in SUFFIXES)
    assert os.readlink(str(tmp_path / "gpuprobe-report-latest")) == "gpuprobe-report-20261203T000000Z-2"
    assert _latest(tmp_path) == _texts("two")
    assert open(files1[".json"]).read() == "one.json"
    for sfx in SUFFIXES:
        assert os.readlink(str(tmp_path / ("gpuprobe-report-latest" + sfx))) == "gpuprobe-report-latest/gpuprobe-report" + sfx
        assert os.stat(files2[sfx]).st_mode & 0o777 == file_mode
    assert os.stat(run2).st_mode & 0o777 == dir_mode
    assert not [n for n in os.listdir(str(tmp_path)) if n.startswith(".")]


def test_write_report_set_takes_over_the_flat_latest_files_of_the_previous_version(tmp_path):
    _flat_previous(tmp_path)
    run, _files = W.write_report_set(str(tmp_path), "gpuprobe-report", "20261203T000000Z", _texts("new"))
    assert _latest(tmp_path) == _texts("new")
    assert sorted(os.listdir(str(tmp_path))) == sorted(["gpuprobe-report-latest", os.path.basename(run)] + [
        "gpuprobe-report-latest" + sfx for sfx in SUFFIXES])


STEPS = ["temp_dir", "file.json", "file.md", "file.html", "file.junit.xml", "run_dir", "migrated", "latest_files"]


@pytest.mark.parametrize("flat", [False, True], ids=["previous-set", "previous-version-flat-files"])
@pytest.mark.parametrize("step", STEPS)
def test_write_report_set_failure_at_any_step_keeps_the_previous_set(tmp_path, monkeypatch, step, flat):
    """A failure (disk full...) at any step before the switch: nothing of this run is kept, every latest file still
    reads the previous set."""
    if flat:
        _flat_previous(tmp_path)
        before = _texts("previous")
    else:
        W.write_report_set(str(tmp_path), "gpuprobe-report", "20261202T000000Z", _texts("previous"))
        before = _texts("previous")
        tree = _tree(tmp_path)

    def hook(name):
        if name == step:
            raise OSError(28, "No space left on device")
    monkeypatch.setattr(W, "_STEP_HOOK", hook)
    with pytest.raises(OSError, match="No space left"):
        W.write_report_set(str(tmp_path), "gpuprobe-report", "20261203T000000Z", _texts("new"))
    assert _latest(tmp_path) == before
    assert not [n for n in os.listdir(str(tmp_path)) if "20261203" in n or n.startswith(".")]
    if not flat:
        assert _tree(tmp_path) == tree


@pytest.mark.parametrize("blocker", ["gpuprobe-report-latest.junit.xml", "gpuprobe-report-latest"])
def test_write_report_set_refuses_a_directory_before_touching_anything(tmp_path, blocker):
    _flat_previous(tmp_path)
    if (tmp_path / blocker).exists():
        (tmp_path / blocker).unlink()
    (tmp_path / blocker).mkdir()
    before = _tree(tmp_path)
    with pytest.raises(OSError, match="refusing to replace it"):
        W.write_report_set(str(tmp_path), "gpuprobe-report", "20261203T000000Z", _texts("new"))
    assert _tree(tmp_path) == before


def test_sweep_removes_only_temporaries_of_dead_writers(tmp_path):
    import subprocess  # pylint: disable=import-outside-toplevel
    child = subprocess.Popen(["true"])
    child.wait()
    gone = child.pid
    names = [".gpuprobe-report-20261203T000000Z.%d.0123456789ab.tmp" % gone,
             ".gpuprobe-report-latest.%d.0123456789ab.tmp" % gone,
             ".gpuprobe-report-20261203T000000Z.%d.0123456789ab.tmp" % os.getppid(),   # a live writer's
             ".other-20261203T000000Z.%d.0123456789ab.tmp" % gone]             # another basename's
    os.mkdir(str(tmp_path / names[0]))
    (tmp_path / names[0] / "gpuprobe-report.json").write_text("partial")
    os.symlink("x", str(tmp_path / names[1]))
    os.mkdir(str(tmp_path / names[2]))
    os.mkdir(str(tmp_path / names[3]))
    assert sorted(W.sweep_temporaries(str(tmp_path), "gpuprobe-report")) == sorted(names[:2])
    assert sorted(os.listdir(str(tmp_path))) == sorted(names[2:])


def test_run_writes_the_status_file_and_fails_with_its_own_message(tmp_path):
    status = tmp_path / "status.json"
    action = _action({"hosts": ["ok", "gone", "crashed"], "report_dir": str(tmp_path / "r"), "status_file": str(status)})
    result = action.run(task_vars={"hostvars": HOSTVARS})
    state = json.loads(status.read_text())
    assert state["report"] == "written" and state["files"] == result["files"]
    assert sorted(state["unverifiable"]) == sorted(result["unverifiable"]) == ["crashed", "gone"]
    assert result["unverifiable"]["gone"].startswith("host unreachable: ")
    (tmp_path / "r" / "gpuprobe-report-latest.md").unlink()
    (tmp_path / "r" / "gpuprobe-report-latest.md").mkdir()
    before = sorted(os.listdir(str(tmp_path / "r")))
    with pytest.raises(Exception, match="gpuprobe report not written to"):
        action.run(task_vars={"hostvars": HOSTVARS})
    state = json.loads(status.read_text())
    assert state["report"] == "failed" and "refusing to replace it" in state["error"]
    assert sorted(os.listdir(str(tmp_path / "r"))) == before and len(before) == 6


def test_failing_lists_the_unverifiable_and_in_a_postcheck_every_node_not_verified(tmp_path):
    names = ["ok", "broken", "gone"]
    result = _action({"hosts": names, "report_dir": str(tmp_path / "a"), "formats": ["json", "html"]}).run(
        task_vars={"hostvars": HOSTVARS})
    assert sorted(result["failing"]) == ["gone"]
    assert result["failing"]["gone"].startswith("gone could not be verified: host unreachable: ")
    assert result["failing"]["gone"].endswith("see %s" % result["files"]["html"])
    post = _action({"hosts": names, "report_dir": str(tmp_path / "b"), "formats": ["json"], "require_verified": True}).run(
        task_vars={"hostvars": HOSTVARS})
    assert sorted(post["failing"]) == ["broken", "gone"]
    assert post["failing"]["broken"].startswith("broken is FAILED_AT_HOST") and "not COMPUTE_VERIFIED; see the report" in post["failing"]["broken"]
