# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: the fleet report's model for gpuprobe.layers: the report entry of one host. Not public API.

Pure functions only (no I/O): every layer of a host (a layer without a record becomes a ``_result.not_run`` record
carrying the reason), its verdict (from ``_verdict.node_verdict``, never decided here), state and cause (``states``),
GPU rows (``gpus``) and drift from its pins; the brief entry the fleet keeps of it; a fault-drill row. The fleet is
counted in ``fleet`` (``Fleet``, ``build_report``), compared in ``diff``, written as JSON by ``jsonfile`` (the source
of truth) and rendered by ``render``.

The JSON report schema (``SCHEMA_VERSION``) is documented in docs/usage.md ("Reading the report").
"""

from __future__ import annotations

from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import LAYERS, NOT_RUN, not_run
from ansible_collections.gpuprobe.layers.plugins.module_utils._verdict.verdict import COMPUTE_VERIFIED, node_verdict
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report.gpus import physical_gpus
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report.states import RUN_FAILED_REASON, UNREACHABLE_REASON, host_state
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report.where import host_where

# 2: hosts.<name>.gpus are physical GPUs, MIG instance rows under their parent; 3: a verified host written against the
# shape of its kind (shapes, _report.compact), where each host is (where), cause ids stable from run to run; 4: every
# host written against a shape, one per kind and failure (issue 45)
SCHEMA_VERSION = 4

# pin name -> (layer, where the observed value lives in that layer's record)
PINS = {
    "driver_version": ("host", ("versions", "driver")),
    "cuda_driver_api": ("host", ("versions", "cuda_driver_api")),
    "runtime_version": ("runtime", ("versions", "runtime")),
    "cdi_spec_digest": ("cdi", ("evidence", "spec_digest")),
}


# ---------------------------------------------------------------------------------------------------
# aggregation

def dig(mapping, path):
    value = mapping
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def norm(value):
    if value is None:
        return None
    return str(value).strip()


def _repeats(reason, message):
    """Whether a layer's NOT_RUN reason only repeats the host's error message (``blocked: <message>`` included)."""
    text = reason[len("blocked: "):] if reason.startswith("blocked: ") else reason
    return bool(text) and text in message


def host_layers(records, unreachable=None, error=None):
    """The complete, ordered layer records of one host: every layer of ``_result.LAYERS`` is present.

    A missing record becomes NOT_RUN with the reason: the host was unreachable, the verify run failed
    before the layer, or the layer was not executed in this run (mode or tags). The message of an unreachable
    host or of a failed run is the entry's ``unverifiable``, said once: a layer that did not run because of it
    says only ``UNREACHABLE_REASON`` or ``RUN_FAILED_REASON`` (the node-side action's own NOT_RUN records, which
    repeat the message, are shortened the same way).
    """
    records = dict(records or {})
    out = {}
    for layer in LAYERS:
        record = records.get(layer)
        if isinstance(record, dict) and record.get("status"):
            reason = str(record.get("reason") or "")
            if record["status"] == NOT_RUN and unreachable and reason.startswith("host unreachable"):
                record = dict(record, reason=UNREACHABLE_REASON)
            elif record["status"] == NOT_RUN and error and _repeats(reason, error):
                record = dict(record, reason=RUN_FAILED_REASON)
            out[layer] = record
            continue
        if unreachable:
            reason = UNREACHABLE_REASON
        elif error:
            reason = RUN_FAILED_REASON
        else:
            reason = "no record: this layer was not executed in this run (mode or tags)"
        out[layer] = not_run(layer, reason)
    return out


def host_drift(layers, pins):
    """Every pin of ``pins`` (gpuprobe_pins) whose observed value differs or could not be observed.

    Returns a list of dicts: key, expected, observed, state (``differs`` or ``unknown``).
    """
    drift = []
    for key in sorted((pins or {}).keys()):
        expected = norm(pins[key])
        if expected in (None, ""):
            continue
        if key not in PINS:
            drift.append({"key": key, "expected": expected, "observed": None, "state": "unknown",
                          "note": "unknown pin name (known: %s)" % ", ".join(sorted(PINS))})
            continue
        layer, path = PINS[key]
        observed = norm(dig(layers.get(layer) or {}, path))
        if observed in (None, ""):
            status = (layers.get(layer) or {}).get("status", NOT_RUN)
            drift.append({"key": key, "expected": expected, "observed": None, "state": "unknown",
                          "note": "not observed (%s layer %s)" % (layer, status)})
        elif observed != expected:
            drift.append({"key": key, "expected": expected, "observed": observed, "state": "differs",
                          "note": "%s layer" % layer})
    return drift


def unverifiable_reason(unreachable=None, error=None):
    """Why a node could not be verified (None when it was): it was unreachable, had no usable Python, or the
    verify run stopped on it. Such a node fails the run in every mode and is an <error> in JUnit."""
    if unreachable:
        return "host unreachable: %s" % unreachable
    if error:
        return "verify run failed: %s" % error
    return None


def host_entry(name, records=None, unreachable=None, error=None, pins=None, extra=None, runtimes=None, where=None):
    """The report entry of one host: verdict (from ``node_verdict``), every layer record, drift. ``runtimes``: the
    per-runtime results of a node verified through several runtimes (verify_node's ``runtimes``): the verdict then
    speaks for every one of them, and the entry's ``runtimes`` rows say which were proven. ``where``: its inventory
    groups and group_by variables (``_report.where.host_where``)."""
    layers = host_layers(records, unreachable=unreachable, error=error)
    verdict = node_verdict(layers, runtimes=runtimes if runtimes and len(runtimes) > 1 else None)
    state, cause = host_state(verdict, unreachable, error, name)
    drift = host_drift(layers, pins)
    if unreachable or error:
        # a pin nobody could observe on a node nobody looked at is not drift: the node's state says why
        drift = [d for d in drift if not str(d.get("note") or "").startswith("not observed")]
    entry = {
        "name": name,
        "verdict": verdict["verdict"],
        "failing_layer": verdict["layer"],
        "signature": verdict["signature"],
        "points_to": verdict["points_to"],
        "reason": verdict["reason"],
        "because": verdict["because"],
        "gpus": physical_gpus(layers, verdict["gpus"]),
        "state": state,
        "cause": cause,
        "reachable": not unreachable,
        "error": error,
        "unverifiable": unverifiable_reason(unreachable, error),
        "layers": layers,
        "pins": dict(pins or {}),
        "where": where or host_where(),
        "drift": drift,
        "runtime": verdict.get("runtime"),
        "runtimes": verdict.get("runtimes") or [],
    }
    if extra:
        entry.update(extra)
    return entry


# what a host's brief entry keeps of its full entry (Fleet): every figure of the fleet and the hosts table, not its
# evidence; its layers keep only their status and reason
BRIEF_KEYS = ("name", "verdict", "failing_layer", "signature", "points_to", "reason", "state", "cause", "reachable",
              "error", "unverifiable", "drift", "where")


def brief(entry):
    """A host entry without what only its own part of the report says (its records' checks and evidence, GPU rows)."""
    out = dict((key, entry[key]) for key in BRIEF_KEYS if key in entry)
    out["layers"] = dict((layer, dict((k, record[k]) for k in ("status", "reason") if k in record))
                         for layer, record in entry["layers"].items())
    return out


def grouped(entry, brief_entry):
    """A host's full entry as the report holds it: with the id of its group (its brief entry's, from Fleet.report)."""
    return dict(entry, group=brief_entry["group"])


def entry_of(item):
    """The host entry of one item of ``build_report``'s ``hosts`` (its inventory groups in ``groups``, its group_by
    variables in ``vars``)."""
    return host_entry(item["name"], item.get("records"), item.get("unreachable"), item.get("error"), item.get("pins"),
                      item.get("extra"), item.get("runtimes"), host_where(item.get("groups"), item.get("vars")))


def drill_row(variant, prediction, records, host=None):
    """One fault-drill row: the prediction made before the run vs the verdict observed after it.

    ``prediction`` is the cdi_spec module's ``prediction`` (``layer`` and ``signature``, also accepted as
    ``predicted_layer``/``predicted_signature``; a null layer means "the probe passes"). The observed
    side comes from ``node_verdict``.
    """
    prediction = prediction or {}
    verdict = node_verdict(records or {})
    predicted_layer = prediction.get("layer", prediction.get("predicted_layer"))
    predicted_signature = prediction.get("signature", prediction.get("predicted_signature"))
    layer_match = predicted_layer == verdict["layer"]
    if predicted_layer is None:
        layer_match = verdict["verdict"] == COMPUTE_VERIFIED
    signature_match = predicted_signature in (None, "") or predicted_signature == verdict["signature"]
    recorded = "layer" in prediction or "predicted_layer" in prediction
    return {
        "host": host,
        "variant": variant,
        "predicted": recorded,
        "predicted_layer": predicted_layer,
        "predicted_signature": predicted_signature,
        "observed_verdict": verdict["verdict"],
        "observed_layer": verdict["layer"],
        "observed_signature": verdict["signature"],
        "observed_points_to": verdict["points_to"],
        "observed_reason": verdict["reason"],
        "match": bool(recorded and layer_match and signature_match),
    }
