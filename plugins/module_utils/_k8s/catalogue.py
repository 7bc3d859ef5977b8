# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: the k8s layer's catalogue: its defaults, the event reasons it reads, the GPU path names and its checks
(CHECKS; docs/checks.md is generated from it). Not public API."""

from __future__ import annotations


DEFAULT_RESOURCES = ("nvidia.com/gpu",)
DEFAULT_TIMEOUT = 30
PATH_DEVICE_PLUGIN, PATH_DRA, PATH_BOTH, PATH_NEITHER, PATH_UNKNOWN = "device_plugin", "dra", "both", "neither", "unknown"
# The events the layer reads for GPU Pods: the scheduler's, the kubelet's DRA prepare failures (pkg/kubelet/events
# FailedPrepareDynamicResources, emitted by kuberuntime_manager "Failed to prepare dynamic resources: %v") and the
# resourceclaim controller's failure to create a Pod's claim from its template (FailedResourceClaimCreation).
SCHEDULING_REASON = "FailedScheduling"
DRA_EVENT_REASONS = ("FailedPrepareDynamicResources", "FailedResourceClaimCreation")


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
