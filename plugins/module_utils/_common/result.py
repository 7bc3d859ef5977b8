# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: the one layer-result contract of gpuprobe.layers.

This file is not public API; it may change without notice. Every layer (host, cdi, runtime, compute,
k8s) returns the record built here, and everything downstream (verdict, reports) consumes it.

Record shape (docs/contract.md):
    layer, status, reason, checks[], evidence{}, not_proven[], versions{}, started_at, duration_ms,
    signature, points_to

``signature`` and ``points_to`` are null unless the layer FAILed: the stable failure id (for example
``compute.cuda.CUDA_ERROR_JIT_COMPILER_NOT_FOUND``) and where the failure points, one of ``POINTS_TO`` (a
compute failure can point at ``runtime`` when the same probe passed on the host; ``image`` is the probe image).
"""

from __future__ import annotations

import datetime
import time

PASS = "PASS"
FAIL = "FAIL"
WARN = "WARN"
NOT_RUN = "NOT_RUN"
STATUSES = (PASS, FAIL, WARN, NOT_RUN)

LAYERS = ("host", "cdi", "runtime", "compute", "k8s")
# The ordered checkpoints of the node verdict; k8s is a cluster-side layer outside that order.
ORDERED_LAYERS = ("host", "cdi", "runtime", "compute")
# the node verdicts (decided in _verdict.node_verdict; named here, with the records, so that the node side can name
# them without loading the verdict code)
COMPUTE_VERIFIED = "COMPUTE_VERIFIED"
INCONCLUSIVE = "INCONCLUSIVE"
VERDICTS = (COMPUTE_VERIFIED, INCONCLUSIVE) + tuple("FAILED_AT_" + layer.upper() for layer in ORDERED_LAYERS)

# Where a failure can point (a record's and a verdict's points_to): a layer, or the probe image (its env, its own
# libraries: a cause inside the container that no spec edit and no runtime put there).
POINTS_TO = LAYERS + ("image",)

RECORD_KEYS = ("layer", "status", "reason", "checks", "evidence", "not_proven", "versions",
               "started_at", "duration_ms", "signature", "points_to")
CHECK_KEYS = ("id", "status", "subject", "expected", "observed", "hint")

# What a PASS of each layer does not establish (a record's not_proven, docs/contract.md: no PASS by inference).
NOT_PROVEN = {
    "host": ["that any CDI spec points at these devices", "that a container can compute on the GPU"],
    "cdi": ["that the node has a working GPU", "that the container runtime applies these edits"],
    "runtime": ["that a CUDA call succeeds in the container"],
    "compute": ["throughput", "isolation between tenants", "health under sustained load"],
    "k8s": ["that the driver or libraries inside a Pod work"],
}


def utc_now_iso():
    """ISO-8601 UTC timestamp with a Z suffix."""
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _text(value):
    if value is None:
        return None
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value)
    return str(value)


def catalogue_entry(title, fail, nxt):
    """One entry of a layer's check catalogue (``LayerBuilder``'s ``catalogue``; docs/checks.md is generated from the
    catalogues): what the check establishes (title), what a FAIL means (fail), what to look at next (next)."""
    return {"title": title, "fail": fail, "next": nxt}


def make_check(check_id, status, subject=None, expected=None, observed=None, hint=None):
    """One check entry. ``expected``/``observed`` are rendered as text so reports can show them."""
    if status not in STATUSES:
        raise ValueError("unknown check status %r for %s" % (status, check_id))
    return {
        "id": check_id,
        "status": status,
        "subject": _text(subject),
        "expected": _text(expected),
        "observed": _text(observed),
        "hint": hint,
    }


def rollup_status(checks):
    """Layer status from its checks: any FAIL -> FAIL, else any WARN -> WARN, else PASS when at least one
    check PASSed, else NOT_RUN (a layer whose checks all did not run proves nothing)."""
    seen = set(c["status"] for c in checks)
    for status in (FAIL, WARN, PASS):
        if status in seen:
            return status
    return NOT_RUN


def not_run_checks_not_proven(checks):
    """The not_proven entries of a PASS/WARN layer for its NOT_RUN checks: what the layer did not check is
    not established by its PASS ("not checked: <id> <subject> (<observed>)")."""
    out = []
    for c in checks:
        if c["status"] == NOT_RUN:
            text = "not checked: %s" % c["id"]
            if c.get("subject"):
                text += " %s" % c["subject"]
            if c.get("observed"):
                text += " (%s)" % c["observed"]
            out.append(text)
    return out


def _first(checks, status):
    for c in checks:
        if c["status"] == status:
            return c
    return None


def _describe(check):
    parts = [check["id"]]
    if check.get("subject"):
        parts.append(check["subject"])
    text = ": ".join(parts)
    if check.get("observed") is not None:
        text += " (observed %s" % check["observed"]
        if check.get("expected") is not None:
            text += ", expected %s" % check["expected"]
        text += ")"
    return text


class LayerBuilder(object):
    """Collects the checks and evidence of one layer and builds its record.

    ``catalogue`` maps check id -> dict(title, fail, next): the documented meaning of every check id
    (docs/checks.md is generated from the catalogues). Adding an unknown id raises KeyError, so an
    undocumented check cannot be emitted.
    """

    def __init__(self, layer, catalogue=None):
        if layer not in LAYERS:
            raise ValueError("unknown layer %r" % layer)
        self.layer = layer
        self.catalogue = catalogue
        self.checks = []
        self.evidence = {}
        self.versions = {}
        self.started_at = utc_now_iso()
        self._t0 = time.monotonic()

    def add(self, check_id, status, subject=None, expected=None, observed=None, hint=None):
        if self.catalogue is not None:
            entry = self.catalogue[check_id]
            if hint is None and status in (FAIL, WARN):
                hint = entry.get("next")
        check = make_check(check_id, status, subject, expected, observed, hint)
        self.checks.append(check)
        return check

    def status_of(self, prefix):
        """Roll-up status of the checks whose id starts with ``prefix`` (NOT_RUN when none)."""
        return rollup_status([c for c in self.checks if c["id"].startswith(prefix)])

    def build(self, status=None, reason=None, signature=None, points_to=None, not_proven=None):
        status = status or rollup_status(self.checks)
        if reason is None and status != PASS:
            culprit = _first(self.checks, status) if status in (FAIL, WARN) else None
            if culprit is not None:
                reason = _describe(culprit)
            elif status == NOT_RUN:
                reason = "no check of this layer was executed"
        if status == FAIL:
            if signature is None:
                culprit = _first(self.checks, FAIL)
                signature = culprit["id"] if culprit else "%s.failed" % self.layer
            points_to = points_to or self.layer
        else:
            signature = None
            points_to = None
        return {
            "layer": self.layer,
            "status": status,
            "reason": reason,
            "checks": self.checks,
            "evidence": self.evidence,
            "not_proven": list(NOT_PROVEN[self.layer] if not_proven is None else not_proven) + (
                not_run_checks_not_proven(self.checks) if status in (PASS, WARN) else []),
            "versions": self.versions,
            "started_at": self.started_at,
            "duration_ms": round((time.monotonic() - self._t0) * 1000.0, 1),
            "signature": signature,
            "points_to": points_to,
        }


def with_checks(record, checks):
    """A copy of ``record`` holding only ``checks`` (a subset of its own), its status, reason, signature, points_to and
    not_proven recomputed from them as ``LayerBuilder.build`` computes them (the record's own reason and signature are
    kept while its status does not change)."""
    out = dict(record)
    out["checks"] = list(checks)
    status = rollup_status(out["checks"])
    if status == record.get("status"):
        return out
    out["status"] = status
    culprit = _first(out["checks"], status) if status in (FAIL, WARN) else None
    out["reason"] = _describe(culprit) if culprit is not None else (
        "no check of this layer was executed" if status == NOT_RUN else None)
    if status == FAIL:
        out["signature"] = culprit["id"]
        out["points_to"] = record.get("layer")
    else:
        out["signature"] = out["points_to"] = None
    base = [n for n in record.get("not_proven") or [] if not str(n).startswith("not checked: ")]
    out["not_proven"] = (base or list(NOT_PROVEN.get(record.get("layer"), []))) + (
        not_run_checks_not_proven(out["checks"]) if status in (PASS, WARN) else [])
    return out


def cdi_for_runtime(cdi_record, name):
    """The cdi record as it speaks for the runtime ``name``: the checks that speak for another runtime (their
    ``runtime`` key; the cdi layer sets it when several runtimes are verified) are left out and the status, reason and
    signature recomputed (``_result.with_checks``). A record without such checks is returned as it is."""
    checks = (cdi_record or {}).get("checks")
    if not isinstance(checks, list) or not any(isinstance(c, dict) and c.get("runtime") for c in checks):
        return cdi_record
    return with_checks(cdi_record, [c for c in checks if not isinstance(c, dict) or c.get("runtime") in (None, name)])


def not_run(layer, reason, evidence=None, versions=None):
    """The record of a layer that was not executed. ``reason`` is mandatory."""
    if not reason:
        raise ValueError("a NOT_RUN record needs a reason")
    builder = LayerBuilder(layer)
    builder.evidence = dict(evidence or {})
    builder.versions = dict(versions or {})
    return builder.build(status=NOT_RUN, reason=reason, not_proven=["everything: this layer did not run"])


def crashed(layer, exc):
    """The record of a layer whose code raised: NOT_RUN with the error (the next layers still run). Call it
    in the ``except`` block (the tail of the traceback goes into the evidence)."""
    import traceback  # pylint: disable=import-outside-toplevel

    tail = traceback.format_exc().strip().splitlines()[-3:]
    return not_run(layer, "the %s layer did not return a record: %s: %s" % (layer, type(exc).__name__, exc),
                   evidence={"traceback_tail": tail})


def validate_record(record):
    """Return a list of contract violations (empty when the record is well-formed)."""
    errors = []
    if not isinstance(record, dict):
        return ["record is not a mapping"]
    for key in RECORD_KEYS:
        if key not in record:
            errors.append("missing key %s" % key)
    if errors:
        return errors
    if record["layer"] not in LAYERS:
        errors.append("unknown layer %r" % (record["layer"],))
    if record["status"] not in STATUSES:
        errors.append("unknown status %r" % (record["status"],))
    if record["status"] != PASS and not record["reason"]:
        errors.append("status %s without a reason" % record["status"])
    if record["status"] == FAIL and not record["signature"]:
        errors.append("FAIL without a signature")
    if record["points_to"] is not None and record["points_to"] not in POINTS_TO:
        errors.append("unknown points_to %r" % (record["points_to"],))
    if not isinstance(record["checks"], list):
        errors.append("checks is not a list")
    else:
        for i, check in enumerate(record["checks"]):
            if not isinstance(check, dict):
                errors.append("check %d is not a mapping" % i)
                continue
            missing = [k for k in CHECK_KEYS if k not in check]
            if missing:
                errors.append("check %d misses %s" % (i, ", ".join(missing)))
            elif check["status"] not in STATUSES:
                errors.append("check %s has unknown status %r" % (check["id"], check["status"]))
        if record["status"] == PASS and any(isinstance(c, dict) and c.get("status") == FAIL for c in record["checks"]):
            errors.append("PASS record holds a FAIL check")
        if record["status"] in (PASS, WARN) and isinstance(record["not_proven"], list):
            said = " ".join(str(item) for item in record["not_proven"])
            not_run_ids = set(str(c["id"]) for c in record["checks"] if isinstance(c, dict) and c.get("status") == NOT_RUN and "id" in c)
            unsaid = sorted(i for i in not_run_ids if i not in said)
            if unsaid:
                errors.append("NOT_RUN check(s) %s missing from not_proven" % ", ".join(unsaid))
    for key in ("evidence", "versions"):
        if not isinstance(record[key], dict):
            errors.append("%s is not a mapping" % key)
    if not isinstance(record["not_proven"], list):
        errors.append("not_proven is not a list")
    return errors
