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

Every way NVML can leave an instance's state open, and what it gives here (docs/contract.md, "compute layer"):
- a parent-level process without instance ids that no instance lists: every instance not known busy is unknown;
- a parent-level process whose instance ids name no instance NVML enumerated (or a MIG GPU with processes and no
  instance enumerated): it runs on an instance CUDA may list under a UUID unknown here, so that instance is unknown
  with no UUID (``gpu_uuid`` null) and no GPU of the node can be left alone by UUID: nothing is touched;
- an instance whose own list NVML did not give (null: NVML_ERROR_NOT_SUPPORTED, no handle): unknown;
- a busy or unknown instance also keeps the probe off any device CUDA names by its parent's UUID (the unversioned
  cuDeviceGetUuid of drivers < 470 gives a MIG device its parent's UUID: which instance it is cannot be told);
- NVML that did not count the GPUs (the inventory then comes from procfs, which has no process list): the node's
  busy state is unknown; a GPU the driver lists in procfs that NVML did not list is unknown.
The MIG mode that counts is the current one (a pending mode applies after a GPU reset: CUDA still sees what the
current mode gives).

What the probe may touch is a positive list (``idle_uuids``), never "whatever is not known busy": a device CUDA lists
under a UUID NVML never listed (an instance NVML did not enumerate, with no process naming it; a GPU NVML did not
count) has no process list that covers it, so it is not known idle and is left alone like a busy one.
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


def _beyond(instances, loose):
    """The parent-level processes no instance lists that run on an instance NVML did not enumerate: their instance ids
    name none of the enumerated ones (each of them with its ids read), or no instance was enumerated."""
    known_ids = all(inst.get("gi") is not None for inst in instances)
    return [p for p in loose if not instances or (p.get("gpu_instance_id") is not None and known_ids)]


def _unenumerated(gpu, instances, loose):
    """The entry of an instance NVML did not enumerate that a parent-level process runs on (None when none can be):
    the process names instance ids no enumerated instance has (each of them with its ids read), or the GPU has
    MIG enabled, processes, and no instance enumerated. Its UUID is unknown: nothing can be skipped by it."""
    beyond = _beyond(instances, loose)
    if not beyond:
        return None
    ids = sorted(set((p.get("gpu_instance_id"), p.get("compute_instance_id")) for p in beyond), key=str)
    return _unknown(gpu, {"uuid": None, "gi": ids[0][0], "ci": ids[0][1]},
                    "pid %s on GPU %s runs on a MIG instance NVML did not enumerate (%s): its UUID is unknown" % (
                        ", ".join(str(p.get("pid")) for p in beyond), gpu.get("uuid"),
                        ", ".join("gi %s ci %s" % i for i in ids)))


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
    beyond = _unenumerated(gpu, instances, loose)
    if beyond is not None:
        out.append(beyond)
    # what could run on any instance: a process no instance id places (one placed on an instance NVML did not
    # enumerate runs there, not here)
    loose = [p for p in loose if p not in _beyond(instances, loose)]
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


def _uncounted(nvml, evidence):
    """True when NVML did not count the GPUs (nvmlDeviceGetCount failed: no GPU listed, none known idle) or the
    host inventory holds a row NVML did not give (procfs: no process list there)."""
    if "gpu_count" in nvml and not isinstance(nvml.get("gpu_count"), int):
        return True
    return any(isinstance(row, dict) and row.get("source") not in (None, "nvml") for row in evidence.get("gpus") or [])


def _bus(text):
    text = str(text or "").lower()
    return text[4:] if len(text) == 16 and text.startswith("0000") else text


def _procfs_only(nvml, evidence):
    """Unknown entries for the GPUs the driver lists in /proc/driver/nvidia/gpus that NVML did not (no process list
    anywhere); a GPU the driver excludes is left out (neither NVML nor CUDA can use it)."""
    gpus = nvml.get("gpus") or []
    buses = set(_bus(g.get("pci_bus_id")) for g in gpus if g.get("pci_bus_id"))
    uuids = set(g.get("uuid") for g in gpus if g.get("uuid"))
    out = []
    for entry in evidence.get("procfs_gpus") or []:
        if not isinstance(entry, dict) or entry.get("excluded") is True:
            continue
        if (entry.get("uuid") and entry["uuid"] in uuids) or _bus(entry.get("pci_bus_id")) in buses:
            continue
        out.append({"gpu_index": None, "gpu_uuid": entry.get("uuid"), "pid": None, "used_gpu_memory_bytes": None,
                    "pci_bus_id": entry.get("pci_bus_id"),
                    "unknown": "busy state unknown: the driver lists GPU %s (%s) and NVML did not, so no process list "
                               "covers it" % (entry.get("uuid") or entry.get("uuid_text") or "?", entry.get("pci_bus_id"))})
    return out


def gpu_compute_processes(host_record):
    """The compute processes NVML saw on each device CUDA can be given: a list of {gpu_index, gpu_uuid, pid,
    used_gpu_memory_bytes}; on a MIG instance ``gpu_uuid`` is the instance's MIG UUID and parent_uuid, gi, ci are
    added; an instance whose busy state is unknown has one entry with ``pid`` None and ``unknown`` (why).

    Returns None when that is unknown for the whole node (NVML did not run or did not count the GPUs, the list of a
    GPU without MIG could not be read, or the MIG mode or instances of a GPU are unknown): the compute layer must then
    treat every GPU as possibly busy, never as idle.
    """
    evidence = (host_record or {}).get("evidence") or {}
    nvml = evidence.get("nvml") or {}
    if not nvml.get("ok") or _uncounted(nvml, evidence):
        return None
    out = _procfs_only(nvml, evidence)
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


def busy_on(busy, uuid, norm=lambda u: str(u).lower()):
    """The entries that keep the probe off the device CUDA names ``uuid``: its own, and on a MIG GPU's parent UUID
    those of every instance of that GPU (a device named by its parent's UUID could be any of them). ``norm``: how
    UUIDs compare (the probe's norm_uuid)."""
    key = norm(uuid) if uuid else None
    if not key:
        return []
    return [p for p in busy or [] if key in (norm(u) for u in (p.get("gpu_uuid"), p.get("parent_uuid")) if u)]


def _name(entry):
    """How a busy entry names its device: its UUID, else its parent and instance ids, else the GPU's index."""
    if entry.get("gpu_uuid"):
        return str(entry["gpu_uuid"])
    if entry.get("parent_uuid"):
        return "a MIG instance (gi %s ci %s) of %s" % (entry.get("gi"), entry.get("ci"), entry["parent_uuid"])
    if entry.get("pci_bus_id"):
        return "the GPU at %s" % entry["pci_bus_id"]
    return "GPU #%s" % entry.get("gpu_index")


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
        gpus = sorted(set(_name(p) for p in known))
        parts.append("GPU in use, not preempting: %d compute process(es) on %s" % (len(known), ", ".join(gpus)))
    if unknown:
        parts.append("busy state unknown on %s, not touching it" % ", ".join(sorted(set(_name(p) for p in unknown))))
    return "; ".join(parts)


UNKNOWN_BUSY = ("cannot tell whether the GPU is in use: no host NVML evidence of compute processes "
                "(allow_busy_gpu: true probes anyway)")


def _idle_uuids(host_record, busy):
    """The UUIDs of the devices NVML positively reported idle: a GPU with MIG off whose process list was read and is
    empty; a MIG instance whose own list was read and no busy or unknown entry names (the parent's processes all carry
    instance ids placing them elsewhere); a MIG GPU's own UUID (what CUDA < 470 names each instance by) only when every
    instance NVML enumerated is idle and no entry names that GPU. Sorted; a GPU only the driver lists is never in it."""
    if busy is None:
        return []
    out = set()
    for gpu in (((host_record or {}).get("evidence") or {}).get("nvml") or {}).get("gpus") or []:
        if _mig_enabled(gpu):
            instances = gpu.get("mig_devices") or []
            listed = [inst["uuid"] for inst in instances if inst.get("uuid") and inst.get("compute_processes") is not None]
            idle = [uuid for uuid in listed if not busy_on(busy, uuid)]
            out.update(idle)
            if gpu.get("uuid") and instances and len(idle) == len(instances) and not busy_on(busy, gpu["uuid"]):
                out.add(gpu["uuid"])
        elif gpu.get("uuid") and gpu.get("compute_processes") == [] and not busy_on(busy, gpu["uuid"]):
            out.add(gpu["uuid"])
    return sorted(out)


def _nvml_uuids(host_record):
    """Every UUID NVML listed on the node (GPUs and MIG instances)."""
    out = set()
    for gpu in (((host_record or {}).get("evidence") or {}).get("nvml") or {}).get("gpus") or []:
        out.update(u for u in [gpu.get("uuid")] + [i.get("uuid") for i in gpu.get("mig_devices") or []] if u)
    return sorted(out)


def busy_plan(host_record, allow_busy_gpu=False):
    """What the probe may touch, from the host's compute processes. Returns dict busy (the processes, None when
    unknown), idle_uuids (the positive list, _idle_uuids: the probe touches only these devices and leaves every other
    one CUDA lists alone, unless allow_busy_gpu: touch_only), nvml_uuids (every UUID NVML listed: says why a device is
    not known idle), allow_busy_gpu and skip_reason (compute must not run at all: the busy state of
    the node is unknown)."""
    busy = gpu_compute_processes(host_record)
    plan = {"busy": busy, "allow_busy_gpu": bool(allow_busy_gpu), "idle_uuids": _idle_uuids(host_record, busy),
            "nvml_uuids": _nvml_uuids(host_record), "skip_reason": None}
    if busy is None and not allow_busy_gpu:
        plan["skip_reason"] = UNKNOWN_BUSY
    return plan


def touch_only(plan):
    """The only UUIDs the probe may touch (the probe's idle_uuids), or None where no busy check was asked
    (allow_busy_gpu: the user's opt-in to run on a busy GPU) or there is no plan."""
    if not plan or plan.get("allow_busy_gpu"):
        return None
    return list(plan.get("idle_uuids") or [])


def not_idle_text(plan, uuid, norm=lambda u: str(u).lower()):
    """Why the device CUDA names ``uuid`` is not known idle (None when NVML reported it idle, or there is no plan): its
    busy or unknown entries (busy_text), else 'not known idle: ' and why NVML did not report it idle."""
    if not plan or (uuid and norm(uuid) in set(norm(u) for u in plan.get("idle_uuids") or [])):
        return None
    procs = busy_on((plan or {}).get("busy"), uuid, norm)
    if procs:
        return busy_text(procs)
    if not uuid:
        return "not known idle: CUDA gave it no UUID, so it cannot be matched to a device NVML reported idle"
    if norm(uuid) not in set(norm(u) for u in (plan or {}).get("nvml_uuids") or []):
        # a process NVML placed on a device it did not list (no UUID) may be on this one
        nameless = [p for p in (plan or {}).get("busy") or [] if not p.get("gpu_uuid")]
        return ("not known idle: NVML on the host never listed %s (a MIG instance or GPU it did not enumerate), so no "
                "process list covers it" % uuid) + ("; %s" % busy_reason(nameless) if nameless else "")
    return ("not known idle: NVML did not report %s idle (a MIG-enabled GPU not every instance of which is known idle: "
            "a driver < 470 names any of them by it)" % uuid)
