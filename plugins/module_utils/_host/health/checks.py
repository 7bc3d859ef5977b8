# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: the per-GPU health checks of the host layer (host.health.*). Not public API.

Read-only: counters are read, never reset, and no mode is changed. ``read_gpu_health`` is handed the pynvml module
and the GPU's handle by _nvml.read_nvml (the one place that initialises NVML) and returns the raw readings, each
call on its own (a reading the driver or the VM does not expose leaves its NVML error text, with the error code
name, in ``errors``); ``read_mig_health`` does the same for one MIG device. ``read_kernel_xids`` reads the NVRM Xid
lines of this boot from the kernel log, and ``read_dcgm_diag`` runs ``dcgmi diag`` where asked, both through
_run.run. ``check_health`` turns them into checks judged against ``THRESHOLDS`` (defaults documented there, in
docs/checks.md and docs/health.md; ``health_thresholds`` overrides them, per inventory group).
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import time

from ansible_collections.gpuprobe.layers.plugins.module_utils._host.busy import busy_reason, gpu_compute_processes
from ansible_collections.gpuprobe.layers.plugins.module_utils._host.health.limits import DEFAULT_THRESHOLDS, THRESHOLDS, judge_replays
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import FAIL, NOT_RUN, PASS, WARN
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.run import run, which

KERNEL_LOG_TIMEOUT = 15.0
XID_PREFIX = b"NVRM: Xid"
# the kernel log of this boot, first source that answers with any line (a booted kernel's log is never empty)
KERNEL_LOG_COMMANDS = (("journalctl", "-k", "-b", "--no-pager", "-q", "-o", "cat"), ("dmesg", "--notime"))
FIELD_RECOVERY_ACTION = 230      # NVML_FI_DEV_GET_GPU_RECOVERY_ACTION (drivers from R570)
FIELD_RESET_STATUS = 226         # NVML_FI_DEV_RESET_STATUS: a reset is required (before R570; deprecated for 230)
FIELD_DRAIN_AND_RESET = 227      # NVML_FI_DEV_DRAIN_AND_RESET_STATUS: drain and reset recommended (idem)
NVLINK_MAX_LINKS = 18            # NVML_NVLINK_MAX_LINKS of a pynvml that has no such constant
NVLINK_STATES = {0: "inactive", 1: "active", 2: "sleep", 3: "active, traffic disabled"}   # NVML_NVLINK_STATE_*
# nvmlMemoryLocation_t values that are not DRAM: on a MIG device handle NVML gives only these, uncorrected
# volatile (its nvmlDeviceGetMemoryErrorCounter documentation)
SRAM_LOCATIONS = ((0, "l1_cache"), (1, "l2_cache"), (3, "register_file"), (4, "texture_memory"), (5, "texture_shm"),
                  (6, "cbu"), (7, "sram"))
RECOVERY_ACTIONS = {0: ("none", PASS), 1: ("GPU reset", FAIL), 2: ("node reboot", FAIL), 3: ("drain peer-to-peer", WARN),
                    4: ("drain and reset", FAIL), 5: ("recover the IMEX domain", WARN), 6: ("bus reset", FAIL),
                    7: ("system reboot", FAIL)}
ENABLE_STATES = {0: "disabled", 1: "enabled"}   # NVML_FEATURE_DISABLED / NVML_FEATURE_ENABLED
FABRIC_STATES = {0: "not supported", 1: "not started", 2: "in progress", 3: "completed"}
# nvmlClocksEventReason* bits: (name, status while active)
CLOCK_EVENTS = ((0x1, "gpu_idle", PASS), (0x2, "applications_clocks_setting", PASS), (0x4, "sw_power_cap", PASS),
                (0x8, "hw_slowdown", FAIL), (0x10, "sync_boost", PASS), (0x20, "sw_thermal_slowdown", WARN),
                (0x40, "hw_thermal_slowdown", FAIL), (0x80, "hw_power_brake_slowdown", FAIL),
                (0x100, "display_clock_setting", PASS))
# Xid meanings (NVIDIA's Xid catalogue); the FAIL ones mean memory or the GPU itself is lost or needs a reset
XID_MEANINGS = {
    13: "graphics engine exception (usually an application fault, e.g. an out-of-range access)",
    31: "GPU memory page fault (usually an application's illegal address)",
    32: "invalid or corrupted push buffer stream",
    38: "driver firmware error",
    43: "GPU stopped processing (a faulting application's channel was reset)",
    45: "preemptive cleanup after previous errors (a process ended while its work ran)",
    48: "double-bit ECC error (uncorrectable memory error)",
    56: "display engine error",
    57: "error programming video memory interface",
    61: "internal micro-controller breakpoint/warning",
    62: "internal micro-controller halt",
    63: "ECC page retirement or row remapping recording event (a reset is needed to apply it)",
    64: "ECC page retirement or row remapper recording failure",
    68: "video processor exception",
    69: "graphics engine class error",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    92: "high single-bit ECC error rate",
    94: "contained ECC error (the application on the bad memory was stopped; the GPU needs a reset)",
    95: "uncontained ECC error (every application on the GPU is affected; the GPU needs a reset)",
    109: "context switch timeout",
    119: "GSP RPC timeout",
    120: "GSP error",
    121: "C2C link corrected error",
    140: "unrecovered ECC error",
    154: "GPU recovery action changed (the driver asks for a reset or a reboot)",
}
XID_FAIL = frozenset((48, 63, 64, 79, 94, 95))
# "NVRM: Xid (PCI:0000:01:00): 94, ..." and, on a MIG GPU, "NVRM: Xid (PCI:0000:01:00 GPU-I:05): 94, ..." (NVIDIA's
# GPU memory error management guide, Table 3): the GPU instance the event hit
_XID = re.compile(r"NVRM: Xid \(PCI:([0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})(?:\.[0-7])?(?: GPU-I:(\d+))?\): "
                  r"(\d+)(?:, (.*))?")


# THRESHOLDS (each against DCGM's default) and DEFAULT_THRESHOLDS live in _health_limits, imported above

# dcgmi diag: the run level the user asks for (1: seconds, software and deployment checks, no load on the GPU;
# 2-4 load the GPU for minutes to hours) and how long each level may take
DCGM_TIMEOUTS = {1: 120.0, 2: 900.0, 3: 3600.0, 4: 14400.0}
# DCGM's JSON result statuses (dcgmi/Diag.cpp HelperDisplayDiagResult; DCGM 3 printed them in capitals)
DCGM_STATUSES = {"pass": PASS, "fail": FAIL, "warn": WARN, "skip": NOT_RUN, "not run": NOT_RUN}


def check_thresholds(value, name="health_thresholds"):
    """The thresholds in force: THRESHOLDS' defaults with ``value`` (a dict of name -> int >= minimum, or null to
    record without judging) over them. ValueError naming the option for an unknown name or a bad value."""
    if value in (None, {}):
        return dict(DEFAULT_THRESHOLDS)
    if not isinstance(value, dict):
        raise ValueError("%s must be a dict of threshold name -> number (got %s)" % (name, type(value).__name__))
    out = dict(DEFAULT_THRESHOLDS)
    for key in sorted(value, key=str):
        if key not in THRESHOLDS:
            raise ValueError("%s: unknown threshold %r (known: %s)" % (name, key, ", ".join(sorted(THRESHOLDS))))
        v = value[key]
        minimum = THRESHOLDS[key]["minimum"]
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < minimum):
            raise ValueError("%s.%s must be a whole number >= %d, or null to record without judging (got %r)" % (
                name, key, minimum, v))
        out[key] = v
    return out


def check_dcgm_level(value, name="dcgm_diag"):
    """0 (do not run dcgmi diag) or the run level 1-4."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 4:
        raise ValueError("%s must be 0 (off) or a dcgmi diag run level 1-4 (got %r)" % (name, value))
    return value


def _check(title, fail, nxt):
    return {"title": title, "fail": fail, "next": nxt}


T = DEFAULT_THRESHOLDS
CHECKS = {
    "host.health.ecc_mode": _check(
        "per GPU: ECC is enabled, and the pending ECC mode is the current one (nvmlDeviceGetEccMode)",
        "(WARN) ECC off: memory errors go undetected; or an ECC mode change waits for a GPU reset",
        "nvidia-smi -q -d ECC; who changed the ECC mode (the probe never changes it)"),
    "host.health.ecc_errors": _check(
        "per GPU: no uncorrectable ECC error (nvmlDeviceGetTotalEccErrors, volatile = since the last driver load, "
        "aggregate = lifetime); corrected counts are recorded, not judged",
        "uncorrectable volatile ECC errors >= %d (ecc_uncorrected_volatile_fail): memory failed since the driver loaded "
        "(FAIL); uncorrectable aggregate >= %d (ecc_uncorrected_aggregate_warn) with none volatile: failed before (WARN)"
        % (T["ecc_uncorrected_volatile_fail"], T["ecc_uncorrected_aggregate_warn"]),
        "nvidia-smi -q -d ECC,ROW_REMAPPER,PAGE_RETIREMENT; dmesg for Xid 48/63/64/94/95; drain the GPU and reset it"),
    "host.health.retired_pages": _check(
        "per GPU with page retirement (before Ampere): no page retirement pending, fewer retired pages than "
        "retired_pages_fail (nvmlDeviceGetRetiredPages, nvmlDeviceGetRetiredPagesPendingStatus)",
        "%d or more retired pages (retired_pages_fail): NVIDIA's replacement threshold (FAIL); a retirement pending "
        "until the next driver load (WARN)" % T["retired_pages_fail"],
        "nvidia-smi -q -d PAGE_RETIREMENT; reset the GPU (or reboot) to retire pending pages"),
    "host.health.row_remap": _check(
        "per GPU with row remapping (Ampere and later): no remapping failure and none pending (nvmlDeviceGetRemappedRows), "
        "and every memory bank has spare rows left (nvmlDeviceGetRowRemapperHistogram)",
        "a row remapping failure: the GPU could not remap a failed row (FAIL); a remapping pending until the GPU is "
        "reset, or %d or more banks without a spare row (row_remap_banks_exhausted_warn) (WARN)"
        % T["row_remap_banks_exhausted_warn"],
        "nvidia-smi -q -d ROW_REMAPPER; drain and reset the GPU; a failure means the GPU needs replacing"),
    "host.health.clock_events": _check(
        "per GPU: no hardware slowdown, HW thermal slowdown or HW power brake is active now, and no SW thermal slowdown "
        "(nvmlDeviceGetCurrentClocksEventReasons, else ...ThrottleReasons); idle, power cap, sync boost and "
        "application clocks are recorded, not judged",
        "hardware slowdown, HW thermal or HW power brake active (FAIL: the GPU runs far below its clocks); SW thermal "
        "slowdown active (WARN)",
        "nvidia-smi -q -d PERFORMANCE,TEMPERATURE,POWER; the cooling, the power supply and the chassis' power brake"),
    "host.health.temperature": _check(
        "per GPU: the GPU temperature is more than temperature_margin_c below its slowdown threshold "
        "(nvmlDeviceGetTemperature, nvmlDeviceGetTemperatureThreshold SLOWDOWN)",
        "at or above the slowdown threshold (FAIL: the GPU slows itself down); within %d C of it "
        "(temperature_margin_c) (WARN)" % T["temperature_margin_c"],
        "nvidia-smi -q -d TEMPERATURE; the airflow and cooling of the node"),
    "host.health.pcie_link": _check(
        "per GPU: the PCIe link runs at its maximum width (nvmlDeviceGetCurrPcieLinkWidth vs ...MaxPcieLinkWidth); "
        "the generation is recorded, not judged (an idle GPU may lower its link generation to save power)",
        "(WARN) the link trained narrower than its maximum (e.g. x8 of x16): a seating, riser or slot problem that "
        "halves host-to-device bandwidth",
        "nvidia-smi -q -d PCI under load; lspci -vv -s <bus id> (LnkSta vs LnkCap); reseat the GPU or riser"),
    "host.health.pcie_replay": _check(
        "per GPU: the PCIe replays since the driver loaded stay below pcie_replay_warn, and those between two readings "
        "of the run stay within DCGM's replay rate limit for the link (nvmlDeviceGetPcieReplayCounter, read twice)",
        "(WARN) replays since the driver loaded >= %d (pcie_replay_warn, DCGM's diagnostic limit), or more replays "
        "between the two readings than DCGM's health watch allows for the link's generation and width over max(interval, "
        "1 minute) (pcie_replay_rate_percent); a lower count is recorded, not judged" % T["pcie_replay_warn"],
        "nvidia-smi -q -d PCI twice under load (does it rise?); dcgmi health with the PCIe watch; reseat the GPU or riser"),
    "host.health.recovery_action": _check(
        "per GPU: the driver asks for no recovery action and no reset (nvmlDeviceGetFieldValues "
        "NVML_FI_DEV_GET_GPU_RECOVERY_ACTION; on drivers without it NVML_FI_DEV_RESET_STATUS and "
        "NVML_FI_DEV_DRAIN_AND_RESET_STATUS)",
        "the driver asks for a GPU reset, a drain and reset, a bus reset or a reboot, or says a reset is required (FAIL); "
        "a peer-to-peer drain or IMEX domain recovery (WARN)",
        "nvidia-smi -q (GPU Reset Status / Recovery Action); drain the node and do what the driver asks"),
    "host.health.fabric": _check(
        "per GPU on an NVSwitch (NVLink fabric) system: the GPU's fabric registration completed successfully, and its "
        "health mask (every NVML_GPU_FABRIC_HEALTH_MASK_* field) is healthy (nvmlDeviceGetGpuFabricInfoV, else "
        "...GpuFabricInfo); NOT_RUN where the GPU has no fabric",
        "registration completed with an error, a route unhealthy or an incorrect configuration (FAIL): CUDA cannot "
        "start on the GPU or its NVLink traffic fails; not started or in progress, degraded bandwidth, route or access "
        "timeout recovery, no partition assigned, the fabric manager disconnected, or an unknown value or bit (WARN)",
        "the nvidia-fabricmanager service's state and log; nvidia-smi -q | grep -A6 Fabric"),
    "host.health.nvlink": _check(
        "per GPU with NVLink: every NVLink is up (nvmlDeviceGetNvLinkState for links 0 to NVML_NVLINK_MAX_LINKS - 1); "
        "NOT_RUN with NVML's code where the GPU or VM exposes no NVLink, where no link is up on a GPU without fabric "
        "(no bridge, no NVSwitch), and where no link is up on a GPU in MIG mode whose fabric reports no fault (MIG "
        "enabled: NVLink not used); a link unread for another reason is never a PASS",
        "%d or more links inactive (nvlink_inactive_fail) while others are up, or every link down on a GPU of an "
        "NVLink fabric (FAIL); a link up with its traffic disabled (WARN)" % T["nvlink_inactive_fail"],
        "nvidia-smi nvlink -s; nvidia-smi nvlink -e (error counters); the fabric manager log; reseat or replace the "
        "GPU baseboard cable"),
    "host.health.mig_ecc": _check(
        "per MIG device: no uncorrectable volatile error in its non-DRAM memories (nvmlDeviceGetMemoryErrorCounter on "
        "the MIG device handle: the per-instance counts NVML gives); NOT_RUN with NVML's code where it gives none",
        "%d or more uncorrected volatile SRAM errors in the instance (mig_sram_uncorrected_fail) (FAIL)"
        % T["mig_sram_uncorrected_fail"],
        "nvidia-smi -q -d ECC; dmesg for Xid 94/95 with GPU-I of that instance; drain the instance's work and reset the GPU"),
    "host.health.xid": _check(
        "per GPU: no NVRM Xid event in this boot's kernel log (journalctl -k -b, else dmesg), each mapped to its "
        "documented meaning and, on MIG, to the GPU instance it names; Xid lines of a PCI address no GPU has are "
        "reported under that address",
        "Xid 48 (double-bit ECC), 63/64 (row remap / page retirement event or failure), 79 (fallen off the bus), 94/95 "
        "(contained / uncontained ECC) since boot (FAIL); any other Xid (WARN: often an application's fault, 13/31/43)",
        "journalctl -k -b | grep Xid; NVIDIA's Xid catalogue; a FAIL Xid stays until the node reboots"),
    "host.health.dcgm_diag": _check(
        "where asked (dcgm_diag: level, default 0 = not run) and dcgmi is installed: each test of dcgmi diag -r <level> -j "
        "per GPU (level 1: deployment and software checks in seconds, no load on the GPU); never while a GPU is busy",
        "a DCGM test failed on the GPU (FAIL) or warned (WARN); dcgmi ran but gave no result (timeout, output not "
        "understood, runtime error) or exited non-zero with every test passing (WARN); NOT_RUN with the reason where "
        "not asked, dcgmi is absent or could not be started, a GPU is busy, or a level above 1 in check or audit mode",
        "dcgmi diag -r 1 by hand; the test's warning text and DCGM's error id; whether nv-hostengine (the DCGM service) runs"),
}
del T
# the checks made once per GPU that NVML has readings for; mig_ecc is per MIG device, xid per GPU when the kernel log
# was read (else once), dcgm_diag per test and GPU when it ran (else once)
PER_GPU_CHECKS = tuple(cid for cid in CHECKS if cid not in ("host.health.xid", "host.health.mig_ecc", "host.health.dcgm_diag"))


def error_code_name(pynvml_module, value):
    """The name of pynvml's NVML_ERROR_* constant whose value is ``value``, or None (nvml.py says errors with it)."""
    for name in dir(pynvml_module):
        if name.startswith("NVML_ERROR_") and getattr(pynvml_module, name, None) == value:
            return name
    return None


# ---- reading (pynvml is handed in by _nvml.read_nvml) --------------------------------------------------------

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
# nvmlGpuFabricInfo_v2_t.healthMask, every field of nvml.h's NVML_GPU_FABRIC_HEALTH_MASK_* (as NVIDIA's nvidia-ml-py
# 13.580 pynvml.py copies them: SHIFT_x, WIDTH_x (the field's mask after the shift), and its values; value 0 of every
# field is NOT_SUPPORTED): (field, shift, width, {value: (meaning, status)}). A value not listed, and any bit outside
# these fields, is a WARN ("unknown"): a newer driver says something this table does not know.
FABRIC_HEALTH_FIELDS = (
    ("degraded bandwidth", 0, 0x3, {1: ("degraded bandwidth", WARN), 2: (None, PASS)}),
    ("route recovery", 2, 0x3, {1: ("route recovery in progress", WARN), 2: (None, PASS)}),
    ("route unhealthy", 4, 0x3, {1: ("route unhealthy", FAIL), 2: (None, PASS)}),
    ("access timeout recovery", 6, 0x3, {1: ("access timeout recovery in progress", WARN), 2: (None, PASS)}),
    ("incorrect configuration", 8, 0xf, {1: (None, PASS), 2: ("incorrect configuration: system GUID", FAIL),
                                         3: ("incorrect configuration: chassis serial number", FAIL),
                                         4: ("incorrect configuration: no partition", FAIL),
                                         5: ("incorrect configuration: insufficient NVLinks", FAIL),
                                         6: ("incorrect configuration: incompatible GPU firmware", FAIL),
                                         7: ("incorrect configuration: invalid location", FAIL),
                                         8: ("incorrect configuration: GPU state invalid", FAIL)}),
    ("partition assigned", 12, 0x3, {1: (None, PASS), 2: ("not assigned to an NVLink partition", WARN)}),
    ("fabric manager", 14, 0x3, {1: (None, PASS), 2: ("global fabric manager disconnected", WARN)}),
)
_FABRIC_HEALTH_KNOWN = sum(width << shift for _name, shift, width, _values in FABRIC_HEALTH_FIELDS)


def fabric_health(mask):
    """[(status, text)] of every field of a fabric health mask that is not healthy or not supported (pure)."""
    out = []
    for name, shift, width, values in FABRIC_HEALTH_FIELDS:
        value = (mask >> shift) & width
        if value == 0:
            continue
        meaning, status = values.get(value, ("%s: unknown value %d" % (name, value), WARN))
        if meaning:
            out.append((status, meaning))
    unknown = mask & ~_FABRIC_HEALTH_KNOWN
    if unknown:
        out.append((WARN, "unknown health bits 0x%x" % unknown))
    return out


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
        errors["nvlink"] = "; ".join("%s on links %s" % (text, _ranges(ls)) for text, ls in sorted(failed.items()))
    return {"links": links, "errors": failed}


def _ranges(numbers):
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
    """The raw health readings of one GPU. ``call(nv, errors, key, func, *args)`` is _nvml's per-call wrapper (it
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
    health["pcie"]["replay_read_at"] = time.monotonic()    # _nvml reads the counter again at its end (replay_again)
    recovery = _recovery_action(nv, call, errors, handle) or {}
    health["recovery_action"] = recovery.get("action")
    health["reset_status"] = dict((k, recovery.get(k)) for k in ("reset_required", "drain_and_reset"))
    health["fabric"] = _fabric(nv, call, errors, handle)
    health["nvlink"] = _nvlink(nv, call, errors, handle)
    return health


# ---- the kernel log ------------------------------------------------------------------------------------------

def parse_xids(text):
    """The NVRM Xid events of kernel log text: [{pci (dddd:bb:dd), xid, gpu_instance (the GPU-I of a MIG GPU's line,
    else None), detail, meaning, line}]."""
    events = []
    for line in (text or "").splitlines():
        match = _XID.search(line)
        if not match:
            continue
        domain, bus, dev = match.group(1).split(":")
        xid = int(match.group(3))
        events.append({"pci": "%04x:%s:%s" % (int(domain, 16), bus.lower(), dev.lower()), "xid": xid,
                       "gpu_instance": int(match.group(2)) if match.group(2) is not None else None,
                       "detail": (match.group(4) or "").strip(), "meaning": XID_MEANINGS.get(xid, "not in the catalogue here"),
                       "line": line.strip()[:500]})
    return events


def read_kernel_xids(root="/", timeout=KERNEL_LOG_TIMEOUT):
    """{source, error, events, lines}: the Xid events of this boot from the first kernel log source that gives any
    line; source None and error saying why when none could be read (the node tree of a test has no kernel log)."""
    if os.path.realpath(root) != "/":
        return {"source": None, "error": "the kernel log is only read when root is /", "events": [], "lines": 0}
    tried = []
    for argv in KERNEL_LOG_COMMANDS:
        if which(argv[0]) is None:
            tried.append("%s: not installed" % argv[0])
            continue
        res = run(list(argv), timeout=timeout, keep_prefix=XID_PREFIX)
        text = res["stdout"] or ""
        if res["rc"] == 0 and text.strip():
            return {"source": " ".join(argv), "error": None, "events": parse_xids(text), "lines": len(text.splitlines()),
                    "truncated": res["truncated"]}
        why = res["error"] or ("rc %s: %s" % (res["rc"], (res["stderr"] or "").strip()[:200] or "no output")
                               if res["rc"] != 0 else "no line (no kernel log for this boot)")
        tried.append("%s: %s" % (" ".join(argv), why))
    return {"source": None, "error": "; ".join(tried), "events": [], "lines": 0}


# ---- dcgmi diag (optional) ---------------------------------------------------------------------------------------

def _busy_gpus(nvml):
    """Why dcgmi diag must not run now ('' when every GPU is known idle): a busy GPU or instance, or a busy state
    NVML could not give (_busy reads it from the same evidence the compute layer uses)."""
    busy = gpu_compute_processes({"evidence": {"nvml": nvml}})
    if busy is None:
        return "cannot tell whether the GPUs are in use (no NVML list of compute processes)"
    return busy_reason(busy) if busy else ""


def _dcgm_list(value, what):
    """A JSON list of objects, or ValueError naming what was not one (a missing value is an empty list)."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise ValueError("%s is not a list of objects: %s" % (what, json.dumps(value)[:120]))
    return value


def _dcgm_texts(value, key):
    """Warnings or info of one result: a list of strings or of {key: text} objects (DCGM 4's warnings)."""
    if value is None:
        return []
    if not isinstance(value, list):
        value = [value]
    return [str(v.get(key) if isinstance(v, dict) else v) for v in value]


def parse_dcgm_diag(text):
    """The per-test results of ``dcgmi diag -j`` output: {version, runtime_error, tests: [{category, test, entity
    (GPU id or None for the test's summary), gpu_uuid (where dcgmi names the GPU's UUID), status (DCGM's word),
    warnings: [text], info: [text]}]}.

    Both JSON shapes DCGM has printed: DCGM 4 ("DCGM Diagnostic", results per entity with entity_group/entity_id and a
    test_summary, dcgmi/Diag.cpp HelperJsonBuildOutput) and DCGM 3 ("DCGM GPU Diagnostic", results with a gpu_ids
    string). ValueError, never another exception, when the text holds no such JSON object or its shape is not one
    of these (a list where an object belongs, a result that is a string, ...)."""
    start, end = (text or "").find("{"), (text or "").rfind("}")
    if start < 0 or end < start:
        raise ValueError("no JSON object in the output")
    try:
        doc = json.loads(text[start:end + 1])
    except RecursionError:
        raise ValueError("the JSON is nested too deeply")
    if not isinstance(doc, dict):
        raise ValueError("the JSON is not an object")
    body = doc.get("DCGM Diagnostic") or doc.get("DCGM GPU Diagnostic")
    if not isinstance(body, dict):
        raise ValueError("no 'DCGM Diagnostic' object in the JSON")
    meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
    version = meta.get("version") or body.get("version")
    tests = []
    for category in _dcgm_list(body.get("test_categories"), "test_categories"):
        for test in _dcgm_list(category.get("tests"), "tests of %s" % category.get("category")):
            entries = [(r, _dcgm_entities(r)) for r in _dcgm_list(test.get("results"), "results of %s" % test.get("name"))]
            summary = test.get("test_summary")
            if isinstance(summary, dict) and (not entries or _dcgm_worse(summary, [r for r, _e in entries])):
                # the summary alone (no result per GPU), or it says worse than every GPU's result: an error of no
                # single GPU (DCGM 4 puts those in the summary only)
                entries.append((summary, [None]))
            for result, entities in entries:
                for entity in entities:
                    tests.append({"category": str(category.get("category")), "test": str(test.get("name")), "entity": entity,
                                  "gpu_uuid": _dcgm_uuid(result) if entity is not None else None,
                                  "status": str(result.get("status") or ""),
                                  "warnings": _dcgm_texts(result.get("warnings"), "warning"),
                                  "info": _dcgm_texts(result.get("info"), "info")})
    runtime_error = body.get("runtime_error")
    return {"version": None if version is None else str(version),
            "runtime_error": None if runtime_error in (None, "") else str(runtime_error), "tests": tests}


def _dcgm_uuid(result):
    """The GPU's UUID where dcgmi names it in a result (entity_uuid, gpu_uuid or uuid), else None."""
    for key in ("entity_uuid", "gpu_uuid", "uuid"):
        value = result.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def _dcgm_rank(result):
    return {FAIL: 3, WARN: 2}.get(DCGM_STATUSES.get(str(result.get("status") or "").strip().lower(), WARN), 1)


def _dcgm_worse(summary, results):
    return _dcgm_rank(summary) > max(_dcgm_rank(r) for r in results)


def _dcgm_entities(result):
    """The GPU ids (DCGM's entity ids) one result is for: DCGM 4's entity_id of entity_group GPU, DCGM 3's gpu_ids
    "0,1,2"; ValueError for an id that is not a number."""
    if "entity_id" in result:
        group = str(result.get("entity_group") or "GPU")
        entity = result["entity_id"]
        if group.upper() == "GPU":
            if isinstance(entity, bool) or not isinstance(entity, (int, str)) or not str(entity).strip().isdigit():
                raise ValueError("a GPU result's entity_id is not a number: %s" % json.dumps(entity)[:60])
            return [int(str(entity).strip())]
        return ["%s %s" % (group, entity)]
    ids = [i.strip() for i in str(result.get("gpu_ids", result.get("gpu_id", ""))).split(",") if i.strip()]
    return [int(i) if i.isdigit() else i for i in ids] or [None]


def read_dcgm_diag(level, nvml, root="/", no_gpu_load=None):
    """{asked (the level, 0 = not asked), ran, why (not run), argv, rc, duration_ms, error, version, runtime_error,
    tests}: ``dcgmi diag -r <level> -j`` through _run.run with DCGM_TIMEOUTS[level], only when asked, dcgmi is
    installed, root is / and no GPU is busy. ``no_gpu_load``: why nothing that loads the GPU may run now ("check
    mode", "audit mode"): levels 2-4 (minutes to hours of load) are then not run; level 1 (deployment and software
    checks, seconds, no load on the GPU) still is."""
    out = {"asked": level, "ran": False, "why": None, "tests": []}
    if not level:
        out["why"] = "not asked (dcgm_diag: 0)"
        return out
    if no_gpu_load and level >= 2:
        out["why"] = "%s: dcgmi diag -r %d loads the GPU, not run (level 1 does not)" % (no_gpu_load, level)
        return out
    if os.path.realpath(root) != "/":
        out["why"] = "dcgmi diag only runs when root is /"
        return out
    path = which("dcgmi")
    if path is None:
        out["why"] = "dcgmi is not installed (no DCGM on this node)"
        return out
    if not nvml.get("ok"):
        out["why"] = "NVML unavailable, so whether a GPU is busy is unknown: %s" % nvml.get("error")
        return out
    busy = _busy_gpus(nvml)
    if busy:
        out["why"] = "%s: dcgmi diag not run" % busy
        return out
    argv = [path, "diag", "-r", str(level), "-j"]
    res = run(argv, timeout=DCGM_TIMEOUTS[level])
    out.update(ran=True, argv=argv, rc=res["rc"], duration_ms=res["duration_ms"], error=res["error"],
               timed_out=bool(res["timed_out"]), stderr=(res["stderr"] or "").strip()[-2000:] or None)
    if res["timed_out"] or res["error"]:
        return out
    try:
        out.update(parse_dcgm_diag(res["stdout"]))
    except ValueError as exc:
        out["error"] = "dcgmi diag output not understood (rc %s): %s; %s" % (
            res["rc"], exc, ((res["stdout"] or "") + (res["stderr"] or "")).strip()[-300:])
    return out


# ---- the checks --------------------------------------------------------------------------------------------------

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


def _not_read(errors, *keys):
    texts = [errors[k] for k in keys if k in errors]
    return "not read: %s" % "; ".join(sorted(set(texts))) if texts else None


# NVML's answers for a link or a memory location the GPU has not (nothing there to read, not a missing reading)
ABSENT_CODES = ("NVML_ERROR_NOT_SUPPORTED", "NVML_ERROR_INVALID_ARGUMENT")


def _add_judged(b, check_id, status, s, expected, observed, missing):
    """Add a check whose FAIL criterion needs the readings ``missing`` names (a "not read: ..." text, None when all
    were read): a PASS without them is NOT_RUN with NVML's code, never PASS; a FAIL or WARN from what was read
    stands."""
    if missing and status == PASS:
        status, observed = NOT_RUN, "%s; %s" % (missing, observed)
    b.add(check_id, status, s, expected, observed)


def _at_or_above(value, threshold):
    """Whether ``value`` reaches ``threshold`` (None: that threshold is off, nothing is judged by it)."""
    return threshold is not None and value is not None and value >= threshold


def _limit(threshold, text):
    return "%s %s" % (text, threshold) if threshold is not None else "%s (not judged: threshold off)" % text


def _ecc_mode(b, s, g, t):
    mode = g["ecc_mode"]
    if mode is None:
        b.add("host.health.ecc_mode", NOT_RUN, s, "enabled", _not_read(g["errors"], "ecc_mode"))
        return
    observed = "current %s, pending %s" % tuple(ENABLE_STATES.get(mode[k], mode[k]) for k in ("current", "pending"))
    ok = mode["current"] == 1 and mode["pending"] == 1
    b.add("host.health.ecc_mode", PASS if ok else WARN, s, "enabled (current and pending)", observed)


def _ecc_errors(b, s, g, t):
    c = g["ecc_errors"]
    if c["uncorrected_volatile"] is None and c["uncorrected_aggregate"] is None:
        b.add("host.health.ecc_errors", NOT_RUN, s, "uncorrected 0",
              _not_read(g["errors"], "ecc_uncorrected_volatile", "ecc_uncorrected_aggregate"))
        return
    observed = ", ".join("%s %s" % (k.replace("_", " "), "unread" if v is None else v) for k, v in sorted(c.items()))
    if _at_or_above(c["uncorrected_volatile"], t["ecc_uncorrected_volatile_fail"]):
        status = FAIL
    elif _at_or_above(c["uncorrected_aggregate"], t["ecc_uncorrected_aggregate_warn"]):
        status = WARN
    else:
        status = PASS
    missing = None
    if c["uncorrected_volatile"] is None and t["ecc_uncorrected_volatile_fail"] is not None:
        missing = "uncorrected volatile %s" % (_not_read(g["errors"], "ecc_uncorrected_volatile") or "not read")
    _add_judged(b, "host.health.ecc_errors", status, s, "%s (FAIL), %s (WARN)" % (
        _limit(t["ecc_uncorrected_volatile_fail"], "uncorrected volatile <"),
        _limit(t["ecc_uncorrected_aggregate_warn"], "uncorrected aggregate <")), observed, missing)


def _retired_pages(b, s, g, t):
    p = g["retired_pages"]
    expected = "%s, none pending" % _limit(t["retired_pages_fail"], "retired <")
    if p["single_bit"] is None and p["double_bit"] is None and p["pending"] is None:
        b.add("host.health.retired_pages", NOT_RUN, s, expected,
              _not_read(g["errors"], "retired_pages_single_bit", "retired_pages_double_bit", "retired_pages_pending"))
        return
    total = (p["single_bit"] or 0) + (p["double_bit"] or 0)
    status = FAIL if _at_or_above(total, t["retired_pages_fail"]) else (WARN if p["pending"] else PASS)
    unread = [k for k in ("single_bit", "double_bit") if p[k] is None]
    missing = _not_read(g["errors"], *["retired_pages_" + k for k in unread]) or (
        "not read: %s" % ", ".join(unread) if unread else None)
    _add_judged(b, "host.health.retired_pages", status, s, expected,
                "single-bit %s, double-bit %s, pending %s" % (p["single_bit"], p["double_bit"], p["pending"]),
                missing if t["retired_pages_fail"] is not None else None)


def _row_remap(b, s, g, t):
    r = g["remapped_rows"]
    expected = "no failure, none pending, %s" % _limit(t["row_remap_banks_exhausted_warn"], "banks without spare rows <")
    if r is None:
        b.add("host.health.row_remap", NOT_RUN, s, expected, _not_read(g["errors"], "remapped_rows"))
        return
    hist = g.get("row_remap_histogram")
    exhausted = hist["none"] if hist else None
    status = FAIL if r["failure"] else (WARN if r["pending"] or _at_or_above(exhausted, t["row_remap_banks_exhausted_warn"])
                                        else PASS)
    observed = "remapped rows: correctable %(corrected)s, uncorrectable %(uncorrected)s; pending %(pending)s, failure %(failure)s" % r
    if hist:
        observed += "; banks by spare rows left: max %(max)s, high %(high)s, partial %(partial)s, low %(low)s, none %(none)s" % hist
    else:
        observed += "; %s" % (_not_read(g["errors"], "row_remap_histogram") or "bank histogram not read")
    b.add("host.health.row_remap", status, s, expected, observed)


def clock_events(mask):
    """[(name, status)] of the reasons active in ``mask`` (unknown bits as bit_0x...: WARN)."""
    found = [(name, status) for bit, name, status in CLOCK_EVENTS if mask & bit]
    known = 0
    for bit, _name, _status in CLOCK_EVENTS:
        known |= bit
    extra = mask & ~known
    bit = 1
    while extra:
        if extra & bit:
            found.append(("bit_0x%x" % bit, WARN))
            extra &= ~bit
        bit <<= 1
    return found


def _worst(statuses):
    for status in (FAIL, WARN):
        if status in statuses:
            return status
    return PASS


def _clock_events(b, s, g, t):
    mask = g["clock_event_reasons"]
    if mask is None:
        b.add("host.health.clock_events", NOT_RUN, s, "no hardware or thermal slowdown", _not_read(g["errors"], "clock_event_reasons"))
        return
    active = clock_events(int(mask))
    b.add("host.health.clock_events", _worst([st for _n, st in active]), s, "no hardware or thermal slowdown",
          "0x%x: %s (%s)" % (mask, ", ".join(n for n, _st in active) or "none active", g["clock_event_source"]))


def _temperature(b, s, g, t):
    temp, slow = g["temperature_c"], g["temperature_slowdown_c"]
    margin = t["temperature_margin_c"]
    if temp is None or slow is None:
        b.add("host.health.temperature", NOT_RUN, s, "below the slowdown threshold",
              _not_read(g["errors"], "temperature_c", "temperature_slowdown_c"))
        return
    status = FAIL if temp >= slow else (WARN if margin is not None and temp >= slow - margin else PASS)
    expected = "< %d C (slowdown %d C - %d)" % (slow - margin, slow, margin) if margin is not None else "< %d C (slowdown)" % slow
    b.add("host.health.temperature", status, s, expected,
          "%s C (slowdown %s C, shutdown %s C)" % (temp, slow, g["temperature_shutdown_c"]))


def _pcie(b, s, g, t):
    p = g["pcie"]
    gen = "generation %s of %s (GPU max %s)" % (p["generation_current"], p["generation_max"], p["generation_gpu_max"])
    if p["width_current"] is None or p["width_max"] is None:
        b.add("host.health.pcie_link", NOT_RUN, s, "width at its maximum", "%s; %s" % (
            _not_read(g["errors"], "pcie_width_current", "pcie_width_max"), gen))
    else:
        b.add("host.health.pcie_link", WARN if p["width_current"] < p["width_max"] else PASS, s,
              "width x%s (generation informative)" % p["width_max"], "x%s of x%s; %s" % (p["width_current"], p["width_max"], gen))
    if p["replay_counter"] is None:
        b.add("host.health.pcie_replay", NOT_RUN, s, "replays below DCGM's limits", _not_read(g["errors"], "pcie_replay_counter"))
    else:
        status, expected, observed = judge_replays(p, t)
        b.add("host.health.pcie_replay", status, s, expected, observed)


RESET_FIELDS = (("reset_required", "a GPU reset is required"), ("drain_and_reset", "drain and reset recommended"))


def _recovery(b, s, g, t):
    action = g["recovery_action"]
    reset = g.get("reset_status") or {}
    if action is not None:
        name, status = RECOVERY_ACTIONS.get(action, ("unknown action %s" % action, WARN))
        b.add("host.health.recovery_action", status, s, "none", "%s (%s)" % (name, action))
        return
    # a driver before the recovery-action field: the two fields it replaced
    read = [(key, text) for key, text in RESET_FIELDS if reset.get(key) is not None]
    if not read:
        b.add("host.health.recovery_action", NOT_RUN, s, "none",
              _not_read(g["errors"], "recovery_action", "reset_required", "drain_and_reset"))
        return
    asked = [text for key, text in read if reset[key]]
    unread = [key for key, _text in RESET_FIELDS if reset.get(key) is None]
    _add_judged(b, "host.health.recovery_action", FAIL if asked else PASS, s, "no reset required",
                "%s (NVML_FI_DEV_RESET_STATUS / DRAIN_AND_RESET_STATUS; %s)" % (
                    "; ".join(asked) or "no reset required", _not_read(g["errors"], "recovery_action")),
                _not_read(g["errors"], *unread) or ("not read: %s" % ", ".join(unread) if unread else None))


def _fabric_check(b, s, g, t):
    f = g["fabric"]
    if f is None:
        b.add("host.health.fabric", NOT_RUN, s, "registration completed", _not_read(g["errors"], "fabric"))
        return
    state = FABRIC_STATES.get(f["state"], "unknown state %s" % f["state"])
    if f["state"] == 0:
        b.add("host.health.fabric", NOT_RUN, s, "registration completed",
              "the GPU has no NVLink fabric (NVML_GPU_FABRIC_STATE_NOT_SUPPORTED)")
        return
    health = fabric_health(f["health_mask"]) if f.get("health_mask") is not None else []
    observed = "%s, status %s, clique %s, cluster %s%s" % (
        state, f["status"], f["clique_id"], f["cluster_uuid"],
        "" if f.get("health_mask") is None else ", health mask 0x%x%s" % (
            f["health_mask"], "".join(", %s" % text for _status, text in health)))
    if f["state"] == 3:
        status = FAIL if f["status"] != 0 else _worst([PASS] + [st for st, _text in health])
    else:
        status = _worst([WARN] + [st for st, _text in health])
    b.add("host.health.fabric", status, s, "registration completed with status 0 (NVML_SUCCESS)", observed)


def _fabric_reports_a_fault(fabric):
    """Whether the fabric registration itself says something is wrong (completed with an error, or a FAIL field
    of its health mask)."""
    if not fabric or fabric.get("state") != 3:
        return False
    return fabric.get("status") != 0 or any(st == FAIL for st, _t in fabric_health(fabric.get("health_mask") or 0))


def _nvlink_check(b, s, g, t, mig_enabled=False):
    n = g.get("nvlink")
    expected = "every NVLink up (%s)" % _limit(t["nvlink_inactive_fail"], "FAIL at inactive links >=")
    if not n or not n["links"]:
        b.add("host.health.nvlink", NOT_RUN, s, expected, _not_read(g["errors"], "nvlink") or "no NVLink state read")
        return
    states = n["links"]
    by_state = {}
    for link, state in states.items():
        by_state.setdefault(state, []).append(int(link))
    parts = ["%s: links %s" % (NVLINK_STATES.get(st, "state %s" % st), _ranges(ls)) for st, ls in sorted(by_state.items())]
    if n["errors"]:
        parts.append("not read: %s" % "; ".join("%s on links %s" % (text, _ranges(ls)) for text, ls in sorted(n["errors"].items())))
    observed = "; ".join(parts)
    inactive = len(by_state.get(0, []))
    up = len(states) - inactive
    on_fabric = (g.get("fabric") or {}).get("state") not in (None, 0)
    # a fabric NVML answered for (a state, or NOT_SUPPORTED: the GPU has none) is read; any other way of not reading it
    # (a pynvml without the call, NVML_ERROR_UNKNOWN, a lost GPU, an exception) leaves it unknown, never absent
    fabric_error = (g["errors"].get("fabric") or "no reading") if g.get("fabric") is None else None
    if not up and fabric_error and not any(code in fabric_error for code in ABSENT_CODES):
        b.add("host.health.nvlink", NOT_RUN, s, expected, "not read: the NVLink fabric (%s), so whether these links should "
              "be up is unknown%s: %s" % (fabric_error, " (MIG enabled)" if mig_enabled else "", observed))
        return
    if not up and not on_fabric:
        b.add("host.health.nvlink", NOT_RUN, s, expected, "no NVLink is up and NVML reports no NVLink fabric for the GPU "
                                                          "(%s): nothing says these links should be up: %s" % (
                                                              fabric_error or "NVML_GPU_FABRIC_STATE_NOT_SUPPORTED", observed))
        return
    if not up and mig_enabled and not _fabric_reports_a_fault(g.get("fabric")):
        # a GPU in MIG mode has no peer-to-peer over NVLink: links down are expected, not a fault
        b.add("host.health.nvlink", NOT_RUN, s, expected, "MIG enabled: NVLink not used (%s)" % observed)
        return
    if (up and _at_or_above(inactive, t["nvlink_inactive_fail"])) or (not up and on_fabric):
        status = FAIL
    elif 3 in by_state or (inactive and up):
        status = WARN
    else:
        status = PASS
    # a link NVML says the GPU has not (NOT_SUPPORTED, INVALID_ARGUMENT) is absent; any other error is a link unread
    unread = dict((text, ls) for text, ls in n["errors"].items() if not any(code in text for code in ABSENT_CODES))
    missing = "links not read: %s" % "; ".join("%s on links %s" % (text, _ranges(ls)) for text, ls in sorted(unread.items())) \
        if unread else None
    _add_judged(b, "host.health.nvlink", status, s, expected, observed, missing)


def _mig_ecc(b, s, g, t):
    for dev in g.get("mig") or []:
        subject = "%s MIG %s" % (s, dev.get("uuid") or "gi%s/ci%s" % (dev.get("gi"), dev.get("ci")))
        expected = _limit(t["mig_sram_uncorrected_fail"], "uncorrected volatile SRAM errors <")
        counts = dict((k, v) for k, v in (dev.get("sram_uncorrected_volatile") or {}).items() if v is not None)
        if not counts:
            b.add("host.health.mig_ecc", NOT_RUN, subject, expected,
                  _not_read(dev.get("errors") or {}, *(dev.get("errors") or {}).keys()) or "no count read")
            continue
        total = sum(counts.values())
        observed = "%d (%s)" % (total, ", ".join("%s %s" % kv for kv in sorted(counts.items())))
        # a location NVML says this GPU has not (NOT_SUPPORTED) is absent; any other error is a count unread
        errors = dict((k, v) for k, v in (dev.get("errors") or {}).items() if not any(code in v for code in ABSENT_CODES))
        _add_judged(b, "host.health.mig_ecc", FAIL if _at_or_above(total, t["mig_sram_uncorrected_fail"]) else PASS, subject,
                    expected, observed, _not_read(errors, *errors.keys()))


def _xid_summary(events):
    counts = {}
    for ev in events:
        counts[ev["xid"]] = counts.get(ev["xid"], 0) + 1
    status = FAIL if any(x in XID_FAIL for x in counts) else (WARN if counts else PASS)
    text = "; ".join("Xid %d x%d (%s)" % (x, n, XID_MEANINGS.get(x, "not in the catalogue here")) for x, n in sorted(counts.items()))
    instances = sorted(set(ev["gpu_instance"] for ev in events if ev.get("gpu_instance") is not None))
    if instances:
        text += "; on GPU instance(s) %s" % ", ".join(str(i) for i in instances)
    return status, text


_BUS = re.compile(r"^([0-9a-fA-F]{1,8}):([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})")


def _bus(pci_bus_id):
    """NVML's "00000000:3B:00.0" or procfs' "0000:3b:00.0" -> "0000:3b:00", the form of the Xid line's PCI address."""
    match = _BUS.match(pci_bus_id or "")
    return "%04x:%02x:%02x" % tuple(int(g, 16) for g in match.groups()) if match else None


def _xids(b, rows, log):
    if log["source"] is None:
        b.add("host.health.xid", NOT_RUN, "kernel log", "no Xid since boot", "kernel log not read: %s" % log["error"])
        return
    events = log["events"]
    if not rows:
        status, text = _xid_summary(events)
        b.add("host.health.xid", status, "kernel log (no GPU inventory)", "no Xid since boot",
              text or "none in %d line(s) of %s" % (log["lines"], log["source"]))
        return
    claimed = set()
    for row in rows:
        bus = _bus(row["pci_bus_id"])
        mine = [ev for ev in events if bus and ev["pci"] == bus]
        claimed.update(id(ev) for ev in mine)
        subject = "%s %s" % (_label(row), row.get("uuid") or "")
        if bus is None:
            b.add("host.health.xid", NOT_RUN, subject.strip(), "no Xid since boot", "the GPU's PCI bus id is unknown")
            continue
        status, text = _xid_summary(mine)
        b.add("host.health.xid", status, subject.strip(), "no Xid since boot",
              text or "none in %d line(s) of %s" % (log["lines"], log["source"]))
    others = {}
    for ev in events:
        if id(ev) not in claimed:
            others.setdefault(ev["pci"], []).append(ev)
    for pci, evs in sorted(others.items()):
        status, text = _xid_summary(evs)
        b.add("host.health.xid", status, "PCI %s (no GPU of the inventory)" % pci, "no Xid since boot", text)


def _label(row):
    return "GPU %s" % row.get("index")


def _dcgm(b, health):
    d = health.get("dcgm_diag")
    if not d:
        return
    expected = "dcgmi diag -r %s: every test Pass (or Skip)" % (d.get("asked") or 1)
    if not d.get("ran"):
        b.add("host.health.dcgm_diag", NOT_RUN, "dcgmi diag", expected, d.get("why"))
        return
    if d.get("error") and not d.get("timed_out") and d.get("rc") is None:
        # not started at all (not found at run time, not executable): nothing of DCGM was asked
        b.add("host.health.dcgm_diag", NOT_RUN, "dcgmi diag", expected, "dcgmi could not run: %s" % d["error"])
        return
    if d.get("timed_out") or (d.get("error") and not d.get("tests")):
        b.add("host.health.dcgm_diag", WARN, "dcgmi diag", expected, "no result: %s" % d.get("error"))
        return
    if d.get("runtime_error"):
        b.add("host.health.dcgm_diag", WARN, "dcgmi diag", expected, "DCGM runtime error: %s" % d["runtime_error"])
    if not d.get("tests") and not d.get("runtime_error"):
        b.add("host.health.dcgm_diag", WARN, "dcgmi diag", expected, "no test result in the output (rc %s)" % d.get("rc"))
        return
    gpus = health.get("gpus") or []
    statuses = []
    for test in d.get("tests") or []:
        status = DCGM_STATUSES.get(test["status"].strip().lower(), WARN)
        statuses.append(status)
        b.add("host.health.dcgm_diag", status, "%s: %s" % (_dcgm_where(test, gpus), test["test"]), expected,
              (test["status"] + ("" if not test["warnings"] else ": " + "; ".join(test["warnings"])))[:1000])
    if d.get("rc") not in (None, 0) and d.get("tests") and FAIL not in statuses and WARN not in statuses:
        b.add("host.health.dcgm_diag", WARN, "dcgmi diag", "exit status 0 with every test Pass",
              "dcgmi exited with rc %s although no test failed or warned%s" % (
                  d["rc"], ": %s" % d["stderr"][-300:] if d.get("stderr") else ""))


def _dcgm_where(test, gpus):
    """Which GPU a DCGM result is about. DCGM's GPU ids are DCGM's own entity ids: the GPU is matched by its UUID
    where dcgmi gives one, else by the id taken as NVML's index, and the subject says which."""
    entity = test["entity"]
    if not isinstance(entity, int):
        return entity or "all GPUs"
    if test.get("gpu_uuid"):
        found = next((g for g in gpus if str(g.get("uuid") or "").lower() == test["gpu_uuid"].lower()), None)
        if found is None:
            return "DCGM GPU id %d %s (not a GPU NVML lists here)" % (entity, test["gpu_uuid"])
        return "GPU %s %s (DCGM id %d)" % (found.get("index"), test["gpu_uuid"], entity)
    found = next((g for g in gpus if g.get("index") == entity), None)
    if found is None:
        return "DCGM GPU id %d (no NVML GPU with that index)" % entity
    return "GPU %d %s (DCGM id %d, matched by id: dcgmi gave no UUID)" % (entity, found.get("uuid") or "", entity)


def check_health(b, ev):
    """The host.health.* checks from evidence.health (and the NVML evidence: why nothing was read), judged against
    the thresholds the evidence records (evidence.health.thresholds)."""
    health = ev.get("health") or {"gpus": [], "kernel_log": None}
    t = dict(DEFAULT_THRESHOLDS)
    t.update(health.get("thresholds") or {})
    nvml = ev["nvml"]
    per_gpu = PER_GPU_CHECKS
    if not health["gpus"]:
        why = "disabled by option (nvml: false)" if ev.get("nvml_disabled") else (
            "NVML unavailable: %s" % nvml["error"] if not nvml["ok"] else "no GPU readings from NVML")
        for cid in per_gpu:
            b.add(cid, NOT_RUN, "GPUs", observed=why)
    mig_on = set(x.get("index") for x in nvml.get("gpus") or [] if (x.get("mig_mode") or {}).get("current") == 1)
    for g in health["gpus"]:
        s = "%s %s" % (_label(g), g.get("uuid") or "")
        s = s.strip()
        if g.get("unread"):
            for cid in per_gpu:
                b.add(cid, NOT_RUN, s, observed="not read: %s" % g["unread"])
            continue
        for step in (_ecc_mode, _ecc_errors, _retired_pages, _row_remap, _clock_events, _temperature, _pcie, _recovery,
                     _fabric_check):
            step(b, s, g, t)
        _nvlink_check(b, s, g, t, mig_enabled=g.get("index") in mig_on)
        _mig_ecc(b, s, g, t)
    if health["kernel_log"] is not None:
        _xids(b, health["gpus"] or ev.get("gpus") or [], health["kernel_log"])
    _dcgm(b, health)
