# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: why a host.health.* check was NOT_RUN, in words that are true of it. Not public API.

A NOT_RUN health check says why in its observation (the host layer writes it: "not asked (dcgm_diag: 0)", NVML's error
code name, "this pynvml has no ...", "GPU in use, ..."). ``reason`` reads that observation into one of ``REASONS``, so
the fleet report never says "not exposed" of a reading nobody asked for, and ``NotRead`` counts them per reason and
check, in GPUs (a GPU's subject) and hosts (a check once per host: the kernel log, dcgmi diag, NVML without a GPU).
"""

from __future__ import annotations

import re

# (key, words), in the order the report says them
REASONS = (
    ("not_asked", "not asked in this run"),
    ("no_nvml", "not read: NVML gave no GPU readings (no driver, no pynvml, or NVML failed: see host.nvml.init)"),
    ("held_back", "not run: a GPU in use, or not known to be idle"),
    ("not_there", "nothing to read: NVML reports the GPU has no such part (no NVLink fabric; NVLink unused in MIG mode)"),
    ("not_available", "not available on the node or in this mode (a tool or a pynvml call it lacks, a node tree, check mode)"),
    ("skipped", "skipped by DCGM"),
    ("not_exposed", "not exposed by the driver or the VM (NVML_ERROR_NOT_SUPPORTED, NVML_ERROR_NO_PERMISSION)"),
    ("error", "could not be read (an NVML error, a lost GPU, a command that failed)"),
)
WORDS = dict(REASONS)
# the same, in a word or two (the per-host health rows: "dcgm_diag (not asked)")
SHORT = {"not_asked": "not asked", "no_nvml": "no NVML", "held_back": "GPU in use", "not_there": "not there",
         "not_available": "not available", "skipped": "skipped by DCGM", "not_exposed": "not exposed", "error": "error"}
# NVML's answers for a reading the driver or the VM does not give (the GPU has not the part, or the VM withholds it)
EXPOSED_CODES = ("NVML_ERROR_NOT_SUPPORTED", "NVML_ERROR_INVALID_ARGUMENT", "NVML_ERROR_NO_PERMISSION")
_CODE = re.compile(r"NVML_ERROR_[A-Z_]+")
# (reason, phrases of the host layer's observations), tried in order before NVML's codes
_PHRASES = (
    ("not_asked", ("not asked", "disabled by option")),
    ("no_nvml", ("nvml unavailable", "no gpu readings from nvml")),
    ("held_back", ("in use", "busy state unknown", "whether a gpu is busy")),
    ("not_there", ("mig enabled: nvlink not used", "reports no nvlink fabric", "nvml_gpu_fabric_state_not_supported")),
    ("skipped", ("skip", "not run")),
)
_AVAILABLE = ("this pynvml has no", "not installed", "only read when root is /", "only runs when root is /", "check mode",
              "audit mode", "loads the gpu, not run")


def reason(observed):
    """The key of ``REASONS`` for a NOT_RUN health check's observation."""
    text = str(observed or "").strip().lower()
    for key, phrases in _PHRASES:
        if any(text.startswith(p) if key in ("not_asked", "skipped") else p in text for p in phrases):
            return key
    codes = set(_CODE.findall(str(observed or "")))
    if codes - set(EXPOSED_CODES):
        return "error"
    if codes:
        return "not_exposed"
    if any(p in text for p in _AVAILABLE):
        return "not_available"
    return "error"


def is_gpu(subject):
    return str(subject or "").startswith("GPU ")


class NotRead(object):
    """The NOT_RUN health checks of the fleet, one host at a time (``add``): per reason and check, the GPUs (distinct
    GPU subjects of each host) and the hosts. ``summary``: [{reason, words, checks: [{check, gpus, hosts}]}] in the
    order of REASONS; ``by_check``: {check: subjects} (the report's former ``not_read``)."""

    def __init__(self):
        self.counts = {}

    def add(self, checks):
        seen = {}
        for c in checks:
            seen.setdefault((reason(c.get("observed")), c["id"]), set()).add(c.get("subject"))
        for key, subjects in seen.items():
            item = self.counts.setdefault(key, {"gpus": 0, "hosts": 0, "subjects": 0})
            item["gpus"] += sum(1 for s in subjects if is_gpu(s))
            item["hosts"] += 1
            item["subjects"] += len(subjects)

    def by_check(self):
        out = {}
        for (_why, cid), item in self.counts.items():
            out[cid] = out.get(cid, 0) + item["subjects"]
        return dict(sorted(out.items()))

    def summary(self):
        return [{"reason": key, "words": words, "checks": [
            {"check": cid, "gpus": item["gpus"], "hosts": item["hosts"]}
            for (why, cid), item in sorted(self.counts.items()) if why == key]}
            for key, words in REASONS if any(why == key for why, _cid in self.counts)]


def where(item):
    """'on 12 GPUs (3 hosts)', or 'on 4 hosts' for a check made once per host."""
    hosts = "{0:,} host{1}".format(item["hosts"], "" if item["hosts"] == 1 else "s")
    if not item["gpus"]:
        return "on %s" % hosts
    return "on {0:,} GPU{1} ({2})".format(item["gpus"], "" if item["gpus"] == 1 else "s", hosts)


def not_read_lines(summary):
    """One sentence per reason: 'not asked in this run: host.health.dcgm_diag on 3 hosts'."""
    return ["%s: %s" % (group["words"][:1].upper() + group["words"][1:], "; ".join(
        "%s %s" % (c["check"], where(c)) for c in group["checks"])) for group in summary or []]
