"""k8s layer: the pure analysis over kubectl JSON fixtures, and record() through a stand-in kubectl executable
(a Kubernetes API cannot exist here; the kubectl boundary is the only thing replaced). Real kubectl is used for the
'no kubeconfig' and 'unreachable cluster' cases."""
import json
import os
import shutil

import pytest
from kubectlfixture import argv_log, stand_in
from kubectlfixture import one as by

from ansible_collections.gpuprobe.layers.plugins.module_utils._k8s import kubectl as _k8s_kubectl
from ansible_collections.gpuprobe.layers.plugins.module_utils._k8s import layer as _k8s
from ansible_collections.gpuprobe.layers.plugins.module_utils._k8s import nodes as _k8s_nodes
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import FAIL, NOT_RUN, PASS, WARN, validate_record

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "k8s")


def load(name):
    with open(os.path.join(FIXTURES, name)) as f:
        return json.load(f)


@pytest.fixture
def record():
    r = _k8s.analyse(load("nodes.json"), load("pods.json"), load("events.json"), ["nvidia.com/gpu"])
    assert validate_record(r) == []
    return r


def test_labelled_node_without_allocatable_fails(record):
    c = by(record, "k8s.node.allocatable", "gpu-b")
    assert c["status"] == FAIL and c["observed"].startswith("device plugin advertises nothing: allocatable nvidia.com/gpu=0")
    assert "nvidia.com/gpu.product=NVIDIA-H200" in c["observed"]
    assert by(record, "k8s.node.allocatable", "gpu-a")["status"] == PASS
    assert "cpu-d" not in [c["subject"] for c in record["checks"]]


def test_unhealthy_devices_and_cordon_warn(record):
    assert by(record, "k8s.node.healthy_devices", "gpu-c")["status"] == WARN
    assert by(record, "k8s.node.healthy_devices", "gpu-a")["status"] == PASS
    assert by(record, "k8s.node.ready", "gpu-c")["observed"] == "cordoned (spec.unschedulable)"


def test_pending_gpu_pods_fail_with_the_scheduler_message(record):
    newest = by(record, "k8s.pod.pending", "ml/trainer-1")
    assert newest["status"] == FAIL
    assert newest["observed"].startswith("Pending: FailedScheduling: 0/4 nodes are available: 1 node(s) were unschedulable, 3 Insufficient nvidia.com/gpu.")
    assert newest["expected"] == "scheduled (requests nvidia.com/gpu=2)"
    # events expired: the PodScheduled condition still says why
    cond = by(record, "k8s.pod.pending", "ml/trainer-0")
    assert cond["status"] == FAIL and "2 Insufficient nvidia.com/gpu" in cond["observed"]
    starting = by(record, "k8s.pod.pending", "batch/starting-0")
    assert starting["status"] == WARN and "ContainerCreating" in starting["observed"]
    assert record["status"] == FAIL and record["signature"] == "k8s.node.allocatable"


def test_non_gpu_pods_are_ignored(record):
    names = [p["name"] for p in record["evidence"]["gpu_pods"]]
    assert names == ["infer-0", "trainer-0", "trainer-1", "starting-0", "rejected-0"]
    assert "web/nginx-0" not in [c["subject"] for c in record["checks"]]


def test_admission_rejection_fails(record):
    c = by(record, "k8s.pod.admission", "batch/rejected-0")
    assert c["status"] == FAIL and c["observed"].startswith("UnexpectedAdmissionError on gpu-c: Pod was rejected: Allocate failed")


def test_evidence_shape(record):
    nodes = dict((n["name"], n) for n in record["evidence"]["nodes"])
    assert nodes["gpu-a"]["capacity"] == {"nvidia.com/gpu": 8} and nodes["gpu-b"]["allocatable"] == {"nvidia.com/gpu": None}
    assert nodes["gpu-a"]["gpu_labels"]["nvidia.com/gpu.present"] == "true" and nodes["gpu-a"]["ready"] is True
    pods = dict((p["name"], p) for p in record["evidence"]["gpu_pods"])
    assert pods["trainer-1"]["requests"] == {"nvidia.com/gpu": 2} and len(pods["trainer-1"]["events"]) == 2


def test_healthy_cluster_passes():
    nodes = load("nodes.json")
    nodes["items"] = [n for n in nodes["items"] if n["metadata"]["name"] in ("gpu-a", "cpu-d")]
    pods = load("pods.json")
    pods["items"] = [p for p in pods["items"] if p["metadata"]["name"] in ("infer-0", "nginx-0")]
    r = _k8s.analyse(nodes, pods, load("events.json"))
    assert r["status"] == PASS, r["checks"]
    assert by(r, "k8s.pod.pending")["observed"] == "1 GPU Pods, none Pending"
    assert by(r, "k8s.cluster.gpu_nodes")["observed"] == "1 of 2 nodes: gpu-a"


def test_no_gpu_resource_anywhere_fails():
    nodes = load("nodes.json")
    nodes["items"] = [n for n in nodes["items"] if n["metadata"]["name"] == "cpu-d"]
    r = _k8s.analyse(nodes, {"items": []}, {"items": []})
    assert by(r, "k8s.cluster.gpu_nodes")["status"] == FAIL and r["signature"] == "k8s.cluster.gpu_nodes"


@pytest.mark.parametrize("node_names,namespaces,pods", [
    (["gpu-a"], None, ["infer-0", "trainer-0", "trainer-1", "starting-0"]),
    (None, ["batch"], ["starting-0", "rejected-0"]),
])
def test_filters(node_names, namespaces, pods):
    r = _k8s.analyse(load("nodes.json"), load("pods.json"), load("events.json"), node_names=node_names, namespaces=namespaces)
    assert [p["name"] for p in r["evidence"]["gpu_pods"]] == pods


def test_other_resource_names():
    nodes = load("nodes.json")
    nodes["items"][0]["status"]["allocatable"]["nvidia.com/mig-1g.18gb"] = "7"
    nodes["items"][0]["status"]["capacity"]["nvidia.com/mig-1g.18gb"] = "7"
    r = _k8s.analyse(nodes, {"items": []}, None, resources=["nvidia.com/gpu", "nvidia.com/mig-1g.18gb"])
    assert by(r, "k8s.node.allocatable", "gpu-a")["observed"] == "allocatable nvidia.com/gpu=8, nvidia.com/mig-1g.18gb=7"


def test_pods_not_listed_is_not_run():
    r = _k8s.analyse(load("nodes.json"), None, None, pods_error='pods is forbidden: User "x" cannot list resource "pods"')
    c = by(r, "k8s.pod.pending")
    assert c["status"] == NOT_RUN and "forbidden" in c["observed"]


@pytest.mark.parametrize("value,count", [("8", 8), (2, 2), ("0", 0), (None, None), ("100m", None)])
def test_quantity(value, count):
    assert _k8s_nodes.quantity(value) == count


# ---- record(): real subprocesses through _run.run ----

FAKE_KUBECTL = r'''fixtures = %(fixtures)r
if args[:2] == ["version", "--client"]:
    print(json.dumps({"clientVersion": {"gitVersion": "v1.32.4"}})); sys.exit(0)
if os.environ.get("FAKE_KUBECTL_DOWN") or "get" not in args:
    sys.stderr.write("The connection to the server 10.0.0.1:6443 was refused - did you specify the right host or port?\n"); sys.exit(1)
what = args[args.index("get") + 1]
if what == "pods" and os.environ.get("FAKE_KUBECTL_FORBID_PODS"):
    sys.stderr.write('Error from server (Forbidden): pods is forbidden: User "probe" cannot list resource "pods"\n'); sys.exit(1)
sys.stdout.write(open(os.path.join(fixtures, what + ".json")).read())
'''


@pytest.fixture
def fake_kubectl(tmp_path):
    return stand_in(tmp_path, FAKE_KUBECTL, fixtures=os.path.abspath(FIXTURES)) + (tmp_path,)


def test_collect_through_kubectl(fake_kubectl):
    path, kubeconfig, tmp = fake_kubectl
    r = _k8s.record(kubectl=path, kubeconfig=kubeconfig, context="lab", timeout=7)
    assert validate_record(r) == [] and r["status"] == FAIL
    assert by(r, "k8s.cluster.reachable")["status"] == PASS
    assert by(r, "k8s.node.allocatable", "gpu-b")["status"] == FAIL
    assert r["versions"] == {"kubectl": "v1.32.4"} and r["evidence"]["kubectl"]["context"] == "lab"
    calls = argv_log(tmp)
    assert calls[1] == ["--kubeconfig", kubeconfig, "--context", "lab", "--request-timeout", "7s", "get", "nodes", "-o", "json"]
    assert ["get", "pods", "--all-namespaces", "-o", "json"] == calls[2][6:]
    assert ["get", "events", "--field-selector", "reason=FailedScheduling", "--all-namespaces", "-o", "json"] == calls[3][6:]


def test_collect_per_namespace(fake_kubectl):
    path, kubeconfig, tmp = fake_kubectl
    r = _k8s.record(kubectl=path, kubeconfig=kubeconfig, namespaces=["ml", "batch"])
    assert [c[-4:-2] for c in argv_log(tmp) if "pods" in c] == [["-n", "ml"], ["-n", "batch"]]
    assert {p["namespace"] for p in r["evidence"]["gpu_pods"]} == {"ml", "batch"}


def test_unreachable_cluster_is_not_run_with_the_exact_error(fake_kubectl, monkeypatch):
    path, kubeconfig, _tmp = fake_kubectl
    monkeypatch.setenv("FAKE_KUBECTL_DOWN", "1")
    r = _k8s.record(kubectl=path, kubeconfig=kubeconfig)
    assert r["status"] == NOT_RUN and validate_record(r) == []
    assert r["reason"] == ("cluster not reachable: kubectl get nodes: The connection to the server 10.0.0.1:6443 was refused"
                           " - did you specify the right host or port?")


def test_forbidden_pods_leave_node_checks(fake_kubectl, monkeypatch):
    path, kubeconfig, _tmp = fake_kubectl
    monkeypatch.setenv("FAKE_KUBECTL_FORBID_PODS", "1")
    r = _k8s.record(kubectl=path, kubeconfig=kubeconfig)
    assert by(r, "k8s.node.allocatable", "gpu-b")["status"] == FAIL
    assert by(r, "k8s.pod.pending")["status"] == NOT_RUN and "Forbidden" in by(r, "k8s.pod.pending")["observed"]


def test_kubectl_missing_is_not_run():
    r = _k8s.record(kubectl="gpuprobe-no-such-kubectl")
    assert r["status"] == NOT_RUN and r["reason"] == "kubectl not found: gpuprobe-no-such-kubectl"


def test_kubeconfig_reason(tmp_path):
    env = {}
    assert _k8s_kubectl.kubeconfig_reason(None, env, str(tmp_path)).startswith("no kubeconfig: option kubeconfig not given, KUBECONFIG unset")
    assert _k8s_kubectl.kubeconfig_reason(str(tmp_path / "nope"), env, str(tmp_path)) == "kubeconfig %s does not exist" % (tmp_path / "nope")
    assert _k8s_kubectl.kubeconfig_reason(None, {"KUBERNETES_SERVICE_HOST": "10.0.0.1"}, str(tmp_path)) is None
    (tmp_path / ".kube").mkdir()
    (tmp_path / ".kube" / "config").write_text("{}")
    assert _k8s_kubectl.kubeconfig_reason(None, env, str(tmp_path)) is None


REAL_KUBECTL = shutil.which("kubectl")


@pytest.mark.skipif(REAL_KUBECTL is None, reason="kubectl is not installed")
def test_real_kubectl_against_a_closed_port_is_not_run(tmp_path):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: 'https://127.0.0.1:1'}\n"
        "users:\n- name: u\n  user: {token: t}\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\n")
    r = _k8s.record(kubectl=REAL_KUBECTL, kubeconfig=str(kubeconfig), timeout=5)
    assert r["status"] == NOT_RUN and r["reason"].startswith("cluster not reachable: kubectl get nodes: ")
    assert r["reason"].endswith("The connection to the server 127.0.0.1:1 was refused - did you specify the right host or port?")


def test_ready_unknown_is_never_pass():
    nodes = load("nodes.json")
    for node in nodes["items"]:
        if node["metadata"]["name"] == "gpu-a":
            node["status"]["conditions"] = [c for c in node["status"]["conditions"] if c["type"] != "Ready"]
    r = _k8s.analyse(nodes, load("pods.json"), load("events.json"), ["nvidia.com/gpu"])
    c = by(r, "k8s.node.ready", "gpu-a")
    assert (c["status"], c["observed"]) == (WARN, "Ready unknown: the node reports no Ready condition")
    assert by(r, "k8s.node.ready", "gpu-b")["status"] == PASS
