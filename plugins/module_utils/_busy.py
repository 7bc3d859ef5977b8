# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: whether the GPUs are busy, read from a host layer record; not public API.

The runtime layer (what the probe may touch) and the compute layer (which rows are NOT_RUN) both ask this of
the host record, through the contract only (``evidence.nvml.gpus[].compute_processes``), never by importing
the host layer: layers meet only through their records.
"""

from __future__ import annotations


def gpu_compute_processes(host_record):
    """The compute processes NVML saw on each GPU: a list of {gpu_index, gpu_uuid, pid, used_gpu_memory_bytes}.

    Returns None when that is unknown (NVML did not run, or the list of some GPU could not be read): the
    compute layer must then treat the GPU as possibly busy, never as idle.
    """
    nvml = ((host_record or {}).get("evidence") or {}).get("nvml") or {}
    if not nvml.get("ok"):
        return None
    out = []
    for gpu in nvml.get("gpus") or []:
        if gpu.get("compute_processes") is None:
            return None
        for proc in gpu["compute_processes"]:
            out.append({"gpu_index": gpu.get("index"), "gpu_uuid": gpu.get("uuid"), "pid": proc.get("pid"),
                        "used_gpu_memory_bytes": proc.get("used_gpu_memory_bytes")})
    return out


def busy_reason(busy):
    gpus = sorted(set(str(p.get("gpu_uuid") or p.get("gpu_index")) for p in busy))
    return "GPU in use, not preempting: %d compute process(es) on %s" % (len(busy), ", ".join(gpus))


UNKNOWN_BUSY = ("cannot tell whether the GPU is in use: no host NVML evidence of compute processes "
                "(allow_busy_gpu: true probes anyway)")


def busy_plan(host_record, allow_busy_gpu=False):
    """What the probe may touch, from the host's compute processes. Returns dict busy (the processes, None when
    unknown), skip_uuids (busy GPUs: listed in the container, never touched) and skip_reason (compute must not
    run at all: the busy state is unknown, or a busy GPU has no UUID to skip it by)."""
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
