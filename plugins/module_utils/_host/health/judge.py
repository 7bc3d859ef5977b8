# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: the verdicts of the host.health.* checks. Not public API.

``check_health`` turns ``evidence.health`` (the readings of _host/health/readers.py, this boot's Xid events of
_host/health/xid.py, the dcgmi diag answer of _host/health/dcgm.py) into checks, judged against the thresholds the
evidence records (``evidence.health.thresholds``: the defaults of ``THRESHOLDS`` in _host/health/limits.py with
``health_thresholds`` over them; docs/health.md and docs/checks.md list them). Pure: no I/O. A check whose FAIL
criterion needs a reading that was not read is NOT_RUN with NVML's error code, never a PASS.
"""

from __future__ import annotations

import re

from ansible_collections.gpuprobe.layers.plugins.module_utils._host.catalogue import HEALTH_CHECKS
from ansible_collections.gpuprobe.layers.plugins.module_utils._host.health.dcgm import DCGM_STATUSES
from ansible_collections.gpuprobe.layers.plugins.module_utils._host.health.limits import DEFAULT_THRESHOLDS, judge_replays
from ansible_collections.gpuprobe.layers.plugins.module_utils._host.health.readers import ranges
from ansible_collections.gpuprobe.layers.plugins.module_utils._host.health.xid import XID_FAIL, XID_MEANINGS
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import FAIL, NOT_RUN, PASS, WARN

NVLINK_STATES = {0: "inactive", 1: "active", 2: "sleep", 3: "active, traffic disabled"}   # NVML_NVLINK_STATE_*
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
# the checks made once per GPU that NVML has readings for; mig_ecc is per MIG device, xid per GPU when the kernel log
# was read (else once), dcgm_diag per test and GPU when it ran (else once)
PER_GPU_CHECKS = tuple(cid for cid in HEALTH_CHECKS if cid not in ("host.health.xid", "host.health.mig_ecc", "host.health.dcgm_diag"))
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
    parts = ["%s: links %s" % (NVLINK_STATES.get(st, "state %s" % st), ranges(ls)) for st, ls in sorted(by_state.items())]
    if n["errors"]:
        parts.append("not read: %s" % "; ".join("%s on links %s" % (text, ranges(ls)) for text, ls in sorted(n["errors"].items())))
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
    missing = "links not read: %s" % "; ".join("%s on links %s" % (text, ranges(ls)) for text, ls in sorted(unread.items())) \
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
