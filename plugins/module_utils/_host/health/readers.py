# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: the NVML health readers of the host layer (the readings the host.health.* checks judge). Not public API.

Read-only: counters are read, never reset, and no mode is changed. ``read_gpu_health`` is handed the pynvml module
and a GPU's handle by _host/nvml.py's ``read_nvml`` (the one place that initialises NVML) and returns the raw
readings, each call on its own: a reading the driver or the VM does not expose leaves its NVML error text, with the
error code name, in ``errors``. ``read_mig_health`` does the same for one MIG device. The fabric registration is read
through this module's own ctypes structures (``_FabricInfoV1``, ``_FabricInfoV2``). ``health_evidence`` moves the
readings out of the NVML evidence into ``evidence.health`` (docs/contract.md), with this boot's Xid events
(_host/health/xid.py), the dcgmi diag answer (_host/health/dcgm.py) and the thresholds in force.
"""

from __future__ import annotations

import ctypes
import time

from ansible_collections.gpuprobe.layers.plugins.module_utils._host.health.limits import DEFAULT_THRESHOLDS

FIELD_RECOVERY_ACTION = 230      # NVML_FI_DEV_GET_GPU_RECOVERY_ACTION (drivers from R570)
FIELD_RESET_STATUS = 226         # NVML_FI_DEV_RESET_STATUS: a reset is required (before R570; deprecated for 230)
FIELD_DRAIN_AND_RESET = 227      # NVML_FI_DEV_DRAIN_AND_RESET_STATUS: drain and reset recommended (idem)
NVLINK_MAX_LINKS = 18            # NVML_NVLINK_MAX_LINKS of a pynvml that has no such constant
# nvmlMemoryLocation_t values that are not DRAM: on a MIG device handle NVML gives only these, uncorrected
# volatile (its nvmlDeviceGetMemoryErrorCounter documentation)
SRAM_LOCATIONS = ((0, "l1_cache"), (1, "l2_cache"), (3, "register_file"), (4, "texture_memory"), (5, "texture_shm"),
                  (6, "cbu"), (7, "sram"))


def error_code_name(pynvml_module, value):
    """The name of pynvml's NVML_ERROR_* constant whose value is ``value``, or None (nvml.py says errors with it)."""
    for name in dir(pynvml_module):
        if name.startswith("NVML_ERROR_") and getattr(pynvml_module, name, None) == value:
            return name
    return None


# ---- reading (pynvml is handed in by _host/nvml.py's read_nvml) -----------------------------------------------

def _absent(errors, key, name):
    errors[key] = "this pynvml has no %s" % name
    return None


def _read(nv, call, errors, key, name, *args):
    func = getattr(nv, name, None)
    if func is None:
        return _absent(errors, key, name)
    return call(nv, errors, key, func, *args)


class _FabricInfoV1(ctypes.Structure):
    """nvmlGpuFabricInfo_t as nvml.h lays it out. Ours, not pynvml's: some pynvml releases declare clusterUuid with
    80 bytes (NVML_DEVICE_UUID_BUFFER_SIZE) instead of 16, which moves status, cliqueId and state out of what NVML
    writes (the state then always reads 0, 'not supported')."""
    _fields_ = [("clusterUuid", ctypes.c_ubyte * 16), ("status", ctypes.c_uint), ("cliqueId", ctypes.c_uint),
                ("state", ctypes.c_ubyte)]


class _FabricInfoV2(ctypes.Structure):
    """nvmlGpuFabricInfo_v2_t (nvmlDeviceGetGpuFabricInfoV): version, the same fields, then healthMask."""
    _fields_ = [("version", ctypes.c_uint), ("clusterUuid", ctypes.c_ubyte * 16), ("status", ctypes.c_uint),
                ("cliqueId", ctypes.c_uint), ("state", ctypes.c_ubyte), ("healthMask", ctypes.c_uint)]


FABRIC_INFO_V2 = ctypes.sizeof(_FabricInfoV2) | (2 << 24)    # nvmlGpuFabricInfo_v2 (0x02000024)


def _fabric(nv, call, errors, handle):
    """The fabric registration through our own structures (see _FabricInfoV1): the versioned call (with the health
    mask) where pynvml and the driver have it, else the first one."""
    info = None
    if getattr(nv, "nvmlDeviceGetGpuFabricInfoV", None) is not None:
        info = _FabricInfoV2(version=FABRIC_INFO_V2)
        call(nv, errors, "fabric", nv.nvmlDeviceGetGpuFabricInfoV, handle, ctypes.byref(info))
        if "fabric" in errors:
            info = None
            # a driver older than the versioned call, or one that refuses its version: try the first call
            if "FUNCTION_NOT_FOUND" in errors["fabric"] or "ARGUMENT_VERSION_MISMATCH" in errors["fabric"]:
                del errors["fabric"]
            else:
                return None
    if info is None:
        if getattr(nv, "nvmlDeviceGetGpuFabricInfo", None) is None:
            return _absent(errors, "fabric", "nvmlDeviceGetGpuFabricInfo")
        info = _FabricInfoV1()
        call(nv, errors, "fabric", nv.nvmlDeviceGetGpuFabricInfo, handle, ctypes.byref(info))
        if "fabric" in errors:
            return None
    mask = getattr(info, "healthMask", None)
    return {"state": int(info.state), "status": int(info.status), "clique_id": int(info.cliqueId),
            "cluster_uuid": bytes(bytearray(info.clusterUuid)).hex(), "health_mask": None if mask is None else int(mask)}


def _field_error(nv, field, code):
    return "field %d: %s (code %s)" % (field, error_code_name(nv, code) or "unknown NVML error", code)


def _recovery_action(nv, call, errors, handle):
    """{action, reset_required, drain_and_reset}: the recovery action field (R570+) and the two fields it replaced,
    each None with its field's NVML code in errors where the driver does not give it."""
    fields = (FIELD_RECOVERY_ACTION, FIELD_RESET_STATUS, FIELD_DRAIN_AND_RESET)
    values = _read(nv, call, errors, "recovery_action", "nvmlDeviceGetFieldValues", handle, list(fields))
    if values is None:
        return None
    out = {}
    for key, field, value in zip(("action", "reset_required", "drain_and_reset"), fields, values):
        if value.nvmlReturn != 0:   # the field's own return code (NOT_SUPPORTED on a driver without it)
            errors["recovery_action" if key == "action" else key] = _field_error(nv, field, value.nvmlReturn)
            out[key] = None
        else:
            out[key] = int(value.value.uiVal)
    return out


def _nvlink(nv, call, errors, handle):
    """{links: {link: state}, errors: {NVML error text: [links]}} for links 0 .. NVML_NVLINK_MAX_LINKS - 1."""
    func = getattr(nv, "nvmlDeviceGetNvLinkState", None)
    if func is None:
        return _absent(errors, "nvlink", "nvmlDeviceGetNvLinkState")
    links, failed = {}, {}
    for link in range(int(getattr(nv, "NVML_NVLINK_MAX_LINKS", NVLINK_MAX_LINKS))):
        per = {}
        state = call(nv, per, "link", func, handle, link)
        if "link" in per:
            failed.setdefault(per["link"], []).append(link)
        else:
            links[str(link)] = int(state)
    if not links:
        errors["nvlink"] = "; ".join("%s on links %s" % (text, ranges(ls)) for text, ls in sorted(failed.items()))
    return {"links": links, "errors": failed}


def ranges(numbers):
    """[0, 1, 2, 5] -> "0-2, 5"."""
    runs = []
    for n in sorted(numbers):
        if runs and n == runs[-1][1] + 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    return ", ".join(str(a) if a == b else "%d-%d" % (a, b) for a, b in runs)


def _histogram(nv, call, errors, handle):
    found = _read(nv, call, errors, "row_remap_histogram", "nvmlDeviceGetRowRemapperHistogram", handle)
    if found is None:
        return None
    return dict((k, int(getattr(found, k))) for k in ("max", "high", "partial", "low", "none"))


def read_mig_health(nv, mig, call):
    """The health readings NVML gives per MIG device (its MIG device handle ``mig``): the uncorrected volatile error
    counts of each non-DRAM memory (nvmlDeviceGetMemoryErrorCounter; NVML gives no DRAM or aggregate count per
    instance). Read-only."""
    errors = {}
    counts = {}
    func = getattr(nv, "nvmlDeviceGetMemoryErrorCounter", None)
    if func is None:
        _absent(errors, "sram_uncorrected_volatile", "nvmlDeviceGetMemoryErrorCounter")
    else:
        for location, lname in SRAM_LOCATIONS:
            # NVML_MEMORY_ERROR_TYPE_UNCORRECTED (1), NVML_VOLATILE_ECC (0)
            counts[lname] = call(nv, errors, "sram_" + lname, func, mig, 1, 0, location)
    return {"sram_uncorrected_volatile": counts, "errors": errors}


def read_gpu_health(nv, handle, call):
    """The raw health readings of one GPU. ``call(nv, errors, key, func, *args)`` is _host/nvml.py's per-call wrapper (it
    records the NVML error text, with its code name, under ``errors[key]`` and returns None). Read-only calls only."""
    errors = {}
    health = {"errors": errors}
    mode = _read(nv, call, errors, "ecc_mode", "nvmlDeviceGetEccMode", handle)
    health["ecc_mode"] = {"current": mode[0], "pending": mode[1]} if mode is not None else None
    counts = {}
    for etype, ename in ((1, "uncorrected"), (0, "corrected")):      # NVML_MEMORY_ERROR_TYPE_*
        for ctype, cname in ((0, "volatile"), (1, "aggregate")):      # NVML_VOLATILE_ECC / NVML_AGGREGATE_ECC
            key = "ecc_%s_%s" % (ename, cname)
            counts["%s_%s" % (ename, cname)] = _read(nv, call, errors, key, "nvmlDeviceGetTotalEccErrors", handle, etype, ctype)
    health["ecc_errors"] = counts
    pages = {}
    for cause, cname in ((0, "single_bit"), (1, "double_bit")):      # NVML_PAGE_RETIREMENT_CAUSE_*
        found = _read(nv, call, errors, "retired_pages_%s" % cname, "nvmlDeviceGetRetiredPages", handle, cause)
        pages[cname] = len(found) if found is not None else None
    pending = _read(nv, call, errors, "retired_pages_pending", "nvmlDeviceGetRetiredPagesPendingStatus", handle)
    pages["pending"] = bool(pending) if pending is not None else None
    health["retired_pages"] = pages
    rows = _read(nv, call, errors, "remapped_rows", "nvmlDeviceGetRemappedRows", handle)
    health["remapped_rows"] = dict(zip(("corrected", "uncorrected", "pending", "failure"), (int(v) for v in rows))) \
        if rows is not None else None
    health["row_remap_histogram"] = _histogram(nv, call, errors, handle) if rows is not None else None
    source = "nvmlDeviceGetCurrentClocksEventReasons"
    if getattr(nv, source, None) is None:
        source = "nvmlDeviceGetCurrentClocksThrottleReasons"
    health["clock_event_reasons"] = _read(nv, call, errors, "clock_event_reasons", source, handle)
    health["clock_event_source"] = source
    health["temperature_c"] = _read(nv, call, errors, "temperature_c", "nvmlDeviceGetTemperature", handle, 0)  # NVML_TEMPERATURE_GPU
    health["temperature_slowdown_c"] = _read(nv, call, errors, "temperature_slowdown_c", "nvmlDeviceGetTemperatureThreshold",
                                             handle, 1)  # NVML_TEMPERATURE_THRESHOLD_SLOWDOWN
    health["temperature_shutdown_c"] = _read(nv, call, errors, "temperature_shutdown_c", "nvmlDeviceGetTemperatureThreshold",
                                             handle, 0)  # NVML_TEMPERATURE_THRESHOLD_SHUTDOWN
    health["pcie"] = dict((key, _read(nv, call, errors, "pcie_" + key, name, handle)) for key, name in (
        ("generation_current", "nvmlDeviceGetCurrPcieLinkGeneration"), ("generation_max", "nvmlDeviceGetMaxPcieLinkGeneration"),
        ("generation_gpu_max", "nvmlDeviceGetGpuMaxPcieLinkGeneration"), ("width_current", "nvmlDeviceGetCurrPcieLinkWidth"),
        ("width_max", "nvmlDeviceGetMaxPcieLinkWidth"), ("replay_counter", "nvmlDeviceGetPcieReplayCounter")))
    health["pcie"]["replay_read_at"] = time.monotonic()    # nvml.py reads the counter again at its end (replay_again)
    recovery = _recovery_action(nv, call, errors, handle) or {}
    health["recovery_action"] = recovery.get("action")
    health["reset_status"] = dict((k, recovery.get(k)) for k in ("reset_required", "drain_and_reset"))
    health["fabric"] = _fabric(nv, call, errors, handle)
    health["nvlink"] = _nvlink(nv, call, errors, handle)
    return health


def health_evidence(nvml, xids, thresholds=None, dcgm=None):
    """evidence.health: {gpus: [{index, uuid, pci_bus_id, <readings>, mig: [{slot, uuid, gi, ci, <readings>}],
    errors}], kernel_log: {...}, thresholds: the thresholds in force, dcgm_diag: read_dcgm_diag's answer}. Takes the
    readings out of NVML's per-GPU and per-MIG-device evidence (they are kept once, here)."""
    gpus = []
    for gpu in nvml.get("gpus") or []:
        readings = gpu.pop("health", None)
        entry = {"index": gpu.get("index"), "uuid": gpu.get("uuid"), "pci_bus_id": gpu.get("pci_bus_id")}
        if readings is None:   # no handle: nothing could be read on this GPU
            entry["unread"] = (gpu.get("errors") or {}).get("handle") or "no NVML handle"
        else:
            entry.update(readings)
        mig = []
        for dev in gpu.get("mig_devices") or []:
            found = dev.pop("health", None)
            if found is not None:
                mig.append(dict(found, slot=dev.get("slot"), uuid=dev.get("uuid"), gi=dev.get("gi"), ci=dev.get("ci")))
        entry["mig"] = mig
        gpus.append(entry)
    return {"gpus": gpus, "kernel_log": xids, "thresholds": dict(thresholds or DEFAULT_THRESHOLDS),
            "dcgm_diag": dcgm or {"asked": 0, "ran": False, "why": "not asked (dcgm_diag: 0)", "tests": []}}
