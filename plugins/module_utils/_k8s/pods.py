# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: the k8s layer's GPU Pods: the Pods that ask for a GPU (a device plugin resource, or a DRA claim whose
class or device is gpu.nvidia.com's), why one is Pending (the scheduler's and the controllers' own words mapped
to a cause: ``PENDING_CAUSES``), why the kubelet could not prepare its claims (``PREPARE_CAUSES``), and the
k8s.pod.* checks. Pure functions over kubectl's JSON; not public API.
"""

from __future__ import annotations

import re

from ansible_collections.gpuprobe.layers.plugins.module_utils._k8s import dra
from ansible_collections.gpuprobe.layers.plugins.module_utils._k8s.catalogue import SCHEDULING_REASON
from ansible_collections.gpuprobe.layers.plugins.module_utils._k8s.kubectl import _items
from ansible_collections.gpuprobe.layers.plugins.module_utils._k8s.nodes import DEVICE_PLUGIN_RESOURCE, fmt_counts, quantity
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import FAIL, NOT_RUN, PASS, WARN


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

    def maybe_gpu(row):
        classes = set(row["device_classes"])
        if classes & gpu_classes or any(d.startswith(dra.DRA_DRIVER + "/") for d in row["devices"]):
            return True
        if known_classes is not None and classes - known_classes:
            return True
        return not classes and not row["devices"]  # unresolved: cannot tell it is not a GPU claim

    gpu = [c for c in out if maybe_gpu(c)]
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


def check_pods(b, pods, pods_error):
    """Add k8s.pod.pending, k8s.pod.prepare and k8s.pod.admission over the GPU Pod summaries to ``b``; all three
    NOT_RUN with ``pods_error`` when the Pods could not be listed."""
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
            wants.append("requests %s" % fmt_counts(pod["requests"]))
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
