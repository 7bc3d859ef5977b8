# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: GPU health in the fleet report: the host layer's host.health.* checks across the fleet, counted and worded
("3 GPUs with pending row remaps on 2 hosts"). Not public API. docs/health.md.
"""

from __future__ import annotations

from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import FAIL, NOT_RUN, WARN
from ansible_collections.gpuprobe.layers.plugins.module_utils._host.health.reasons import NotRead, is_gpu
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report.sentences import plural

# ---------------------------------------------------------------------------------------------------
# GPU health (the host layer's host.health.* checks, one per GPU and reading)

HEALTH_PREFIX = "host.health."
# what a WARN or FAIL of a health check means for a GPU, in the words of "3 GPUs with pending row remaps"
HEALTH_WORDS = {
    ("host.health.row_remap", WARN): "pending row remaps or memory banks without a spare row",
    ("host.health.row_remap", FAIL): "a row remapping failure",
    ("host.health.ecc_errors", FAIL): "uncorrectable ECC errors since the driver loaded",
    ("host.health.ecc_errors", WARN): "uncorrectable ECC errors in their lifetime",
    ("host.health.ecc_mode", WARN): "ECC off or an ECC mode change pending",
    ("host.health.retired_pages", FAIL): "too many retired pages",
    ("host.health.retired_pages", WARN): "a page retirement pending",
    ("host.health.clock_events", FAIL): "a hardware slowdown active",
    ("host.health.clock_events", WARN): "a software thermal slowdown or an unknown slowdown reason active",
    ("host.health.temperature", FAIL): "a temperature at the slowdown threshold",
    ("host.health.temperature", WARN): "a temperature near the slowdown threshold",
    ("host.health.pcie_link", WARN): "a PCIe link narrower than its maximum",
    ("host.health.pcie_replay", WARN): "PCIe replays above DCGM's limits",
    ("host.health.recovery_action", FAIL): "the driver asking for a reset or a reboot",
    ("host.health.recovery_action", WARN): "the driver asking for a drain or a recovery",
    ("host.health.fabric", FAIL): "an NVLink fabric registration error",
    ("host.health.fabric", WARN): "NVLink fabric registration not completed, or a degraded fabric",
    ("host.health.xid", FAIL): "Xid errors that need a reset (48, 63, 64, 79, 94, 95)",
    ("host.health.xid", WARN): "other Xid events",
    ("host.health.nvlink", FAIL): "NVLink links down",
    ("host.health.nvlink", WARN): "NVLink links inactive or with traffic disabled",
    ("host.health.mig_ecc", FAIL): "uncorrected SRAM errors in a MIG instance",
    ("host.health.dcgm_diag", FAIL): "a failed DCGM diagnostic",
    ("host.health.dcgm_diag", WARN): "a DCGM diagnostic warning or no DCGM result",
}


def health_words(check_id, status):
    return HEALTH_WORDS.get((check_id, status)) or "%s %s" % (check_id, status)


def health_checks(entry):
    """The host.health.* checks of a host entry's host layer."""
    return [c for c in ((entry["layers"].get("host") or {}).get("checks") or [])
            if isinstance(c, dict) and str(c.get("id") or "").startswith(HEALTH_PREFIX)]


class HealthTally(object):
    """The fleet's GPU health gathered one host entry at a time (``add``, each host once, in name order); ``summary``
    is ``health_summary``'s result. Only counts are kept per GPU: a GPU is (host, subject), so one host's distinct
    subjects add up across hosts."""

    def __init__(self):
        self.found, self.not_read, self.gpus_read, self.hosts_read = {}, NotRead(), 0, 0

    def add(self, e):
        found, read, checks = {}, set(), health_checks(e)
        for c in checks:
            if c.get("status") in (FAIL, WARN):
                found.setdefault((c["id"], c["status"]), set()).add(c.get("subject"))
            if c.get("status") != NOT_RUN and is_gpu(c.get("subject")):   # a GPU, not the kernel log or dcgmi
                read.add(c.get("subject"))
        for key, gpus in found.items():
            item = self.found.setdefault(key, {"gpus": 0, "hosts": []})
            item["gpus"] += len(gpus)
            item["hosts"].append(e["name"])
        # why each reading was NOT_RUN (not asked, not exposed, an error, ...): _health_reasons
        self.not_read.add([c for c in checks if c.get("status") == NOT_RUN])
        self.gpus_read += len(read)
        self.hosts_read += 1 if read else 0

    def summary(self):
        findings = [{"check": cid, "status": status, "gpus": item["gpus"], "hosts": len(item["hosts"]),
                     "words": health_words(cid, status), "host_names": item["hosts"]}
                    for (cid, status), item in self.found.items()]
        findings.sort(key=lambda f: (f["status"] != FAIL, -f["gpus"], f["check"]))
        return {"findings": findings, "not_read": self.not_read.by_check(), "not_read_why": self.not_read.summary(),
                "gpus_read": self.gpus_read, "hosts_read": self.hosts_read}


def health_summary(entries):
    """The fleet's GPU health: findings (one per health check and status WARN/FAIL: the GPUs (subjects) and hosts
    concerned, FAIL first, then the most GPUs), not_read (per check: the subjects whose reading was NOT_RUN), not_read_why
    (the same per reason: _health_reasons.NotRead.summary) and how many GPUs and hosts had any health reading."""
    tally = HealthTally()
    for e in entries:
        tally.add(e)
    return tally.summary()


def health_line(finding):
    """'3 GPUs with pending row remaps on 2 hosts'."""
    return "%s with %s on %s" % (plural(finding["gpus"], "GPU"), finding["words"], plural(finding["hosts"], "host"))
