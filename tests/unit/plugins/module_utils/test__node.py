"""_node: the layer selection from tags (plugin_utils._selection), the gate (_node.gate), and the two stages run for
real on synthetic node trees (hostfixture.build_node: real files and mknod devices; NVML off)."""
import os

import pytest

from hostfixture import build_node

from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import spec as _cdi_spec
from ansible_collections.gpuprobe.layers.plugins.module_utils._node import gate as _gate
from ansible_collections.gpuprobe.layers.plugins.module_utils._node import inspect as _inspect
from ansible_collections.gpuprobe.layers.plugins.plugin_utils import _selection
from ansible_collections.gpuprobe.layers.plugins.module_utils._node import probe as _node_probe
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import FAIL, NOT_RUN, PASS, WARN, LayerBuilder, not_run, validate_record
from ansible_collections.gpuprobe.layers.plugins.module_utils._common import args as _args


def params(**over):
    p = dict((name, spec.get("default")) for name, spec in _args.NODE_LAYERS_ARGSPEC.items())
    p.update(nvml=False)
    p.update(over)
    return p


def probe_params(**over):
    p = dict((name, spec.get("default")) for name, spec in _args.NODE_PROBE_ARGSPEC.items())
    p.update(over)
    return p


@pytest.mark.parametrize("run,skip,k8s,expected", [
    (None, None, True, ["host", "cdi", "runtime", "compute", "k8s"]),
    (["all"], [], False, ["host", "cdi", "runtime", "compute"]),
    (["compute"], [], True, ["host", "cdi", "runtime", "compute"]),
    (["runtime"], [], True, ["host", "cdi", "runtime", "compute"]),
    (["cdi"], [], True, ["host", "cdi"]),
    (["host"], [], True, ["host"]),
    (["k8s"], [], True, ["k8s"]),
    (["k8s"], [], False, []),
    (["all"], ["k8s"], True, ["host", "cdi", "runtime", "compute"]),
    (["all"], ["compute"], True, ["host", "cdi", "k8s"]),
    (["all"], ["cdi"], True, ["host", "k8s"]),
    (["all"], ["host"], True, ["k8s"]),
    (["tagged"], [], True, ["host", "cdi", "runtime", "compute", "k8s"]),
    (["unrelated"], [], True, []),
])
def test_selected_layers_follow_the_tags_the_role_tasks_carried(run, skip, k8s, expected):
    assert _selection.selected_layers(run, skip, k8s) == expected


@pytest.mark.parametrize("given,expected", [
    (["compute"], ["host", "cdi", "runtime", "compute"]),
    (["runtime", "k8s"], ["host", "cdi", "runtime", "compute", "k8s"]),
    (["cdi"], ["host", "cdi"]),
    (["k8s"], ["k8s"]),
    ([], []),
])
def test_needed_layers_add_what_a_layer_needs(given, expected):
    assert _selection.needed_layers(given) == expected


def _record(layer, status, **evidence):
    b = LayerBuilder(layer)
    b.add("%s.sample" % layer, status, observed="x")
    b.evidence = evidence
    return b.build()


def _host_with(*failing):
    b = LayerBuilder("host")
    b.add("host.nvml.init", PASS, observed="x")
    for cid in failing:
        b.add(cid, FAIL, observed="x")
    return b.build()


CDI_OK = _record("cdi", PASS, requested_devices=["nvidia.com/gpu=0"])


@pytest.mark.parametrize("records,mode,expected", [
    ({}, "audit", "audit mode: no container is started"),
    ({"host": _record("host", FAIL), "cdi": _record("cdi", PASS)}, "full", "blocked by host FAIL"),
    ({"host": _record("host", PASS), "cdi": _record("cdi", FAIL)}, "full", "blocked by cdi FAIL"),
    ({"host": not_run("host", "x"), "cdi": _record("cdi", PASS)}, "full", "blocked: the host layer did not run (x)"),
    ({"host": _record("host", PASS)}, "full", "blocked: the cdi layer did not run (no record)"),
    ({"host": _record("host", PASS), "cdi": _record("cdi", PASS, requested_devices=[])}, "full",
     "blocked: the cdi layer resolved no device to inject"),
    ({"host": _record("host", PASS), "cdi": _record("cdi", PASS, requested_devices=["nvidia.com/gpu=0"])}, "full", ""),
    # a host FAIL of health checks alone leaves the GPU usable: the probe runs (the verdict stays FAILED_AT_HOST)
    ({"host": _host_with("host.health.row_remap"), "cdi": CDI_OK}, "full", ""),
    ({"host": _host_with("host.health.xid", "host.health.ecc_errors"), "cdi": CDI_OK}, "full", ""),
    ({"host": _host_with("host.health.clock_events"), "cdi": CDI_OK}, "audit", "audit mode: no container is started"),
    ({"host": _host_with("host.health.xid", "host.device_node.uvm"), "cdi": CDI_OK}, "full", "blocked by host FAIL"),
    ({"host": _host_with("host.nvml.init"), "cdi": CDI_OK}, "full", "blocked by host FAIL"),
    ({"host": _host_with("host.healthy.lookalike"), "cdi": CDI_OK}, "full", "blocked by host FAIL"),
    ({"host": _host_with("host.health.fabric"), "cdi": _record("cdi", FAIL)}, "full", "blocked by cdi FAIL"),
])
def test_layer_gate(records, mode, expected):
    assert _gate.layer_gate(records, mode) == expected


def test_inspect_runs_host_and_cdi_in_one_call_on_a_node_tree(tmp_path):
    build_node(str(tmp_path / "node"), gpus=2, procfs=True)
    out = _inspect.inspect(params(root=str(tmp_path / "node"), cdi_spec_dirs=["/etc/cdi"]))
    assert sorted(out["records"]) == ["cdi", "host"] and out["spec"] is None
    for record in out["records"].values():
        assert validate_record(record) == []
    assert [g["device_node"] for g in out["records"]["host"]["evidence"]["gpus"]] == ["/dev/nvidia0", "/dev/nvidia1"]
    # no spec in the tree: the cdi layer FAILs, never PASSes without a spec
    assert out["records"]["cdi"]["status"] == FAIL


def test_inspect_runs_only_the_layers_asked_for(tmp_path):
    build_node(str(tmp_path / "node"))
    out = _inspect.inspect(params(root=str(tmp_path / "node"), layers=["cdi"]))
    assert sorted(out["records"]) == ["cdi"]


def test_a_layer_that_raises_is_not_run_with_the_error_and_the_next_layers_run(tmp_path, monkeypatch):
    from ansible_collections.gpuprobe.layers.plugins.module_utils._host import layer as _host

    def broken(**_kwargs):
        raise KeyError("driver_version")
    monkeypatch.setattr(_host, "record", broken)
    build_node(str(tmp_path / "node"))
    out = _inspect.inspect(params(root=str(tmp_path / "node"), cdi_spec_dirs=["/etc/cdi"]))
    host = out["records"]["host"]
    assert host["status"] == NOT_RUN and host["reason"] == "the host layer did not return a record: KeyError: 'driver_version'"
    assert validate_record(host) == []
    assert out["records"]["cdi"]["status"] in (PASS, FAIL, "WARN")


def test_the_runtime_selection_runs_beside_the_host_layer_and_its_error_is_the_cdi_record(tmp_path, monkeypatch):
    # the selection starts before the host layer and is joined by the cdi layer: both run; a selection that
    # raises is the cdi record's reason (crashed), never a missing record
    from ansible_collections.gpuprobe.layers.plugins.module_utils._host import layer as _host
    import threading
    started = threading.Event()

    def host(**kwargs):
        assert started.wait(10), "the selection did not start before the host layer ended"
        return not_run("host", "stub host layer")

    def select(p, probe_follows=False, processes_read=None):
        started.set()
        raise RuntimeError("no engine today")
    monkeypatch.setattr(_host, "record", host)
    monkeypatch.setattr(_inspect, "selected_engines", select)
    build_node(str(tmp_path / "node"))
    out = _inspect.inspect(params(root=str(tmp_path / "node"), cdi_spec_dirs=["/etc/cdi"]))
    assert out["records"]["host"]["reason"] == "stub host layer"
    assert out["records"]["cdi"]["status"] == NOT_RUN and "RuntimeError: no engine today" in out["records"]["cdi"]["reason"]


@pytest.mark.parametrize("probe_follows,check_mode,version_only", [(False, False, True), (True, False, False), (True, True, True)])
def test_the_engines_are_detected_in_full_beside_the_host_layer_only_when_the_probe_follows(
        tmp_path, monkeypatch, probe_follows, check_mode, version_only):
    # node_verify runs the probe stage next in the same process: podman info runs in the selection thread, beside
    # the host layer, instead of before the container; an audit (or check mode, which starts no container) asks
    # podman's version only
    from ansible_collections.gpuprobe.layers.plugins.module_utils._host import layer as _host
    from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import select as _runtime_select
    from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import engine
    asked = []

    def select(requested, **kw):
        asked.append(kw["inspect"])
        return [{"name": None, "usable": False, "path": None, "version": None, "reason": "no runtime in this test"}]
    monkeypatch.setattr(_runtime_select, "select_runtimes", select)
    monkeypatch.setattr(engine, "read_engine_config", lambda info: {})
    monkeypatch.setattr(_host, "record", lambda **kw: not_run("host", "stub host layer"))
    _inspect.inspect(params(root="/", k8s=False, cdi_spec_dirs=[str(tmp_path)]), check_mode, probe_follows=probe_follows)
    assert asked == [version_only]


# the runtime selection and the discovery it reads the node with (no probe code, no grpc)
SELECTION_MODULES = ("select", "layouts", "kubelet", "daemons", "systemd", "nodefs", "why", "docker_context", "handler")


def test_the_inspect_stage_imports_no_probe_code():
    # the inspect stage selects the runtimes (_runtime/select.py and the discovery it uses) and their handler
    # (_runtime/handler.py) but loads no other module of the runtime room (the CRI adapter and grpc: ~0.4 s on each
    # node-side call, docs/performance.md); run at / in a fresh interpreter
    import subprocess
    import sys
    code = ("import sys\n"
            "from ansible_collections.gpuprobe.layers.plugins.module_utils._common import args as _args\n"
            "from ansible_collections.gpuprobe.layers.plugins.module_utils._node import inspect as _inspect\n"
            "p = {k: v.get('default') for k, v in _args.NODE_LAYERS_ARGSPEC.items()}\n"
            "p.update(nvml=False, k8s=False)\n"
            "_inspect.inspect(p)\n"
            "print(sorted(m for m in sys.modules if m.startswith('grpc') or ('.module_utils._runtime.' in m "
            "and m.rsplit('.', 1)[-1] not in %r)))\n" % (SELECTION_MODULES,))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_inspect_refuses_a_root_that_is_not_a_directory(tmp_path):
    with pytest.raises(ValueError, match="is not a directory"):
        _inspect.inspect(params(root=str(tmp_path / "absent")))


def test_self_built_spec_is_written_read_and_removed_by_the_probe_stage(tmp_path):
    build_node(str(tmp_path / "node"), gpus=2)
    spec_dir = str(tmp_path / "run-cdi")
    os.makedirs(spec_dir)
    common = dict(root=str(tmp_path / "node"), cdi_source="self-built", self_built_spec_dir=spec_dir, run_id="t-1")
    out = _inspect.inspect(params(**common))
    spec = out["spec"]
    assert spec["path"] == os.path.join(spec_dir, _cdi_spec.spec_file_name("t-1")) and os.path.exists(spec["path"])
    cdi = out["records"]["cdi"]
    # one GPU device of the run's own kind, never the "all" device
    assert cdi["evidence"]["requested_devices"] == [spec["kind"] + "=0"]
    # the probe stage with a runtime that cannot run here: runtime and compute are NOT_RUN, and the spec is gone
    probed = _node_probe.probe(probe_params(records=out["records"], runtime="containerd", remove_spec=True, run_id="t-1",
                                            self_built_spec_dir=spec_dir))
    assert probed["records"]["runtime"]["status"] == NOT_RUN and probed["records"]["compute"]["status"] == NOT_RUN
    assert probed["spec_removed"] == spec["path"] and not os.path.exists(spec["path"])


def test_probe_in_check_mode_starts_nothing(tmp_path):
    records = {"host": _record("host", PASS), "cdi": _record("cdi", PASS, requested_devices=["nvidia.com/gpu=0"])}
    out = _node_probe.probe(probe_params(records=records, run_id="t-2"), check_mode=True)
    assert out["records"]["runtime"]["reason"] == "check mode: no container was started"
    assert out["records"]["compute"]["status"] == NOT_RUN


def test_probe_refuses_records_that_are_not_records():
    with pytest.raises(ValueError, match="records.cdi"):
        _node_probe.probe(probe_params(records={"host": _record("host", PASS), "cdi": {"layer": "cdi", "status": 5}}, run_id="t-3"))


def _rewrite(path):
    with open(path, "a") as f:
        f.write("# rewritten\n")


def _remove(path):
    os.unlink(path)


def _fifo(path):
    os.unlink(path)
    os.mkfifo(path)  # a read would block: the recheck must not


def _grow(path):
    with open(path, "a") as f:
        f.write("#" * (2 * 1024 * 1024) + "\n")


def _same_content_new_file(path):
    with open(path) as f:
        text = f.read()
    os.unlink(path)
    with open(path, "w") as f:
        f.write(text)


def _self_built(tmp_path, run_id):
    build_node(str(tmp_path / "node"), gpus=1)
    spec_dir = str(tmp_path / "run-cdi")
    os.makedirs(spec_dir)
    common = dict(root=str(tmp_path / "node"), cdi_source="self-built", self_built_spec_dir=spec_dir, run_id=run_id)
    out = _inspect.inspect(params(**common))
    return out, spec_dir


@pytest.mark.parametrize("change", [_rewrite, _remove, _fifo, _grow])
def test_a_spec_changed_between_the_inspect_and_the_probe_call_is_never_probed(tmp_path, change):
    """issue 18 (suspicion confirmed): the probe call used the cdi record of the inspect call without rechecking the
    spec; a spec rewritten in between was probed under the cdi verdict of another content."""
    out, spec_dir = _self_built(tmp_path, "t-9")
    path = out["spec"]["path"]
    sources = out["records"]["cdi"]["evidence"]["device_sources"]
    assert set(sources.values()) == {path}
    change(path)
    probed = _node_probe.probe(probe_params(records=out["records"], runtime="podman", remove_spec=True, run_id="t-9",
                                            self_built_spec_dir=spec_dir, image="no-such-image:never-started"))
    runtime, compute = probed["records"]["runtime"], probed["records"]["compute"]
    assert runtime["status"] == NOT_RUN and runtime["reason"].startswith(_node_probe.SPEC_CHANGED), runtime["reason"]
    assert path in runtime["reason"] and "before the probe container was started" in runtime["reason"]
    assert "container" not in runtime["evidence"]  # no container was started
    assert compute["status"] == NOT_RUN and _node_probe.SPEC_CHANGED in compute["reason"]
    assert validate_record(runtime) == [] and validate_record(compute) == []
    assert not os.path.lexists(path) or change is _fifo  # this run's spec is still removed (a FIFO is not ours)


def test_a_spec_with_the_same_content_is_the_same_spec(tmp_path):
    out, _spec_dir = _self_built(tmp_path, "t-10")
    _same_content_new_file(out["spec"]["path"])
    assert _node_probe.spec_changes(out["records"]["cdi"]["evidence"]) == []


def test_a_spec_changed_while_the_probe_ran_discards_the_records(tmp_path, monkeypatch):
    out, spec_dir = _self_built(tmp_path, "t-11")
    path = out["spec"]["path"]

    def runtime_that_sees_a_rewrite(params, check_mode=False):  # the spec is rewritten while the container runs
        _rewrite(path)
        return _record("runtime", PASS), {"executed": True, "steps": []}

    monkeypatch.setattr(_node_probe, "runtime_record", runtime_that_sees_a_rewrite)
    probed = _node_probe.probe(probe_params(records=out["records"], run_id="t-11", self_built_spec_dir=spec_dir,
                                            host_control=False))
    runtime = probed["records"]["runtime"]
    assert runtime["status"] == NOT_RUN and "while the probe container ran" in runtime["reason"]
    assert runtime["evidence"]["discarded"]["runtime"].startswith("PASS")
    assert probed["records"]["compute"]["status"] == NOT_RUN


def test_a_cdi_record_without_its_sources_is_not_probed():
    records = {"host": _record("host", PASS), "cdi": _record("cdi", PASS, requested_devices=["nvidia.com/gpu=0"])}
    out = _node_probe.probe(probe_params(records=records, run_id="t-12", runtime="podman", image="no-such-image:x"))
    assert out["records"]["runtime"]["status"] == NOT_RUN
    assert "names no spec file providing the requested devices" in out["records"]["runtime"]["reason"]


@pytest.mark.parametrize("check_id", ["host.health.row_remap", "host.health.xid", "host.health.ecc_errors", "host.health.clock_events"])
def test_health_fail_keeps_failed_at_host_with_its_signature(check_id):
    """The probe ran (the gate let it) and passed: the node is still FAILED_AT_HOST, signed by the health check."""
    from ansible_collections.gpuprobe.layers.plugins.module_utils._verdict.verdict import node_verdict

    records = {"host": _host_with(check_id), "cdi": CDI_OK, "runtime": _record("runtime", WARN), "compute": _record("compute", PASS)}
    assert _gate.layer_gate(records) == ""
    verdict = node_verdict(records)
    assert (verdict["verdict"], verdict["layer"], verdict["signature"], verdict["points_to"]) == ("FAILED_AT_HOST", "host", check_id, "host")
