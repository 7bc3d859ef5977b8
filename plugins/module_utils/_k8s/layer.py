# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: the k8s layer of gpuprobe.layers: does the scheduler see the GPUs, and why is a GPU Pod Pending?

Not public API; it may change without notice. ``collect_k8s`` asks ``kubectl`` (through _run.run, with a
timeout) for nodes, Pods and their events and, where the cluster serves resource.k8s.io, for the Dynamic
Resource Allocation objects (ResourceSlices, DeviceClasses, ResourceClaims and their templates); ``analyse`` is
the pure function that turns that JSON into the k8s layer record: one code path from kubectl's JSON to the
record. Kubernetes has two GPU paths (docs/k8s.md): the device plugin (allocatable ``nvidia.com/gpu``,
``nvidia.com/mig-*``) and DRA (ResourceSlices of driver ``gpu.nvidia.com``); each node is placed on one, both or
neither. With the host record of the node it runs on, the layer also compares that node's published DRA devices
with the GPUs and driver the host layer read. No kubectl, no kubeconfig or an unreachable cluster make the
record NOT_RUN with that exact reason: this layer is optional and says nothing about the node's driver.
"""

from __future__ import annotations

import json
import os
import re
import socket

from ansible_collections.gpuprobe.layers.plugins.module_utils._k8s import dra as dra
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import (
    COMPUTE_VERIFIED, FAIL, NOT_RUN, PASS, WARN, LayerBuilder, not_run,
)
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.run import first_line, run, which

DEFAULT_RESOURCES = ("nvidia.com/gpu",)
DEFAULT_TIMEOUT = 30
# Labels that say "this node has an NVIDIA GPU" (GPU feature discovery, NFD, GKE).
GPU_PRESENT_LABELS = ("nvidia.com/gpu.present", "nvidia.com/gpu.product", "nvidia.com/gpu.count",
                      "feature.node.kubernetes.io/pci-10de.present", "cloud.google.com/gke-accelerator")
GPU_LABEL_PREFIXES = ("nvidia.com/", "feature.node.kubernetes.io/pci-10de", "cloud.google.com/gke-accelerator")
# Device plugin resources found in a node's capacity besides the ones asked for (MIG strategy "mixed").
DEVICE_PLUGIN_RESOURCE = re.compile(r"^nvidia\.com/(gpu|mig-[A-Za-z0-9.+-]+)$")
PATH_DEVICE_PLUGIN, PATH_DRA, PATH_BOTH, PATH_NEITHER, PATH_UNKNOWN = "device_plugin", "dra", "both", "neither", "unknown"
# The events the layer reads for GPU Pods: the scheduler's, the kubelet's DRA prepare failures (pkg/kubelet/events
# FailedPrepareDynamicResources, emitted by kuberuntime_manager "Failed to prepare dynamic resources: %v") and the
# resourceclaim controller's failure to create a Pod's claim from its template (FailedResourceClaimCreation).
SCHEDULING_REASON = "FailedScheduling"
DRA_EVENT_REASONS = ("FailedPrepareDynamicResources", "FailedResourceClaimCreation")
# kubectl's words when the server does not serve a resource type at all (a cluster without resource.k8s.io)
NOT_SERVED = re.compile(r"doesn't have a resource type|the server could not find the requested resource", re.I)


def _check(title, fail, nxt):
    return {"title": title, "fail": fail, "next": nxt}


CHECKS = {
    "k8s.cluster.reachable": _check(
        "kubectl reaches the cluster and lists the nodes",
        "(NOT_RUN record) kubectl missing, no kubeconfig, or the API server did not answer: the exact error is the reason",
        "kubectl get nodes with the same kubeconfig/context"),
    "k8s.cluster.gpu_nodes": _check(
        "at least one node advertises GPUs: device plugin capacity > 0, or DRA devices of driver gpu.nvidia.com",
        "the scheduler sees no GPU anywhere: every GPU Pod stays Pending",
        "is the NVIDIA device plugin (or GPU operator) or NVIDIA's DRA driver deployed? kubectl get ds -A | grep -i nvidia"),
    "k8s.node.gpu_path": _check(
        "each GPU node is on exactly one GPU path: the device plugin (allocatable nvidia.com/gpu, nvidia.com/mig-*) or "
        "DRA (ResourceSlices of driver gpu.nvidia.com)",
        "both paths advertise this node's GPUs (the same GPU can go to two Pods; NVIDIA's DRA chart refuses this unless "
        "gpuResourcesEnabledOverride is set), or neither does (NOT_RUN when the ResourceSlices could not be read: "
        "neither one path nor both can be told then)",
        "kubectl get ds -A | grep -i nvidia (device plugin and DRA kubelet plugin on that node); "
        "kubectl get resourceslices --field-selector spec.nodeName=<node>"),
    "k8s.node.allocatable": _check(
        "a device plugin node (or a GPU node on no path) has allocatable GPUs",
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
    "k8s.dra.api": _check(
        "the cluster serves resource.k8s.io and its ResourceSlices can be read (v1, v1beta2 or v1beta1)",
        "(NOT_RUN) the cluster serves no resource.k8s.io API (no DRA path is possible there) or the read was refused: "
        "the exact kubectl error",
        "kubectl api-resources --api-group=resource.k8s.io; RBAC: list resourceslices, deviceclasses, resourceclaims"),
    "k8s.dra.device_classes": _check(
        "a DeviceClass selects driver gpu.nvidia.com's devices when a node is on the DRA path",
        "(WARN) no DeviceClass selects gpu.nvidia.com: a claim has no class to name these GPUs by",
        "kubectl get deviceclasses -o yaml (NVIDIA's chart installs gpu.nvidia.com, mig.nvidia.com)"),
    "k8s.dra.devices": _check(
        "the DRA driver publishes at least one device for a node on the DRA path",
        "the node's gpu.nvidia.com ResourceSlices publish no device: no claim can be allocated there (this says "
        "nothing about the driver)",
        "the DRA kubelet plugin on that node: kubectl -n <ns> logs <gpu-kubelet-plugin pod> -c gpus; the host layer on that node"),
    "k8s.dra.pool": _check(
        "the node's pool is complete: as many slices of the newest generation as resourceSliceCount, no older generation",
        "(WARN) the pool is incomplete or mid-update (the DRA driver is republishing, or failed to): the scheduler "
        "allocates only from the newest generation, and an 'All' request fails on an incomplete pool",
        "kubectl get resourceslices --field-selector spec.nodeName=<node> -o yaml (spec.pool); the DRA kubelet plugin's log"),
    "k8s.dra.device_taints": _check(
        "no published GPU device carries a NoSchedule/NoExecute device taint",
        "(WARN) the DRA driver tainted devices (gpu.nvidia.com/xid, gpu.nvidia.com/gpu-lost): the scheduler does not "
        "allocate them unless a claim tolerates the taint",
        "the device's taints in its ResourceSlice; the host layer's health checks (Xid) on that node"),
    "k8s.dra.claims": _check(
        "every ResourceClaim allocated to a gpu.nvidia.com device holds a device that is still published",
        "(WARN) a claim holds a device its node no longer publishes (GPU lost, driver republished without it)",
        "kubectl get resourceclaim <claim> -o yaml (status.allocation, reservedFor); the node's ResourceSlices"),
    "k8s.dra.host_match": _check(
        "each GPU device this node publishes through DRA is a GPU the host layer read: same UUID, minor attribute, "
        "PCI bus id, driver version; name gpu-<minor> or gpu-<published index>",
        "the slice advertises a GPU the node does not have, a wrong minor attribute, another bus id, or a driver other "
        "than the loaded one (WARN: a host GPU the driver does not publish, a name or index nothing published explains); "
        "NOT_RUN for a device of which nothing could be compared (vfio, a MIG device without parentUUID on a host that "
        "lists no MIG UUID) and without the node's host record",
        "the DRA kubelet plugin on that node (restart it after a driver change); compare kubectl get resourceslices "
        "-o yaml with nvidia-smi -q"),
    "k8s.pod.pending": _check(
        "no Pod requesting a GPU (resource or DRA claim) is Pending",
        "a GPU Pod is Pending: the scheduler's message says why, mapped to a cause (Insufficient nvidia.com/gpu, "
        "cannot allocate all claims, ResourceClaim not created yet, device class does not exist, ...)",
        "kubectl describe pod <pod>; the hint of the check names what to look at for its cause"),
    "k8s.pod.prepare": _check(
        "the kubelet prepared the DRA claims of every scheduled GPU Pod (no FailedPrepareDynamicResources event)",
        "the kubelet could not prepare the Pod's claim on its node: the DRA kubelet plugin is not registered there, or "
        "its NodePrepareResources failed (CDI spec, MIG, sharing config, a held GPU)",
        "kubectl describe pod <pod>; the DRA kubelet plugin's log on that node; the cdi and host layers of that node"),
    "k8s.pod.admission": _check(
        "no GPU Pod was rejected at admission by the kubelet",
        "the kubelet could not allocate the GPU (UnexpectedAdmissionError): device plugin / kubelet disagree",
        "kubectl describe pod <pod>; kubelet and device plugin logs on that node"),
}


def _cause(cause_id, pattern, cause, nxt):
    return {"id": cause_id, "pattern": re.compile(pattern, re.I), "cause": cause, "next": nxt}


# Why a GPU Pod is Pending, from the scheduler's and the controllers' own words (tests/unit/fixtures/k8s/README.md
# cites the source of each message). First match wins; the message itself is always kept in the check.
PENDING_CAUSES = (
    _cause("claim_not_created", r"ResourceClaim not created yet|FailedResourceClaimCreation",
           "the resourceclaim controller has not created the Pod's claim from its ResourceClaimTemplate",
           "kubectl describe pod <pod> (FailedResourceClaimCreation); kubectl get resourceclaimtemplates -n <ns>; "
           "kube-controller-manager's log"),
    _cause("device_class_missing", r"device class \S+ does not exist|could not retrieve device class",
           "the claim names a DeviceClass that does not exist",
           "kubectl get deviceclasses (NVIDIA's chart installs gpu.nvidia.com, mig.nvidia.com); the claim's deviceClassName"),
    _cause("claim_elsewhere", r"resourceclaim not available on the node",
           "the claim is already allocated to another node (a shared claim, or an allocation left over) and this Pod "
           "cannot go there",
           "kubectl get resourceclaim <claim> -o yaml: status.allocation.nodeSelector and reservedFor"),
    _cause("claim_deleting", r"resourceclaim \S+ is being deleted", "the Pod's claim is being deleted",
           "kubectl get resourceclaim <claim> -o yaml (finalizers, deletionTimestamp)"),
    _cause("claim_not_for_pod", r"was not created for pod", "the claim belongs to another Pod (pod is not owner)",
           "kubectl get resourceclaim <claim> -o yaml (ownerReferences)"),
    _cause("cannot_allocate", r"cannot allocate all claims",
           "no node has free devices that satisfy the claims: all gpu.nvidia.com devices allocated, the selectors or "
           "constraints match none, or the devices are tainted",
           "kubectl get resourceclaims -A (who holds the devices); kubectl get resourceslices -o yaml (devices, taints); "
           "the claim's selectors"),
    _cause("insufficient_resource", r"Insufficient nvidia\.com/",
           "no node has that many allocatable GPUs of this resource (device plugin path)",
           "compare the Pod's GPU request with the nodes' allocatable (kubectl describe nodes)"),
)
# Why the kubelet could not prepare a scheduled Pod's claims (FailedPrepareDynamicResources messages).
PREPARE_CAUSES = (
    _cause("plugin_not_registered", r"not found in the list of registered DRA plugins",
           "the DRA driver's kubelet plugin is not registered on that node (not running, or crashed)",
           "kubectl -n <ns> get pods -o wide | grep kubelet-plugin (on that node) and its log"),
    _cause("prepare_timeout", r"DeadlineExceeded|context deadline exceeded",
           "NodePrepareResources timed out (a process holds the GPU, the plugin hangs)",
           "the kubelet plugin's log; processes holding /dev/nvidia* on that node (the host layer's busy check)"),
    _cause("prepare_failed", r"NodePrepareResources failed for claim|error preparing devices",
           "the DRA driver failed to prepare the device for the claim (its CDI spec, MIG, sharing or opaque config)",
           "the kubelet plugin's log (-c gpus) on that node; the cdi layer of that node (its per-claim specs)"),
)


def explain(message, causes=PENDING_CAUSES):
    """(cause id, cause, what to look at next) for a scheduler/kubelet message; (None, None, None) when unknown."""
    for entry in causes:
        if message and entry["pattern"].search(message):
            return entry["id"], entry["cause"], entry["next"]
    return None, None, None


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


def node_resources(node, resources):
    """The GPU resources to report for a node: the ones asked for, and any nvidia.com/gpu or nvidia.com/mig-*
    its capacity or allocatable lists (a mixed MIG strategy advertises one resource per profile)."""
    status = node.get("status") or {}
    found = set(resources)
    for key in list((status.get("capacity") or {})) + list((status.get("allocatable") or {})):
        if DEVICE_PLUGIN_RESOURCE.match(key):
            found.add(key)
    return list(resources) + sorted(found - set(resources))


def node_summary(node, resources):
    status = node.get("status") or {}
    labels = (node.get("metadata") or {}).get("labels") or {}
    names = node_resources(node, resources)
    return {
        "name": (node.get("metadata") or {}).get("name"),
        "capacity": dict((r, quantity((status.get("capacity") or {}).get(r))) for r in names),
        "allocatable": dict((r, quantity((status.get("allocatable") or {}).get(r))) for r in names),
        "gpu_labels": gpu_labels(labels),
        "hostname_label": labels.get("kubernetes.io/hostname"),
        "ready": _ready(node),
        "unschedulable": bool((node.get("spec") or {}).get("unschedulable")),
    }


def pod_gpu_requests(pod, resources):
    """{resource: count} summed over the containers (limits stand for requests of extended resources): the
    resources asked for, and any nvidia.com/gpu or nvidia.com/mig-* the Pod names."""
    spec = pod.get("spec") or {}
    out = {}
    for container in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        res = container.get("resources") or {}
        named = set(list(res.get("limits") or {}) + list(res.get("requests") or {}))
        for r in list(resources) + sorted(k for k in named if DEVICE_PLUGIN_RESOURCE.match(k) and k not in resources):
            value = quantity((res.get("limits") or {}).get(r))
            if value is None:
                value = quantity((res.get("requests") or {}).get(r))
            if value:
                out[r] = out.get(r, 0) + value
    return out


def _event_key(obj):
    return (obj.get("namespace"), obj.get("name"))


def pod_events(events_json, reasons=(SCHEDULING_REASON,)):
    """{(namespace, pod name): [event, ...]} of the given reasons, newest last."""
    out = {}
    for ev in _items(events_json):
        if ev.get("reason") not in reasons:
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


def scheduling_events(events_json):
    """{(namespace, pod name): [FailedScheduling event, ...]} newest last."""
    return pod_events(events_json, (SCHEDULING_REASON,))


def pod_claims(pod, claims_by_name, templates_by_name, gpu_classes, known_classes=None):
    """The Pod's DRA claims (spec.resourceClaims), each resolved as the scheduler resolves it
    (k8s.io/dynamic-resource-allocation resourceclaim.Name): a named claim, or the claim generated from a
    template (status.resourceClaimStatuses); None for a Pod that asks for no GPU through DRA."""
    meta = pod.get("metadata") or {}
    ns = meta.get("namespace")
    statuses = dict((s.get("name"), s.get("resourceClaimName")) for s in (pod.get("status") or {}).get("resourceClaimStatuses") or [])
    out = []
    for ref in (pod.get("spec") or {}).get("resourceClaims") or []:
        entry = {"name": ref.get("name"), "claim": None, "template": ref.get("resourceClaimTemplateName"), "state": None,
                 "device_classes": [], "allocated": False, "devices": [], "reserved_for": []}
        claim = None
        if ref.get("resourceClaimName"):
            entry["claim"] = ref["resourceClaimName"]
        elif ref.get("resourceClaimTemplateName"):
            entry["claim"] = statuses.get(ref.get("name"))
        if entry["claim"]:
            claim = claims_by_name.get((ns, entry["claim"]))
            entry["state"] = "missing" if claim is None else (
                "deleting" if claim["deleting"] else "allocated" if claim["allocated"] else "pending")
        else:
            entry["state"] = "not created"
        if claim is not None:
            entry["device_classes"] = sorted(set(c for r in claim["requests"] for c in r["device_classes"]))
            entry["allocated"] = claim["allocated"]
            entry["devices"] = ["%s/%s/%s" % (r["driver"], r["pool"], r["device"]) for r in (claim["allocation"] or {}).get("results", [])]
            entry["reserved_for"] = claim["reserved_for"]
        elif entry["template"]:
            template = templates_by_name.get((ns, entry["template"]))
            if template:
                entry["device_classes"] = sorted(set(c for r in template["requests"] for c in r["device_classes"]))
        out.append(entry)
    gpu = [c for c in out if set(c["device_classes"]) & gpu_classes or any(d.startswith(dra.DRA_DRIVER + "/") for d in c["devices"])
           or (known_classes is not None and set(c["device_classes"]) - known_classes)
           or (not c["device_classes"] and not c["devices"])]  # unresolved: cannot tell it is not a GPU claim
    return out if gpu else None


def pod_summary(pod, requests, events, claims=None, dra_events=None):
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
    key = (meta.get("namespace"), meta.get("name"))
    return {
        "namespace": meta.get("namespace"), "name": meta.get("name"), "phase": status.get("phase"),
        "node": (pod.get("spec") or {}).get("nodeName"), "requests": requests, "reason": status.get("reason"),
        "message": status.get("message"), "unschedulable_message": unschedulable, "waiting": waiting,
        "events": events.get(key, []), "claims": claims or [], "dra_events": (dra_events or {}).get(key, []),
    }


def _fmt(counts):
    return ", ".join("%s=%s" % (k, v) for k, v in sorted(counts.items()))


def device_summary(device):
    attrs = device["attributes"]
    return {"name": device["name"], "pool": device["pool"], "type": dra.device_type(device), "uuid": attrs.get("uuid"),
            "parent_uuid": attrs.get("parentUUID"), "product_name": attrs.get("productName"),
            "driver_version": attrs.get("driverVersion"), "cuda_driver_version": attrs.get("cudaDriverVersion"),
            "pci_bus_id": attrs.get(dra.PCI_BUS_ID_ATTRIBUTE), "minor": attrs.get("minor"), "index": attrs.get("index"),
            "taints": device["taints"]}


def node_dra(name, slices, claims):
    """The DRA evidence of one node: its gpu.nvidia.com pools, devices (newest generation) and the claims
    allocated to them."""
    mine = dra.node_slices(slices, name)
    devices = dra.current_devices(mine)
    held = dra.claims_on_node(claims, devices, name)
    return {
        "slices": [{"name": s["name"], "api_version": s["api_version"], "pool": s["pool"], "devices": len(s["devices"])} for s in mine],
        "pools": dra.pool_state(mine),
        "devices": [device_summary(d) for d in devices],
        "claims": [{"namespace": c["namespace"], "name": c["name"], "devices": c["devices_here"],
                    "unpublished": c["unpublished"], "reserved_for": c["reserved_for"]} for c in held],
    }


def gpu_path(node, dra_state):
    """device_plugin | dra | both | neither | unknown (the ResourceSlices were not read and the device plugin
    advertises nothing)."""
    plugin = any(node["capacity"].get(r) or node["allocatable"].get(r) for r in node["capacity"])
    if dra_state == "error":
        return PATH_DEVICE_PLUGIN if plugin else PATH_UNKNOWN
    on_dra = bool(node.get("dra") and node["dra"]["slices"])
    if plugin and on_dra:
        return PATH_BOTH
    return PATH_DEVICE_PLUGIN if plugin else PATH_DRA if on_dra else PATH_NEITHER


def _devices_text(devices):
    return ", ".join("%s (%s)" % (d["name"], d["uuid"] or d["type"]) for d in devices) or "none"


def _check_path(b, node, dra_info):
    path, subject = node["path"], node["name"]
    expected = "one GPU path: device plugin or DRA (%s)" % dra.DRA_DRIVER
    plugin = _fmt(dict((r, q) for r, q in node["allocatable"].items() if q)) or "nothing allocatable"
    devices = len((node.get("dra") or {}).get("devices") or [])
    if path == PATH_BOTH:
        b.add("k8s.node.gpu_path", FAIL, subject, expected,
              "both: device plugin allocatable %s and %d DRA device(s) of %s" % (plugin, devices, dra.DRA_DRIVER))
    elif path == PATH_DEVICE_PLUGIN:
        if dra_info["state"] == "error":  # DRA unread: "both" cannot be excluded
            b.add("k8s.node.gpu_path", NOT_RUN, subject, expected, "device plugin: allocatable %s; DRA unknown: "
                  "ResourceSlices not read: %s" % (plugin, dra_info["error"]))
            return
        dra_text = "the cluster serves no resource.k8s.io (no DRA)" if dra_info["state"] == "not_served" else \
            "no ResourceSlice of %s" % dra.DRA_DRIVER
        b.add("k8s.node.gpu_path", PASS, subject, expected, "device plugin: allocatable %s; %s" % (plugin, dra_text))
    elif path == PATH_DRA:
        b.add("k8s.node.gpu_path", PASS, subject, expected, "DRA: %d device(s) of %s in %d slice(s); no device plugin resource"
              % (devices, dra.DRA_DRIVER, len(node["dra"]["slices"])))
    elif path == PATH_NEITHER:
        b.add("k8s.node.gpu_path", FAIL, subject, expected, "neither: no device plugin resource and %s" % (
            "the cluster serves no resource.k8s.io" if dra_info["state"] == "not_served" else "no ResourceSlice of %s" % dra.DRA_DRIVER))
    else:
        b.add("k8s.node.gpu_path", NOT_RUN, subject, expected,
              "no device plugin resource; DRA unknown: ResourceSlices not read: %s" % dra_info["error"])


def _check_plugin_node(b, node, resources):
    alloc = dict((r, node["allocatable"][r] or 0) for r in node["allocatable"])
    cap = dict((r, node["capacity"][r] or 0) for r in node["capacity"])
    # the resources asked for, and the others the node has (a mixed MIG strategy's nvidia.com/mig-*)
    shown = [r for r in alloc if r in resources or alloc[r] or cap[r]]
    labels = ", ".join("%s=%s" % (k, node["gpu_labels"][k]) for k in GPU_PRESENT_LABELS if k in node["gpu_labels"])
    if not any(alloc.values()):
        observed = "device plugin advertises nothing: allocatable %s, capacity %s" % (
            _fmt(dict((r, alloc[r]) for r in shown)), _fmt(dict((r, cap[r]) for r in shown)))
        b.add("k8s.node.allocatable", FAIL, node["name"], "> 0 allocatable", observed + ("; labels " + labels if labels else ""))
        return
    b.add("k8s.node.allocatable", PASS, node["name"], "> 0 allocatable", "allocatable %s" % _fmt(
        dict((r, alloc[r]) for r in shown)))
    short = [r for r in alloc if alloc[r] < cap[r]]
    b.add("k8s.node.healthy_devices", WARN if short else PASS, node["name"], "allocatable == capacity",
          "allocatable %s, capacity %s" % (_fmt(dict((r, alloc[r]) for r in shown)), _fmt(dict((r, cap[r]) for r in shown))))


def _check_dra_node(b, node):
    info = node["dra"]
    devices = info["devices"]
    if devices:
        b.add("k8s.dra.devices", PASS, node["name"], ">= 1 device of %s" % dra.DRA_DRIVER,
              "%d device(s): %s" % (len(devices), _devices_text(devices)))
    else:
        b.add("k8s.dra.devices", FAIL, node["name"], ">= 1 device of %s" % dra.DRA_DRIVER,
              "DRA driver publishes no device: %d slice(s) of %s, 0 devices" % (len(info["slices"]), dra.DRA_DRIVER))
    for pool in info["pools"]:
        ok = pool["complete"] and not pool["older_slices"]
        b.add("k8s.dra.pool", PASS if ok else WARN, "%s pool %s" % (node["name"], pool["pool"]),
              "complete, newest generation only", "generation %s: %d of %d slice(s)%s" % (
                  pool["generation"], pool["slices"], pool["resource_slice_count"],
                  ", %d slice(s) of older generations" % pool["older_slices"] if pool["older_slices"] else ""))
    tainted = [(d, dra.blocking_taints(d)) for d in devices]
    tainted = [(d, t) for d, t in tainted if t]
    others = [(d, d["taints"]) for d in devices if d["taints"] and not dra.blocking_taints(d)]
    if tainted:
        b.add("k8s.dra.device_taints", WARN, node["name"], "no NoSchedule/NoExecute device taint",
              "; ".join("%s: %s" % (d["name"], ", ".join(dra.taint_text(t) for t in taints)) for d, taints in tainted))
    elif devices:
        b.add("k8s.dra.device_taints", PASS, node["name"], "no NoSchedule/NoExecute device taint", "none blocking%s" % (
            " (effect None: %s)" % "; ".join("%s: %s" % (d["name"], ", ".join(dra.taint_text(t) for t in ts)) for d, ts in others)
            if others else ""))


def _gpu_node(node):
    return (any(node["capacity"].values()) or any(node["allocatable"].values())
            or any(k in node["gpu_labels"] for k in GPU_PRESENT_LABELS) or bool((node.get("dra") or {}).get("slices")))


def _check_nodes(b, nodes, resources, dra_info):
    advertising = [n for n in nodes if any(n["capacity"].values()) or (n.get("dra") or {}).get("devices")]
    b.add("k8s.cluster.gpu_nodes", PASS if advertising else FAIL, ", ".join(resources) + " or DRA %s" % dra.DRA_DRIVER,
          ">= 1 node advertising GPUs",
          "%d of %d nodes: %s" % (len(advertising), len(nodes), ", ".join(n["name"] for n in advertising) or "none"))
    for node in nodes:
        if not _gpu_node(node):
            continue
        if node["path"] in (PATH_DEVICE_PLUGIN, PATH_NEITHER, PATH_UNKNOWN, PATH_BOTH):
            _check_plugin_node(b, node, resources)
        _check_path(b, node, dra_info)
        if node["path"] in (PATH_DRA, PATH_BOTH):
            _check_dra_node(b, node)
        if node["ready"] is False:
            b.add("k8s.node.ready", FAIL, node["name"], "Ready, schedulable", "NotReady")
        elif node["unschedulable"]:
            b.add("k8s.node.ready", WARN, node["name"], "Ready, schedulable", "cordoned (spec.unschedulable)")
        elif node["ready"] is None:  # never PASS on what was not reported
            b.add("k8s.node.ready", WARN, node["name"], "Ready, schedulable",
                  "Ready unknown: the node reports no Ready condition")
        else:
            b.add("k8s.node.ready", PASS, node["name"], "Ready, schedulable", "Ready")


def _check_dra_cluster(b, nodes, dra_info):
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


# ---- the node's own DRA devices against its host record ----

def _host_gpus(host_record):
    ev = (host_record or {}).get("evidence") or {}
    return [g for g in ev.get("gpus") or [] if isinstance(g, dict)]


def _host_mig_uuids(gpus):
    return set(dra.uuid_key(i.get("uuid")) for g in gpus for i in ((g.get("mig") or {}).get("instances") or []) if i.get("uuid"))


def _driver_version_row(dev, driver, problems, matched, skipped):
    """Compare a device's driverVersion with the loaded driver, as numbers per part; a version either side that is
    not numbers is "not compared" (in ``skipped``), never equal."""
    if not dev["driver_version"] or not driver:
        return
    published, loaded = dra.version_key(dev["driver_version"]), dra.version_key(driver)
    if published is None or loaded is None:
        skipped.append("driverVersion %s against loaded driver %s not compared (not numeric)" % (dev["driver_version"], driver))
    elif published != loaded:
        problems.append("driverVersion %s, loaded driver %s" % (dev["driver_version"], driver))
    else:
        matched.append("driver %s" % driver)


def _host_match_row(subject, expected, ident, found, nothing):
    """One row from ``found`` {problems, matched, unsure, skipped}: FAIL on a mismatch, WARN on something published
    that nothing explains, PASS only when something was compared and agreed, NOT_RUN (``nothing``: why) when nothing
    was compared. What was not compared is said in every row."""
    skipped = "".join("; %s" % text for text in found["skipped"])
    if found["problems"]:
        return (FAIL, subject, expected, "; ".join(found["problems"]) + skipped)
    if found["unsure"]:
        return (WARN, subject, expected, "%s: %s%s%s" % (ident, "; ".join(found["unsure"]),
                                                         "; matched " + ", ".join(found["matched"]) if found["matched"] else "", skipped))
    if found["matched"]:
        return (PASS, subject, expected, "%s: %s%s" % (ident, ", ".join(found["matched"]), skipped))
    return (NOT_RUN, subject, expected, "; ".join([nothing] + found["skipped"]))


def host_match(node, host_record):
    """[(status, subject, expected, observed)] comparing the node's published gpu.nvidia.com devices with the GPUs
    and the loaded driver of its host record (pure). A device of which nothing could be compared is NOT_RUN with
    why, never PASS."""
    gpus = _host_gpus(host_record)
    driver = ((host_record or {}).get("versions") or {}).get("driver")
    by_uuid = dict((dra.uuid_key(g.get("uuid")), g) for g in gpus if g.get("uuid"))
    rows = []
    seen = set()
    for dev in node["dra"]["devices"]:
        kind = dev["type"]
        subject = "%s %s" % (node["name"], dev["name"])
        if kind == "vfio":
            rows.append((NOT_RUN, subject, "not compared",
                         "vfio device (bound to vfio-pci, not visible to NVML): not compared with the host record"))
            continue
        if kind == "mig":
            parent = by_uuid.get(dra.uuid_key(dev["parent_uuid"]))
            migs = _host_mig_uuids(gpus)
            found = dict(problems=[], matched=[], unsure=[], skipped=[])
            problems, matched = found["problems"], found["matched"]
            if dev["parent_uuid"]:
                if parent is None:
                    problems.append("parent GPU %s is not a GPU of this host" % dev["parent_uuid"])
                else:
                    seen.add(dra.uuid_key(dev["parent_uuid"]))
                    matched.append("parent %s" % dev["parent_uuid"])
            if dev["uuid"] and migs:
                if dra.uuid_key(dev["uuid"]) not in migs:
                    problems.append("MIG device %s is not a MIG instance of this host" % dev["uuid"])
                else:
                    matched.append("MIG instance %s" % dev["uuid"])
            if matched or problems:
                _driver_version_row(dev, driver, problems, matched, found["skipped"])
            why = []
            if not dev["parent_uuid"]:
                why.append("the device publishes no parentUUID")
            if not dev["uuid"]:
                why.append("the device publishes no uuid")
            elif not migs:
                why.append("the host record lists no MIG instance UUID")
            rows.append(_host_match_row(subject, "a MIG instance of a host GPU", dev["uuid"] or dev["name"], found,
                                        "not compared: %s" % "; ".join(why)))
            continue
        gpu = by_uuid.get(dra.uuid_key(dev["uuid"]))
        if gpu is None:
            if not dev["uuid"]:
                rows.append((NOT_RUN, subject, "a GPU of this host", "not compared: the device publishes no uuid"))
                continue
            rows.append((FAIL, subject, "a GPU of this host", "advertises GPU %s, which this node does not have (host GPUs: %s)"
                         % (dev["uuid"], ", ".join(g.get("uuid") or "?" for g in gpus) or "none")))
            continue
        seen.add(dra.uuid_key(dev["uuid"]))
        found = dict(problems=[], matched=[], unsure=[], skipped=[])
        problems, matched = found["problems"], found["matched"]
        verdict, text = dra.gpu_name_check(dev["name"], dev.get("minor"), dev.get("index"), gpu.get("minor"), gpu.get("index"))
        if verdict in ("mismatch", "match", "unsure"):
            found[{"mismatch": "problems", "match": "matched", "unsure": "unsure"}[verdict]].append(text)
        if dev["pci_bus_id"] and gpu.get("pci_bus_id"):
            if dra.bus_id_key(dev["pci_bus_id"]) != dra.bus_id_key(gpu["pci_bus_id"]):
                problems.append("pciBusID %s, host %s" % (dev["pci_bus_id"], gpu["pci_bus_id"]))
            else:
                matched.append("bus %s" % gpu["pci_bus_id"])
        _driver_version_row(dev, driver, problems, matched, found["skipped"])
        if not matched:
            matched.append("uuid")   # the UUID itself was compared and is a GPU of this host
        rows.append(_host_match_row(subject, "uuid, name/minor/index, pciBusID, driverVersion of the host's GPU",
                                    dev["uuid"], found, None))
    for gpu in gpus:
        if gpu.get("uuid") and dra.uuid_key(gpu["uuid"]) not in seen:
            rows.append((WARN, "%s %s" % (node["name"], gpu["uuid"]), "published by the DRA driver",
                         "host GPU %s (minor %s, bus %s) is not published" % (gpu["uuid"], gpu.get("minor"), gpu.get("pci_bus_id"))))
    return rows


def _check_host_match(b, nodes, self_node, host_record):
    if host_record is None:
        return
    subject = (self_node or {}).get("name") or "this node"
    node = next((n for n in nodes if n["name"] == (self_node or {}).get("name")), None)
    if node is None:
        b.add("k8s.dra.host_match", NOT_RUN, subject, "the node's DRA devices against its host record",
              (self_node or {}).get("reason") or "this host is not a node of the cluster")
    elif node["path"] not in (PATH_DRA, PATH_BOTH):
        return
    elif (host_record.get("status") == NOT_RUN) or not _host_gpus(host_record):
        b.add("k8s.dra.host_match", NOT_RUN, subject, "the node's DRA devices against its host record",
              "the host record lists no GPU (%s)" % (host_record.get("reason") or host_record.get("status")))
    else:
        for status, subj, expected, observed in host_match(node, host_record):
            b.add("k8s.dra.host_match", status, subj, expected, observed)


def match_node(names, hostname, labels=None):
    """The node this host is: its name equal to the hostname (case-insensitive), its kubernetes.io/hostname label,
    or a unique node whose short name is the host's short name. Returns {name, matched_by} or {name: None, reason}."""
    host = str(hostname or "").strip().lower()
    if not host:
        return {"name": None, "reason": "no hostname to match a node with"}
    for name in names:
        if str(name).lower() == host:
            return {"name": name, "matched_by": "node name", "hostname": hostname}
    host_short = host.split(".", maxsplit=1)[0]
    for name, label in (labels or {}).items():
        if label and str(label).lower() in (host, host_short):
            return {"name": name, "matched_by": "kubernetes.io/hostname label", "hostname": hostname}
    short = [n for n in names if str(n).lower().split(".", maxsplit=1)[0] == host_short]
    if len(short) == 1:
        return {"name": short[0], "matched_by": "short name", "hostname": hostname}
    return {"name": None, "hostname": hostname, "reason": "no node is named %s%s" % (
        hostname, " (%d share its short name)" % len(short) if short else "")}


# ---- Pods ----

def _pending_observed(pod):
    if pod["events"]:
        last = pod["events"][-1]
        return "Pending: FailedScheduling: %s" % last["message"]
    if pod["unschedulable_message"]:
        return "Pending: PodScheduled False: %s" % pod["unschedulable_message"]
    created = [e for e in pod["dra_events"] if e["reason"] == "FailedResourceClaimCreation"]
    if created:
        return "Pending: FailedResourceClaimCreation: %s" % created[-1]["message"]
    unmade = [c for c in pod["claims"] if c["state"] == "not created"]
    if unmade:
        # the scheduler's PreEnqueue gate keeps such a Pod out of scheduling without an event
        return "Pending: claim %s: ResourceClaim not created yet (from template %s)" % (unmade[0]["name"], unmade[0]["template"])
    return "Pending, no FailedScheduling event"


def _claim_text(claim):
    named = " (%s)" % claim["claim"] if claim["claim"] and claim["claim"] != claim["name"] else ""
    classes = " %s" % ", ".join(claim["device_classes"]) if claim["device_classes"] else ""
    return "claim %s%s: %s%s" % (claim["name"], named, claim["state"], classes)


def _claims_text(pod):
    return "; ".join(_claim_text(c) for c in pod["claims"])


def _check_pods(b, pods, pods_error):
    if pods_error:
        for cid in ("k8s.pod.pending", "k8s.pod.prepare", "k8s.pod.admission"):
            b.add(cid, NOT_RUN, "GPU Pods", observed="Pods not listed: %s" % pods_error)
        return
    pending = [p for p in pods if p["phase"] == "Pending"]
    for pod in pending:
        subject = "%s/%s" % (pod["namespace"], pod["name"])
        if pod["node"]:  # scheduled, containers not started yet
            b.add("k8s.pod.pending", WARN, subject, "scheduled and running",
                  "Pending on %s: %s" % (pod["node"], "; ".join(pod["waiting"]) or "containers not started"))
            continue
        observed = _pending_observed(pod)
        cause_id, cause, nxt = explain(observed)
        wants = []
        if pod["requests"]:
            wants.append("requests %s" % _fmt(pod["requests"]))
        if pod["claims"]:
            wants.append(_claims_text(pod))
        b.add("k8s.pod.pending", FAIL, subject, "scheduled (%s)" % "; ".join(wants),
              observed + (" -> cause (%s): %s" % (cause_id, cause) if cause else ""), hint=nxt)
    if not pending:
        b.add("k8s.pod.pending", PASS, "GPU Pods", "none Pending", "%d GPU Pods, none Pending" % len(pods))
    failed_prepare = [p for p in pods if p["phase"] == "Pending" and any(
        e["reason"] == "FailedPrepareDynamicResources" for e in p["dra_events"])]
    for pod in failed_prepare:
        last = [e for e in pod["dra_events"] if e["reason"] == "FailedPrepareDynamicResources"][-1]
        cause_id, cause, nxt = explain(last["message"], PREPARE_CAUSES)
        because = " -> cause (%s): %s" % (cause_id, cause) if cause else ""
        b.add("k8s.pod.prepare", FAIL, "%s/%s" % (pod["namespace"], pod["name"]), "claims prepared by the kubelet",
              "FailedPrepareDynamicResources on %s: %s%s" % (pod["node"], last["message"], because), hint=nxt)
    if not failed_prepare:
        claimed = [p for p in pods if p["claims"]]
        b.add("k8s.pod.prepare", PASS, "GPU Pods", "claims prepared by the kubelet",
              "%d Pod(s) with DRA claims, no FailedPrepareDynamicResources" % len(claimed))
    rejected = [p for p in pods if p["phase"] == "Failed" and p["reason"] == "UnexpectedAdmissionError"]
    for pod in rejected:
        b.add("k8s.pod.admission", FAIL, "%s/%s" % (pod["namespace"], pod["name"]), "admitted by the kubelet",
              "%s on %s: %s" % (pod["reason"], pod["node"], pod["message"]))
    if not rejected:
        b.add("k8s.pod.admission", PASS, "GPU Pods", "admitted by the kubelet", "no UnexpectedAdmissionError")


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
        node["path"] = gpu_path(node, dra_info["state"]) if _gpu_node(node) else None
    b.add("k8s.cluster.reachable", PASS, (kubectl or {}).get("context") or "cluster", "nodes listed", "%d nodes" % len(nodes))
    _check_nodes(b, nodes, resources, dra_info)
    _check_dra_cluster(b, nodes, dra_info)
    _check_host_match(b, nodes, self_node, host_record)
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
    _check_pods(b, pods, pods_error)
    b.evidence = {"kubectl": kubectl or {}, "resources": resources, "nodes": nodes, "gpu_pods": pods,
                  "pods_error": pods_error, "self_node": self_node,
                  "dra": {"state": dra_info["state"], "error": dra_info["error"], "errors": dra_info["errors"],
                          "api_versions": dra_info["api_versions"], "slices": dra_info["slice_count"],
                          "device_classes": dra_info["classes"],
                          "claims": None if dra_info["claims"] is None else len(dra_info["claims"])}}
    b.versions = {"kubectl": (kubectl or {}).get("version")}
    return b.build()


def advertising_findings(host, verdict, node):
    """What the scheduler is told about one node, on either GPU path, against what its node verdict proved (pure;
    for the fleet report's k8s cross-check). ``verdict``: a verdict string or a node_verdict dict (its ``gpus``
    rows, by UUID, say which GPUs computed); ``node``: the node's entry of a k8s record's evidence.nodes. Returns
    findings {host, k8s_node, finding, severity, observed, message}:
    - allocatable_on_unverified_node: device plugin GPUs allocatable on a node that cannot compute (FAIL) or was
      not verified (WARN);
    - dra_device_compute_failed: a DRA device whose GPU failed compute on this node (FAIL);
    - dra_devices_on_unverified_node: DRA devices published on a node that cannot compute (FAIL) or was not
      verified (WARN), when no per-GPU row names the failing GPU;
    - nothing_advertised: a COMPUTE_VERIFIED node on which neither path advertises a GPU (WARN).
    """
    rows = verdict.get("gpus") or [] if isinstance(verdict, dict) else []
    verdict = verdict.get("verdict") if isinstance(verdict, dict) else verdict
    cannot = str(verdict).startswith("FAILED_AT_")
    findings = []

    def add(finding, severity, observed, message):
        findings.append({"host": host, "k8s_node": node.get("name"), "finding": finding, "severity": severity,
                         "observed": observed, "message": message})
    allocatable = dict((r, q) for r, q in sorted((node.get("allocatable") or {}).items()) if q)
    devices = [d for d in ((node.get("dra") or {}).get("devices") or []) if d.get("type") != "vfio"]
    if allocatable and verdict != COMPUTE_VERIFIED:
        add("allocatable_on_unverified_node", FAIL if cannot else WARN, "allocatable %s; verdict %s" % (_fmt(allocatable), verdict),
            "the scheduler will place GPU Pods here, on a node that %s" % ("cannot compute" if cannot else "was not verified to compute"))
    failed = dict((dra.uuid_key(r.get("uuid")), r) for r in rows if r.get("status") == FAIL and r.get("uuid"))
    named = [d for d in devices if dra.uuid_key(d.get("uuid")) in failed or dra.uuid_key(d.get("parent_uuid")) in failed]
    for dev in named:
        row = failed.get(dra.uuid_key(dev.get("uuid"))) or failed.get(dra.uuid_key(dev.get("parent_uuid")))
        add("dra_device_compute_failed", FAIL, "%s %s (%s): compute %s%s" % (
            node.get("name"), dev.get("name"), dev.get("uuid"), row.get("status"), ", %s" % row["signature"] if row.get("signature") else ""),
            "the DRA driver offers a GPU that failed compute on this node: claims can be allocated to it")
    if devices and verdict != COMPUTE_VERIFIED and not named:
        add("dra_devices_on_unverified_node", FAIL if cannot else WARN, "%d DRA device(s) of %s; verdict %s" % (
            len(devices), dra.DRA_DRIVER, verdict),
            "the scheduler will allocate claims to GPUs of a node that %s" % ("cannot compute" if cannot else "was not verified to compute"))
    if not allocatable and not devices and verdict == COMPUTE_VERIFIED:
        add("nothing_advertised", WARN, "path %s; allocatable %s; %d DRA device(s); verdict %s" % (
            node.get("path"), _fmt(node.get("allocatable") or {}) or "none", len(devices), verdict),
            "neither the device plugin nor the DRA driver advertises a GPU: GPU Pods cannot land on this verified node")
    return findings


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


def kubectl_base(path, kubeconfig=None, context=None, timeout=DEFAULT_TIMEOUT):
    """The argv prefix of every kubectl call: the program, its kubeconfig and context, the request timeout."""
    return [path] + (["--kubeconfig", kubeconfig] if kubeconfig else []) + (["--context", context] if context else []) \
        + ["--request-timeout", "%ds" % timeout]


def resolve_kubectl(kubectl, kubeconfig):
    """(path of kubectl or None, why there is no cluster to talk to or None)."""
    path = kubectl if os.path.sep in kubectl else which(kubectl)
    if not path or not os.path.isfile(path):
        return None, "kubectl not found: %s" % kubectl
    return path, kubeconfig_reason(kubeconfig)


def collect_dra(base, scopes, timeout):
    """The DRA documents for ``analyse``: ResourceSlices and DeviceClasses (cluster-wide), ResourceClaims, their
    templates and the DRA events of the Pods' namespaces. A cluster that serves no resource.k8s.io (or refuses the
    ResourceSlices) stops after the first read; the error is kept for the record."""
    docs = {"errors": {}}
    for kind in ("resourceslices", "deviceclasses"):
        docs[kind], err = _kubectl_json(base, ["get", kind], timeout)
        if err:
            docs["errors"][kind] = err
            if kind == "resourceslices":
                return docs, None
    per_scope = {"resourceclaims": [], "resourceclaimtemplates": []}
    events = []
    for scope in scopes:
        for kind in per_scope:
            if kind in docs["errors"]:
                continue
            doc, err = _kubectl_json(base, ["get", kind] + scope, timeout)
            if err:
                docs["errors"][kind] = err
            else:
                per_scope[kind].append(doc)
        for reason in DRA_EVENT_REASONS:
            doc, err = _kubectl_json(base, ["get", "events", "--field-selector", "reason=%s" % reason] + scope, timeout)
            if err:
                docs["errors"].setdefault("events", []).append(err)
            else:
                events.append(doc)
    for kind, found in per_scope.items():
        docs[kind] = None if kind in docs["errors"] else _merge(found)
    return docs, _merge(events)


def collect_k8s(kubectl="kubectl", kubeconfig=None, context=None, resources=DEFAULT_RESOURCES, node_names=None,
                namespaces=None, timeout=DEFAULT_TIMEOUT, host_record=None, hostname=None, dra=True):
    """The k8s layer record, from kubectl; NOT_RUN with the exact reason when there is no cluster to ask.

    ``host_record``: the host layer record of the node this runs on (its DRA devices are compared with it; the
    node is found by ``hostname``, the machine's own name by default). ``dra`` False skips the resource.k8s.io
    reads (the DRA checks are then NOT_RUN, "not asked").
    """
    path, reason = resolve_kubectl(kubectl, kubeconfig)
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
    if dra:
        dra_docs, dra_events = collect_dra(base, scopes, timeout)
        event_docs.append(dra_events)
        info["events_errors"] = info.get("events_errors", []) + dra_docs["errors"].pop("events", [])
    else:
        dra_docs = {"errors": {"resourceslices": "not asked (dra: false)"}}
    if host_record is not None and hostname is None:
        hostname = socket.gethostname()
    return analyse(nodes, None if pods_error else _merge(pod_docs), _merge(event_docs), resources, node_names, namespaces,
                   pods_error=pods_error, kubectl=info, builder=builder, dra_docs=dra_docs, host_record=host_record,
                   hostname=hostname)
