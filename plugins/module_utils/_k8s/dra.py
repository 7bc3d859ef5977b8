# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: Dynamic Resource Allocation (resource.k8s.io) as the k8s layer reads it. Not public API.

Pure functions over the JSON that ``kubectl get resourceslices|resourceclaims|resourceclaimtemplates|deviceclasses
-o json`` prints, in every shape a cluster serves: ``resource.k8s.io/v1`` (Kubernetes 1.34+), ``v1beta2`` (1.33) and
``v1beta1`` (1.32). The shapes differ (kubernetes/kubernetes staging/src/k8s.io/api/resource/v1*/types.go):

* a ResourceSlice device is ``{name, attributes, capacity, taints}`` in v1 and v1beta2, but ``{name, basic:
  {attributes, capacity, taints}}`` in v1beta1 (and v1alpha3);
* a ResourceClaim request names its class as ``deviceClassName`` directly in v1beta1, but under ``exactly`` in v1
  and v1beta2; ``firstAvailable`` (sub-requests, each with its own ``deviceClassName``) exists in all three;
* an attribute value is one of ``{"string"|"version"|"int"|"bool": v}`` (or the list forms ``strings`` ...), and
  an attribute name without a domain belongs to the driver (``uuid`` of driver gpu.nvidia.com is
  ``gpu.nvidia.com/uuid``); standard attributes carry ``resource.kubernetes.io/`` (``pciBusID``).

Every object is normalised here into one shape (``slice_summary``, ``claim_summary``, ``class_summary``) and
everything downstream reads only that. NVIDIA's DRA driver (kubernetes-sigs/dra-driver-nvidia-gpu, formerly
NVIDIA/k8s-dra-driver-gpu) publishes one pool per node, named after the node, with devices ``gpu-<minor>``
(``GpuInfo.CanonicalName``), MIG devices and ``gpu-vfio-<n>``; its ``driverVersion`` attribute is the NVML
driver version as a semantic version (Masterminds semver ``String()``: 580.159.04 is published as 580.159.4).
The older NVIDIA/k8s-dra-driver (cmd/nvidia-dra-plugin/deviceinfo.go) names a GPU ``gpu-<index>`` (the NVML
index) and publishes int attributes ``minor`` and ``index``: a device name is therefore only a minor number when
the driver says so (``gpu_name_check``).
"""

from __future__ import annotations

import re

DRA_DRIVER = "gpu.nvidia.com"
STANDARD_PREFIX = "resource.kubernetes.io/"
PCI_BUS_ID_ATTRIBUTE = STANDARD_PREFIX + "pciBusID"
# The DeviceClasses NVIDIA's chart installs (deployments/helm/dra-driver-nvidia-gpu/templates/deviceclass-*.yaml):
# used to recognise GPU claims only when the DeviceClasses themselves could not be read.
DEFAULT_GPU_CLASSES = ("gpu.nvidia.com", "mig.nvidia.com", "vfio.gpu.nvidia.com")
ATTRIBUTES = ("type", "uuid", "parentUUID", "productName", "driverVersion", "cudaDriverVersion", "minor", "index",
              PCI_BUS_ID_ATTRIBUTE)
# device taint effects that keep the scheduler from allocating the device (resource.k8s.io DeviceTaintEffect)
BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")
_DEVICE_MINOR = re.compile(r"^gpu-(\d+)$")


def _items(doc):
    return list((doc or {}).get("items") or [])


def _meta(obj):
    return obj.get("metadata") or {}


def attribute_value(value):
    """The plain value of a DeviceAttribute ({"string": "x"} -> "x", {"ints": [1]} -> [1]); None when empty."""
    if not isinstance(value, dict):
        return None
    for key in ("string", "version", "int", "bool", "strings", "versions", "ints", "bools"):
        if key in value:
            return value[key]
    return None


def _attributes(raw, driver):
    """{name: value} with the driver's own domain removed ("gpu.nvidia.com/uuid" and "uuid" are one name)."""
    out = {}
    prefix = "%s/" % driver if driver else None
    for name, value in (raw or {}).items():
        key = name[len(prefix):] if prefix and name.startswith(prefix) else name
        out[key] = attribute_value(value)
    return out


def _device(raw, driver):
    body = raw.get("basic") if isinstance(raw.get("basic"), dict) else raw  # v1beta1 / v1alpha3 wrap it in "basic"
    attrs = _attributes(body.get("attributes"), driver)
    capacity = {}
    for name, value in (body.get("capacity") or {}).items():
        capacity[name] = value.get("value") if isinstance(value, dict) else value  # v1alpha3: a bare quantity
    taints = [{"key": t.get("key"), "value": t.get("value"), "effect": t.get("effect"), "time_added": t.get("timeAdded")}
              for t in body.get("taints") or [] if isinstance(t, dict)]
    return {"name": raw.get("name"), "attributes": dict((k, attrs.get(k)) for k in ATTRIBUTES if k in attrs),
            "all_attributes": attrs, "capacity": capacity, "taints": taints}


def slice_summary(obj):
    """One ResourceSlice, any served version, in the one shape the k8s layer reads."""
    spec = obj.get("spec") or {}
    driver = spec.get("driver")
    pool = spec.get("pool") or {}
    return {
        "name": _meta(obj).get("name"), "api_version": obj.get("apiVersion"), "driver": driver,
        "node": spec.get("nodeName"), "all_nodes": bool(spec.get("allNodes")),
        "node_selector": spec.get("nodeSelector"),
        "pool": {"name": pool.get("name"), "generation": pool.get("generation"),
                 "resource_slice_count": pool.get("resourceSliceCount")},
        "devices": [_device(d, driver) for d in spec.get("devices") or [] if isinstance(d, dict)],
        "shared_counters": len(spec.get("sharedCounters") or []),
    }


def _request_classes(request):
    """The DeviceClass names one request may be satisfied from (v1/v1beta2 ``exactly``, v1beta1 top level, and
    every ``firstAvailable`` sub-request)."""
    names = []
    exact = request.get("exactly") if isinstance(request.get("exactly"), dict) else None
    if exact and exact.get("deviceClassName"):
        names.append(exact["deviceClassName"])
    elif request.get("deviceClassName"):
        names.append(request["deviceClassName"])
    for sub in request.get("firstAvailable") or []:
        if isinstance(sub, dict) and sub.get("deviceClassName"):
            names.append(sub["deviceClassName"])
    return names


def _request(request):
    exact = request.get("exactly") if isinstance(request.get("exactly"), dict) else request
    return {"name": request.get("name"), "device_classes": _request_classes(request),
            "allocation_mode": exact.get("allocationMode"), "count": exact.get("count"),
            "first_available": [s.get("name") for s in request.get("firstAvailable") or [] if isinstance(s, dict)]}


def _allocated_nodes(node_selector):
    """Node names an allocation's nodeSelector pins it to (matchFields metadata.name In [...]); [] otherwise."""
    names = []
    for term in (node_selector or {}).get("nodeSelectorTerms") or []:
        for field in (term or {}).get("matchFields") or []:
            if field.get("key") == "metadata.name" and field.get("operator") == "In":
                names.extend(field.get("values") or [])
    return names


def claim_summary(obj):
    """One ResourceClaim, any served version, in the one shape the k8s layer reads."""
    meta = _meta(obj)
    spec = (obj.get("spec") or {}).get("devices") or {}
    status = obj.get("status") or {}
    allocation = status.get("allocation") or None
    results = []
    if allocation:
        for r in ((allocation.get("devices") or {}).get("results") or []):
            results.append({"request": r.get("request"), "driver": r.get("driver"), "pool": r.get("pool"),
                            "device": r.get("device")})
    return {
        "namespace": meta.get("namespace"), "name": meta.get("name"), "uid": meta.get("uid"),
        "api_version": obj.get("apiVersion"), "deleting": bool(meta.get("deletionTimestamp")),
        "owner": ["%s/%s" % (o.get("kind"), o.get("name")) for o in meta.get("ownerReferences") or []],
        "requests": [_request(r) for r in spec.get("requests") or [] if isinstance(r, dict)],
        "allocated": allocation is not None,
        "allocation": {"results": results, "nodes": _allocated_nodes((allocation or {}).get("nodeSelector"))}
        if allocation else None,
        "reserved_for": ["%s/%s" % (r.get("resource"), r.get("name")) for r in status.get("reservedFor") or []],
    }


def template_summary(obj):
    """A ResourceClaimTemplate: its namespace, name and requests (the claim spec sits under spec.spec)."""
    meta = _meta(obj)
    spec = (((obj.get("spec") or {}).get("spec") or {}).get("devices") or {})
    return {"namespace": meta.get("namespace"), "name": meta.get("name"),
            "requests": [_request(r) for r in spec.get("requests") or [] if isinstance(r, dict)]}


_CEL_DRIVER = re.compile(r"device\.driver\s*==\s*['\"]([^'\"]+)['\"]")


def class_summary(obj):
    """One DeviceClass: its CEL selectors, the drivers they name (device.driver == '...'), extendedResourceName."""
    spec = obj.get("spec") or {}
    exprs = [((s or {}).get("cel") or {}).get("expression") for s in spec.get("selectors") or []]
    exprs = [e for e in exprs if e]
    drivers = sorted(set(d for e in exprs for d in _CEL_DRIVER.findall(e)))
    return {"name": _meta(obj).get("name"), "api_version": obj.get("apiVersion"), "selectors": exprs,
            "drivers": drivers, "extended_resource_name": spec.get("extendedResourceName")}


def gpu_class_names(classes, driver=DRA_DRIVER):
    """The DeviceClasses that select the GPU driver's devices; the chart's defaults when none could be read."""
    if classes is None:
        return set(DEFAULT_GPU_CLASSES)
    return set(c["name"] for c in classes if driver in c["drivers"])


def node_slices(slices, node, driver=DRA_DRIVER):
    """The GPU driver's slices of one node (spec.nodeName; a pool named after the node counts too)."""
    return [s for s in slices if s["driver"] == driver and (s["node"] == node or (s["node"] is None and s["pool"]["name"] == node))]


def pool_state(slices):
    """Per pool of these slices: the newest generation, its slice count against resourceSliceCount, and whether
    older generations linger (the scheduler uses only the newest generation, and only a complete pool)."""
    pools = {}
    for s in slices:
        pools.setdefault(s["pool"]["name"], []).append(s)
    out = []
    for name in sorted(pools, key=str):
        group = pools[name]
        newest = max(s["pool"]["generation"] or 0 for s in group)
        current = [s for s in group if (s["pool"]["generation"] or 0) == newest]
        expected = max(s["pool"]["resource_slice_count"] or 0 for s in current)
        out.append({"pool": name, "generation": newest, "slices": len(current), "resource_slice_count": expected,
                    "older_slices": len(group) - len(current), "complete": expected == len(current),
                    "devices": sum(len(s["devices"]) for s in current)})
    return out


def current_devices(slices):
    """The devices of the newest generation of each pool, each with its pool and slice name."""
    newest = dict((p["pool"], p["generation"]) for p in pool_state(slices))
    out = []
    for s in slices:
        if (s["pool"]["generation"] or 0) != newest.get(s["pool"]["name"]):
            continue
        for d in s["devices"]:
            out.append(dict(d, pool=s["pool"]["name"], slice=s["name"], driver=s["driver"]))
    return out


def device_type(device):
    """gpu | mig | vfio | the published ``type`` attribute; inferred from the name when it is missing."""
    declared = (device.get("attributes") or {}).get("type")
    if declared:
        return str(declared)
    name = str(device.get("name") or "")
    if name.startswith("gpu-vfio-"):
        return "vfio"
    if _DEVICE_MINOR.match(name):
        return "gpu"
    return "mig" if "mig" in name else "unknown"


def device_minor(device):
    """The number in a full GPU's DRA name ``gpu-<n>`` (None for other names): the minor number for
    kubernetes-sigs/dra-driver-nvidia-gpu, the NVML index for NVIDIA/k8s-dra-driver."""
    match = _DEVICE_MINOR.match(str(device.get("name") or ""))
    return int(match.group(1)) if match else None


def _int(value):
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def gpu_name_check(name, published_minor, published_index, host_minor, host_index):
    """Judge a full GPU's device name and its ``minor``/``index`` attributes against the host's GPU (pure).

    Returns (verdict, text): verdict "match" (something was compared and agreed), "mismatch" (the published
    ``minor`` attribute is not the GPU's minor: a wrong device node would be handed out), "unsure" (the name or the
    index disagree, but nothing published decides it; the two drivers name GPUs differently), or "not_compared".
    Rules: a published ``minor`` is compared with the host's minor; a name ``gpu-<n>`` is accepted when ``n`` is the
    GPU's minor (kubernetes-sigs/dra-driver-nvidia-gpu: ``gpu-%d`` of the minor) or when the driver publishes
    ``index`` and ``n`` is that index (NVIDIA/k8s-dra-driver: ``gpu-%d`` of the index)."""
    p_minor, p_index, h_minor, h_index = _int(published_minor), _int(published_index), _int(host_minor), _int(host_index)
    n = device_minor({"name": name})
    if p_minor is not None and h_minor is not None and p_minor != h_minor:
        return "mismatch", "minor attribute %s, but the GPU's minor is %s" % (p_minor, h_minor)
    matched, doubts = [], []
    if p_minor is not None and h_minor is not None:
        matched.append("minor %s" % h_minor)
    if p_index is not None and h_index is not None:
        if p_index == h_index:
            matched.append("index %s" % h_index)
        else:
            doubts.append("index attribute %s, but NVML's index of the GPU is %s" % (p_index, h_index))
    if n is not None:
        if h_minor is not None and n == h_minor:
            if not matched or matched[0] != "minor %s" % h_minor:
                matched.insert(0, "minor %s" % h_minor)
        elif p_index is not None and n == p_index:
            matched.append("name gpu-%s = its index attribute" % n)
        elif h_minor is None:
            doubts.append("name %s not compared: the host record has no minor number" % name)
        else:
            doubts.append("name %s is neither the GPU's minor (%s) nor an index the driver publishes%s" % (
                name, h_minor, " (index attribute %s)" % p_index if p_index is not None else ""))
    if doubts:
        return "unsure", "; ".join(doubts) + ("; agrees: %s" % ", ".join(matched) if matched else "")
    if matched:
        return "match", ", ".join(matched)
    return "not_compared", "name %s: no minor or index to compare" % name


def blocking_taints(device):
    return [t for t in device.get("taints") or [] if t.get("effect") in BLOCKING_EFFECTS]


def taint_text(taint):
    return "%s%s:%s" % (taint.get("key"), "=%s" % taint["value"] if taint.get("value") not in (None, "") else "",
                        taint.get("effect"))


def claims_on_node(claims, devices, node, driver=DRA_DRIVER):
    """The claims allocated to this node's devices of the driver (by driver/pool/device; a claim whose device is
    no longer published is matched by its allocation's node selector), each with the devices it holds there."""
    published = set((d["driver"], d["pool"], d["name"]) for d in devices)
    out = []
    for claim in claims:
        alloc = claim.get("allocation")
        if not alloc:
            continue
        on_node = node in alloc["nodes"]
        ours = [r for r in alloc["results"] if r["driver"] == driver]
        held = [r for r in ours if on_node or r["pool"] == node or (r["driver"], r["pool"], r["device"]) in published]
        if held:
            out.append(dict(claim, devices_here=["%s/%s" % (r["pool"], r["device"]) for r in held],
                            unpublished=["%s/%s" % (r["pool"], r["device"]) for r in held
                                         if (r["driver"], r["pool"], r["device"]) not in published]))
    return out


def version_key(text):
    """A driver version compared as numbers per dot-separated part: "580.159.04" and "580.159.4" are equal."""
    parts = []
    for part in str(text or "").strip().split("."):
        if not part.isdigit():
            return None
        parts.append(int(part))
    while len(parts) > 1 and parts[-1] == 0:
        parts.pop()
    return tuple(parts) if parts else None


def bus_id_key(text):
    """A PCI bus id compared as numbers (domain, bus, device, function): "0000:1b:00.0" == "00000000:1B:00.0"."""
    match = re.match(r"^\s*(?:([0-9a-fA-F]+):)?([0-9a-fA-F]+):([0-9a-fA-F]+)\.([0-7])\s*$", str(text or ""))
    if not match:
        return None
    dom, bus, dev, fn = match.groups()
    return (int(dom or "0", 16), int(bus, 16), int(dev, 16), int(fn, 16))


def uuid_key(text):
    return str(text or "").strip().lower() or None
