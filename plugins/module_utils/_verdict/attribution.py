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

Beside it: ``PREDICTS`` (cdi check -> the compute step, or compute check, it says cannot succeed), the comparison of WHERE the
container and the host control failed (``container_failure``, ``host_outcome``, ``host_explains``), and the
rules that name one spec edit (``spec_edit_named``, over the one rule of ``_faithful``) or one setting of the image
(``image_setting``) as the cause, read from the records' evidence, not from a table of error strings.
"""

from __future__ import annotations

import posixpath
import re

from ansible_collections.gpuprobe.layers.plugins.module_utils._verdict.faithful import (
    LIBCUDA_CAUSED, describe_edit, edit_caused, foreign_libraries, paths_in, same_path as _same, spec_edits,
    under_path as _under,
)
from ansible_collections.gpuprobe.layers.plugins.module_utils._probe.script import COMPUTE_STEPS, norm_uuid
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import FAIL, NOT_RUN, PASS, WARN

# the signature of any CUresult not named below (a key of _compute.SIGNATURES)
OTHER_CURESULT = "compute.cuda.<CUresult name>"
_SPEC_READABLE = ["cdi.discovery.spec_dirs", "cdi.discovery.runtime_config", "cdi.spec.parse", "cdi.spec.schema",
                  "cdi.spec.version", "cdi.spec.kind", "cdi.spec.devices", "cdi.resolve.kind", "cdi.resolve.device",
                  "cdi.resolve.conflict", "cdi.runtime.spec_version", "cdi.runtime.spec_dir", "cdi.runtime.cdi_support",
                  "cdi.discovery.spec_dir_readable", "cdi.spec.library_panic"]

EXPLAINED_BY = {
    # compute signatures (_compute.SIGNATURES)
    "compute.dlopen.libcuda": ["cdi.nvidia.libcuda", "cdi.host.mount_source", "cdi.nvidia.libcuda_noexec",
                               "cdi.nvidia.libcuda_path", "cdi.host.library_soname"],
    "compute.cuda.CUDA_ERROR_STUB_LIBRARY": ["cdi.nvidia.libcuda"],
    "compute.cuda.CUDA_ERROR_INSUFFICIENT_DRIVER": ["cdi.host.library_version"],
    "compute.cuda.CUDA_ERROR_NO_DEVICE": ["cdi.nvidia.nvidiactl", "cdi.nvidia.uvm", "cdi.nvidia.cgroup_write", "cdi.nvidia.cgroup_read",
                                          "cdi.host.device_node", "cdi.host.device_number", "cdi.identity.gives_gpu"],
    "compute.cuda.CUDA_ERROR_JIT_COMPILER_NOT_FOUND": ["cdi.nvidia.ptxjit", "cdi.host.mount_source", "cdi.nvidia.ptxjit_noexec",
                                                       "cdi.nvidia.ptxjit_path", "cdi.host.library_soname",
                                                       "cdi.host.driver_library"],
    "compute.cuda.CUDA_ERROR_SYSTEM_NOT_READY": [],
    "compute.cuda.CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE": ["cdi.host.library_version", "cdi.nvidia.libcuda"],
    "compute.cuda.CUDA_ERROR_UNKNOWN": ["cdi.nvidia.uvm", "cdi.nvidia.nvidiactl", "cdi.nvidia.cgroup_write",
                                        "cdi.nvidia.cgroup_read"],
    OTHER_CURESULT: [],
    "compute.cuda.SYMBOL_NOT_FOUND": ["cdi.nvidia.libcuda", "cdi.host.library_version", "cdi.host.library_soname"],
    "compute.verify.mismatch": [],
    "compute.timeout": [],
    "compute.gpu.missing": ["cdi.identity.gives_gpu", "cdi.identity.index", "cdi.identity.uuid", "cdi.identity.mig",
                            "cdi.identity.all", "cdi.host.device_node"],
    "compute.probe.incomplete": [],
    "compute.probe.crashed": [],
    "compute.probe.output": [],
    "compute.dlopen.image_glibc": [],
    "compute.dlopen.dependency": ["cdi.nvidia.libcuda"],
    "compute.driver.binding": ["cdi.host.libcuda_identity", "cdi.nvidia.libcuda", "cdi.host.library_version",
                               "cdi.host.mount_source", "cdi.host.driver_library"],
    # runtime signatures (_runtime.SIGNATURES)
    "runtime.start.cdi_unresolvable": _SPEC_READABLE,
    "runtime.start.hostpath_missing": ["cdi.host.mount_source", "cdi.host.device_node", "cdi.host.hook",
                                       "cdi.inject.device_node"],
    "runtime.start.permission_denied": ["cdi.host.hook"],
    "runtime.start.oci_error": ["cdi.host.hook", "cdi.host.device_node"],
    "runtime.start.image_missing": [],
    # the engine has no handler of that name (cdi.engine.handler WARNs it, but the spec is not the cause): the runtime's
    "runtime.start.unknown_handler": [],
    "runtime.start.timeout": ["cdi.host.hook"],
    "runtime.start.failed": [],
    "runtime.device_node.open.EPERM": ["cdi.nvidia.cgroup_write", "cdi.nvidia.cgroup_read"],
    "runtime.device_node.open.EACCES": [],
    "runtime.device_node.open.ENXIO": ["cdi.host.device_number", "cdi.host.host_layer_match"],
    "runtime.device_node.open.ENODEV": [],
    "runtime.device_node.open.other": [],
    "runtime.probe.unchanged": ["cdi.host.hook", "cdi.trust.accounted"],
    "runtime.loader.libcuda": ["cdi.nvidia.libcuda", "cdi.host.library_version", "cdi.nvidia.libcuda_path",
                               "cdi.nvidia.libcuda_noexec", "cdi.host.library_soname"],
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


def _mode_denies_more(check):
    """Whether a runtime.device_node.mode check shows a mode that grants LESS than the spec's fileMode asked (a bit
    the spec gives is missing): only such a lost edit can deny the probe an open(). A mode more permissive than the
    spec's (the runtime did not apply a restrictive fileMode, as podman+runc on the H200) cannot cause a failure.
    A mode that cannot be read is counted as able to."""
    found = [re.search(r"\b([0-7]{3,4})\b", str(check.get(key) or "")) for key in ("expected", "observed")]
    if not all(found):
        return True
    want, got = (int(m.group(1), 8) & 0o777 for m in found)
    return bool(want & ~got)


def edits_not_applied(runtime_record, signature=None):
    """The edit checks of a runtime record that say an edit was not applied as the spec asks; with a failure
    ``signature``, only the kinds of edit that can cause it (EDITS_THAT_CAN_CAUSE; every kind for the others)."""
    kinds = EDITS_THAT_CAN_CAUSE.get(signature)
    differing = [c for c in edits_compared(runtime_record) if c["status"] in EDIT_CHECKS[c["id"]]]
    of_kind = [c for c in differing if kinds is None or c["id"].startswith(kinds)]
    return [c for c in of_kind if c["id"] != "runtime.device_node.mode" or _mode_denies_more(c)]


# ---------------------------------------------------------------------------------------------------
# What a cdi check predicts: the compute step that cannot succeed in the container when the check WARNs or
# FAILs. That step PASSing in the container is a contradiction: what answered is not what the spec gives
# (an image's own libcuda, a runtime adding nodes of its own), so the PASS proves nothing about the spec.
PREDICTS = {
    "cdi.nvidia.nvidiactl": "cuInit",        # no /dev/nvidiactl: the driver cannot be opened
    "cdi.nvidia.uvm": "cuInit",              # no /dev/nvidia-uvm: cuInit CUDA_ERROR_UNKNOWN (999)
    "cdi.nvidia.cgroup_write": "cuInit",     # nodes without cgroup 'w': cuInit CUDA_ERROR_NO_DEVICE (100)
    "cdi.nvidia.cgroup_read": "cuInit",      # nodes without cgroup 'r': the driver's open(O_RDWR) is denied too
    "cdi.nvidia.libcuda_noexec": "dlopen",   # libcuda on a noexec mount: its code cannot be mapped
    "cdi.nvidia.ptxjit_noexec": "cuModuleLoadData",  # the PTX JIT compiler on a noexec mount: JIT_COMPILER_NOT_FOUND
    # (cdi.nvidia.*_path WARNs are no prediction: the image's own loader configuration, unseen, may cover the place)
    "cdi.nvidia.libcuda": "cuInit",          # no driver libcuda (none mounted, or the toolkit stub): no driver API
    "cdi.nvidia.ptxjit": "cuModuleLoadData",  # no PTX JIT compiler: CUDA_ERROR_JIT_COMPILER_NOT_FOUND (221)
    # a value that is not a probe step is a compute check: the mounted libcuda is not the driver root's file of the
    # running driver, so the binding (the loaded libcuda is that file) cannot PASS: a PASS means the libcuda that
    # answered is not the one the spec gives (issue 32: a probe replaced through a spec hashed the driver's file)
    "cdi.host.libcuda_identity": "compute.driver.binding",
}


def step_index(step):
    """Position of a probe step in _probe.COMPUTE_STEPS (None for an unknown or absent step)."""
    return COMPUTE_STEPS.index(step) if step in COMPUTE_STEPS else None


def _container_steps(compute_record):
    return (((compute_record or {}).get("evidence") or {}).get("container") or {}).get("steps") or []


def contradictions(cdi_record, compute_record):
    """The cdi checks (WARN/FAIL, rows of PREDICTS) whose predicted step (or compute check) PASSed in the container:
    a list of {check, status, subject, observed, step}."""
    passed = set(s.get("step") for s in _container_steps(compute_record) if s.get("ok"))
    passed |= set(c.get("id") for c in (compute_record or {}).get("checks") or [] if c.get("status") == PASS)
    out = []
    for check in (cdi_record or {}).get("checks") or []:
        step = PREDICTS.get(check.get("id"))
        if step and check.get("status") in (FAIL, WARN) and step in passed:
            out.append({"check": check["id"], "status": check["status"], "subject": check.get("subject"),
                        "observed": check.get("observed"), "step": step})
    return out


def container_failure(compute_record):
    """Where the container's probe failed: {step, signature, uuid} (the global step that failed, else the first
    expected GPU row that FAILed and its first failed step; a GPU missing from the listing fails at
    cuDeviceGetCount; step None when the record does not say)."""
    record = compute_record or {}
    evidence = record.get("evidence") or {}
    steps = _container_steps(record)
    failed = next((s for s in steps if s.get("device") is None and not s.get("ok")), None)
    if failed is not None:
        return {"step": failed.get("step"), "signature": record.get("signature"), "uuid": None}
    row = next((r for r in evidence.get("gpus") or [] if isinstance(r, dict) and r.get("expected") and r.get("status") == FAIL), None)
    if row is None:
        hung = (evidence.get("container") or {}).get("hung_step")
        return {"step": hung, "signature": record.get("signature"), "uuid": None}
    uuid = row.get("uuid")
    step = next((s.get("step") for s in steps if not s.get("ok") and uuid and norm_uuid(s.get("uuid")) == norm_uuid(uuid)),
                None)
    if step is None and row.get("signature") == "compute.gpu.missing":
        step = "cuDeviceGetCount"
    return {"step": step, "signature": row.get("signature") or record.get("signature"), "uuid": uuid}


def host_outcome(compute_record, uuid=None):
    """The host control's outcome for the GPU ``uuid`` when it reports one per GPU (evidence.host_control.gpus),
    else its global one: {status, step, signature}. The step is evidence.host_control.failed_step, else the
    first failed step of its own steps, else its hung step."""
    control = (((compute_record or {}).get("evidence") or {}).get("host_control")) or {}
    for gpu in control.get("gpus") or []:
        if uuid and isinstance(gpu, dict) and norm_uuid(gpu.get("uuid")) == norm_uuid(uuid):
            return {"status": gpu.get("status") or NOT_RUN, "step": gpu.get("step"), "signature": gpu.get("signature")}
    step = control.get("failed_step")
    if step is None and control.get("status") == FAIL:
        step = next((s.get("step") for s in control.get("steps") or [] if not s.get("ok")), control.get("hung_step"))
    return {"status": control.get("status") or NOT_RUN, "step": step, "signature": control.get("signature")}


def host_explains(container, host):
    """The host control explains the container's failure only when it failed with the same kind of failure
    (signature) at the same step or earlier (``container_failure``/``host_outcome`` dicts)."""
    if host["status"] != FAIL or host["signature"] != container["signature"]:
        return False
    c, h = step_index(container["step"]), step_index(host["step"])
    return c is None or h is None or h <= c


def where_text(outcome):
    return "%s%s" % (outcome.get("signature") or "a failure", " at %s" % outcome["step"] if outcome.get("step") else "")


# ---------------------------------------------------------------------------------------------------
# Which spec edit, or which setting of the image, explains a failure

def mount_of(path, edits):
    """The spec mount that put the container file ``path`` there (that file, or a directory holding it)."""
    for m in edits.get("mounts") or []:
        point = m.get("containerPath")
        if _same(point, path) or _under(path, point):
            return m
    return None


def env_edit(key, edits):
    """The spec's env edit of ``key`` (KEY=VALUE), or None."""
    return next((str(e) for e in edits.get("env") or [] if str(e).partition("=")[0] == key), None)


# The container environment variables that change what the probe's CUDA does, and the probe steps at which
# each can make it fail. Set by the spec's env edits they are the spec's; set in the container otherwise
# (the runtime adds none of these) they are the image's. NVIDIA_VISIBLE_DEVICES is not here: CUDA does not
# read it (a legacy NVIDIA runtime hook does: the runtime's), and CUDA_DEVICE_ORDER only renumbers devices,
# which the probe (matching by UUID) does not depend on.
ENV_BREAKS = {
    "CUDA_VISIBLE_DEVICES": ("cuInit", "cuDeviceGetCount", "cuDeviceGet"),
    "LD_PRELOAD": ("dlopen", "cuInit", "cuDriverGetVersion"),
    "LD_LIBRARY_PATH": ("dlopen", "cuInit", "cuDriverGetVersion"),
    "CUDA_DISABLE_PTX_JIT": ("cuModuleLoadData",),
}


def container_env(records):
    """The container's environment as the runtime layer saw it (runtime evidence.observed.env)."""
    return ((((records.get("runtime") or {}).get("evidence") or {}).get("observed") or {}).get("env")) or {}


def loaded_libcuda(compute_record):
    """The libcuda file the container's probe loaded or tried to load (its dlopen step), or None."""
    step = next((s for s in _container_steps(compute_record) if s.get("step") == "dlopen"), None)
    if step is None:
        return None
    if step.get("ok"):
        return step.get("realpath") or step.get("path")
    paths = paths_in(step.get("error"))
    return paths[0] if paths else None


def _env_explains(key, value, failure, libcuda, edits):
    """Whether ``key``=``value`` in the container can explain ``failure``: the step that failed is one the
    variable can break; a loader variable only when the libcuda that answered is no spec mount and is what it
    points at (a file of LD_PRELOAD, a file in a directory of LD_LIBRARY_PATH)."""
    if failure.get("step") not in ENV_BREAKS.get(key, ()):
        return False
    if key == "LD_LIBRARY_PATH":
        return bool(libcuda) and mount_of(libcuda, edits) is None and any(
            _same(posixpath.dirname(libcuda), d) for d in str(value).split(":") if d)
    if key == "LD_PRELOAD":
        return bool(libcuda) and mount_of(libcuda, edits) is None and any(
            _same(libcuda, f) for f in re.split(r"[\s:]+", str(value)) if f)
    return True


def spec_edit_named(records, failure):
    """The spec edit that explains a compute failure (``container_failure``), as {edit, words}, or None:
    - the failure sits at what an edit made, applied as asked (``_faithful.edit_caused``: the libcuda that answered
      or that dlopen refused is a file the spec mounted and the failure is one the libcuda file causes, the PTX JIT
      compiler CUDA could not use is the spec's mount of that name, ...);
    - an env edit of the spec sets a variable (ENV_BREAKS) that can break the step that failed."""
    edits = spec_edits(records)
    libcuda = loaded_libcuda(records.get("compute"))
    caused = edit_caused(records, edits, failure)
    if caused:
        return {"edit": caused[0]["edit"], "words": caused[0]["words"]}
    for key in ENV_BREAKS:
        item = env_edit(key, edits)
        if item is not None and _env_explains(key, item.partition("=")[2], failure, libcuda, edits):
            return {"edit": describe_edit("env", item), "words": "set by the spec; %s can fail at %s" % (key, failure["step"])}
    return None


def image_setting(records, failure):
    """A setting of the image (a variable of ENV_BREAKS in the container's env that no spec env edit set, or the
    image's own libcuda answering a library failure) that explains a compute failure, as a sentence, or None."""
    edits = spec_edits(records)
    env = container_env(records)
    libcuda = loaded_libcuda(records.get("compute"))
    for key in ENV_BREAKS:
        if key in env and env_edit(key, edits) is None and _env_explains(key, env[key], failure, libcuda, edits):
            return "the image sets %s=%s (no spec edit sets it), which can fail %s" % (key, env[key], failure["step"])
    foreign = foreign_libraries(records.get("compute")) if failure.get("signature") == "compute.driver.binding" else []
    if foreign:
        own = [path for path in foreign if mount_of(path, edits) is None]
        return "the driver library loaded into the probe, %s, is the image's own (no spec mount put it there)" % (
            ", ".join(own)) if own and len(own) == len(foreign) else None
    if libcuda and failure.get("signature") in LIBCUDA_CAUSED and mount_of(libcuda, edits) is None:
        return "the libcuda that answered, %s, is the image's own (no spec mount put it there)" % libcuda
    return None


def image_env(records):
    """The variables of ENV_BREAKS the image sets (in the container's env, set by no spec edit): KEY=VALUE."""
    edits = spec_edits(records)
    return ["%s=%s" % (k, v) for k, v in sorted(container_env(records).items())
            if k in ENV_BREAKS and env_edit(k, edits) is None]
