# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE (k8s layer): the runtime handler the GPU Pods use. Not public API.

A Pod names a RuntimeClass (``spec.runtimeClassName``); the RuntimeClass names the CRI handler (``handler``) the kubelet
sends in ``RunPodSandboxRequest.runtime_handler``; a Pod without one runs with the engine's default handler (the kubelet
sends ""). GPU Operator installs three (``nvidia``, ``nvidia-cdi``, ``nvidia-legacy``, each handler of its own name).
``runtime_handlers`` reads them from ``kubectl get runtimeclasses`` and the Pods the layer lists; the node's probe takes
the handler most GPU Pods on this node use (``_runtime.handler.choose``)."""

from __future__ import annotations

GONE_PHASES = ("Succeeded", "Failed")


def _items(doc):
    return [i for i in ((doc or {}).get("items") or []) if isinstance(i, dict)]


def runtime_classes(doc):
    """{RuntimeClass name: its handler} of a ``kubectl get runtimeclasses -o json`` document."""
    out = {}
    for item in _items(doc):
        name = (item.get("metadata") or {}).get("name")
        if name:
            out[name] = item.get("handler")
    return out


def runtime_handlers(pods_doc, classes_doc, node, gpu_requests, error=None):
    """evidence.runtime_handlers of the k8s record: node (this host's node name or None), runtime_classes, gpu_pods
    (each GPU Pod that is not over: namespace, name, node, on_this_node, runtime_class, handler: the RuntimeClass's
    handler, '' for none named (the default), None when its RuntimeClass does not exist), error (why they were not
    read). ``gpu_requests(pod)``: the Pod's GPU requests (empty: not a GPU Pod)."""
    if error:
        return {"node": node, "runtime_classes": None, "gpu_pods": [], "error": error}
    classes = runtime_classes(classes_doc)
    pods = []
    for pod in _items(pods_doc):
        if not gpu_requests(pod) or (pod.get("status") or {}).get("phase") in GONE_PHASES:
            continue
        meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        rc = spec.get("runtimeClassName") or None
        pods.append({"namespace": meta.get("namespace"), "name": meta.get("name"), "node": spec.get("nodeName"),
                     "on_this_node": bool(node) and spec.get("nodeName") == node, "runtime_class": rc,
                     "handler": classes.get(rc) if rc else ""})
    return {"node": node, "runtime_classes": classes, "gpu_pods": pods, "error": None}
