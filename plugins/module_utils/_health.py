# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: the per-GPU health checks of the host layer (host.health.*). Not public API.

Read-only: counters are read, never reset, and no mode is changed. ``read_gpu_health`` is handed the pynvml module
and the GPU's handle by _nvml.read_nvml (the one place that initialises NVML) and returns the raw readings, each
call on its own (a reading the driver or the VM does not expose leaves its NVML error text, with the error code
name, in ``errors``). ``read_kernel_xids`` reads the NVRM Xid lines of this boot from the kernel log through
_run.run. ``check_health`` turns both into checks with the thresholds documented in ``CHECKS`` (docs/checks.md,
docs/health.md).
"""

from __future__ import annotations

import ctypes
import os
import re

from ansible_collections.gpuprobe.layers.plugins.module_utils._result import FAIL, NOT_RUN, PASS, WARN
from ansible_collections.gpuprobe.layers.plugins.module_utils._run import run, which

KERNEL_LOG_TIMEOUT = 15.0
XID_PREFIX = b"NVRM: Xid"
# the kernel log of this boot, first source that answers with any line (a booted kernel's log is never empty)
KERNEL_LOG_COMMANDS = (("journalctl", "-k", "-b", "--no-pager", "-q", "-o", "cat"), ("dmesg", "--notime"))
RETIRED_PAGES_FAIL = 60          # NVIDIA's RMA threshold for retired pages (DCGM's retired-pages limit)
TEMPERATURE_MARGIN_C = 5         # WARN this close to the slowdown threshold
FIELD_RECOVERY_ACTION = 230      # NVML_FI_DEV_GET_GPU_RECOVERY_ACTION
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
_XID = re.compile(r"NVRM: Xid \(PCI:([0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})(?:\.[0-7])?\): (\d+)(?:, (.*))?")


def _check(title, fail, nxt):
    return {"title": title, "fail": fail, "next": nxt}


CHECKS = {
    "host.health.ecc_mode": _check(
        "per GPU: ECC is enabled, and the pending ECC mode is the current one (nvmlDeviceGetEccMode)",
        "(WARN) ECC off: memory errors go undetected; or an ECC mode change waits for a GPU reset",
        "nvidia-smi -q -d ECC; who changed the ECC mode (the probe never changes it)"),
    "host.health.ecc_errors": _check(
        "per GPU: no uncorrectable ECC error (nvmlDeviceGetTotalEccErrors, volatile = since the last driver load, "
        "aggregate = lifetime); corrected counts are recorded, not judged",
        "uncorrectable volatile ECC errors > 0: memory failed since the driver loaded (FAIL); uncorrectable aggregate "
        "> 0 with none volatile: failed before (WARN)",
        "nvidia-smi -q -d ECC,ROW_REMAPPER,PAGE_RETIREMENT; dmesg for Xid 48/63/64/94/95; drain the GPU and reset it"),
    "host.health.retired_pages": _check(
        "per GPU with page retirement (before Ampere): no page retirement pending, fewer than %d retired pages "
        "(nvmlDeviceGetRetiredPages, nvmlDeviceGetRetiredPagesPendingStatus)" % RETIRED_PAGES_FAIL,
        "%d or more retired pages: NVIDIA's replacement threshold (FAIL); a retirement pending until the next driver "
        "load (WARN)" % RETIRED_PAGES_FAIL,
        "nvidia-smi -q -d PAGE_RETIREMENT; reset the GPU (or reboot) to retire pending pages"),
    "host.health.row_remap": _check(
        "per GPU with row remapping (Ampere and later): no remapping failure and none pending (nvmlDeviceGetRemappedRows)",
        "a row remapping failure: the GPU could not remap a failed row (FAIL); a remapping pending until the GPU is "
        "reset (WARN)",
        "nvidia-smi -q -d ROW_REMAPPER; drain and reset the GPU; a failure means the GPU needs replacing"),
    "host.health.clock_events": _check(
        "per GPU: no hardware slowdown, HW thermal slowdown or HW power brake is active now, and no SW thermal slowdown "
        "(nvmlDeviceGetCurrentClocksEventReasons, else ...ThrottleReasons); idle, power cap, sync boost and "
        "application clocks are recorded, not judged",
        "hardware slowdown, HW thermal or HW power brake active (FAIL: the GPU runs far below its clocks); SW thermal "
        "slowdown active (WARN)",
        "nvidia-smi -q -d PERFORMANCE,TEMPERATURE,POWER; the cooling, the power supply and the chassis' power brake"),
    "host.health.temperature": _check(
        "per GPU: the GPU temperature is more than %d C below its slowdown threshold (nvmlDeviceGetTemperature, "
        "nvmlDeviceGetTemperatureThreshold SLOWDOWN)" % TEMPERATURE_MARGIN_C,
        "at or above the slowdown threshold (FAIL: the GPU slows itself down); within %d C of it (WARN)" % TEMPERATURE_MARGIN_C,
        "nvidia-smi -q -d TEMPERATURE; the airflow and cooling of the node"),
    "host.health.pcie_link": _check(
        "per GPU: the PCIe link runs at its maximum width (nvmlDeviceGetCurrPcieLinkWidth vs ...MaxPcieLinkWidth); "
        "the generation is recorded, not judged (an idle GPU lowers its link generation to save power)",
        "(WARN) the link trained narrower than its maximum (e.g. x8 of x16): a seating, riser or slot problem that "
        "halves host-to-device bandwidth",
        "nvidia-smi -q -d PCI under load; lspci -vv -s <bus id> (LnkSta vs LnkCap); reseat the GPU or riser"),
    "host.health.pcie_replay": _check(
        "per GPU: the PCIe replay counter is 0 (nvmlDeviceGetPcieReplayCounter, since the driver loaded)",
        "(WARN) replays > 0: the link retransmitted packets (signal integrity); one reading cannot give a rate",
        "nvidia-smi -q -d PCI twice under load (does it rise?); reseat the GPU or riser"),
    "host.health.recovery_action": _check(
        "per GPU: the driver asks for no recovery action (nvmlDeviceGetFieldValues NVML_FI_DEV_GET_GPU_RECOVERY_ACTION)",
        "the driver asks for a GPU reset, a drain and reset, a bus reset or a reboot (FAIL); a peer-to-peer drain or "
        "IMEX domain recovery (WARN)",
        "nvidia-smi -q (GPU Reset Status / Recovery Action); drain the node and do what the driver asks"),
    "host.health.fabric": _check(
        "per GPU on an NVSwitch (NVLink fabric) system: the GPU's fabric registration completed successfully "
        "(nvmlDeviceGetGpuFabricInfo); NOT_RUN where the GPU has no fabric",
        "registration completed with an error (FAIL): CUDA cannot start on the GPU; not started or in progress (WARN)",
        "the nvidia-fabricmanager service's state and log; nvidia-smi -q | grep -A3 Fabric"),
    "host.health.xid": _check(
        "per GPU: no NVRM Xid event in this boot's kernel log (journalctl -k -b, else dmesg), each mapped to its "
        "documented meaning; Xid lines of a PCI address no GPU has are reported under that address",
        "Xid 48 (double-bit ECC), 63/64 (row remap / page retirement event or failure), 79 (fallen off the bus), 94/95 "
        "(contained / uncontained ECC) since boot (FAIL); any other Xid (WARN: often an application's fault, 13/31/43)",
        "journalctl -k -b | grep Xid; NVIDIA's Xid catalogue; a FAIL Xid stays until the node reboots"),
}


# ---- reading (pynvml is handed in by _nvml.read_nvml) --------------------------------------------------------

def _absent(errors, key, name):
    errors[key] = "this pynvml has no %s" % name
    return None


def _read(nv, call, errors, key, name, *args):
    func = getattr(nv, name, None)
    if func is None:
        return _absent(errors, key, name)
    return call(nv, errors, key, func, *args)


def _fabric(nv, call, errors, handle):
    struct_type = getattr(nv, "c_nvmlGpuFabricInfo_t", None)
    if struct_type is None or getattr(nv, "nvmlDeviceGetGpuFabricInfo", None) is None:
        return _absent(errors, "fabric", "nvmlDeviceGetGpuFabricInfo")
    info = struct_type()
    call(nv, errors, "fabric", nv.nvmlDeviceGetGpuFabricInfo, handle, ctypes.byref(info))
    if "fabric" in errors:
        return None
    return {"state": int(info.state), "status": int(info.status), "clique_id": int(info.cliqueId),
            "cluster_uuid": bytes(bytearray(info.clusterUuid)).hex()}


def _recovery_action(nv, call, errors, handle):
    values = _read(nv, call, errors, "recovery_action", "nvmlDeviceGetFieldValues", handle, [FIELD_RECOVERY_ACTION])
    if values is None:
        return None
    value = values[0]
    if value.nvmlReturn != 0:   # the field's own return code (NOT_SUPPORTED on a driver without it)
        # imported here: _nvml imports this module (it hands the readers the pynvml module)
        from ansible_collections.gpuprobe.layers.plugins.module_utils._nvml import error_code_name  # pylint: disable=import-outside-toplevel
        errors["recovery_action"] = "field %d: %s (code %s)" % (
            FIELD_RECOVERY_ACTION, error_code_name(nv, value.nvmlReturn) or "unknown NVML error", value.nvmlReturn)
        return None
    return int(value.value.uiVal)


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
    health["recovery_action"] = _recovery_action(nv, call, errors, handle)
    health["fabric"] = _fabric(nv, call, errors, handle)
    return health


# ---- the kernel log ------------------------------------------------------------------------------------------

def parse_xids(text):
    """The NVRM Xid events of kernel log text: [{pci (dddd:bb:dd), xid, detail, meaning, line}]."""
    events = []
    for line in (text or "").splitlines():
        match = _XID.search(line)
        if not match:
            continue
        domain, bus, dev = match.group(1).split(":")
        xid = int(match.group(2))
        events.append({"pci": "%04x:%s:%s" % (int(domain, 16), bus.lower(), dev.lower()), "xid": xid,
                       "detail": (match.group(3) or "").strip(), "meaning": XID_MEANINGS.get(xid, "not in the catalogue here"),
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


# ---- the checks --------------------------------------------------------------------------------------------------

def health_evidence(nvml, xids):
    """evidence.health: {gpus: [{index, uuid, pci_bus_id, <readings>, errors}], kernel_log: {...}}. Takes the
    readings out of NVML's per-GPU evidence (they are kept once, here)."""
    gpus = []
    for gpu in nvml.get("gpus") or []:
        readings = gpu.pop("health", None)
        entry = {"index": gpu.get("index"), "uuid": gpu.get("uuid"), "pci_bus_id": gpu.get("pci_bus_id")}
        if readings is None:   # no handle: nothing could be read on this GPU
            entry["unread"] = (gpu.get("errors") or {}).get("handle") or "no NVML handle"
        else:
            entry.update(readings)
        gpus.append(entry)
    return {"gpus": gpus, "kernel_log": xids}


def _not_read(errors, *keys):
    texts = [errors[k] for k in keys if k in errors]
    return "not read: %s" % "; ".join(sorted(set(texts))) if texts else None


def _ecc_mode(b, s, g):
    mode = g["ecc_mode"]
    if mode is None:
        b.add("host.health.ecc_mode", NOT_RUN, s, "enabled", _not_read(g["errors"], "ecc_mode"))
        return
    observed = "current %s, pending %s" % tuple(ENABLE_STATES.get(mode[k], mode[k]) for k in ("current", "pending"))
    ok = mode["current"] == 1 and mode["pending"] == 1
    b.add("host.health.ecc_mode", PASS if ok else WARN, s, "enabled (current and pending)", observed)


def _ecc_errors(b, s, g):
    c = g["ecc_errors"]
    if c["uncorrected_volatile"] is None and c["uncorrected_aggregate"] is None:
        b.add("host.health.ecc_errors", NOT_RUN, s, "uncorrected 0",
              _not_read(g["errors"], "ecc_uncorrected_volatile", "ecc_uncorrected_aggregate"))
        return
    observed = ", ".join("%s %s" % (k.replace("_", " "), "unread" if v is None else v) for k, v in sorted(c.items()))
    if c["uncorrected_volatile"]:
        status = FAIL
    elif c["uncorrected_aggregate"]:
        status = WARN
    else:
        status = PASS
    b.add("host.health.ecc_errors", status, s, "uncorrected volatile 0 (FAIL), uncorrected aggregate 0 (WARN)", observed)


def _retired_pages(b, s, g):
    p = g["retired_pages"]
    if p["single_bit"] is None and p["double_bit"] is None and p["pending"] is None:
        b.add("host.health.retired_pages", NOT_RUN, s, "< %d retired, none pending" % RETIRED_PAGES_FAIL,
              _not_read(g["errors"], "retired_pages_single_bit", "retired_pages_double_bit", "retired_pages_pending"))
        return
    total = (p["single_bit"] or 0) + (p["double_bit"] or 0)
    status = FAIL if total >= RETIRED_PAGES_FAIL else (WARN if p["pending"] else PASS)
    b.add("host.health.retired_pages", status, s, "< %d retired, none pending" % RETIRED_PAGES_FAIL,
          "single-bit %s, double-bit %s, pending %s" % (p["single_bit"], p["double_bit"], p["pending"]))


def _row_remap(b, s, g):
    r = g["remapped_rows"]
    if r is None:
        b.add("host.health.row_remap", NOT_RUN, s, "no failure, none pending", _not_read(g["errors"], "remapped_rows"))
        return
    status = FAIL if r["failure"] else (WARN if r["pending"] else PASS)
    b.add("host.health.row_remap", status, s, "no failure, none pending",
          "remapped rows: correctable %(corrected)s, uncorrectable %(uncorrected)s; pending %(pending)s, failure %(failure)s" % r)


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


def _clock_events(b, s, g):
    mask = g["clock_event_reasons"]
    if mask is None:
        b.add("host.health.clock_events", NOT_RUN, s, "no hardware or thermal slowdown", _not_read(g["errors"], "clock_event_reasons"))
        return
    active = clock_events(int(mask))
    b.add("host.health.clock_events", _worst([st for _n, st in active]), s, "no hardware or thermal slowdown",
          "0x%x: %s (%s)" % (mask, ", ".join(n for n, _st in active) or "none active", g["clock_event_source"]))


def _temperature(b, s, g):
    temp, slow = g["temperature_c"], g["temperature_slowdown_c"]
    if temp is None or slow is None:
        b.add("host.health.temperature", NOT_RUN, s, "below the slowdown threshold",
              _not_read(g["errors"], "temperature_c", "temperature_slowdown_c"))
        return
    status = FAIL if temp >= slow else (WARN if temp >= slow - TEMPERATURE_MARGIN_C else PASS)
    b.add("host.health.temperature", status, s, "< %d C (slowdown %d C - %d)" % (slow - TEMPERATURE_MARGIN_C, slow, TEMPERATURE_MARGIN_C),
          "%s C (slowdown %s C, shutdown %s C)" % (temp, slow, g["temperature_shutdown_c"]))


def _pcie(b, s, g):
    p = g["pcie"]
    gen = "generation %s of %s (GPU max %s)" % (p["generation_current"], p["generation_max"], p["generation_gpu_max"])
    if p["width_current"] is None or p["width_max"] is None:
        b.add("host.health.pcie_link", NOT_RUN, s, "width at its maximum", "%s; %s" % (
            _not_read(g["errors"], "pcie_width_current", "pcie_width_max"), gen))
    else:
        b.add("host.health.pcie_link", WARN if p["width_current"] < p["width_max"] else PASS, s,
              "width x%s (generation informative)" % p["width_max"], "x%s of x%s; %s" % (p["width_current"], p["width_max"], gen))
    replay = p["replay_counter"]
    if replay is None:
        b.add("host.health.pcie_replay", NOT_RUN, s, "0", _not_read(g["errors"], "pcie_replay_counter"))
    else:
        b.add("host.health.pcie_replay", WARN if replay > 0 else PASS, s, "0", str(replay))


def _recovery(b, s, g):
    action = g["recovery_action"]
    if action is None:
        b.add("host.health.recovery_action", NOT_RUN, s, "none", _not_read(g["errors"], "recovery_action"))
        return
    name, status = RECOVERY_ACTIONS.get(action, ("unknown action %s" % action, WARN))
    b.add("host.health.recovery_action", status, s, "none", "%s (%s)" % (name, action))


def _fabric_check(b, s, g):
    f = g["fabric"]
    if f is None:
        b.add("host.health.fabric", NOT_RUN, s, "registration completed", _not_read(g["errors"], "fabric"))
        return
    state = FABRIC_STATES.get(f["state"], "unknown state %s" % f["state"])
    if f["state"] == 0:
        b.add("host.health.fabric", NOT_RUN, s, "registration completed",
              "the GPU has no NVLink fabric (NVML_GPU_FABRIC_STATE_NOT_SUPPORTED)")
        return
    observed = "%s, status %s, clique %s, cluster %s" % (state, f["status"], f["clique_id"], f["cluster_uuid"])
    if f["state"] == 3:
        status = PASS if f["status"] == 0 else FAIL
    else:
        status = WARN
    b.add("host.health.fabric", status, s, "registration completed with status 0 (NVML_SUCCESS)", observed)


def _xid_summary(events):
    counts = {}
    for ev in events:
        counts[ev["xid"]] = counts.get(ev["xid"], 0) + 1
    status = FAIL if any(x in XID_FAIL for x in counts) else (WARN if counts else PASS)
    text = "; ".join("Xid %d x%d (%s)" % (x, n, XID_MEANINGS.get(x, "not in the catalogue here")) for x, n in sorted(counts.items()))
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


def check_health(b, ev):
    """The host.health.* checks from evidence.health (and the NVML evidence: why nothing was read)."""
    health = ev.get("health") or {"gpus": [], "kernel_log": None}
    nvml = ev["nvml"]
    if not health["gpus"]:
        why = "disabled by option (nvml: false)" if ev.get("nvml_disabled") else (
            "NVML unavailable: %s" % nvml["error"] if not nvml["ok"] else "no GPU readings from NVML")
        for cid in CHECKS:
            if cid != "host.health.xid":
                b.add(cid, NOT_RUN, "GPUs", observed=why)
    for g in health["gpus"]:
        s = "%s %s" % (_label(g), g.get("uuid") or "")
        s = s.strip()
        if g.get("unread"):
            for cid in CHECKS:
                if cid != "host.health.xid":
                    b.add(cid, NOT_RUN, s, observed="not read: %s" % g["unread"])
            continue
        for step in (_ecc_mode, _ecc_errors, _retired_pages, _row_remap, _clock_events, _temperature, _pcie, _recovery,
                     _fabric_check):
            step(b, s, g)
    if health["kernel_log"] is not None:
        _xids(b, health["gpus"] or ev.get("gpus") or [], health["kernel_log"])
