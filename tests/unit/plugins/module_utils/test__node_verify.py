"""_node_verify.verify: the whole node in one process on a synthetic node tree (hostfixture.build_node: real files,
mknod devices, NVML off), a self-built spec written and removed for real. Replaced: the engines the node has
(_inspect.selected_engines: which runtimes exist is this machine's), the gate's verdict on the records (to reach the
probe on a tree without a GPU) and the probe stage itself (it runs for real through podman in tests/integration and
on the GPU host), whose calls are recorded."""
import os

import pytest

from hostfixture import build_node

from ansible_collections.gpuprobe.layers.plugins.module_utils._node import gate as _gate
from ansible_collections.gpuprobe.layers.plugins.module_utils._node import inspect as _inspect
from ansible_collections.gpuprobe.layers.plugins.module_utils._node import verify as _node_verify
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import NOT_RUN, PASS, LayerBuilder
from ansible_collections.gpuprobe.layers.plugins.module_utils._common import args as _args


def _passing(layer):
    b = LayerBuilder(layer)
    b.add("%s.sample" % layer, PASS, observed="x")
    return b.build()


@pytest.fixture(name="node")
def _node_fixture(tmp_path, monkeypatch):
    tree = str(tmp_path / "node")
    build_node(tree, gpus=1, procfs=True)
    spec_dir = str(tmp_path / "run-cdi")
    os.makedirs(spec_dir)
    probes = []

    def probe(p, check_mode=False):
        probes.append({"runtime": p["runtime"], "remove_spec": p["remove_spec"], "endpoint": p["runtime_endpoint"],
                       "spec_there": os.listdir(spec_dir)})
        if p["runtime"] in interrupt:
            return {"interrupted": "interrupted by signal 15: the probe container and the host control were stopped"}
        out = {"records": {"runtime": _passing("runtime"), "compute": _passing("compute")}, "spec_removed": None}
        if p["remove_spec"]:
            out.update(_node_verify.remove_run_spec(p["run_id"], p["self_built_spec_dir"]))
        return out

    interrupt = set()
    monkeypatch.setattr(_node_verify, "probe", probe)
    engines = [{"name": "podman", "version": "4.3.1", "endpoint": None},
               {"name": "docker", "version": "26.1.5", "endpoint": "unix:///run/docker.sock"}]
    monkeypatch.setattr(_inspect, "selected_engines", lambda p, probe_follows=False, processes_read=None: [dict(e) for e in engines])
    params = dict((name, spec.get("default")) for name, spec in _args.NODE_VERIFY_ARGSPEC.items())
    params.update(root=tree, nvml=False, cdi_source="self-built", self_built_spec_dir=spec_dir, run_id="t-7",
                  runtime=["podman", "docker"])
    return {"params": params, "probes": probes, "interrupt": interrupt, "spec_dir": spec_dir}


def test_every_runtime_the_gate_lets_run_is_probed_and_the_last_removes_the_spec(node, monkeypatch):
    monkeypatch.setattr(_gate, "layer_gate", lambda records, mode="full": "")
    out = _node_verify.verify(node["params"])
    assert [(p["runtime"], p["remove_spec"]) for p in node["probes"]] == [("podman", False), ("docker", True)]
    assert node["probes"][1]["endpoint"] == "unix:///run/docker.sock"
    assert all(p["spec_there"] == ["gpuprobe-t-7.yaml"] for p in node["probes"])  # the spec stays until the last probe
    assert [(p["runtime"], p["ran"]) for p in out["probes"]] == [("podman", True), ("docker", True)]
    assert out["spec_removed"].endswith("gpuprobe-t-7.yaml") and os.listdir(node["spec_dir"]) == []
    assert set(out["records"]) == {"host", "cdi"}


def test_a_gated_runtime_gets_the_gates_records_and_the_spec_is_removed_by_the_last_probe_that_ran(node, monkeypatch):
    monkeypatch.setattr(_gate, "engine_gate", lambda records, engine, mode, blocked=None: (
        records, "blocked by cdi FAIL" if engine["name"] == "docker" else ""))
    out = _node_verify.verify(node["params"])
    assert [(p["runtime"], p["remove_spec"]) for p in node["probes"]] == [("podman", True)]
    docker = out["probes"][1]
    assert docker["ran"] is False and docker["records"]["runtime"]["status"] == NOT_RUN
    assert docker["records"]["compute"]["reason"] == "blocked by cdi FAIL"
    assert os.listdir(node["spec_dir"]) == []


def test_no_probe_runs_when_every_runtime_is_blocked_and_the_spec_is_still_removed(node, monkeypatch):
    monkeypatch.setattr(_gate, "layer_gate", lambda records, mode="full": "blocked by host FAIL")
    out = _node_verify.verify(node["params"])
    assert node["probes"] == [] and [p["ran"] for p in out["probes"]] == [False, False]
    assert all(p["records"]["runtime"]["status"] == NOT_RUN for p in out["probes"])
    assert out["spec_removed"].endswith("gpuprobe-t-7.yaml") and os.listdir(node["spec_dir"]) == []


def test_an_interrupted_probe_stops_the_run_and_leaves_no_spec(node, monkeypatch):
    monkeypatch.setattr(_gate, "layer_gate", lambda records, mode="full": "")
    node["interrupt"].add("podman")
    out = _node_verify.verify(node["params"])
    assert [p["runtime"] for p in node["probes"]] == ["podman"]  # docker is never started after the interrupt
    assert out["interrupted"].startswith("interrupted by signal 15")
    assert out["probes"] == [{"runtime": "podman", "ran": True, "records": None}]
    assert out["records"]["host"]["status"] != NOT_RUN and os.listdir(node["spec_dir"]) == []


def test_check_mode_writes_no_spec_and_starts_nothing(node):
    out = _node_verify.verify(node["params"], check_mode=True)
    assert node["probes"] == [] and os.listdir(node["spec_dir"]) == []
    assert out["records"]["cdi"]["status"] == NOT_RUN and "spec_removed" not in out
