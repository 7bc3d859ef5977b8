# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: which cdi checks can explain a failure signature; not public API.

One table, ``EXPLAINED_BY``: failure signature (every key of ``_compute.SIGNATURES`` and
``_runtime.SIGNATURES``) -> the cdi check ids whose WARN/FAIL explains it. An empty list means nothing a
CDI spec says can explain that failure (a driver, GPU or runtime matter). ``_verdict.node_verdict`` uses it
to attribute a runtime/compute failure to the spec and to say "because ..." in the verdict; docs/checks.md
prints it. Check ids are strings on purpose: this file does not import the cdi layer.
"""

from __future__ import annotations

from ansible_collections.gpuprobe.layers.plugins.module_utils._result import FAIL, PASS, WARN

# the signature of any CUresult not named below (a key of _compute.SIGNATURES)
OTHER_CURESULT = "compute.cuda.<CUresult name>"
_SPEC_READABLE = ["cdi.discovery.spec_dirs", "cdi.discovery.runtime_config", "cdi.spec.parse", "cdi.spec.schema",
                  "cdi.spec.version", "cdi.spec.kind", "cdi.spec.devices", "cdi.resolve.kind", "cdi.resolve.device",
                  "cdi.resolve.conflict", "cdi.runtime.spec_version", "cdi.runtime.spec_dir", "cdi.runtime.cdi_support",
                  "cdi.discovery.spec_dir_readable", "cdi.spec.library_panic"]

EXPLAINED_BY = {
    # compute signatures (_compute.SIGNATURES)
    "compute.dlopen.libcuda": ["cdi.nvidia.libcuda", "cdi.host.mount_source"],
    "compute.cuda.CUDA_ERROR_STUB_LIBRARY": ["cdi.nvidia.libcuda"],
    "compute.cuda.CUDA_ERROR_INSUFFICIENT_DRIVER": ["cdi.host.library_version"],
    "compute.cuda.CUDA_ERROR_NO_DEVICE": ["cdi.nvidia.nvidiactl", "cdi.nvidia.uvm", "cdi.nvidia.cgroup_write",
                                          "cdi.host.device_node", "cdi.host.device_number", "cdi.identity.gives_gpu"],
    "compute.cuda.CUDA_ERROR_JIT_COMPILER_NOT_FOUND": ["cdi.nvidia.ptxjit"],
    "compute.cuda.CUDA_ERROR_SYSTEM_NOT_READY": [],
    "compute.cuda.CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE": ["cdi.host.library_version", "cdi.nvidia.libcuda"],
    "compute.cuda.CUDA_ERROR_UNKNOWN": ["cdi.nvidia.uvm", "cdi.nvidia.nvidiactl", "cdi.nvidia.cgroup_write"],
    OTHER_CURESULT: [],
    "compute.cuda.SYMBOL_NOT_FOUND": ["cdi.nvidia.libcuda", "cdi.host.library_version"],
    "compute.verify.mismatch": [],
    "compute.timeout": [],
    "compute.gpu.missing": ["cdi.identity.gives_gpu", "cdi.identity.index", "cdi.identity.uuid", "cdi.identity.mig",
                            "cdi.identity.all", "cdi.host.device_node"],
    "compute.probe.incomplete": [],
    "compute.probe.crashed": [],
    "compute.probe.output": [],
    "compute.dlopen.image_glibc": [],
    "compute.dlopen.dependency": ["cdi.nvidia.libcuda"],
    "compute.driver.binding": ["cdi.nvidia.libcuda", "cdi.host.library_version", "cdi.host.mount_source"],
    # runtime signatures (_runtime.SIGNATURES)
    "runtime.start.cdi_unresolvable": _SPEC_READABLE,
    "runtime.start.hostpath_missing": ["cdi.host.mount_source", "cdi.host.device_node", "cdi.host.hook",
                                       "cdi.inject.device_node"],
    "runtime.start.permission_denied": ["cdi.host.hook"],
    "runtime.start.oci_error": ["cdi.host.hook", "cdi.host.device_node"],
    "runtime.start.image_missing": [],
    "runtime.start.timeout": ["cdi.host.hook"],
    "runtime.start.failed": [],
    "runtime.device_node.open.EPERM": ["cdi.nvidia.cgroup_write"],
    "runtime.device_node.open.EACCES": [],
    "runtime.device_node.open.ENXIO": ["cdi.host.device_number", "cdi.host.host_layer_match"],
    "runtime.device_node.open.ENODEV": [],
    "runtime.device_node.open.other": [],
    "runtime.loader.libcuda": ["cdi.nvidia.libcuda", "cdi.host.library_version"],
}


def explaining_ids(signature):
    """The cdi check ids that can explain ``signature`` (an unlisted compute.cuda.* falls back to the
    catch-all CUresult row; an unknown signature has none)."""
    if signature in EXPLAINED_BY:
        return list(EXPLAINED_BY[signature])
    if (signature or "").startswith("compute.cuda."):
        return list(EXPLAINED_BY[OTHER_CURESULT])
    return []


def because_text(item):
    """One "because" entry as a line: ``id subject: observed``."""
    text = item["check"]
    if item.get("subject"):
        text += " %s" % item["subject"]
    if item.get("observed") is not None:
        text += ": %s" % item["observed"]
    return text


def explain(signature, cdi_record):
    """The checks of ``cdi_record`` that explain ``signature``: those of its table row that WARNed or
    FAILed, in record order. Returns a list of {check, status, subject, observed, hint}."""
    ids = set(explaining_ids(signature))
    out = []
    for check in (cdi_record or {}).get("checks") or []:
        if check.get("id") in ids and check.get("status") in (FAIL, WARN):
            out.append({"check": check["id"], "status": check["status"], "subject": check.get("subject"),
                        "observed": check.get("observed"), "hint": check.get("hint")})
    return out


# The runtime checks that compare one CDI edit with what the container got, and the statuses that say the
# edit was NOT applied as the spec asks (runtime.device_node.open is what the applied edit allows, not an edit).
EDIT_CHECKS = {
    "runtime.device_node.present": (FAIL,),
    "runtime.device_node.type": (FAIL,),
    "runtime.device_node.mode": (FAIL, WARN),
    "runtime.mount.present": (FAIL,),
    "runtime.mount.source": (FAIL, WARN),
    "runtime.env.value": (FAIL,),
    "runtime.group.additional": (FAIL,),
}


def edits_compared(runtime_record):
    """The edit checks of a runtime record that were executed (status other than NOT_RUN)."""
    return [c for c in (runtime_record or {}).get("checks") or []
            if c.get("id") in EDIT_CHECKS and c.get("status") in (PASS, WARN, FAIL)]


# Which edits can cause a failure signature: a device the container cannot open or find is about device nodes
# (and groups), a library the loader cannot use is about mounts and env. A lost edit of another kind (a WARN
# on the libnvidia-ml mount) does not explain a missing GPU, and is not blamed for it.
_DEVICE_EDITS = ("runtime.device_node.", "runtime.group.additional")
_LIBRARY_EDITS = ("runtime.mount.", "runtime.env.value")
EDITS_THAT_CAN_CAUSE = {
    "compute.cuda.CUDA_ERROR_NO_DEVICE": _DEVICE_EDITS,
    "compute.cuda.CUDA_ERROR_UNKNOWN": _DEVICE_EDITS,
    "compute.gpu.missing": _DEVICE_EDITS,
    "compute.dlopen.libcuda": _LIBRARY_EDITS,
    "compute.cuda.CUDA_ERROR_STUB_LIBRARY": _LIBRARY_EDITS,
    "compute.cuda.CUDA_ERROR_INSUFFICIENT_DRIVER": _LIBRARY_EDITS,
    "compute.cuda.CUDA_ERROR_JIT_COMPILER_NOT_FOUND": _LIBRARY_EDITS,
    "compute.cuda.CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE": _LIBRARY_EDITS,
    "compute.cuda.SYMBOL_NOT_FOUND": _LIBRARY_EDITS,
}


def edits_not_applied(runtime_record, signature=None):
    """The edit checks of a runtime record that say an edit was not applied as the spec asks; with a failure
    ``signature``, only the kinds of edit that can cause it (EDITS_THAT_CAN_CAUSE; every kind for the others)."""
    kinds = EDITS_THAT_CAN_CAUSE.get(signature)
    return [c for c in edits_compared(runtime_record) if c["status"] in EDIT_CHECKS[c["id"]]
            and (kinds is None or c["id"].startswith(kinds))]
