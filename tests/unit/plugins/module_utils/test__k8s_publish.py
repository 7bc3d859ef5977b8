"""Publishing the verdicts as Node conditions (opt-in): the condition and label built from a verdict, the plan per
host, and publish() through a stand-in kubectl that records what it is asked to write (no kube-apiserver can exist
here; tests/integration/test_k8s_kubectl_http.py runs the real kubectl against a recording HTTP endpoint)."""
import json
import os

import pytest
from kubectlfixture import argv_log, stand_in
from ansible.module_utils.testing import patch_module_args

from ansible_collections.gpuprobe.layers.plugins.module_utils._k8s import publish as _k8s_publish
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.allowlist import check_allowed
from ansible_collections.gpuprobe.layers.plugins.modules import k8s_publish
from ansible_collections.gpuprobe.layers.plugins.module_utils._common import module as _module

FIXTURES = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "k8s", "dra"))
NOW = "2026-12-03T10:00:00Z"


def nodes_json(previous=None):
    with open(os.path.join(FIXTURES, "nodes.json")) as f:
        doc = json.load(f)
    if previous:
        for node in doc["items"]:
            if node["metadata"]["name"] == "dra-0":
                node["status"]["conditions"].append(previous)
    return doc


@pytest.mark.parametrize("verdict,status", [("COMPUTE_VERIFIED", "True"), ("FAILED_AT_CDI", "False"),
                                            ("FAILED_AT_COMPUTE", "False"), ("INCONCLUSIVE", "Unknown"), ("", "Unknown")])
def test_condition_status(verdict, status):
    cond = _k8s_publish.build_condition(verdict, NOW)
    assert cond["status"] == status and cond["type"] == "GPUComputeVerified"
    assert cond["lastHeartbeatTime"] == NOW == cond["lastTransitionTime"]


def test_condition_from_a_node_verdict():
    verdict = {"verdict": "FAILED_AT_COMPUTE", "signature": "compute.cuda.CUDA_ERROR_JIT_COMPILER_NOT_FOUND",
               "points_to": "cdi", "reason": "PTX load failed"}
    cond = _k8s_publish.build_condition(verdict, NOW, run_id="r1")
    assert cond["reason"] == "FAILED_AT_COMPUTE"
    assert cond["message"] == ("gpuprobe.layers verdict FAILED_AT_COMPUTE; signature compute.cuda.CUDA_ERROR_JIT_COMPILER_NOT_FOUND; "
                               "points to cdi; PTX load failed; run r1")


def test_transition_time_is_kept_while_the_status_holds():
    before = {"type": "GPUComputeVerified", "status": "False", "reason": "FAILED_AT_CDI", "lastTransitionTime": "2026-12-01T00:00:00Z"}
    assert _k8s_publish.build_condition("FAILED_AT_RUNTIME", NOW, before)["lastTransitionTime"] == "2026-12-01T00:00:00Z"
    assert _k8s_publish.build_condition("COMPUTE_VERIFIED", NOW, before)["lastTransitionTime"] == NOW


def test_long_messages_are_cut():
    cond = _k8s_publish.build_condition({"verdict": "INCONCLUSIVE", "reason": "x" * 5000}, NOW)
    assert len(cond["message"]) == _k8s_publish.MESSAGE_LIMIT and cond["message"].endswith("...")


@pytest.mark.parametrize("key,ok", [("gpuprobe.layers/verdict", True), ("verdict", True), ("a.b-c/d_e.f", True),
                                    ("Bad/verdict", False), ("/verdict", False), ("x/" + "n" * 64, False), ("", False),
                                    # namespaces reserved for Kubernetes' own components
                                    ("kubernetes.io/hostname", False), ("node-role.kubernetes.io/control-plane", False),
                                    ("node.kubernetes.io/exclude-from-external-load-balancers", False),
                                    ("k8s.io/x", False), ("x.k8s.io/verdict", False), ("notkubernetes.io/verdict", True)])
def test_label_key(key, ok):
    assert (_k8s_publish.label_key_error(key) is None) == ok


@pytest.mark.parametrize("value,ok", [("GPUComputeVerified", True), ("example.com/GPUReady", True), ("bad type", False),
                                      ("1abc", False),
                                      # the kubelet's own conditions: the node lifecycle controller taints/evicts on them
                                      ("Ready", False), ("MemoryPressure", False), ("DiskPressure", False),
                                      ("PIDPressure", False), ("NetworkUnavailable", False), ("ready", False),
                                      ("node.kubernetes.io/GPUReady", False), ("ReadyForGPU", True)])
def test_condition_type(value, ok):
    assert (_k8s_publish.condition_type_error(value) is None) == ok


def test_plan_matches_hosts_to_nodes_and_reports_the_rest():
    previous = {"type": "GPUComputeVerified", "status": "True", "reason": "COMPUTE_VERIFIED",
                "message": "gpuprobe.layers verdict COMPUTE_VERIFIED", "lastTransitionTime": "2026-12-01T00:00:00Z"}
    plans, unmatched, kept = _k8s_publish.plan(nodes_json(previous), {
        "DRA-0": "COMPUTE_VERIFIED", "gpu-x": "FAILED_AT_HOST", "h-plain": "FAILED_AT_CDI"},
        NOW, node_names={"h-plain": "plain-0"}, label_key="gpuprobe.layers/verdict")
    assert unmatched == [{"host": "gpu-x", "reason": "no Node is named gpu-x or labelled kubernetes.io/hostname=gpu-x"}]
    assert kept == []
    by_host = dict((p["host"], p) for p in plans)
    same = by_host["DRA-0"]
    assert same["node"] == "dra-0" and same["condition"]["lastTransitionTime"] == "2026-12-01T00:00:00Z"
    assert same["changed"] is True  # the condition is the same, the label is new
    assert by_host["h-plain"]["node"] == "plain-0" and by_host["h-plain"]["label"] == {"gpuprobe.layers/verdict": "FAILED_AT_CDI"}
    for item in plans:
        for patch in item["patches"]:  # every write the plan makes is one the allowlist accepts
            assert check_allowed(["kubectl", "patch", "node", item["node"]] + patch + ["-o", "json"]) == "kubectl node condition write"


def test_unchanged_condition_without_label_is_not_a_change():
    previous = {"type": "GPUComputeVerified", "status": "True", "reason": "COMPUTE_VERIFIED",
                "message": "gpuprobe.layers verdict COMPUTE_VERIFIED", "lastTransitionTime": "2026-12-01T00:00:00Z"}
    plans, unmatched, _kept = _k8s_publish.plan(nodes_json(previous), {"dra-0": "COMPUTE_VERIFIED"}, NOW)
    assert unmatched == []
    assert plans[0]["changed"] is False
    # the heartbeat is still written: the condition says when the verdict was last confirmed
    assert json.loads(plans[0]["patches"][0][3])["status"]["conditions"][0]["lastHeartbeatTime"] == NOW


def test_unknown_node_name_is_unmatched():
    _plans, unmatched, _kept = _k8s_publish.plan(nodes_json(), {"h": "COMPUTE_VERIFIED"}, NOW, node_names={"h": "nope"})
    assert unmatched == [{"host": "h", "reason": "no Node named nope (node_names)"}]


# ---- publish() through a stand-in kubectl ----

FAKE_KUBECTL = r'''if "get" in args:
    sys.stdout.write(open(os.path.join(%(fixtures)r, "nodes.json")).read()); sys.exit(0)
node = args[args.index("node") + 1]
if node in os.environ.get("FAKE_FORBID", "").split(","):
    sys.stderr.write('Error from server (Forbidden): nodes "%%s" is forbidden: User "probe" cannot patch resource "nodes/status" '
                     'in API group "" at the cluster scope\n' %% node)
    sys.exit(1)
print(json.dumps({"kind": "Node", "metadata": {"name": node}}))
'''


@pytest.fixture
def fake_kubectl(tmp_path):
    return stand_in(tmp_path, FAKE_KUBECTL, fixtures=FIXTURES) + (tmp_path,)


def calls(tmp_path):
    return [argv[4:] for argv in argv_log(tmp_path)]


def test_publish_writes_one_condition_and_one_label_per_node(fake_kubectl):
    path, kubeconfig, tmp = fake_kubectl
    out = _k8s_publish.publish({"dra-0": "COMPUTE_VERIFIED", "plain-0": "FAILED_AT_CDI"}, kubectl=path, kubeconfig=kubeconfig,
                               signatures={"plain-0": "cdi.spec.parse"}, label_key="gpuprobe.layers/verdict", now=NOW)
    assert out["errors"] == [] and out["unmatched"] == [] and out["changed"] is True
    assert [(p["node"], p["written"]) for p in out["published"]] == [("dra-0", True), ("plain-0", True)]
    log = calls(tmp)
    assert log[0] == ["get", "nodes", "-o", "json"]
    # the Nodes are written a few at a time (workers): each Node's condition, then its label
    plain = [argv for argv in log if argv[:3] == ["patch", "node", "plain-0"]]
    status = plain[0]
    assert status[:5] == ["patch", "node", "plain-0", "--subresource=status", "--type=strategic"]
    cond = json.loads(status[6])["status"]["conditions"][0]
    assert (cond["status"], cond["reason"]) == ("False", "FAILED_AT_CDI")
    assert cond["message"] == "gpuprobe.layers verdict FAILED_AT_CDI; signature cdi.spec.parse"
    assert len(plain) == 2 and plain[1][:4] == ["patch", "node", "plain-0", "--type=merge"]
    assert json.loads(plain[1][5]) == {"metadata": {"labels": {"gpuprobe.layers/verdict": "FAILED_AT_CDI"}}}


def test_check_mode_writes_nothing_and_shows_what_it_would(fake_kubectl):
    path, kubeconfig, tmp = fake_kubectl
    out = _k8s_publish.publish({"dra-0": "FAILED_AT_HOST"}, kubectl=path, kubeconfig=kubeconfig, check_mode=True, now=NOW)
    assert [c[:2] for c in calls(tmp)] == [["get", "nodes"]]
    entry = out["published"][0]
    assert entry["written"] is False and out["changed"] is True
    assert entry["condition"]["status"] == "False"
    assert entry["commands"][0][:1] == ["kubectl"] and "--subresource=status" in entry["commands"][0]


def test_a_failed_write_is_reported(fake_kubectl, monkeypatch):
    path, kubeconfig, _tmp = fake_kubectl
    monkeypatch.setenv("FAKE_FORBID", "plain-0")
    out = _k8s_publish.publish({"dra-0": "COMPUTE_VERIFIED", "plain-0": "COMPUTE_VERIFIED"}, kubectl=path, kubeconfig=kubeconfig,
                               label_key="v", now=NOW)
    assert [(p["node"], p["written"]) for p in out["published"]] == [("dra-0", True), ("plain-0", False)]
    assert out["errors"] == [{"host": "plain-0", "node": "plain-0", "error": (
        'kubectl patch node plain-0 --subresource=status --type=strategic: Error from server (Forbidden): nodes "plain-0" is '
        'forbidden: User "probe" cannot patch resource "nodes/status" in API group "" at the cluster scope')}]


def test_no_cluster_is_an_error():
    out = _k8s_publish.publish({"h": "COMPUTE_VERIFIED"}, kubectl="gpuprobe-no-such-kubectl")
    assert out["errors"] == [{"host": None, "node": None, "error": "kubectl not found: gpuprobe-no-such-kubectl"}]


def run_module(capsys, args):
    with patch_module_args(args):
        with pytest.raises(SystemExit) as exc:
            k8s_publish.main()
    return exc.value.code, json.loads(capsys.readouterr().out)


def test_module_fails_on_a_failed_write(fake_kubectl, capsys, monkeypatch):
    path, kubeconfig, _tmp = fake_kubectl
    monkeypatch.setenv("FAKE_FORBID", "dra-0")
    code, out = run_module(capsys, {"kubectl": path, "kubeconfig": kubeconfig, "verdicts": {"dra-0": "COMPUTE_VERIFIED"}})
    assert code == 1 and out["failed"] is True
    assert out["msg"].startswith("publishing the verdicts failed: dra-0: kubectl patch node dra-0 --subresource=status")
    assert out["published"][0]["written"] is False


def test_module_check_mode(fake_kubectl, capsys):
    path, kubeconfig, tmp = fake_kubectl
    code, out = run_module(capsys, {"kubectl": path, "kubeconfig": kubeconfig, "verdicts": {"plain-0": "FAILED_AT_RUNTIME"},
                                    "label": "gpuprobe.layers/verdict", "_ansible_check_mode": True})
    assert code == 0 and out["changed"] is True
    assert out["published"][0]["label"] == {"gpuprobe.layers/verdict": "FAILED_AT_RUNTIME"}
    assert [c[:2] for c in calls(tmp)] == [["get", "nodes"]]


@pytest.mark.parametrize("args,msg", [({"label": "Bad Key"}, "label key 'Bad Key' is not a qualified name"),
                                      ({"condition_type": "not a type"}, "condition type 'not a type'")])
def test_module_refuses_bad_names(capsys, args, msg):
    code, out = run_module(capsys, dict(args, verdicts={"h": "COMPUTE_VERIFIED"}))
    assert code == 1 and out["msg"].startswith(msg)


def test_two_hosts_resolving_to_one_node_are_refused():
    """Which of two verdicts is the Node's cannot be told: neither is written, both are unmatched with the reason."""
    nodes = {"items": [{"metadata": {"name": "gpu-1.lab", "labels": {"kubernetes.io/hostname": "gpu-1"}}},
                       {"metadata": {"name": "gpu-2"}}]}
    plans, unmatched, _kept = _k8s_publish.plan(nodes, {"gpu-1": "COMPUTE_VERIFIED", "gpu-1.lab": "FAILED_AT_HOST",
                                                        "gpu-2": "COMPUTE_VERIFIED"}, NOW)
    assert [p["node"] for p in plans] == ["gpu-2"]
    reason = "Node gpu-1.lab is the Node of 2 inventory hosts (gpu-1, gpu-1.lab): refused, set node_names"
    assert unmatched == [{"host": "gpu-1", "reason": reason}, {"host": "gpu-1.lab", "reason": reason}]
    # node_names naming one Node twice is refused the same way
    plans, unmatched, _kept = _k8s_publish.plan(nodes, {"a": "COMPUTE_VERIFIED", "b": "FAILED_AT_HOST"}, NOW,
                                                node_names={"a": "gpu-2", "b": "gpu-2"})
    assert plans == [] and [u["host"] for u in unmatched] == ["a", "b"]


def test_module_fails_and_warns_on_a_verdict_it_could_not_publish(fake_kubectl, capsys, monkeypatch):
    """A verdict asked to be published and not published is an error: the others are written, then the task fails
    with each host and why (and a warning each, in the playbook output)."""
    path, kubeconfig, _tmp = fake_kubectl
    warned = []
    # in a test process the warning goes to the controller's display, not the result: collect it where it is made
    monkeypatch.setattr(_module.AnsibleModule, "warn", lambda self, text, **kw: warned.append(text))
    code, out = run_module(capsys, {"kubectl": path, "kubeconfig": kubeconfig,
                                    "verdicts": {"dra-0": "COMPUTE_VERIFIED", "gpu-x": "FAILED_AT_HOST"}})
    assert code == 1 and out["failed"] is True
    why = "no Node is named gpu-x or labelled kubernetes.io/hostname=gpu-x"
    assert out["msg"] == "publishing the verdicts failed: gpu-x: not published: " + why
    assert warned == ["verdict of gpu-x not published: " + why]
    assert [(p["node"], p["written"]) for p in out["published"]] == [("dra-0", True)]


# ---- issue 43: a Node is written only when it is the host's exactly, and only with what the run decided ----

def _node(name, hostname=None, condition=None, label=None):
    labels = dict({"kubernetes.io/hostname": hostname} if hostname else {}, **({"gpuprobe.layers/verdict": label} if label else {}))
    return {"metadata": {"name": name, "labels": labels}, "status": {"conditions": [condition] if condition else []}}


@pytest.mark.parametrize("nodes,host,reason", [
    # another machine's Node that only shares the short name
    ([_node("gpu-a.dc1", "gpu-a.dc1")], "gpu-a.dc2",
     "no Node is named gpu-a.dc2 or labelled kubernetes.io/hostname=gpu-a.dc2; Node gpu-a.dc1 has the short name gpu-a, "
     "which is not a match (set node_names)"),
    # a kubelet that labels itself with the host's name, beside the Node that shares the host's short name
    ([_node("gpu-a.dc1", "gpu-a.dc1"), _node("rogue", "gpu-a")], "gpu-a",
     "ambiguous: Node rogue is labelled kubernetes.io/hostname=gpu-a, and Node gpu-a.dc1 has the short name gpu-a: not "
     "matched by label (set node_names)"),
    # a label that is another Node's name
    ([_node("gpu-a", "gpu-a"), _node("rogue", "gpu-a")], "gpu-a",
     "ambiguous: Node gpu-a is named gpu-a, Node rogue is labelled kubernetes.io/hostname=gpu-a (set node_names)"),
    # two Nodes with one hostname label
    ([_node("n1", "gpu-a"), _node("n2", "gpu-a")], "gpu-a",
     "ambiguous: Node n1 is labelled kubernetes.io/hostname=gpu-a, Node n2 is labelled kubernetes.io/hostname=gpu-a "
     "(set node_names)"),
])
def test_a_verified_host_is_never_written_on_a_node_it_is_not_exactly(nodes, host, reason):
    plans, unmatched, kept = _k8s_publish.plan({"items": nodes}, {host: "COMPUTE_VERIFIED"}, NOW)
    assert plans == [] and kept == []
    assert unmatched == [{"host": host, "reason": reason}]


@pytest.mark.parametrize("nodes,host,node,node_names", [
    ([_node("gpu-a.dc1", "gpu-a.dc1"), _node("gpu-a.dc2", "gpu-a.dc2")], "gpu-a.dc2", "gpu-a.dc2", None),
    ([_node("ip-10-0-0-7", "gpu-b.lab"), _node("gpu-a.lab")], "gpu-b.lab", "ip-10-0-0-7", None),  # the one label
    ([_node("gpu-a.dc1", "gpu-a.dc1"), _node("rogue", "gpu-a")], "gpu-a", "gpu-a.dc1", {"gpu-a": "gpu-a.dc1"}),
])
def test_an_exact_match_or_the_explicit_map_is_written(nodes, host, node, node_names):
    plans, unmatched, _kept = _k8s_publish.plan({"items": nodes}, {host: "COMPUTE_VERIFIED"}, NOW, node_names=node_names)
    assert unmatched == [] and [p["node"] for p in plans] == [node]


VERIFIED = {"type": "GPUComputeVerified", "status": "True", "reason": "COMPUTE_VERIFIED",
            "message": "gpuprobe.layers verdict COMPUTE_VERIFIED; run r0", "lastTransitionTime": "2026-12-01T00:00:00Z",
            "lastHeartbeatTime": "2026-12-02T00:00:00Z"}


@pytest.mark.parametrize("mode,verdict,status", [
    ("full", "COMPUTE_VERIFIED", "True"), ("full", "FAILED_AT_COMPUTE", "False"), ("full", "INCONCLUSIVE", None),
    ("postcheck", "COMPUTE_VERIFIED", "True"), ("postcheck", "FAILED_AT_RUNTIME", "False"), ("postcheck", "INCONCLUSIVE", None),
    ("audit", "FAILED_AT_HOST", "False"), ("audit", "FAILED_AT_CDI", "False"), ("audit", "INCONCLUSIVE", None),
    # what an audit cannot prove, whatever a record claims: it runs no container
    ("audit", "COMPUTE_VERIFIED", None), ("audit", "FAILED_AT_COMPUTE", None),
    ("full", "garbage", None), ("full", "", None),
])
def test_what_each_mode_writes(mode, verdict, status):
    """docs/k8s.md, "What is written": True/False for what the run decided, nothing for the rest (never Unknown)."""
    plans, unmatched, kept = _k8s_publish.plan({"items": [_node("gpu-a", "gpu-a", VERIFIED, "COMPUTE_VERIFIED")]},
                                               {"gpu-a": verdict}, NOW, label_key="gpuprobe.layers/verdict", mode=mode)
    assert unmatched == []
    if status is None:
        assert plans == [] and [(k["host"], k["node"]) for k in kept] == [("gpu-a", "gpu-a")]
        assert kept[0]["reason"]
    else:
        assert kept == [] and plans[0]["condition"]["status"] == status
        assert plans[0]["label"] == {"gpuprobe.layers/verdict": verdict}


def test_an_unreachable_node_keeps_its_condition_and_label(fake_kubectl):
    """Not checked in this run: no write at all (no kubectl patch), the host is in kept, the task does not fail."""
    path, kubeconfig, tmp = fake_kubectl
    out = _k8s_publish.publish({"dra-0": "INCONCLUSIVE", "plain-0": "FAILED_AT_CDI"}, kubectl=path, kubeconfig=kubeconfig,
                               label_key="gpuprobe.layers/verdict", now=NOW)
    assert out["errors"] == [] and out["unmatched"] == []
    assert [argv[:3] for argv in calls(tmp) if argv[0] == "patch"] == [["patch", "node", "plain-0"]] * 2
    assert [(k["host"], k["node"], k["verdict"]) for k in out["kept"]] == [("dra-0", "dra-0", "INCONCLUSIVE")]


def test_module_audit_writes_only_a_host_or_cdi_failure(fake_kubectl, capsys):
    path, kubeconfig, tmp = fake_kubectl
    code, out = run_module(capsys, {"kubectl": path, "kubeconfig": kubeconfig, "mode": "audit", "verdicts": {
        "dra-0": "COMPUTE_VERIFIED", "dra-1": "INCONCLUSIVE", "plain-0": "FAILED_AT_CDI", "gpu-nowhere": "INCONCLUSIVE"}})
    assert code == 0, out
    assert [argv[:3] for argv in calls(tmp) if argv[0] == "patch"] == [["patch", "node", "plain-0"]]
    assert [(k["host"], k["node"]) for k in out["kept"]] == [("dra-0", "dra-0"), ("dra-1", "dra-1"), ("gpu-nowhere", None)]
    assert out["unmatched"] == []


def _doc_table():
    """The rows of docs/k8s.md's "What is written" table: (modes, verdicts, condition status or None, label or None)."""
    import re  # pylint: disable=import-outside-toplevel
    with open(os.path.join(os.path.dirname(FIXTURES), "..", "..", "..", "..", "docs", "k8s.md")) as f:
        text = f.read().split("### What is written", 1)[1].split("\n\n", 2)[2]
    rows = []
    for line in text.split("\n\n", 1)[0].splitlines()[2:]:
        mode, verdicts, condition, label = [c.strip() for c in line.strip("|").split("|")]
        if mode == "any":
            continue
        status = re.match(r"`(True|False)`", condition)
        rows.append(([m.strip() for m in mode.split(",")], re.findall(r"`([A-Z_]+)`", verdicts),
                     status.group(1) if status else None, None if label.startswith("not written") else label))
    return rows


def test_the_doc_table_is_what_plan_writes():
    """docs/k8s.md, "What is written": every mode and verdict of each row, through plan."""
    rows = _doc_table()
    assert sorted(set(m for modes, _v, _c, _l in rows for m in modes)) == sorted(_k8s_publish.MODES)
    for modes, verdicts, status, label in rows:
        for mode in modes:
            for verdict in verdicts:
                plans, unmatched, kept = _k8s_publish.plan({"items": [_node("gpu-a", "gpu-a", VERIFIED, "COMPUTE_VERIFIED")]},
                                                           {"gpu-a": verdict}, NOW, label_key="v", mode=mode)
                assert unmatched == []
                if status is None:
                    assert (plans, [k["host"] for k in kept]) == ([], ["gpu-a"]), (mode, verdict)
                else:
                    assert plans[0]["condition"]["status"] == status and plans[0]["condition"]["reason"] == verdict
                    assert label in ("the verdict", "`%s`" % verdict) and plans[0]["label"] == {"v": verdict}
