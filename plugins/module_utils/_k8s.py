# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: the k8s layer of gpuprobe.layers: does the scheduler see the GPUs, and why is a GPU Pod Pending?

Not public API; it may change without notice. ``collect_k8s`` asks ``kubectl`` (through _run.run, with a
timeout) for nodes, Pods and FailedScheduling events; ``analyse`` is the pure function that turns that JSON
into the k8s layer record. No kubectl, no kubeconfig or an unreachable cluster make the record NOT_RUN
with that exact reason: this layer is optional and says nothing about the node's driver.
"""

from __future__ import annotations

import json
import os

from ansible_collections.gpuprobe.layers.plugins.module_utils._result import (
    FAIL, NOT_RUN, PASS, WARN, LayerBuilder, not_run,
)
from ansible_collections.gpuprobe.layers.plugins.module_utils._run import first_line, run, which

DEFAULT_RESOURCES = ("nvidia.com/gpu",)
DEFAULT_TIMEOUT = 30
# Labels that say "this node has an NVIDIA GPU" (GPU feature discovery, NFD, GKE).
GPU_PRESENT_LABELS = ("nvidia.com/gpu.present", "nvidia.com/gpu.product", "nvidia.com/gpu.count",
                      "feature.node.kubernetes.io/pci-10de.present", "cloud.google.com/gke-accelerator")
GPU_LABEL_PREFIXES = ("nvidia.com/", "feature.node.kubernetes.io/pci-10de", "cloud.google.com/gke-accelerator")


def _check(title, fail, nxt):
    return {"title": title, "fail": fail, "next": nxt}


CHECKS = {
    "k8s.cluster.reachable": _check(
        "kubectl reaches the cluster and lists the nodes",
        "(NOT_RUN record) kubectl missing, no kubeconfig, or the API server did not answer: the exact error is the reason",
        "kubectl get nodes with the same kubeconfig/context"),
    "k8s.cluster.gpu_nodes": _check(
        "at least one node advertises a GPU resource (capacity > 0)",
        "the scheduler sees no GPU anywhere: every GPU Pod stays Pending",
        "is the NVIDIA device plugin (or GPU operator) deployed? kubectl get ds -A | grep -i nvidia"),
    "k8s.node.allocatable": _check(
        "a node with GPU labels or GPU capacity has allocatable GPUs",
        "device plugin advertises nothing: the node has GPU labels but 0 allocatable, so no GPU Pod lands there "
        "(this says nothing about the driver)",
        "the device plugin Pod on that node: kubectl -n <ns> logs <nvidia-device-plugin pod>; the host layer on that node"),
    "k8s.node.healthy_devices": _check(
        "allocatable equals capacity for each GPU resource",
        "(WARN) the device plugin marked some devices unhealthy (allocatable < capacity)",
        "device plugin logs (Xid / health check); the host layer on that node"),
    "k8s.node.ready": _check(
        "GPU nodes are Ready and schedulable",
        "the GPU node is NotReady (FAIL), cordoned or its Ready condition is unknown (WARN): Pods cannot use its GPUs",
        "kubectl describe node <node>"),
    "k8s.pod.pending": _check(
        "no Pod requesting a GPU resource is Pending",
        "a GPU Pod is Pending: the FailedScheduling event says why (e.g. Insufficient nvidia.com/gpu)",
        "kubectl describe pod <pod>; compare its GPU request with the nodes' allocatable"),
    "k8s.pod.admission": _check(
        "no GPU Pod was rejected at admission by the kubelet",
        "the kubelet could not allocate the GPU (UnexpectedAdmissionError): device plugin / kubelet disagree",
        "kubectl describe pod <pod>; kubelet and device plugin logs on that node"),
}


def quantity(value):
    """Integer count of an extended resource quantity ("8", 8); None when absent or not an integer."""
    if value is None:
        return None
    try:
        return int(str(value))
    except ValueError:
        return None


def _items(doc):
    return list((doc or {}).get("items") or [])


def gpu_labels(labels):
    return dict((k, v) for k, v in (labels or {}).items() if k.startswith(GPU_LABEL_PREFIXES))


def _ready(node):
    for cond in (node.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return cond.get("status") == "True"
    return None


def node_summary(node, resources):
    status = node.get("status") or {}
    labels = (node.get("metadata") or {}).get("labels") or {}
    return {
        "name": (node.get("metadata") or {}).get("name"),
        "capacity": dict((r, quantity((status.get("capacity") or {}).get(r))) for r in resources),
        "allocatable": dict((r, quantity((status.get("allocatable") or {}).get(r))) for r in resources),
        "gpu_labels": gpu_labels(labels),
        "ready": _ready(node),
        "unschedulable": bool((node.get("spec") or {}).get("unschedulable")),
    }


def pod_gpu_requests(pod, resources):
    """{resource: count} summed over the containers (limits stand for requests of extended resources)."""
    spec = pod.get("spec") or {}
    out = {}
    for container in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        res = container.get("resources") or {}
        for r in resources:
            value = quantity((res.get("limits") or {}).get(r))
            if value is None:
                value = quantity((res.get("requests") or {}).get(r))
            if value:
                out[r] = out.get(r, 0) + value
    return out


def _event_key(obj):
    return (obj.get("namespace"), obj.get("name"))


def scheduling_events(events_json):
    """{(namespace, pod name): [FailedScheduling event, ...]} newest last."""
    out = {}
    for ev in _items(events_json):
        if ev.get("reason") != "FailedScheduling":
            continue
        obj = ev.get("involvedObject") or ev.get("regarding") or {}
        if obj.get("kind") not in (None, "Pod"):
            continue
        out.setdefault(_event_key(obj), []).append({
            "reason": ev.get("reason"), "message": ev.get("message") or ev.get("note"), "count": ev.get("count"),
            "last_timestamp": ev.get("lastTimestamp") or ev.get("eventTime"),
        })
    for evs in out.values():
        evs.sort(key=lambda e: e["last_timestamp"] or "")
    return out


def pod_summary(pod, requests, events):
    meta = pod.get("metadata") or {}
    status = pod.get("status") or {}
    unschedulable = None
    for cond in status.get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            unschedulable = cond.get("message") or cond.get("reason")
    waiting = []
    for cs in status.get("containerStatuses") or []:
        w = (cs.get("state") or {}).get("waiting")
        if w:
            waiting.append("%s: %s%s" % (cs.get("name"), w.get("reason"), (" (%s)" % w["message"]) if w.get("message") else ""))
    return {
        "namespace": meta.get("namespace"), "name": meta.get("name"), "phase": status.get("phase"),
        "node": (pod.get("spec") or {}).get("nodeName"), "requests": requests, "reason": status.get("reason"),
        "message": status.get("message"), "unschedulable_message": unschedulable, "waiting": waiting,
        "events": events.get((meta.get("namespace"), meta.get("name")), []),
    }


def _fmt(counts):
    return ", ".join("%s=%s" % (k, v) for k, v in sorted(counts.items()))


def _check_nodes(b, nodes, resources):
    advertising = [n for n in nodes if any(n["capacity"][r] for r in resources)]
    b.add("k8s.cluster.gpu_nodes", PASS if advertising else FAIL, ", ".join(resources), ">= 1 node with capacity",
          "%d of %d nodes: %s" % (len(advertising), len(nodes), ", ".join(n["name"] for n in advertising) or "none"))
    for node in nodes:
        has_gpu = any(node["capacity"][r] for r in resources) or any(k in node["gpu_labels"] for k in GPU_PRESENT_LABELS)
        if not has_gpu:
            continue
        alloc = dict((r, node["allocatable"][r] or 0) for r in resources)
        cap = dict((r, node["capacity"][r] or 0) for r in resources)
        labels = ", ".join("%s=%s" % (k, node["gpu_labels"][k]) for k in GPU_PRESENT_LABELS if k in node["gpu_labels"])
        if not any(alloc.values()):
            observed = "device plugin advertises nothing: allocatable %s, capacity %s" % (_fmt(alloc), _fmt(cap))
            b.add("k8s.node.allocatable", FAIL, node["name"], "> 0 allocatable", observed + ("; labels " + labels if labels else ""))
        else:
            b.add("k8s.node.allocatable", PASS, node["name"], "> 0 allocatable", "allocatable %s" % _fmt(alloc))
            short = [r for r in resources if alloc[r] < cap[r]]
            b.add("k8s.node.healthy_devices", WARN if short else PASS, node["name"], "allocatable == capacity",
                  "allocatable %s, capacity %s" % (_fmt(alloc), _fmt(cap)))
        if node["ready"] is False:
            b.add("k8s.node.ready", FAIL, node["name"], "Ready, schedulable", "NotReady")
        elif node["unschedulable"]:
            b.add("k8s.node.ready", WARN, node["name"], "Ready, schedulable", "cordoned (spec.unschedulable)")
        elif node["ready"] is None:  # never PASS on what was not reported
            b.add("k8s.node.ready", WARN, node["name"], "Ready, schedulable",
                  "Ready unknown: the node reports no Ready condition")
        else:
            b.add("k8s.node.ready", PASS, node["name"], "Ready, schedulable", "Ready")


def _pending_observed(pod):
    if pod["events"]:
        last = pod["events"][-1]
        return "Pending: FailedScheduling: %s" % last["message"]
    if pod["unschedulable_message"]:
        return "Pending: PodScheduled False: %s" % pod["unschedulable_message"]
    return "Pending, no FailedScheduling event"


def _check_pods(b, pods, pods_error):
    if pods_error:
        for cid in ("k8s.pod.pending", "k8s.pod.admission"):
            b.add(cid, NOT_RUN, "GPU Pods", observed="Pods not listed: %s" % pods_error)
        return
    pending = [p for p in pods if p["phase"] == "Pending"]
    for pod in pending:
        subject = "%s/%s" % (pod["namespace"], pod["name"])
        if pod["node"]:  # scheduled, containers not started yet
            b.add("k8s.pod.pending", WARN, subject, "scheduled and running",
                  "Pending on %s: %s" % (pod["node"], "; ".join(pod["waiting"]) or "containers not started"))
        else:
            b.add("k8s.pod.pending", FAIL, subject, "scheduled (requests %s)" % _fmt(pod["requests"]), _pending_observed(pod))
    if not pending:
        b.add("k8s.pod.pending", PASS, "GPU Pods", "none Pending", "%d GPU Pods, none Pending" % len(pods))
    rejected = [p for p in pods if p["phase"] == "Failed" and p["reason"] == "UnexpectedAdmissionError"]
    for pod in rejected:
        b.add("k8s.pod.admission", FAIL, "%s/%s" % (pod["namespace"], pod["name"]), "admitted by the kubelet",
              "%s on %s: %s" % (pod["reason"], pod["node"], pod["message"]))
    if not rejected:
        b.add("k8s.pod.admission", PASS, "GPU Pods", "admitted by the kubelet", "no UnexpectedAdmissionError")


def analyse(nodes_json, pods_json, events_json, resources=DEFAULT_RESOURCES, node_names=None, namespaces=None,
            pods_error=None, kubectl=None, builder=None):
    """The k8s layer record from ``kubectl get nodes/pods/events -o json`` documents (pure).

    ``pods_json`` None with ``pods_error``: the Pods could not be listed (those checks NOT_RUN with it).
    """
    resources = list(resources or DEFAULT_RESOURCES)
    b = builder or LayerBuilder("k8s", CHECKS)
    nodes = [node_summary(n, resources) for n in _items(nodes_json)]
    if node_names:
        nodes = [n for n in nodes if n["name"] in node_names]
    b.add("k8s.cluster.reachable", PASS, (kubectl or {}).get("context") or "cluster", "nodes listed", "%d nodes" % len(nodes))
    _check_nodes(b, nodes, resources)
    pods = []
    if pods_json is not None:
        events = scheduling_events(events_json)
        for pod in _items(pods_json):
            requests = pod_gpu_requests(pod, resources)
            if not requests:
                continue
            summary = pod_summary(pod, requests, events)
            if namespaces and summary["namespace"] not in namespaces:
                continue
            if node_names and summary["node"] and summary["node"] not in node_names:
                continue
            pods.append(summary)
    elif pods_error is None:
        pods_error = "not collected"
    _check_pods(b, pods, pods_error)
    b.evidence = {"kubectl": kubectl or {}, "resources": resources, "nodes": nodes, "gpu_pods": pods,
                  "pods_error": pods_error}
    b.versions = {"kubectl": (kubectl or {}).get("version")}
    return b.build()


def kubeconfig_reason(kubeconfig, environ=None, home=None):
    """Why there is no cluster to talk to (None when a kubeconfig or an in-cluster service account exists)."""
    environ = os.environ if environ is None else environ
    if kubeconfig:
        return None if os.path.isfile(kubeconfig) else "kubeconfig %s does not exist" % kubeconfig
    paths = [p for p in (environ.get("KUBECONFIG") or "").split(os.pathsep) if p]
    if any(os.path.isfile(p) for p in paths):
        return None
    default = os.path.join(home or os.path.expanduser("~"), ".kube", "config")
    if os.path.isfile(default) or environ.get("KUBERNETES_SERVICE_HOST"):
        return None
    return "no kubeconfig: option kubeconfig not given, KUBECONFIG %s, %s absent, not running in a Pod" % (
        "lists no existing file (%s)" % environ["KUBECONFIG"] if paths else "unset", default)


def _last_line(text):
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _kubectl_json(base, args, timeout):
    res = run(base + args + ["-o", "json"], timeout=timeout + 5)
    if res["rc"] == 0:
        try:
            return json.loads(res["stdout"]), None
        except ValueError as exc:
            return None, "%s: output is not JSON: %s" % (" ".join(args), exc)
    # kubectl logs klog lines first; its own error message is the last line
    detail = res["error"] or _last_line(res["stderr"]) or first_line(res["stdout"]) or "rc %s" % res["rc"]
    return None, "kubectl %s: %s" % (" ".join(args), detail)


def _merge(docs):
    return {"items": [item for doc in docs for item in _items(doc)]}


def collect_k8s(kubectl="kubectl", kubeconfig=None, context=None, resources=DEFAULT_RESOURCES, node_names=None,
                namespaces=None, timeout=DEFAULT_TIMEOUT):
    """The k8s layer record, from kubectl; NOT_RUN with the exact reason when there is no cluster to ask."""
    path = kubectl if os.path.sep in kubectl else which(kubectl)
    if not path or not os.path.isfile(path):
        return not_run("k8s", "kubectl not found: %s" % kubectl, evidence={"kubectl": None})
    reason = kubeconfig_reason(kubeconfig)
    if reason:
        return not_run("k8s", reason, evidence={"kubectl": {"path": path}})
    builder = LayerBuilder("k8s", CHECKS)
    base = [path] + (["--kubeconfig", kubeconfig] if kubeconfig else []) + (["--context", context] if context else []) \
        + ["--request-timeout", "%ds" % timeout]
    info = {"path": path, "context": context, "kubeconfig": kubeconfig, "version": None}
    version, _err = _kubectl_json([path], ["version", "--client"], timeout)
    if version:
        info["version"] = (version.get("clientVersion") or {}).get("gitVersion")
    nodes, error = _kubectl_json(base, ["get", "nodes"], timeout)
    if error:
        return not_run("k8s", "cluster not reachable: %s" % error, evidence={"kubectl": info})
    scopes = [["-n", ns] for ns in namespaces] if namespaces else [["--all-namespaces"]]
    pod_docs, event_docs, pods_error = [], [], None
    for scope in scopes:
        doc, err = _kubectl_json(base, ["get", "pods"] + scope, timeout)
        if err:
            pods_error = err
            break
        pod_docs.append(doc)
        doc, err = _kubectl_json(base, ["get", "events", "--field-selector", "reason=FailedScheduling"] + scope, timeout)
        event_docs.append(doc if not err else None)
        if err:
            info.setdefault("events_errors", []).append(err)
    return analyse(nodes, None if pods_error else _merge(pod_docs), _merge(event_docs), resources, node_names, namespaces,
                   pods_error=pods_error, kubectl=info, builder=builder)
