# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: the k8s layer of gpuprobe.layers: does the scheduler see the GPUs, and why is a GPU Pod Pending?

Not public API; it may change without notice. ``record`` (the layer's entry) asks kubectl (through
``_common.run.run``, with a timeout; ``kubectl.py``) for nodes, Pods and their events and, where the cluster
serves resource.k8s.io, for the Dynamic Resource Allocation objects (ResourceSlices, DeviceClasses,
ResourceClaims and their templates); ``analyse`` is the pure function that turns that JSON into the k8s layer
record: one code path from kubectl's JSON to the record. Kubernetes has two GPU paths (docs/k8s.md): the device
plugin (allocatable ``nvidia.com/gpu``, ``nvidia.com/mig-*``) and DRA (ResourceSlices of driver
``gpu.nvidia.com``); each node is placed on one, both or neither. With the host record of the node it runs on,
the layer also compares that node's published DRA devices with the GPUs and driver the host layer read. No
kubectl, no kubeconfig or an unreachable cluster make the record NOT_RUN with that exact reason: this layer is
optional and says nothing about the node's driver.

The room, by concern: ``catalogue`` (defaults, event reasons, GPU path names, CHECKS), ``kubectl`` (kubectl and the
kubeconfig, the reads), ``nodes`` (what Nodes advertise, the node checks, ``match_node``, ``host_match``,
``advertising_findings`` for the fleet report), ``pods`` (GPU Pods, why one is Pending), ``dra`` (resource.k8s.io
objects in one shape), ``handlers`` (the runtime handler the GPU Pods use), ``publish`` (node verdicts to Nodes,
module k8s_publish). Code outside the room imports ``layer``, ``catalogue``, ``nodes`` and ``publish`` only (DOORS
in tests/unit/test_layout.py).
"""

from __future__ import annotations

import socket

from ansible_collections.gpuprobe.layers.plugins.module_utils._k8s import dra
from ansible_collections.gpuprobe.layers.plugins.module_utils._k8s import handlers as _handlers
from ansible_collections.gpuprobe.layers.plugins.module_utils._k8s.catalogue import (
    CHECKS, DEFAULT_RESOURCES, DEFAULT_TIMEOUT, DRA_EVENT_REASONS, PATH_BOTH, PATH_DRA, SCHEDULING_REASON,
)
from ansible_collections.gpuprobe.layers.plugins.module_utils._k8s.kubectl import (
    NOT_SERVED, _items, _kubectl_json, _merge, collect_dra, collect_pods, kubectl_base, resolve_kubectl,
)
from ansible_collections.gpuprobe.layers.plugins.module_utils._k8s.nodes import (
    check_host_match, check_nodes, gpu_path, is_gpu_node, match_node, node_dra, node_summary,
)
from ansible_collections.gpuprobe.layers.plugins.module_utils._k8s.pods import check_pods, pod_claims, pod_events, pod_gpu_requests, pod_summary
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import NOT_RUN, PASS, WARN, LayerBuilder, not_run


def _check_dra_cluster(b, nodes, dra_info):
    """Add the cluster-wide DRA checks to ``b``: k8s.dra.api, k8s.dra.device_classes, k8s.dra.claims."""
    if dra_info["state"] != "served":
        b.add("k8s.dra.api", NOT_RUN, "resource.k8s.io", "ResourceSlices listed", dra_info["error"])
        return
    versions = ", ".join(dra_info["api_versions"]) or "no ResourceSlice in the cluster"
    b.add("k8s.dra.api", PASS, "resource.k8s.io", "ResourceSlices listed", "%d ResourceSlice(s) (%s)" % (
        dra_info["slice_count"], versions))
    on_dra = [n["name"] for n in nodes if n["path"] in (PATH_DRA, PATH_BOTH)]
    classes = dra_info["classes"]
    if classes is None:
        b.add("k8s.dra.device_classes", NOT_RUN, "DeviceClasses", "a class selecting %s" % dra.DRA_DRIVER,
              "DeviceClasses not read: %s" % dra_info["errors"].get("deviceclasses"))
    else:
        gpu = sorted(dra.gpu_class_names(classes))
        status = PASS if gpu or not on_dra else WARN
        b.add("k8s.dra.device_classes", status, "DeviceClasses", "a class selecting %s" % dra.DRA_DRIVER,
              "%s%s" % (", ".join(gpu) or "none selects %s" % dra.DRA_DRIVER,
                        "" if on_dra else " (no node on the DRA path)"))
    if dra_info["claims"] is None:
        b.add("k8s.dra.claims", NOT_RUN, "ResourceClaims", "allocated devices still published",
              "ResourceClaims not read: %s" % dra_info["errors"].get("resourceclaims"))
        return
    held = [(n["name"], c) for n in nodes for c in (n.get("dra") or {}).get("claims") or []]
    stale = [(name, c) for name, c in held if c["unpublished"]]
    for name, claim in stale:
        b.add("k8s.dra.claims", WARN, "%s/%s" % (claim["namespace"], claim["name"]), "allocated devices still published",
              "holds %s on %s, no longer published%s" % (", ".join(claim["unpublished"]), name,
                                                         "; reserved for %s" % ", ".join(claim["reserved_for"]) if claim["reserved_for"] else ""))
    if not stale:
        b.add("k8s.dra.claims", PASS, "ResourceClaims", "allocated devices still published",
              "%d claim(s) hold %d %s device(s)" % (len(held), sum(len(c["devices"]) for _n, c in held), dra.DRA_DRIVER))


def _dra_info(dra_docs):
    """Normalise the DRA documents: state served | not_served | error, and the summaries."""
    dra_docs = dra_docs or {}
    errors = dict(dra_docs.get("errors") or {})
    info = {"state": "served", "error": None, "errors": errors, "slices": [], "classes": None, "claims": None,
            "templates": None, "api_versions": [], "slice_count": 0}
    if dra_docs.get("resourceslices") is None:
        error = errors.get("resourceslices") or "ResourceSlices not collected"
        info.update(state="not_served" if NOT_SERVED.search(error) else "error", error=error)
        return info
    info["slices"] = [dra.slice_summary(s) for s in _items(dra_docs["resourceslices"])]
    info["slice_count"] = len(info["slices"])
    info["api_versions"] = sorted(set(s["api_version"] for s in info["slices"] if s["api_version"]))
    for kind, fn in (("classes", dra.class_summary), ("claims", dra.claim_summary), ("templates", dra.template_summary)):
        doc = dra_docs.get({"classes": "deviceclasses", "claims": "resourceclaims", "templates": "resourceclaimtemplates"}[kind])
        info[kind] = None if doc is None else [fn(o) for o in _items(doc)]
    return info


def analyse(nodes_json, pods_json, events_json, resources=DEFAULT_RESOURCES, node_names=None, namespaces=None,
            pods_error=None, kubectl=None, builder=None, dra_docs=None, host_record=None, hostname=None):
    """The k8s layer record from ``kubectl get ... -o json`` documents (pure).

    ``pods_json`` None with ``pods_error``: the Pods could not be listed (those checks NOT_RUN with it).
    ``dra_docs``: {resourceslices, deviceclasses, resourceclaims, resourceclaimtemplates: document or None,
    errors: {kind: kubectl error}}; a missing resourceslices document makes DRA NOT_RUN with its error (a
    cluster that serves no resource.k8s.io says so). ``events_json`` holds every event read (FailedScheduling and
    the DRA reasons). ``host_record`` (the host layer record of the node this runs on) and ``hostname``: compare
    that node's DRA devices with its GPUs (k8s.dra.host_match).
    """
    resources = list(resources or DEFAULT_RESOURCES)
    b = builder or LayerBuilder("k8s", CHECKS)
    dra_info = _dra_info(dra_docs)
    raw_nodes = _items(nodes_json)
    nodes = [node_summary(n, resources) for n in raw_nodes]
    self_node = match_node([n["name"] for n in nodes], hostname, dict((n["name"], n["hostname_label"]) for n in nodes)) \
        if host_record is not None or hostname else None
    if node_names:
        nodes = [n for n in nodes if n["name"] in node_names]
    claims = dra_info["claims"] or []
    for node in nodes:
        node["dra"] = node_dra(node["name"], dra_info["slices"], claims) if dra_info["state"] == "served" else None
        node["path"] = gpu_path(node, dra_info["state"]) if is_gpu_node(node) else None
    b.add("k8s.cluster.reachable", PASS, (kubectl or {}).get("context") or "cluster", "nodes listed", "%d nodes" % len(nodes))
    check_nodes(b, nodes, resources, dra_info)
    _check_dra_cluster(b, nodes, dra_info)
    check_host_match(b, nodes, self_node, host_record)
    pods = []
    if pods_json is not None:
        events = pod_events(events_json, (SCHEDULING_REASON,))
        dra_events = pod_events(events_json, DRA_EVENT_REASONS)
        claims_by_name = dict(((c["namespace"], c["name"]), c) for c in claims)
        templates_by_name = dict(((t["namespace"], t["name"]), t) for t in dra_info["templates"] or [])
        gpu_classes = dra.gpu_class_names(dra_info["classes"])
        known = None if dra_info["classes"] is None else set(c["name"] for c in dra_info["classes"])
        for pod in _items(pods_json):
            requests = pod_gpu_requests(pod, resources)
            pod_dra = pod_claims(pod, claims_by_name, templates_by_name, gpu_classes, known) if dra_info["state"] == "served" else None
            if not requests and not pod_dra:
                continue
            summary = pod_summary(pod, requests, events, pod_dra, dra_events)
            if namespaces and summary["namespace"] not in namespaces:
                continue
            if node_names and summary["node"] and summary["node"] not in node_names:
                continue
            pods.append(summary)
    elif pods_error is None:
        pods_error = "not collected"
    check_pods(b, pods, pods_error)
    b.evidence = {"kubectl": kubectl or {}, "resources": resources, "nodes": nodes, "gpu_pods": pods,
                  "pods_error": pods_error, "self_node": self_node,
                  "dra": {"state": dra_info["state"], "error": dra_info["error"], "errors": dra_info["errors"],
                          "api_versions": dra_info["api_versions"], "slices": dra_info["slice_count"],
                          "device_classes": dra_info["classes"],
                          "claims": None if dra_info["claims"] is None else len(dra_info["claims"])}}
    b.versions = {"kubectl": (kubectl or {}).get("version")}
    return b.build()


def record(kubectl="kubectl", kubeconfig=None, context=None, resources=DEFAULT_RESOURCES, node_names=None,
           namespaces=None, timeout=DEFAULT_TIMEOUT, host_record=None, hostname=None, dra=True, procs=None):
    """The k8s layer record, from kubectl; NOT_RUN with the exact reason when there is no cluster to ask.

    ``host_record``: the host layer record of the node this runs on (its DRA devices are compared with it; the
    node is found by ``hostname``, the machine's own name by default). ``dra`` False skips the resource.k8s.io
    reads (the DRA checks are then NOT_RUN, "not asked"). ``procs``: the node's processes, already read by the caller
    (``_runtime.nodefs.processes``), for the distribution's kubectl and kubeconfig; else /proc is read here. ``evidence.runtime_handlers``: the runtime handlers
    (RuntimeClasses) of the GPU Pods on this host's node (``handlers.runtime_handlers``), for the node's probe.
    """
    path, reason = resolve_kubectl(kubectl, kubeconfig, procs)
    if reason:
        return not_run("k8s", reason, evidence={"kubectl": {"path": path} if path else None})
    builder = LayerBuilder("k8s", CHECKS)
    base = kubectl_base(path, kubeconfig, context, timeout)
    info = {"path": path, "context": context, "kubeconfig": kubeconfig, "version": None}
    version, _err = _kubectl_json([path], ["version", "--client"], timeout)
    if version:
        info["version"] = (version.get("clientVersion") or {}).get("gitVersion")
    nodes, error = _kubectl_json(base, ["get", "nodes"], timeout)
    if error:
        return not_run("k8s", "cluster not reachable: %s" % error, evidence={"kubectl": info})
    scopes = [["-n", ns] for ns in namespaces] if namespaces else [["--all-namespaces"]]
    pod_docs, event_docs, pods_error, events_errors = collect_pods(base, scopes, timeout)
    if events_errors:
        info["events_errors"] = events_errors
    if dra:
        dra_docs, dra_events = collect_dra(base, scopes, timeout)
        event_docs.append(dra_events)
        info["events_errors"] = info.get("events_errors", []) + dra_docs["errors"].pop("events", [])
    else:
        dra_docs = {"errors": {"resourceslices": "not asked (dra: false)"}}
    if host_record is not None and hostname is None:
        hostname = socket.gethostname()
    rec = analyse(nodes, None if pods_error else _merge(pod_docs), _merge(event_docs), resources, node_names, namespaces,
                  pods_error=pods_error, kubectl=info, builder=builder, dra_docs=dra_docs, host_record=host_record,
                  hostname=hostname)
    # the runtime handler the GPU Pods of this node use (their RuntimeClass), for the node's probe (_runtime.handler)
    classes, rc_error = (None, pods_error) if pods_error else _kubectl_json(base, ["get", "runtimeclasses"], timeout)
    metas = [n.get("metadata") or {} for n in _items(nodes)]
    node = match_node([m.get("name") for m in metas], hostname or socket.gethostname(),
                      dict((m.get("name"), (m.get("labels") or {}).get("kubernetes.io/hostname")) for m in metas)).get("name")
    rec["evidence"]["runtime_handlers"] = _handlers.runtime_handlers(
        None if pods_error else _merge(pod_docs), classes, node, lambda pod: pod_gpu_requests(pod, resources), rc_error)
    return rec
