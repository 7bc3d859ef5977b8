# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: whether the GPUs are busy, read from a host layer record; not public API.

The runtime layer (what the probe may touch) and the compute layer (which rows are NOT_RUN) both ask this of
the host record, through the contract only (``evidence.nvml.gpus[]``: ``compute_processes`` and, on a MIG GPU,
each MIG device's own ``compute_processes``), never by importing the host layer: layers meet only through their
records.

Busy is per device CUDA can be given: a GPU without MIG, or one MIG instance of a GPU with MIG enabled (CUDA sees
only the instances then, each by its MIG UUID). An instance's busy state is known where NVML gives it: the process
list of its MIG device handle (busy or idle), and the parent's list, whose processes carry their GPU and compute
instance ids (busy only: NVML gives that aggregate list only to a privileged caller, so an empty one proves no
instance idle). A parent-level process without instance ids that no instance listed could run on any of them: every
instance of that GPU not known busy is then unknown. Unknown is never idle: such an instance gets an entry with
``pid`` null and ``unknown`` (the reason), so it is skipped like a busy one and never touched.
"""

from __future__ import annotations

MIG_ENABLED = 1             # NVML_DEVICE_MIG_ENABLE (nvml mig_mode.current)


def _entry(gpu, proc, uuid=None, instance=None):
    entry = {"gpu_index": gpu.get("index"), "gpu_uuid": uuid or gpu.get("uuid"), "pid": proc.get("pid"),
             "used_gpu_memory_bytes": proc.get("used_gpu_memory_bytes")}
    if instance is not None:
        entry.update(parent_uuid=gpu.get("uuid"), gi=instance.get("gi"), ci=instance.get("ci"))
    return entry


def _unknown(gpu, instance, why):
    return {"gpu_index": gpu.get("index"), "gpu_uuid": instance.get("uuid"), "pid": None, "used_gpu_memory_bytes": None,
            "parent_uuid": gpu.get("uuid"), "gi": instance.get("gi"), "ci": instance.get("ci"),
            "unknown": "busy state unknown: %s" % why}


def _on_instance(proc, instance):
    """Whether a parent-level process runs on ``instance`` by its instance ids (a GPU instance without a compute
    instance id given: every compute instance of that GPU instance)."""
    gi, ci = proc.get("gpu_instance_id"), proc.get("compute_instance_id")
    return gi is not None and gi == instance.get("gi") and (ci is None or ci == instance.get("ci"))


def _mig_enabled(gpu):
    """True (MIG on: CUDA sees the instances), False (off, not supported, or a record without MIG fields) or None
    (NVML could not say: the MIG mode read failed other than NVML_ERROR_NOT_SUPPORTED)."""
    mode = gpu.get("mig_mode")
    if mode:
        return mode.get("current") == MIG_ENABLED
    if gpu.get("mig_devices"):
        return True
    error = str((gpu.get("errors") or {}).get("mig_mode") or "")
    return None if error and "NVML_ERROR_NOT_SUPPORTED" not in error else False


def _instance_entries(gpu):
    """The busy entries of the MIG instances of a GPU with MIG enabled; None when the instances are not known."""
    instances = gpu.get("mig_devices")
    if instances is None:
        return None
    parent = gpu.get("compute_processes") or []
    listed = set(p.get("pid") for inst in instances for p in inst.get("compute_processes") or [])
    # a parent-level process without instance ids that no instance listed could run on any of them
    loose = [p for p in parent if not any(_on_instance(p, inst) for inst in instances) and p.get("pid") not in listed]
    out = []
    for inst in instances:
        own = inst.get("compute_processes")
        procs = list(own or [])
        procs += [p for p in parent if _on_instance(p, inst) and p.get("pid") not in set(q.get("pid") for q in procs)]
        errors = inst.get("errors") or {}
        if procs:
            out.extend(_entry(gpu, p, inst.get("uuid"), inst) for p in procs)
        elif own is None:
            # an empty parent list proves nothing here: NVML gives the aggregate only to a privileged caller
            out.append(_unknown(gpu, inst, "NVML did not list this MIG instance's processes (%s)" % (
                errors.get("compute_processes") or errors.get("handle"))))
        elif loose:
            out.append(_unknown(gpu, inst, "pid %s on GPU %s has no MIG instance id and no MIG instance listed it" % (
                ", ".join(str(p.get("pid")) for p in loose), gpu.get("uuid"))))
    return out


def gpu_compute_processes(host_record):
    """The compute processes NVML saw on each device CUDA can be given: a list of {gpu_index, gpu_uuid, pid,
    used_gpu_memory_bytes}; on a MIG instance ``gpu_uuid`` is the instance's MIG UUID and parent_uuid, gi, ci are
    added; an instance whose busy state is unknown has one entry with ``pid`` None and ``unknown`` (why).

    Returns None when that is unknown for the whole node (NVML did not run, the list of a GPU without MIG could not
    be read, or the MIG mode or instances of a GPU are unknown): the compute layer must then treat every GPU as
    possibly busy, never as idle.
    """
    nvml = ((host_record or {}).get("evidence") or {}).get("nvml") or {}
    if not nvml.get("ok"):
        return None
    out = []
    for gpu in nvml.get("gpus") or []:
        mig = _mig_enabled(gpu)
        if mig is None:
            return None
        if mig:
            entries = _instance_entries(gpu)
            if entries is None:
                return None
            out.extend(entries)
            continue
        if gpu.get("compute_processes") is None:
            return None
        out.extend(_entry(gpu, proc) for proc in gpu["compute_processes"])
    return out


def is_unknown(entry):
    return bool(entry.get("unknown"))


def busy_text(procs):
    """Why these entries (of one device) keep the probe away: 'GPU in use, not preempting: pid …' or the unknown."""
    pids = [str(p.get("pid")) for p in procs if not is_unknown(p)]
    if pids:
        return "GPU in use, not preempting: pid %s" % ", ".join(pids)
    return "; ".join(sorted(set(p["unknown"] for p in procs if is_unknown(p)))) + ", not touching it"


def busy_reason(busy):
    known = [p for p in busy if not is_unknown(p)]
    unknown = [p for p in busy if is_unknown(p)]
    parts = []
    if known:
        gpus = sorted(set(str(p.get("gpu_uuid") or p.get("gpu_index")) for p in known))
        parts.append("GPU in use, not preempting: %d compute process(es) on %s" % (len(known), ", ".join(gpus)))
    if unknown:
        parts.append("busy state unknown on %s, not touching it" % ", ".join(
            sorted(set(str(p.get("gpu_uuid") or p.get("gpu_index")) for p in unknown))))
    return "; ".join(parts)


UNKNOWN_BUSY = ("cannot tell whether the GPU is in use: no host NVML evidence of compute processes "
                "(allow_busy_gpu: true probes anyway)")


def busy_plan(host_record, allow_busy_gpu=False):
    """What the probe may touch, from the host's compute processes. Returns dict busy (the processes, None when
    unknown), skip_uuids (busy GPUs and MIG instances, and instances whose busy state is unknown: listed in the
    container, never touched) and skip_reason (compute must not run at all: the busy state is unknown, or a busy
    device has no UUID to skip it by)."""
    busy = gpu_compute_processes(host_record)
    plan = {"busy": busy, "skip_uuids": [], "skip_reason": None}
    if allow_busy_gpu:
        return plan
    if busy is None:
        plan["skip_reason"] = UNKNOWN_BUSY
    elif any(not p.get("gpu_uuid") for p in busy):
        plan["skip_reason"] = busy_reason(busy) + " (a GPU without a UUID cannot be skipped alone)"
    else:
        plan["skip_uuids"] = sorted(set(p["gpu_uuid"] for p in busy))
    return plan
