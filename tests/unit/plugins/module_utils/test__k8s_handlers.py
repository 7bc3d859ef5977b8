"""The runtime handler the GPU Pods use (_k8s.handlers): GPU Operator's RuntimeClasses (tests/unit/fixtures/engines/live,
from gpu-operator's assets) and Pods naming them, read through the stand-in kubectl as the k8s layer reads the cluster."""
import json
import os

from kubectlfixture import argv_log, stand_in  # tests/conftest.py puts tests/unit/fixtures/k8s on sys.path

from ansible_collections.gpuprobe.layers.plugins.module_utils._k8s import handlers as K
from ansible_collections.gpuprobe.layers.plugins.module_utils._k8s.layer import record as k8s_record
from ansible_collections.gpuprobe.layers.plugins.module_utils._k8s.pods import pod_gpu_requests

LIVE = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "engines", "live")
RESOURCES = ("nvidia.com/gpu",)


def classes():
    with open(os.path.join(LIVE, "gpu-operator-runtimeclasses.json")) as fh:
        return json.load(fh)


def pod(name, node, runtime_class=None, gpus=1, phase="Running"):
    spec = {"nodeName": node, "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}} if gpus else {}}]}
    if runtime_class:
        spec["runtimeClassName"] = runtime_class
    return {"metadata": {"namespace": "ml", "name": name}, "spec": spec, "status": {"phase": phase}}


def requests(p):
    return pod_gpu_requests(p, RESOURCES)


def test_gpu_operator_runtime_classes_map_to_their_handlers():
    assert K.runtime_classes(classes()) == {"nvidia": "nvidia", "nvidia-cdi": "nvidia-cdi", "nvidia-legacy": "nvidia-legacy"}


def test_the_gpu_pods_of_this_node_and_their_handlers():
    pods = {"items": [pod("a", "gpu-1", "nvidia-cdi"), pod("b", "gpu-1"), pod("c", "gpu-2", "nvidia-legacy"),
                      pod("d", "gpu-1", "gone-class"), pod("e", "gpu-1", "nvidia", gpus=0), pod("f", "gpu-1", "nvidia", phase="Succeeded")]}
    out = K.runtime_handlers(pods, classes(), "gpu-1", requests)
    assert out["error"] is None and out["node"] == "gpu-1"
    assert [(p["name"], p["on_this_node"], p["runtime_class"], p["handler"]) for p in out["gpu_pods"]] == [
        ("a", True, "nvidia-cdi", "nvidia-cdi"), ("b", True, None, ""), ("c", False, "nvidia-legacy", "nvidia-legacy"),
        ("d", True, "gone-class", None)]
    assert K.runtime_handlers(pods, None, "gpu-1", requests, error="forbidden")["error"] == "forbidden"


BODY = r'''
kind = args[args.index("get") + 1] if "get" in args else None
docs = %(docs)r
if args[:1] == ["version"]:
    print(json.dumps({"clientVersion": {"gitVersion": "v1.32.4"}}))
elif kind in docs:
    print(json.dumps(docs[kind]))
elif kind == "runtimeclasses" and os.environ.get("FAKE_RC_FORBIDDEN"):
    sys.stderr.write('Error from server (Forbidden): runtimeclasses.node.k8s.io is forbidden\n'); sys.exit(1)
else:
    print(json.dumps({"items": []}))
'''


def test_collect_reads_the_runtime_classes(tmp_path, monkeypatch):
    nodes = {"items": [{"metadata": {"name": "gpu-1", "labels": {"kubernetes.io/hostname": "gpu-1"}}, "status": {}}]}
    docs = {"nodes": nodes, "pods": {"items": [pod("a", "gpu-1", "nvidia-cdi")]}, "runtimeclasses": classes()}
    path, kubeconfig = stand_in(tmp_path, BODY, docs=docs)
    record = k8s_record(kubectl=path, kubeconfig=kubeconfig, hostname="gpu-1", dra=False)
    found = record["evidence"]["runtime_handlers"]
    assert found["node"] == "gpu-1" and found["gpu_pods"][0]["handler"] == "nvidia-cdi"
    assert ["get", "runtimeclasses", "-o", "json"] in [a[-4:] for a in argv_log(tmp_path)]
    docs.pop("runtimeclasses")
    monkeypatch.setenv("FAKE_RC_FORBIDDEN", "1")
    path, kubeconfig = stand_in(tmp_path, BODY, docs=docs)
    found = k8s_record(kubectl=path, kubeconfig=kubeconfig, hostname="gpu-1", dra=False)["evidence"]["runtime_handlers"]
    assert "Forbidden" in found["error"] and found["gpu_pods"] == []
