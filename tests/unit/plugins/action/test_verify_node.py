"""The verify_node action plugin: what the controller decides between the node-side calls. The node side is
_inspect.inspect/_node.probe run for real in this process on synthetic node trees; what is replaced is only the
transport (ActionBase._execute_module), to inject what a real fleet does to it: a failed module, a node that
goes away between the two calls. The same plugin runs over real ansible-playbook in tests/integration and on
the GPU host (scripts/gpu-e2e.sh)."""
import os

import pytest
from ansible.errors import AnsibleActionFail, AnsibleConnectionFailure

from actionlab import make_action
from hostfixture import build_node

from ansible_collections.gpuprobe.layers.plugins.action import verify_node as A
from ansible_collections.gpuprobe.layers.plugins.module_utils._node import gate as _gate
from ansible_collections.gpuprobe.layers.plugins.module_utils._node import inspect as _inspect
from ansible_collections.gpuprobe.layers.plugins.plugin_utils import _selection
from ansible_collections.gpuprobe.layers.plugins.module_utils._node import probe as _node_probe
from ansible_collections.gpuprobe.layers.plugins.module_utils._node import verify as _node_verify
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import NOT_RUN, PASS, LayerBuilder, not_run
from ansible_collections.gpuprobe.layers.plugins.module_utils._common import args as _args


def _action(args, check_mode=False):
    return make_action(A, "gpuprobe.layers.verify_node", args, check_mode)


class Node(object):
    """The node side: node_layers and node_verify run _inspect.inspect and _node_verify.verify in this process;
    ``fail`` maps a call (inspect, verify, probe_cleanup, cdi_spec) to what goes wrong, or "probe" to "interrupted"
    (the probe stage inside node_verify stopped by a signal); ``probe_records`` replaces what the probe stage returns.
    ``calls`` lists the node-side calls, ``probes`` the probe stages node_verify ran (with their options)."""

    def __init__(self, fail=None, probe_records=None):
        self.calls = []
        self.probes = []
        self.fail = fail or {}
        self.probe_records = probe_records

    def __call__(self, module_name=None, module_args=None, task_vars=None, **_kwargs):
        call = {A.INSPECT_MODULE: "inspect", A.VERIFY_MODULE: "verify"}.get(module_name) or module_name.rsplit(".", 1)[-1]
        self.calls.append((call, dict(module_args)))
        what = self.fail.get(call)
        if what == "unreachable":
            raise AnsibleConnectionFailure("Failed to connect to the host via ssh: Connection refused")
        if what == "failed":
            return {"failed": True, "msg": "MODULE FAILURE\nSee stdout/stderr for the exact error", "module_stderr": "/usr/bin/python3: not found"}
        if call == "inspect":
            return _inspect.inspect(_with_defaults(_args.NODE_LAYERS_ARGSPEC, module_args))
        if call == "verify":
            real = _node_verify.probe
            _node_verify.probe = self._probe
            try:
                out = _node_verify.verify(_with_defaults(_args.NODE_VERIFY_ARGSPEC, module_args))
            finally:
                _node_verify.probe = real
            if out.get("interrupted"):  # as node_verify's fail_json
                out = dict(out, failed=True, msg=out.pop("interrupted"))
            return out
        return {"changed": True}

    def _probe(self, p, check_mode=False):
        self.probes.append(dict((k, p[k]) for k in _args.NODE_PROBE_ARGSPEC))
        if self.fail.get("probe") == "interrupted":
            return {"interrupted": "interrupted by signal 15: the probe container and the host control were stopped and removed"}
        if self.probe_records is not None:
            out = {"records": _of_run(self.probe_records, p["run_id"]), "spec_removed": None}
            if p["remove_spec"]:
                out.update(_node_probe.remove_run_spec(p["run_id"], p["self_built_spec_dir"]))
            return out
        return _node_probe.probe(p, check_mode)


def _of_run(records, run_id):
    """``records`` as an honest node of run ``run_id`` returns them: a runtime record that ran names this run's id and
    its container, and so does a compute record whose container ran (what the controller binds a record to:
    _intake.run_errors)."""
    out = dict(records)
    runtime = out.get("runtime")
    if runtime and runtime["status"] != NOT_RUN:
        evidence = dict(runtime["evidence"], run_id=run_id)
        evidence["container"] = dict(evidence.get("container") or {}, name="gpuprobe-%s-0a1b2c3d" % run_id)
        out["runtime"] = dict(runtime, evidence=evidence)
    compute = out.get("compute")
    container = (compute or {}).get("evidence", {}).get("container") or {}
    if container.get("executed"):
        evidence = dict(compute["evidence"], container=dict(container, container_name="gpuprobe-%s-0a1b2c3d" % run_id))
        out["compute"] = dict(compute, evidence=evidence)
    return out


def _with_defaults(argspec, args):
    p = dict((name, spec.get("default")) for name, spec in argspec.items())
    p.update(args)
    unknown = set(args) - set(argspec)
    assert not unknown, "the action sent options the module does not take: %s" % sorted(unknown)
    return p


def _passing(layer, **evidence):
    b = LayerBuilder(layer)
    b.add("%s.sample" % layer, PASS, observed="x")
    b.evidence = evidence
    return b.build()


@pytest.fixture(name="tree")
def _tree(tmp_path):
    build_node(str(tmp_path / "node"), gpus=1, procfs=True)
    return str(tmp_path / "node")


def run(action, node, tags=None, skip=None):
    action._execute_module = node  # pylint: disable=protected-access
    return action.run(task_vars={"inventory_hostname": "n1", "ansible_play_hosts_all": ["n1", "n2"],
                                 "ansible_run_tags": tags or ["all"], "ansible_skip_tags": skip or []})


def test_audit_is_one_node_side_call_and_the_verdict_is_decided_here(tree):
    node = Node()
    result = run(_action({"mode": "audit", "root": tree, "nvml": False, "cdi_spec_dirs": ["/etc/cdi"]}), node)
    assert [c[0] for c in node.calls] == ["inspect"] and node.calls[0][1]["layers"] == ["host", "cdi", "k8s"]
    assert result["records"]["runtime"]["reason"] == result["records"]["compute"]["reason"] == "audit mode: no container is started"
    assert result["verdict"]["verdict"] == "FAILED_AT_CDI"
    assert result["gpuprobe_host_done"] == {"verdict": "FAILED_AT_CDI", "total": 2}
    assert len(result["calls"]) == 1 and "failed" not in result


def test_full_with_a_blocking_failure_makes_no_probe_call(tree):
    node = Node()
    result = run(_action({"root": tree, "nvml": False, "k8s": False, "cdi_spec_dirs": ["/etc/cdi"]}), node)
    assert [c[0] for c in node.calls] == ["verify"] and node.probes == []  # the gate ran on the node
    assert result["records"]["runtime"]["reason"] == "blocked by cdi FAIL"
    assert result["records"]["k8s"]["reason"] == _selection.K8S_DISABLED


def test_tags_select_the_layers_of_the_call(tree):
    node = Node()
    result = run(_action({"root": tree, "nvml": False}), node, tags=["host"])
    assert node.calls[0][1]["layers"] == ["host"] and result["layers"] == ["host"]
    assert result["records"]["cdi"]["reason"] == _selection.NOT_SELECTED


def test_a_failed_inspect_call_fails_the_task_with_every_layer_not_run(tree):
    result = run(_action({"root": tree, "k8s": False, "mode": "audit"}), Node(fail={"inspect": "failed"}))
    assert result["failed"] is True and result["msg"].startswith("the node-side call (gpuprobe.layers.node_layers) failed")
    assert result["records"]["host"]["status"] == NOT_RUN and result["records"]["host"]["reason"] == result["msg"]
    assert result["verdict"]["verdict"] != "COMPUTE_VERIFIED"


def test_a_failed_whole_node_call_fails_the_task_every_layer_not_run_and_sweeps(tree):
    node = Node(fail={"verify": "failed"})
    result = run(_action({"root": tree, "k8s": False, "probe_runtime": "podman"}), node)
    # the call may have died with its probe container running: swept through the option's runtime
    assert [c[0] for c in node.calls] == ["verify", "probe_cleanup"] and node.calls[1][1]["runtime"] == "podman"
    assert result["failed"] is True and result["msg"].startswith("the node-side call (gpuprobe.layers.node_verify) failed")
    assert result["records"]["host"]["status"] == NOT_RUN and result["records"]["host"]["reason"] == result["msg"]
    assert result["records"]["compute"]["reason"].startswith("blocked: the node-side call")
    assert result["verdict"]["verdict"] != "COMPUTE_VERIFIED"


def test_a_node_gone_during_the_call_is_unreachable_with_no_further_call(tree):
    node = Node(fail={"verify": "unreachable"})
    result = run(_action({"root": tree, "nvml": False, "k8s": False}), node)
    assert result["unreachable"] is True and "Connection refused" in result["msg"] and len(node.calls) == 1
    assert all(result["records"][layer]["reason"].startswith("host unreachable: ")
               for layer in ("host", "cdi", "runtime", "compute"))
    assert result["verdict"]["verdict"] != "COMPUTE_VERIFIED"


def test_an_interrupted_probe_fails_the_task_keeps_the_inspect_records_and_its_container_is_swept(tree, monkeypatch):
    monkeypatch.setattr(_gate, "layer_gate", lambda records, mode: "")
    node = Node(fail={"probe": "interrupted"})
    env = {"CONTAINERS_CONF": "/etc/gpuprobe/containers.conf"}
    result = run(_action({"root": tree, "nvml": False, "k8s": False, "probe_runtime": "podman", "probe_environment": env}), node)
    assert [c[0] for c in node.calls] == ["verify", "probe_cleanup"] and len(node.probes) == 1
    cleanup = node.calls[1][1]
    assert cleanup["run_id"] == result["run_id"] and cleanup["specs"] is False and cleanup["runtime"] == "podman"
    # the sweep looks where the probe's containers live
    assert cleanup["environment"] == env
    assert result["records"]["compute"]["reason"].startswith("the node-side call (gpuprobe.layers.node_verify) did not return a record")
    assert "interrupted by signal 15" in result["records"]["compute"]["reason"]
    # a probe that did not return proves nothing: the node could not be verified (exit 2 in the fleet play)
    assert result["failed"] is True and result["msg"].startswith("the node-side call (gpuprobe.layers.node_verify) failed")
    assert result["records"]["host"]["status"] != NOT_RUN


def test_per_device_probes_are_always_swept_and_a_failed_sweep_fails_the_task(tree, monkeypatch):
    monkeypatch.setattr(_gate, "layer_gate", lambda records, mode: "")
    node = Node(probe_records={"runtime": _passing("runtime"), "compute": _passing("compute")}, fail={"probe_cleanup": "failed"})
    result = run(_action({"root": tree, "nvml": False, "k8s": False, "probe_isolation": "per_device"}), node)
    assert [c[0] for c in node.calls] == ["verify", "probe_cleanup"] and node.probes[0]["isolation"] == "per_device"
    assert result["failed"] is True and "may be left on the node" in result["msg"]


def test_a_probe_that_removed_its_container_costs_no_cleanup_call(tree, monkeypatch):
    monkeypatch.setattr(_gate, "layer_gate", lambda records, mode: "")
    runtime = _passing("runtime", container={"cleanup": {"rc": 0, "removed": True}})
    node = Node(probe_records={"runtime": runtime, "compute": _passing("compute")})
    result = run(_action({"root": tree, "nvml": False, "k8s": False}), node)
    assert [c[0] for c in node.calls] == ["verify"] and len(node.probes) == 1
    assert result["records"]["runtime"] == _of_run({"runtime": runtime}, result["run_id"])["runtime"]


def _self_built(tmp_path, tree):
    spec_dir = str(tmp_path / "run-cdi")
    os.makedirs(spec_dir)
    return {"root": tree, "nvml": False, "k8s": False, "cdi_source": "self-built", "self_built_spec_dir": spec_dir,
            "run_id": "t-9"}


def test_a_self_built_spec_blocked_before_the_probe_is_removed_by_the_node_call(tree, tmp_path, monkeypatch):
    monkeypatch.setattr(_gate, "layer_gate", lambda records, mode: "blocked by cdi FAIL")
    node = Node()
    args = _self_built(tmp_path, tree)
    result = run(_action(args), node)
    assert [c[0] for c in node.calls] == ["verify"] and node.probes == []
    assert result["spec"]["path"].startswith(args["self_built_spec_dir"]) and result["changed"] is True
    assert not os.path.exists(result["spec"]["path"])


def test_a_self_built_spec_left_by_a_failed_call_is_removed_by_the_controller(tree, tmp_path):
    node = Node(fail={"verify": "failed"})
    args = _self_built(tmp_path, tree)
    result = run(_action(args), node)
    assert [c[0] for c in node.calls] == ["verify", "probe_cleanup", "cdi_spec"]
    assert node.calls[2][1] == {"state": "absent", "run_id": "t-9", "spec_dir": args["self_built_spec_dir"]}
    assert result["failed"] is True


def test_a_self_built_spec_the_probe_removed_costs_no_call(tree, tmp_path, monkeypatch):
    monkeypatch.setattr(_gate, "layer_gate", lambda records, mode: "")
    node = Node(probe_records={"runtime": _passing("runtime"), "compute": _passing("compute")})
    result = run(_action(_self_built(tmp_path, tree)), node)
    assert [c[0] for c in node.calls] == ["verify"] and node.probes[0]["remove_spec"] is True
    assert not os.path.exists(result["spec"]["path"])


def test_a_spec_given_by_the_caller_is_left_to_the_caller(tree, tmp_path, monkeypatch):
    monkeypatch.setattr(_gate, "layer_gate", lambda records, mode: "blocked by cdi FAIL")
    args = _self_built(tmp_path, tree)
    given = {"path": os.path.join(args["self_built_spec_dir"], "gpuprobe-t-9.yaml"), "kind": "gpuprobe.local/gpu-t-9",
             "devices": ["gpuprobe.local/gpu-t-9=0"]}
    node = Node()
    result = run(_action(dict(args, cdi_spec=given)), node)
    assert [c[0] for c in node.calls] == ["verify"] and result["changed"] is False


@pytest.mark.parametrize("args,text", [
    ({"mode": "audit", "cdi_source": "self-built"}, "audit mode is read-only"),
    ({"self_built_spec_dir": "/etc/cdi/x"}, "never written to /etc/cdi"),
    ({"run_id": "Bad_Id"}, "run_id is 'Bad_Id'"),
    ({"run_id": "a" * 64}, "at most 63"),
    ({"probe_timeout": 0}, "probe_timeout is 0: must be a whole number of seconds greater than 0 and at most 86400"),
    ({"probe_runtime": []}, "runtime is an empty list"),
    ({"probe_runtime": ["containerd", "nerdctl"]}, "unknown engine name"),
    ({"probe_runtime": ["auto", "docker"]}, "cannot be combined"),
    ({"probe_runtime_endpoint": "tcp://10.0.0.1:10010"}, "only unix:///absolute/path.sock"),
])
def test_invalid_options_stop_before_any_call(args, text):
    node = Node()
    with pytest.raises(AnsibleActionFail, match=text):
        run(_action(args), node)
    assert node.calls == []


def test_a_verified_probe_without_the_cdi_layer_is_inconclusive(tree, monkeypatch):
    """Issue 18 item 4: runtime + compute records that would verify the node do not, when the cdi layer did not
    run, whoever calls the verdict; this plugin is the verify role's caller."""
    monkeypatch.setattr(_gate, "layer_gate", lambda records, mode: "")
    row = {"index": 0, "uuid": "GPU-a", "model": None, "expected": True, "seen_in_container": True, "ordinal": 0,
           "status": PASS, "signature": None, "reason": None}
    b = LayerBuilder("compute")
    b.add("compute.kernel.verify", PASS, observed="0 mismatches")
    b.add("compute.driver.binding", PASS, "container", observed="cuDriverGetVersion = NVML; libcuda sha256 = the driver root's")
    b.evidence = {"container": {"executed": True, "cdi_devices": ["nvidia.com/gpu=0"]}, "gpus": [row]}
    runtime = LayerBuilder("runtime")
    runtime.add("runtime.mount.present", PASS, observed="x")
    node = Node(probe_records={"runtime": runtime.build(), "compute": b.build()})
    inspect = _inspect.inspect

    def cdi_did_not_run(params, check_mode=False, probe_follows=False):  # the node side's cdi layer returned no record (it crashed there)
        out = inspect(params, check_mode, probe_follows)
        out["records"]["cdi"] = not_run("cdi", "the cdi layer did not return a record: OSError: boom")
        return out
    monkeypatch.setattr(_inspect, "inspect", cdi_did_not_run)
    result = run(_action({"root": tree, "nvml": False, "k8s": False}), node)
    assert result["records"]["cdi"]["status"] == NOT_RUN
    assert result["verdict"]["verdict"] == "INCONCLUSIVE"
    assert result["verdict"]["reason"].startswith("cdi: not run ("), result["verdict"]["reason"]


def test_health_options_reach_the_host_layer_and_bad_ones_stop_before_any_call(tree):
    node = Node()
    result = run(_action({"mode": "audit", "root": tree, "nvml": False, "cdi_spec_dirs": ["/etc/cdi"],
                          "health_thresholds": {"pcie_replay_warn": 9}, "dcgm_diag": 1}), node)
    assert (node.calls[0][1]["health_thresholds"], node.calls[0][1]["dcgm_diag"]) == ({"pcie_replay_warn": 9}, 1)
    health = result["records"]["host"]["evidence"]["health"]
    assert health["thresholds"]["pcie_replay_warn"] == 9 and health["dcgm_diag"]["asked"] == 1
    node = Node()
    with pytest.raises(AnsibleActionFail) as err:
        run(_action({"root": tree, "health_thresholds": {"replays": 1}, "dcgm_diag": 3}), node)
    assert "health_thresholds: unknown threshold 'replays'" in str(err.value)
    assert "dcgm_diag is 3: dcgmi diag -r 3 may take 3600 s, more than layer_timeout (300 s)" in str(err.value)
    assert node.calls == []


def test_several_runtimes_probe_once_each_gated_on_the_cdi_record_as_it_speaks_for_that_runtime(tree, monkeypatch):
    """Issue 25: [podman, docker] where docker's own CDI configuration FAILs: podman is probed, docker is blocked by
    its cdi FAIL only, and the result carries one entry per runtime; the node verdict speaks for the failing one."""
    engines = [
        {"name": "podman", "version": "4.3.1", "path": "/usr/bin/podman", "usable": True, "selected_because": "named",
         "cdi_config": {"engine": "podman", "enabled": True, "spec_dirs": ["/etc/cdi"], "origin": "default", "source": "c"}},
        {"name": "docker", "version": "26.1.5", "path": "/usr/bin/docker", "usable": False, "selected_because": "named",
         "cdi_config": {"engine": "docker", "enabled": False, "spec_dirs": [], "source": "docker info",
                        "reason": "CDISpecDirs is empty"}}]
    seen = {}
    monkeypatch.setattr(_inspect, "selected_engines", lambda p, probe_follows=False, processes_read=None: [dict(e) for e in engines])

    def gate(records, mode):
        own = [c for c in records["cdi"]["checks"] if c.get("runtime")]
        seen.setdefault("runtimes", []).append(sorted(set(c["runtime"] for c in own)))
        return "blocked by cdi FAIL" if any(c["status"] == "FAIL" for c in own) else ""

    monkeypatch.setattr(_gate, "layer_gate", gate)
    node = Node(probe_records={"runtime": _passing("runtime"), "compute": _passing("compute")})
    result = run(_action({"root": tree, "nvml": False, "k8s": False, "probe_runtime": ["podman", "docker"]}), node)
    assert seen["runtimes"] == [["podman"], ["docker"]]  # each gate saw only its own runtime's checks
    assert [c[0] for c in node.calls] == ["verify"] and [p["runtime"] for p in node.probes] == ["podman"]
    assert node.calls[0][1]["runtime"] == ["podman", "docker"]
    assert [r["runtime"] for r in result["runtimes"]] == ["podman", "docker"]
    assert result["runtimes"][1]["records"]["runtime"]["reason"] == "blocked by cdi FAIL"
    assert result["runtimes"][1]["engine"]["version"] == "26.1.5"
    assert result["records"]["runtime"] == result["runtimes"][0]["records"]["runtime"]
    docker = [c for c in result["records"]["cdi"]["checks"] if c["id"] == "cdi.engine.config" and c.get("runtime") == "docker"]
    assert docker and docker[0]["status"] == "FAIL" and "CDISpecDirs is empty" in docker[0]["observed"]
    assert [row["runtime"] for row in result["verdict"]["runtimes"]] == ["podman", "docker"]
    assert result["runtimes"][1]["verdict"]["verdict"] == "FAILED_AT_CDI"


def test_spool_keeps_the_records_in_a_file_of_the_run_and_the_report_reads_them_back(tree, tmp_path, monkeypatch):
    from ansible import constants as C
    from ansible_collections.gpuprobe.layers.plugins.action import fleet_report
    from ansible_collections.gpuprobe.layers.plugins.plugin_utils import _spool
    monkeypatch.setattr(C, "DEFAULT_LOCAL_TMP", str(tmp_path / "run-tmp"))
    args = {"mode": "audit", "root": tree, "nvml": False, "k8s": False, "cdi_spec_dirs": ["/etc/cdi"]}
    kept = run(_action(args), Node())
    spooled = run(_action(dict(args, spool=True)), Node())
    assert "records" not in spooled and "runtimes" not in spooled
    assert spooled["records_file"].startswith("n1-") and "/" not in spooled["records_file"]
    assert _spool.records_path(spooled).startswith(str(tmp_path / "run-tmp" / _spool.SUBDIR) + "/n1-")
    assert spooled["layer_status"] == dict((layer, r["status"]) for layer, r in kept["records"].items())
    assert spooled["verdict"]["verdict"] == kept["verdict"]["verdict"] == "FAILED_AT_CDI"
    back = _spool.unspool(spooled)
    assert [(k, r["status"], r["reason"]) for k, r in sorted(back["records"].items())] == \
        [(k, r["status"], r["reason"]) for k, r in sorted(kept["records"].items())]
    # the report collects the same records from the file as from a result that kept them
    [from_file, in_memory] = fleet_report.collect_hosts({"n1": {"verify_result": spooled}, "b": {"verify_result": kept}},
                                                        ["n1", "b"], "verify_result", None, "gpuprobe_pins")
    assert from_file["records"].keys() == in_memory["records"].keys() and from_file["error"] is None
    assert from_file["records"]["cdi"]["checks"] == in_memory["records"]["cdi"]["checks"]
    # a result pointing at another host's file (or another run's, or other statuses) never gets its records
    [other] = fleet_report.collect_hosts({"n2": {"verify_result": spooled}}, ["n2"], "verify_result", None, "gpuprobe_pins")
    assert other["records"] is None and "it holds the records of n1" in other["error"]
    forged = dict(spooled, layer_status=dict(spooled["layer_status"], cdi="PASS"))
    [lie] = fleet_report.collect_hosts({"n1": {"verify_result": forged}}, ["n1"], "verify_result", None, "gpuprobe_pins")
    assert lie["records"] is None and "layer statuses" in lie["error"]
    # a file gone before the report: that node is reported as not verified, saying why, never as verified
    os.unlink(_spool.records_path(spooled))
    [gone] = fleet_report.collect_hosts({"n1": {"verify_result": spooled}}, ["n1"], "verify_result", None, "gpuprobe_pins")
    assert gone["records"] is None and gone["error"].startswith("the records of this node were kept in ")


def test_an_unreachable_nodes_spooled_result_holds_its_message_and_little_else(tree, tmp_path, monkeypatch):
    """Ansible's default callback prints an unreachable node's whole result (issue 45.5): spooled, it keeps the message,
    its file's name and what the progress line needs; the report reads the same node from it as from the whole result."""
    from ansible import constants as C
    from ansible_collections.gpuprobe.layers.plugins.action import fleet_report
    from ansible_collections.gpuprobe.layers.plugins.plugin_utils import _spool
    monkeypatch.setattr(C, "DEFAULT_LOCAL_TMP", str(tmp_path / "run-tmp"))
    args = {"mode": "audit", "root": tree, "nvml": False, "k8s": False, "cdi_spec_dirs": ["/etc/cdi"]}
    kept = run(_action(args), Node(fail={"inspect": "unreachable"}))
    spooled = run(_action(dict(args, spool=True)), Node(fail={"inspect": "unreachable"}))
    assert sorted(spooled) == ["changed", _selection.PROGRESS_KEY, "msg", "records_file", "unreachable"]
    assert spooled[_selection.PROGRESS_KEY] == {"verdict": "INCONCLUSIVE"} and spooled["msg"] == kept["msg"]
    back = _spool.unspool(spooled, "n1")
    assert [(k, r["status"], r["reason"]) for k, r in sorted(back["records"].items())] == \
        [(k, r["status"], r["reason"]) for k, r in sorted(kept["records"].items())]
    assert dict((k, back[k]) for k in ("verdict", "layers", "calls")) == dict((k, kept[k]) for k in ("verdict", "layers", "calls"))
    assert back["run_id"] and back["run_started_at"] and fleet_report.run_of(back)["id"] == back["run_id"]
    [from_file, in_memory] = fleet_report.collect_hosts({"n1": {"verify_result": spooled}, "b": {"verify_result": kept}},
                                                        ["n1", "b"], "verify_result", None, "gpuprobe_pins")
    assert from_file["unreachable"] == in_memory["unreachable"] and from_file["unreachable"].startswith("Failed to connect")
    assert [(k, r["status"], r["reason"]) for k, r in sorted(from_file["records"].items())] == \
        [(k, r["status"], r["reason"]) for k, r in sorted(in_memory["records"].items())]
    assert dict(from_file, name="b", records=None) == dict(in_memory, records=None)
    # its file never gives records to a result that is not an unreachable node's
    [other] = fleet_report.collect_hosts({"n1": {"verify_result": dict(spooled, unreachable=False)}}, ["n1"], "verify_result",
                                         None, "gpuprobe_pins")
    assert other["records"] is None and "an unreachable node" in other["error"]


def test_spooled_files_of_hosts_with_alike_names_never_meet(tree, tmp_path, monkeypatch):
    from ansible import constants as C
    from ansible_collections.gpuprobe.layers.plugins.plugin_utils import _spool
    monkeypatch.setattr(C, "DEFAULT_LOCAL_TMP", str(tmp_path / "run-tmp"))
    a = {"records": {"host": {"status": "FAIL"}}, "runtimes": []}
    b = {"records": {"host": {"status": "PASS"}}, "runtimes": []}
    assert _spool.spool(a, "gpu:1", "r1") is None and _spool.spool(b, "gpu_1", "r1") is None
    assert a["records_file"] != b["records_file"]
    assert _spool.unspool(a, "gpu:1")["records"]["host"]["status"] == "FAIL"
    assert _spool.unspool(b, "gpu_1")["records"]["host"]["status"] == "PASS"


def test_spool_that_cannot_write_keeps_the_records_in_the_result(tree, tmp_path, monkeypatch):
    from ansible import constants as C
    (tmp_path / "not-a-dir").write_text("")
    monkeypatch.setattr(C, "DEFAULT_LOCAL_TMP", str(tmp_path / "not-a-dir"))
    result = run(_action({"mode": "audit", "root": tree, "nvml": False, "k8s": False, "cdi_spec_dirs": ["/etc/cdi"], "spool": True}), Node())
    assert "records_file" not in result and result["records"]["host"]["status"] != NOT_RUN
    assert any(w.startswith("spool: the records stay in the result") for w in result["warnings"])
