# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: the thresholds of the host.health.* checks (``THRESHOLDS``), each set against DCGM's default for the same
reading, ``check_thresholds`` (the option ``health_thresholds`` over them), the time each dcgmi diag run level may
take (``DCGM_TIMEOUTS``), and the PCIe replay judgement of DCGM's health watch. Not public API.

DCGM is cited at NVIDIA/DCGM tag v4.6.0: ``modules/health/DcgmHealthWatch.cpp`` (the health watches),
``common/DcgmGPUHardwareLimits.h`` (its limits), ``nvvs/src/Software.cpp`` (the diagnostic's level-1 software checks)
and ``nvvs/plugin_src/pcie/Pcie.cpp`` (the diagnostic's PCIe test). docs/health.md has the table.
"""

from __future__ import annotations

import math

from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import PASS, WARN

DCGM = "DCGM v4.6.0"
# DcgmHealthWatch.cpp:1559 (GetExpectedPcieReplayRate): replays per minute per lane that DCGM expects at a bit error
# rate of 1e-12, per PCIe generation (Gen1 2.5 GT/s ... Gen6 64 GT/s); a generation above the table is capped
PCIE_REPLAYS_PER_LANE_PER_MINUTE = (2.5 / 1000 * 60, 5.0 / 1000 * 60, 8.0 / 1000 * 60, 16.0 / 1000 * 60, 32.0 / 1000 * 60,
                                    64.0 / 1000 * 60)


def _threshold(default, unit, minimum, applies, why):
    return {"default": default, "unit": unit, "minimum": minimum, "applies": applies, "why": why}


# The WARN/FAIL thresholds of the host.health.* checks: name -> default, unit, smallest value allowed, the check and
# status it sets, why that default (with DCGM's default for the same reading, or that DCGM has none). ``health_thresholds``
# (host_facts, node_layers, verify_node; the verify role's verify_health_thresholds, e.g. per inventory group) overrides
# any of them; null records the reading without judging it. docs/checks.md lists this table (scripts/gen_checks_doc.py).
THRESHOLDS = {
    "ecc_uncorrected_volatile_fail": _threshold(
        1, "errors", 1, "host.health.ecc_errors FAIL at or above",
        "an uncorrectable error since the driver loaded: memory failed while in use; as DCGM: its health watch FAILs any "
        "volatile DBE (%s DcgmHealthWatch.cpp:1735 MonitorMemVolatileDbes, > 0)" % DCGM),
    "ecc_uncorrected_aggregate_warn": _threshold(
        1, "errors", 1, "host.health.ecc_errors WARN at or above (with none volatile)",
        "lifetime uncorrectable errors: the GPU failed before; row remapping or page retirement should have handled it. "
        "Ours: DCGM judges no aggregate count (its health watch and level-1 software test read the volatile one), hence "
        "a WARN, never a FAIL"),
    "retired_pages_fail": _threshold(
        63, "pages", 1, "host.health.retired_pages FAIL at or above (single- and double-bit together)",
        "DCGM's retired-pages limit: DCGM_LIMIT_MAX_RETIRED_PAGES 63 (%s common/DcgmGPUHardwareLimits.h:21), FAIL at "
        "sbe + dbe >= 63 (DcgmHealthWatch.cpp:1836, nvvs/src/Software.cpp:765); was 60 here before" % DCGM),
    "row_remap_banks_exhausted_warn": _threshold(
        1, "banks", 1, "host.health.row_remap WARN at or above (banks with no spare row left, histogram 'none')",
        "a bank with no spare row cannot remap its next failing row: the next uncorrectable error there is a remap "
        "failure. Ours: DCGM reads the histogram but judges only the remap failure (FAIL) and 512 uncorrectable remapped "
        "rows (DCGM_LIMIT_MAX_ROW_REMAP_UNCORRECTABLE, DcgmGPUHardwareLimits.h:39), hence a WARN"),
    "temperature_margin_c": _threshold(
        5, "C", 0, "host.health.temperature WARN this close to the slowdown threshold (FAIL at it)",
        "a GPU this close to its slowdown threshold slows down under the first sustained load. Ours: DCGM has no "
        "temperature margin; its thermal watch WARNs on any thermal violation time (%s DcgmHealthWatch.cpp:2407), "
        "which host.health.clock_events judges from the active slowdown reasons" % DCGM),
    "pcie_replay_warn": _threshold(
        81, "replays", 1, "host.health.pcie_replay WARN at or above (the count since the driver loaded)",
        "DCGM's diagnostic fails a GPU with more than 80 replays in its PCIe test (max_pcie_replays 80, %s "
        "nvvs/plugin_src/pcie/Pcie.cpp:104); a lower count since the driver loaded gives no rate and is recorded (1 or "
        "2 on every healthy H200 seen). Was 1 here before" % DCGM),
    "pcie_replay_rate_percent": _threshold(
        100, "percent", 1, "host.health.pcie_replay WARN above this share of DCGM's replay rate limit, over the run",
        "DCGM's PCIe health watch WARNs when the replays of the last minute exceed ceil(rate per lane x lanes) for the "
        "link's generation (a bit error rate of 1e-12: Gen5 x16 31, Gen4 x16 16 a minute; %s DcgmHealthWatch.cpp:1559, "
        "1577, 1676). The counter is read twice while the host layer reads NVML, and the replays between are compared "
        "with the limit for max(interval, 1 minute)" % DCGM),
    "nvlink_inactive_fail": _threshold(
        1, "links", 1, "host.health.nvlink FAIL at or above (inactive links of a GPU with NVLink in use)",
        "an NVLink that is down cuts peer bandwidth and, on NVSwitch systems, degrades or removes the GPU from the "
        "fabric; as DCGM: its health watch FAILs any link down outside MIG mode (%s DcgmHealthWatch.cpp:3002)" % DCGM),
    "mig_sram_uncorrected_fail": _threshold(
        1, "errors", 1, "host.health.mig_ecc FAIL at or above (per MIG device, uncorrected volatile non-DRAM errors)",
        "an uncorrectable SRAM error in an instance: its work was corrupted or stopped (Xid 94/95); as DCGM: any "
        "uncorrectable volatile error FAILs (%s DcgmHealthWatch.cpp:1735)" % DCGM),
}
DEFAULT_THRESHOLDS = dict((name, entry["default"]) for name, entry in THRESHOLDS.items())

# dcgmi diag: the run level the user asks for (1: seconds, software and deployment checks, no load on the GPU;
# 2-4 load the GPU for minutes to hours) and how long each level may take
DCGM_TIMEOUTS = {1: 120.0, 2: 900.0, 3: 3600.0, 4: 14400.0}


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


def replay_rate_limit(generation, width):
    """DCGM's PCIe replay limit per minute for a link of ``generation`` and ``width`` lanes (None when unknown)."""
    if not isinstance(generation, int) or not isinstance(width, int) or generation < 1 or width < 1:
        return None
    rate = PCIE_REPLAYS_PER_LANE_PER_MINUTE[min(generation, len(PCIE_REPLAYS_PER_LANE_PER_MINUTE)) - 1]
    return int(math.ceil(rate * width))


def judge_replays(pcie, t):
    """(status, expected, observed) of host.health.pcie_replay from a GPU's PCIe readings (``replay_counter`` since the
    driver loaded, and ``replay_counter_end`` read ``replay_interval_s`` seconds later, in the same NVML session).

    WARN when the count since the driver loaded reaches ``pcie_replay_warn`` (DCGM's diagnostic limit), or when the
    replays between the two readings exceed ``pcie_replay_rate_percent`` of DCGM's per-minute limit for the link's
    current generation and width over max(interval, 1 minute): a shorter interval is never extrapolated to a minute,
    so a replay or two is never a rate. A lower count is PASS with the count in the observation (information)."""
    count, end, seconds = pcie.get("replay_counter"), pcie.get("replay_counter_end"), pcie.get("replay_interval_s")
    warn_at, percent = t["pcie_replay_warn"], t["pcie_replay_rate_percent"]
    limit = replay_rate_limit(pcie.get("generation_current"), pcie.get("width_current"))
    expected = "%s since the driver loaded, %s" % (
        "< %s" % warn_at if warn_at is not None else "not judged (threshold off)",
        "and over the run at most %s%% of DCGM's rate limit" % percent if percent is not None else "rate not judged (threshold off)")
    notes = []
    status = WARN if warn_at is not None and count >= warn_at else PASS
    notes.append("%s since the driver loaded%s" % (count, " (information: below %s, no rate)" % warn_at
                                                   if status == PASS and count and warn_at is not None else ""))
    if end is None or seconds is None:
        notes.append("rate not measured (no second reading)")
    elif limit is None:
        notes.append("+%s in %.2f s (rate not judged: link generation or width unread)" % (end - count, seconds))
    else:
        allowed = limit * max(seconds, 60.0) / 60.0 * (percent if percent is not None else 100) / 100.0
        over = percent is not None and end - count > allowed
        status = WARN if over else status
        notes.append("+%s in %.2f s (DCGM limit %s a minute for Gen%s x%s%s)" % (
            end - count, seconds, limit, pcie.get("generation_current"), pcie.get("width_current"),
            ": above it" if over else ""))
    return status, expected, "; ".join(notes)


def replay_again(nv, call, handle, pcie, now):
    """The second reading of a GPU's PCIe replay counter, at the end of the same NVML session (``now``: monotonic
    seconds): ``replay_counter_end`` and ``replay_interval_s`` since the first (``replay_read_at``, which it removes).
    No reading is added when the first failed; one that fails leaves both None and its error under pcie_replay_end."""
    first_at = pcie.pop("replay_read_at", None)
    if pcie.get("replay_counter") is None or first_at is None or getattr(nv, "nvmlDeviceGetPcieReplayCounter", None) is None:
        return
    errors = {}
    pcie["replay_counter_end"] = call(nv, errors, "pcie_replay_end", nv.nvmlDeviceGetPcieReplayCounter, handle)
    pcie["replay_interval_s"] = round(now - first_at, 3) if pcie["replay_counter_end"] is not None else None
    if errors:
        pcie["replay_end_error"] = errors["pcie_replay_end"]
