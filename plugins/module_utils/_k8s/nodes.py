# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: what the k8s layer reads of the Nodes: what each one advertises (device plugin capacity and
allocatable of nvidia.com/gpu and nvidia.com/mig-*, GPU labels, Ready, cordon; the gpu.nvidia.com devices its
ResourceSlices publish), the GPU path it is on, the checks of each node, which Node this host is
(``match_node``) and, with this host's host record, its published DRA devices against its GPUs (``host_match``).
``advertising_findings`` compares what a node advertises with its node verdict (the fleet report's k8s
cross-check). Pure functions over kubectl's JSON; not public API.
"""

from __future__ import annotations

import re

from ansible_collections.gpuprobe.layers.plugins.module_utils._k8s import dra
from ansible_collections.gpuprobe.layers.plugins.module_utils._k8s.catalogue import (
    PATH_BOTH, PATH_DEVICE_PLUGIN, PATH_DRA, PATH_NEITHER, PATH_UNKNOWN,
)
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import COMPUTE_VERIFIED, FAIL, NOT_RUN, PASS, WARN


# Labels that say "this node has an NVIDIA GPU" (GPU feature discovery, NFD, GKE).
GPU_PRESENT_LABELS = ("nvidia.com/gpu.present", "nvidia.com/gpu.product", "nvidia.com/gpu.count",
                      "feature.node.kubernetes.io/pci-10de.present", "cloud.google.com/gke-accelerator")
GPU_LABEL_PREFIXES = ("nvidia.com/", "feature.node.kubernetes.io/pci-10de", "cloud.google.com/gke-accelerator")
# Device plugin resources found in a node's capacity besides the ones asked for (MIG strategy "mixed").
DEVICE_PLUGIN_RESOURCE = re.compile(r"^nvidia\.com/(gpu|mig-[A-Za-z0-9.+-]+)$")


def quantity(value):
    """Integer count of an extended resource quantity ("8", 8); None when absent or not an integer."""
    if value is None:
        return None
    try:
        return int(str(value))
    except ValueError:
        return None


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


def fmt_counts(counts):
    """{resource: count} as "a=1, b=2" (sorted by resource)."""
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
    plugin = fmt_counts(dict((r, q) for r, q in node["allocatable"].items() if q)) or "nothing allocatable"
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
            fmt_counts(dict((r, alloc[r]) for r in shown)), fmt_counts(dict((r, cap[r]) for r in shown)))
        b.add("k8s.node.allocatable", FAIL, node["name"], "> 0 allocatable", observed + ("; labels " + labels if labels else ""))
        return
    b.add("k8s.node.allocatable", PASS, node["name"], "> 0 allocatable", "allocatable %s" % fmt_counts(
        dict((r, alloc[r]) for r in shown)))
    short = [r for r in alloc if alloc[r] < cap[r]]
    b.add("k8s.node.healthy_devices", WARN if short else PASS, node["name"], "allocatable == capacity",
          "allocatable %s, capacity %s" % (fmt_counts(dict((r, alloc[r]) for r in shown)), fmt_counts(dict((r, cap[r]) for r in shown))))


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


def is_gpu_node(node):
    """A node summary that has GPUs by any sign: device plugin capacity or allocatable, a GPU label, DRA slices."""
    if any(node["capacity"].values()) or any(node["allocatable"].values()):
        return True
    return any(k in node["gpu_labels"] for k in GPU_PRESENT_LABELS) or bool((node.get("dra") or {}).get("slices"))


def check_nodes(b, nodes, resources, dra_info):
    """Add k8s.cluster.gpu_nodes and, for each GPU node, its device plugin, GPU path, DRA and Ready checks to ``b``."""
    advertising = [n for n in nodes if any(n["capacity"].values()) or (n.get("dra") or {}).get("devices")]
    b.add("k8s.cluster.gpu_nodes", PASS if advertising else FAIL, ", ".join(resources) + " or DRA %s" % dra.DRA_DRIVER,
          ">= 1 node advertising GPUs",
          "%d of %d nodes: %s" % (len(advertising), len(nodes), ", ".join(n["name"] for n in advertising) or "none"))
    for node in nodes:
        if not is_gpu_node(node):
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


def check_host_match(b, nodes, self_node, host_record):
    """Add k8s.dra.host_match for this host's node (``self_node``, from ``match_node``) when a host record was given
    and the node is on the DRA path; NOT_RUN with why when the node or the host's GPUs are unknown."""
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


def _short(name):
    return str(name or "").lower().split(".", maxsplit=1)[0]


def _sharing(near, host):
    many = len(near) > 1
    return "Node%s %s %s the short name %s" % ("s" if many else "", ", ".join(sorted(near)), "have" if many else "has",
                                               _short(host))


def match_node(names, hostname, labels=None):
    """The Node this host is, matched exactly: the Node whose name is the hostname (case-insensitive, as DNS names
    are), or the one Node whose ``kubernetes.io/hostname`` label is. Never by a short name, and never when the match
    is ambiguous: a Node named so and another labelled so, two Nodes labelled so, or a Node found only by its label
    while another Node's name or label has the host's short name (``gpu-a`` labelling Node ``rogue`` beside Node
    ``gpu-a.dc1``). Returns {name, matched_by, hostname} or {name: None, hostname, reason} (the reason says what was
    found and that an explicit map, ``node_names``, settles it)."""
    host = str(hostname or "").strip().lower()
    if not host:
        return {"name": None, "reason": "no hostname to match a node with"}
    labels = labels or {}
    by_name = [n for n in names if str(n).lower() == host]
    by_label = [n for n, label in sorted(labels.items(), key=lambda kv: str(kv[0])) if label and str(label).lower() == host]
    found = by_name + [n for n in by_label if n not in by_name]
    if len(found) > 1:
        return {"name": None, "hostname": hostname, "reason": "ambiguous: %s (set node_names)" % ", ".join(
            "Node %s %s" % (n, "is named %s" % hostname if n in by_name else "is labelled kubernetes.io/hostname=%s" % hostname)
            for n in found)}
    near = [n for n in names if n not in found and (_short(n) == _short(host) or _short(labels.get(n)) == _short(host))]
    if by_name:
        return {"name": by_name[0], "matched_by": "node name", "hostname": hostname}
    if by_label and not near:
        return {"name": by_label[0], "matched_by": "kubernetes.io/hostname label", "hostname": hostname}
    if by_label:
        return {"name": None, "hostname": hostname, "reason": "ambiguous: Node %s is labelled kubernetes.io/hostname=%s, and "
                "%s: not matched by label (set node_names)" % (by_label[0], hostname, _sharing(near, host))}
    return {"name": None, "hostname": hostname, "reason": "no Node is named %s or labelled kubernetes.io/hostname=%s%s" % (
        hostname, hostname, "; %s, which is not a match (set node_names)" % _sharing(near, host) if near else "")}


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
        add("allocatable_on_unverified_node", FAIL if cannot else WARN, "allocatable %s; verdict %s" % (fmt_counts(allocatable), verdict),
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
            node.get("path"), fmt_counts(node.get("allocatable") or {}) or "none", len(devices), verdict),
            "neither the device plugin nor the DRA driver advertises a GPU: GPU Pods cannot land on this verified node")
    return findings
