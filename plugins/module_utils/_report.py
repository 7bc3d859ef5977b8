# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: fleet report aggregation and rendering for gpuprobe.layers.

This file is not public API; it may change without notice. Pure functions only (no I/O): the action
plugin ``gpuprobe.layers.fleet_report`` collects the per-host inputs from hostvars, calls
``build_report`` and the ``render_*`` functions, and writes the files. The verdict of every host comes
from ``_verdict.node_verdict`` (never decided here); a layer without a record becomes a ``_result.not_run``
record carrying the reason.

The JSON report schema (``SCHEMA_VERSION``) is documented in docs/usage.md ("Reading the report").
"""

from __future__ import annotations

import html
import json
import re
import xml.etree.ElementTree as ET

from ansible_collections.gpuprobe.layers.plugins.module_utils._attribution import because_text
from ansible_collections.gpuprobe.layers.plugins.module_utils._result import (
    FAIL, LAYERS, NOT_RUN, ORDERED_LAYERS, PASS, WARN, not_run,
)
from ansible_collections.gpuprobe.layers.plugins.module_utils._verdict import (
    COMPUTE_VERIFIED, INCONCLUSIVE, node_verdict,
)

SCHEMA_VERSION = 2          # 2: hosts.<name>.gpus are physical GPUs, MIG instance rows under their parent

# pin name -> (layer, where the observed value lives in that layer's record)
PINS = {
    "driver_version": ("host", ("versions", "driver")),
    "cuda_driver_api": ("host", ("versions", "cuda_driver_api")),
    "runtime_version": ("runtime", ("versions", "runtime")),
    "cdi_spec_digest": ("cdi", ("evidence", "spec_digest")),
}

STATUS_COLOURS = {PASS: "#1a7f37", WARN: "#9a6700", FAIL: "#cf222e", NOT_RUN: "#6e7781"}
VERDICT_COLOURS = {COMPUTE_VERIFIED: "#1a7f37", INCONCLUSIVE: "#6e7781"}


# ---------------------------------------------------------------------------------------------------
# aggregation

def _dig(mapping, path):
    value = mapping
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def _norm(value):
    if value is None:
        return None
    return str(value).strip()


def host_layers(records, unreachable=None, error=None):
    """The complete, ordered layer records of one host: every layer of ``_result.LAYERS`` is present.

    A missing record becomes NOT_RUN with the reason: the host was unreachable, the verify run failed
    before the layer, or the layer was not executed in this run (mode or tags).
    """
    records = dict(records or {})
    out = {}
    for layer in LAYERS:
        record = records.get(layer)
        if isinstance(record, dict) and record.get("status"):
            out[layer] = record
            continue
        if unreachable:
            reason = "host unreachable: %s" % unreachable
        elif error:
            reason = "verify run failed before this layer: %s" % error
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
        expected = _norm(pins[key])
        if expected in (None, ""):
            continue
        if key not in PINS:
            drift.append({"key": key, "expected": expected, "observed": None, "state": "unknown",
                          "note": "unknown pin name (known: %s)" % ", ".join(sorted(PINS))})
            continue
        layer, path = PINS[key]
        observed = _norm(_dig(layers.get(layer) or {}, path))
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


def host_entry(name, records=None, unreachable=None, error=None, pins=None, extra=None):
    """The report entry of one host: verdict (from ``node_verdict``), every layer record, drift."""
    layers = host_layers(records, unreachable=unreachable, error=error)
    verdict = node_verdict(layers)
    entry = {
        "name": name,
        "verdict": verdict["verdict"],
        "failing_layer": verdict["layer"],
        "signature": verdict["signature"],
        "points_to": verdict["points_to"],
        "reason": verdict["reason"],
        "because": verdict["because"],
        "gpus": physical_gpus(layers, verdict["gpus"]),
        "reachable": not unreachable,
        "error": error,
        "unverifiable": unverifiable_reason(unreachable, error),
        "layers": layers,
        "pins": dict(pins or {}),
        "drift": host_drift(layers, pins),
    }
    if extra:
        entry.update(extra)
    return entry


# GPU feature discovery labels holding the driver version: the full one, else major/minor/rev (older GFD)
DRIVER_LABEL_FULL = "nvidia.com/cuda.driver-version.full"
DRIVER_LABEL_PARTS = (("nvidia.com/cuda.driver-version.major", "nvidia.com/cuda.driver-version.minor",
                       "nvidia.com/cuda.driver-version.revision"),
                      ("nvidia.com/cuda.driver.major", "nvidia.com/cuda.driver.minor", "nvidia.com/cuda.driver.rev"))


def label_driver_version(labels):
    """The driver version the node's GPU feature labels claim, or None."""
    labels = labels or {}
    if labels.get(DRIVER_LABEL_FULL):
        return str(labels[DRIVER_LABEL_FULL])
    for keys in DRIVER_LABEL_PARTS:
        parts = [labels.get(k) for k in keys]
        if parts[0] not in (None, "") and parts[1] not in (None, ""):
            return ".".join(str(p) for p in parts if p not in (None, ""))
    return None


def _k8s_nodes(k8s_records):
    nodes = {}
    for record in k8s_records or []:
        if not isinstance(record, dict) or record.get("status") == NOT_RUN:
            continue
        for node in (record.get("evidence") or {}).get("nodes") or []:
            if isinstance(node, dict) and node.get("name"):
                nodes.setdefault(node["name"], node)
    return nodes


def _k8s_node_of(host, nodes):
    if host in nodes:
        return nodes[host]
    short = str(host).split(".", 1)[0]
    matches = [n for name, n in nodes.items() if name.split(".")[0] == short]
    return matches[0] if len(matches) == 1 else None


def k8s_crosscheck(verdicts, k8s_records, drivers=None):
    """What the scheduler is told about a node against what the node verdict proved.

    ``verdicts``: {host: verdict (string, or a node_verdict dict)}; ``k8s_records``: k8s layer records (their
    evidence.nodes, matched to hosts by name or short name); ``drivers``: {host: the host layer's driver
    version}. Returns findings {host, k8s_node, finding, severity, observed, message}:
    - allocatable_on_unverified_node: GPUs allocatable on a node that cannot compute (FAIL) or was not verified (WARN);
    - nothing_advertised: allocatable 0 on a COMPUTE_VERIFIED node (WARN);
    - stale_driver_label: the feature labels' driver version differs from the host's (WARN).
    """
    nodes = _k8s_nodes(k8s_records)
    drivers = drivers or {}
    findings = []
    for host in sorted(verdicts):
        verdict = verdicts[host]
        verdict = verdict.get("verdict") if isinstance(verdict, dict) else verdict
        node = _k8s_node_of(host, nodes)
        if node is None:
            continue

        def add(finding, severity, observed, message, _host=host, _node=node["name"]):
            findings.append({"host": _host, "k8s_node": _node, "finding": finding, "severity": severity,
                             "observed": observed, "message": message})
        allocatable = dict((r, q) for r, q in sorted((node.get("allocatable") or {}).items()) if q)
        counts = ", ".join("%s=%s" % kv for kv in allocatable.items())
        if allocatable and verdict != COMPUTE_VERIFIED:
            cannot = str(verdict).startswith("FAILED_AT_")
            add("allocatable_on_unverified_node", FAIL if cannot else WARN, "allocatable %s; verdict %s" % (counts, verdict),
                "the scheduler will place GPU Pods here, on a node that %s" % (
                    "cannot compute" if cannot else "was not verified to compute"))
        elif not allocatable and verdict == COMPUTE_VERIFIED:
            add("nothing_advertised", WARN, "allocatable %s; verdict %s" % (
                ", ".join("%s=%s" % kv for kv in sorted((node.get("allocatable") or {}).items())) or "none", verdict),
                "the device plugin advertises nothing: GPU Pods cannot land on this verified node")
        label = label_driver_version(node.get("gpu_labels"))
        driver = drivers.get(host)
        if label and driver and str(driver) != label:
            add("stale_driver_label", WARN, "feature label driver %s, host driver %s" % (label, driver),
                "stale labels: GPU feature discovery has not relabelled the node since the driver changed")
    return findings


def _count(values):
    out = {}
    for value in values:
        out[value] = out.get(value, 0) + 1
    return dict(sorted(out.items()))


def _uuid_key(uuid):
    """A GPU or MIG UUID compared as NVML and CUDA share it: lower case, without its 'GPU-'/'MIG-' prefix."""
    text = str(uuid or "").strip().lower()
    for prefix in ("gpu-", "mig-"):
        if text.startswith(prefix):
            return text[len(prefix):]
    return text or None


def _mig_parents(layers):
    """MIG instance (uuid key) -> its physical GPU {index, uuid, model}: from the host inventory (evidence.gpus[].mig.
    instances) and the cdi identity (evidence.identity.expected_gpus: mig_uuid with the parent's uuid and index)."""
    parents = {}
    for gpu in ((layers.get("host") or {}).get("evidence") or {}).get("gpus") or []:
        if not isinstance(gpu, dict):
            continue
        for inst in (gpu.get("mig") or {}).get("instances") or []:
            if isinstance(inst, dict) and _uuid_key(inst.get("uuid")):
                parents[_uuid_key(inst["uuid"])] = {"index": gpu.get("index"), "uuid": gpu.get("uuid"), "model": gpu.get("name")}
    identity = (((layers.get("cdi") or {}).get("evidence") or {}).get("identity") or {})
    for gpu in identity.get("expected_gpus") or []:
        if isinstance(gpu, dict) and _uuid_key(gpu.get("mig_uuid")) and _uuid_key(gpu.get("uuid")):
            parents.setdefault(_uuid_key(gpu["mig_uuid"]), {"index": gpu.get("index"), "uuid": gpu.get("uuid"), "model": None})
    return parents


def _host_gpu_by_index(layers):
    gpus = ((layers.get("host") or {}).get("evidence") or {}).get("gpus") or []
    return dict((g.get("index"), g) for g in gpus if isinstance(g, dict) and g.get("index") is not None)


def _mig_parent_of(row, parents, by_index):
    """The physical GPU of a compute row that is a MIG instance, else None (the row is a GPU of its own)."""
    parent = parents.get(_uuid_key(row.get("uuid")))
    if parent is not None:
        return parent
    if str(row.get("uuid") or "").upper().startswith("MIG-"):
        # an instance the inventory does not list: its parent by the index the cdi identity gave it, else unknown
        gpu = by_index.get(row.get("index")) or {}
        return {"index": row.get("index"), "uuid": gpu.get("uuid"), "model": gpu.get("name")}
    return None


def _instance_name(row):
    return row.get("uuid") or "#%s" % row.get("ordinal")


def _mig_gpu(parent, instances):
    """The row of a physical GPU with MIG from its instance rows: verified when every instance requested on it passed,
    failed when one failed, not run when one requested was not run (busy, or compute did not reach it); with no
    instance requested on it (the container saw one it did not ask for), the instances' worst status."""
    requested = [r for r in instances if r.get("expected")]
    failed = [r for r in requested if r.get("status") == FAIL]
    not_passed = [r for r in requested if r.get("status") != PASS]
    if failed:
        status, why = FAIL, failed
    elif requested and not not_passed:
        status, why = PASS, []
    elif requested:
        status, why = NOT_RUN, not_passed
    else:
        status = min((r.get("status") for r in instances), key=lambda st: _ROW_RANK.get(st, 9))
        why = instances
    if status == PASS:
        reason = "MIG: %d of %d requested instance(s) verified" % (len(requested), len(requested))
    else:
        reason = "MIG: %d of %d requested instance(s) verified; %s" % (
            len(requested) - len(not_passed), len(requested),
            "; ".join("%s: %s" % (_instance_name(r), r.get("reason") or r.get("status")) for r in why))
    return {"index": parent.get("index"), "uuid": parent.get("uuid"), "model": parent.get("model"),
            "expected": bool(requested), "seen_in_container": all(r.get("seen_in_container") for r in requested) if requested else None,
            "ordinal": None, "status": status, "signature": next((r.get("signature") for r in why if r.get("signature")), None),
            "reason": reason, "mig": True, "instances": instances}


_ROW_RANK = {FAIL: 0, WARN: 1, NOT_RUN: 2, PASS: 3}


def physical_gpus(layers, rows):
    """The per-GPU rows of a host entry (schema 2): one per physical GPU the compute rows speak of, in index order;
    a GPU without MIG is its compute row (mig false, instances []); a GPU with MIG is one row (mig true) holding the
    compute rows of its MIG instances under ``instances``, its status from the instances requested on it."""
    parents = _mig_parents(layers)
    by_index = _host_gpu_by_index(layers)
    out = []
    groups = {}
    for row in rows or []:
        if not isinstance(row, dict):
            continue
        parent = _mig_parent_of(row, parents, by_index)
        if parent is None:
            out.append(dict(row, mig=False, instances=[]))
            continue
        key = _uuid_key(parent.get("uuid")) or "index:%s" % parent.get("index")
        if key not in groups:
            groups[key] = (parent, [])
            out.append(key)
        groups[key][1].append(row)
    out = [_mig_gpu(*groups[item]) if isinstance(item, str) else item for item in out]
    return sorted(out, key=lambda g: (g.get("index") is None, g.get("index") if g.get("index") is not None else 0,
                                      str(g.get("uuid") or "")))


def gpu_counts(entry):
    """Per-GPU counts of one host entry, in physical GPUs: total (the host inventory's GPUs, and any GPU of the rows
    it does not list), verified (requested GPUs that PASSed: a kernel verified in the container on the GPU, or on
    every MIG instance requested on it), failed (requested GPUs that FAILed: the GPU, or one instance on it), not_run
    (the rest: busy, or compute did not reach them, or not requested). ``mig_instances`` counts the requested MIG
    instances the same way (total, verified, failed, not_run)."""
    host_gpus = ((entry["layers"].get("host") or {}).get("evidence") or {}).get("gpus") or []
    gpus = [g for g in entry.get("gpus") or [] if isinstance(g, dict)]
    rows = [g for g in gpus if g.get("expected")]

    def key(g):
        return _uuid_key(g.get("uuid")) or "index:%s" % g.get("index")
    keys = set(key(g) for g in host_gpus if isinstance(g, dict))
    keys.update(key(g) for g in gpus)
    # a PASS row counts unless an earlier layer failed: a kernel that ran on a GPU the node's spec lies about
    # (FAILED_AT_CDI) or that the runtime did not inject as asked proves the GPU, not that a container asking
    # for it gets it. (On a node with one failing GPU, its other GPUs were proven: they count.)
    trusted = entry.get("failing_layer") in (None, "compute")
    verified = sum(1 for r in rows if r.get("status") == PASS) if trusted else 0
    failed = sum(1 for r in rows if r.get("status") == FAIL)
    instances = [i for g in gpus for i in g.get("instances") or [] if i.get("expected")]
    inst_verified = sum(1 for i in instances if i.get("status") == PASS) if trusted else 0
    inst_failed = sum(1 for i in instances if i.get("status") == FAIL)
    return {"total": len(keys), "verified": verified, "failed": failed, "not_run": max(len(keys) - verified - failed, 0),
            "unknown": not keys,
            "mig_instances": {"total": len(instances), "verified": inst_verified, "failed": inst_failed,
                              "not_run": len(instances) - inst_verified - inst_failed},
            "mig_gpus": sum(1 for g in gpus if g.get("mig"))}


def build_report(hosts, generated_at, run=None, drills=None):
    """The fleet report (a JSON-serialisable dict, schema ``SCHEMA_VERSION``).

    ``hosts`` is a list of dicts with keys name, records (layer -> record), unreachable (reason or
    None), error (reason or None), pins (gpuprobe_pins or None). ``drills`` is an optional list of
    fault-drill rows (see ``drill_row``).
    """
    entries = {}
    for item in hosts:
        entries[item["name"]] = host_entry(item["name"], item.get("records"), item.get("unreachable"),
                                           item.get("error"), item.get("pins"), item.get("extra"))
    ordered = [entries[name] for name in sorted(entries)]
    layer_status = {}
    for layer in LAYERS:
        layer_status[layer] = _count(e["layers"][layer]["status"] for e in ordered)
    drift = []
    for entry in ordered:
        for item in entry["drift"]:
            row = {"host": entry["name"]}
            row.update(item)
            drift.append(row)
    crosscheck = k8s_crosscheck(dict((e["name"], e["verdict"]) for e in ordered),
                                [e["layers"]["k8s"] for e in ordered],
                                dict((e["name"], (e["layers"]["host"].get("versions") or {}).get("driver")) for e in ordered))
    report = {
        "schema_version": SCHEMA_VERSION,
        "generated_at": generated_at,
        "run": dict(run or {}),
        "summary": {
            "hosts": len(ordered),
            "compute_verified": sum(1 for e in ordered if e["verdict"] == COMPUTE_VERIFIED),
            "failed": sum(1 for e in ordered if e["failing_layer"]),
            "inconclusive": sum(1 for e in ordered if e["verdict"] == INCONCLUSIVE),
            "unreachable": sum(1 for e in ordered if not e["reachable"]),
            "unverifiable": sum(1 for e in ordered if e["unverifiable"]),
            "drifted": len(set(d["host"] for d in drift)),
        },
        "counts": {
            "by_verdict": _count(e["verdict"] for e in ordered),
            "by_failing_layer": _count(e["failing_layer"] for e in ordered if e["failing_layer"]),
            "by_signature": _count(e["signature"] for e in ordered if e["signature"]),
            "by_layer_status": layer_status,
        },
        "drift": drift,
        "k8s_crosscheck": crosscheck,
        "hosts": dict((e["name"], e) for e in ordered),
    }
    report["summary"]["k8s_findings"] = len(crosscheck)
    per_host = [gpu_counts(e) for e in ordered]
    report["summary"]["gpus"] = {
        "total": sum(c["total"] for c in per_host), "verified": sum(c["verified"] for c in per_host),
        "failed": sum(c["failed"] for c in per_host), "not_run": sum(c["not_run"] for c in per_host),
        "hosts_with_failed_gpu": sum(1 for c in per_host if c["failed"]),
        "hosts_with_unknown_gpus": sum(1 for c in per_host if c["unknown"]),
        "mig_gpus": sum(c["mig_gpus"] for c in per_host),
        "mig_instances": dict((k, sum(c["mig_instances"][k] for c in per_host)) for k in ("total", "verified", "failed", "not_run")),
    }
    if drills is not None:
        report["drills"] = list(drills)
        report["summary"]["drills"] = len(drills)
        report["summary"]["drills_matched"] = sum(1 for d in drills if d.get("match"))
    return report


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


def _predicted_text(row):
    if row.get("predicted") is False:
        return "no prediction (the drill did not run)"
    return row.get("predicted_layer") or "none (passes)"


def summary_lines(report):
    """A short fixed-width table (one line per host) for the end of a run."""
    rows = [("HOST", "VERDICT", "SIGNATURE", "DRIFT")]
    for name, entry in report["hosts"].items():
        rows.append((name, entry["verdict"], entry["signature"] or "-",
                     str(len(entry["drift"])) if entry["drift"] else "-"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows]
    counts = ", ".join("%s=%d" % kv for kv in report["counts"]["by_verdict"].items()) or "no hosts"
    lines.append("%d host(s): %s" % (report["summary"]["hosts"], counts))
    lines.append(gpu_line(report["summary"].get("gpus")))
    return lines


def gpu_line(gpus):
    """'1,598 of 1,600 GPUs verified; 2 failed on 2 hosts; 0 not run' (the fleet in physical GPUs, not only in nodes;
    a GPU with MIG counts once, then '; MIG: 2 of 2 requested instance(s) verified on 1 GPU(s)')."""
    gpus = gpus or {}
    line = "{verified:,} of {total:,} GPUs verified; {failed:,} failed on {hosts:,} host(s); {not_run:,} not verified " \
           "(busy, or compute did not reach them)".format(verified=gpus.get("verified", 0), total=gpus.get("total", 0),
                                                          failed=gpus.get("failed", 0),
                                                          hosts=gpus.get("hosts_with_failed_gpu", 0),
                                                          not_run=gpus.get("not_run", 0))
    if gpus.get("hosts_with_unknown_gpus"):
        line += "; {0:,} host(s) whose GPUs are unknown (not counted)".format(gpus["hosts_with_unknown_gpus"])
    mig = gpus.get("mig_instances") or {}
    if mig.get("total"):
        line += "; MIG: {verified:,} of {total:,} requested instance(s) verified on {gpus:,} GPU(s)".format(
            verified=mig.get("verified", 0), total=mig["total"], gpus=gpus.get("mig_gpus", 0))
    return line


# ---------------------------------------------------------------------------------------------------
# comparing two reports

def _host_view(entry):
    view = {"verdict": entry.get("verdict"), "signature": entry.get("signature")}
    for layer, record in (entry.get("layers") or {}).items():
        view["layers.%s.status" % layer] = record.get("status")
        for key, value in sorted((record.get("versions") or {}).items()):
            view["layers.%s.versions.%s" % (layer, key)] = _norm(value)
    cdi = (entry.get("layers") or {}).get("cdi") or {}
    view["layers.cdi.evidence.spec_digest"] = _norm(_dig(cdi, ("evidence", "spec_digest")))
    return view


# how a run was made (report["run"]): when these differ between two reports, a change of a node may come from the
# runs (audit runs no runtime and compute; a self-built spec is not the node's own), not from the node
DIFF_RUN_FIELDS = ("mode", "cdi_source", "hosts_pattern")


def diff_reports(old, new):
    """What changed between two fleet reports, per node.

    Returns a dict: added (hosts only in ``new``), removed (only in ``old``), changed (host -> list of
    {field, old, new}), unchanged (count), verdicts ({old_verdict -> new_verdict: n} for changed verdicts),
    runs_differ (list of {field, old, new} for the DIFF_RUN_FIELDS of report["run"] that differ: the two runs were
    not made the same way, e.g. mode audit and full).
    """
    old_run, new_run = (old or {}).get("run") or {}, (new or {}).get("run") or {}
    runs_differ = [{"field": f, "old": old_run.get(f), "new": new_run.get(f)} for f in DIFF_RUN_FIELDS
                   if old_run.get(f) != new_run.get(f)]
    old_hosts = (old or {}).get("hosts") or {}
    new_hosts = (new or {}).get("hosts") or {}
    changed = {}
    transitions = {}
    unchanged = 0
    for name in sorted(set(old_hosts) & set(new_hosts)):
        before, after = _host_view(old_hosts[name]), _host_view(new_hosts[name])
        fields = []
        for key in sorted(set(before) | set(after)):
            if before.get(key) != after.get(key):
                fields.append({"field": key, "old": before.get(key), "new": after.get(key)})
        if fields:
            changed[name] = fields
        else:
            unchanged += 1
        if before["verdict"] != after["verdict"]:
            key = "%s -> %s" % (before["verdict"], after["verdict"])
            transitions[key] = transitions.get(key, 0) + 1
    return {
        "old_generated_at": (old or {}).get("generated_at"),
        "new_generated_at": (new or {}).get("generated_at"),
        "added": sorted(set(new_hosts) - set(old_hosts)),
        "removed": sorted(set(old_hosts) - set(new_hosts)),
        "changed": changed,
        "unchanged": unchanged,
        "verdicts": dict(sorted(transitions.items())),
        "runs_differ": runs_differ,
    }


def render_diff_markdown(diff):
    lines = ["# gpuprobe fleet report comparison", "",
             "- old report: %s" % _md(diff["old_generated_at"]),
             "- new report: %s" % _md(diff["new_generated_at"])]
    if diff.get("runs_differ"):
        lines.append("- **the two runs were not made the same way**: %s; a change below may come from the runs "
                     "(an audit runs no runtime and compute layer), not from the nodes"
                     % "; ".join("%s %s in the old report, %s in the new" % (_md(f["field"]), _md(f["old"]), _md(f["new"]))
                                 for f in diff["runs_differ"]))
    lines += ["- hosts added: %s" % (_md(", ".join(diff["added"])) or "none"),
              "- hosts removed: %s" % (_md(", ".join(diff["removed"])) or "none"),
              "- hosts unchanged: %d" % diff["unchanged"], ""]
    if diff["verdicts"]:
        lines += ["| verdict change | hosts |", "|---|---|"]
        lines += ["| %s | %d |" % (_md(k), v) for k, v in diff["verdicts"].items()]
        lines.append("")
    if diff["changed"]:
        lines += ["| host | field | old | new |", "|---|---|---|---|"]
        for host, fields in diff["changed"].items():
            for f in fields:
                lines.append("| %s | %s | %s | %s |" % (_md(host), _md(f["field"]), _md(f["old"]), _md(f["new"])))
    else:
        lines.append("No host changed.")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------------
# Markdown

def _text(value):
    """Plain text of a report value: "" for None, JSON for lists and mappings (null, never Python's None)."""
    if value is None:
        return ""
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value, sort_keys=True, default=str)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _md(value):
    text = _text(value).replace("\r", " ").replace("\n", " ")
    for ch in ("\\", "|", "`", "*", "_", "<", ">", "[", "]"):
        text = text.replace(ch, "\\" + ch)
    return text


def _unverifiable(report):
    return [(name, e["unverifiable"]) for name, e in report["hosts"].items() if e.get("unverifiable")]


def _count_table(title, counts, head):
    lines = ["### %s" % title, "", "| %s | hosts |" % head, "|---|---|"]
    if not counts:
        lines.append("| (none) | 0 |")
    for key, value in counts.items():
        lines.append("| %s | %d |" % (_md(key), value))
    return lines + [""]


def render_markdown(report):
    run = report.get("run") or {}
    s = report["summary"]
    lines = ["# gpuprobe fleet report", "",
             "- generated: %s (schema %s)" % (_md(report["generated_at"]), report["schema_version"]),
             "- mode: %s, CDI source: %s" % (_md(run.get("mode")), _md(run.get("cdi_source"))),
             "- hosts: %d, COMPUTE_VERIFIED: %d, failed: %d, inconclusive: %d, unreachable: %d, drifted: %d"
             % (s["hosts"], s["compute_verified"], s["failed"], s["inconclusive"], s["unreachable"], s["drifted"]),
             "- %s" % gpu_line(s.get("gpus"))]
    unverifiable = _unverifiable(report)
    if unverifiable:
        lines.append("- **could not be verified** (the run fails for them in every mode): %s"
                     % "; ".join("%s: %s" % (_md(name), _md(why)) for name, why in unverifiable))
    lines += ["", "## Hosts", "",
              "| host | verdict | " + " | ".join(LAYERS) + " | signature | points to |",
              "|---|---|" + "---|" * len(LAYERS) + "---|---|"]
    for name, e in report["hosts"].items():
        cells = [e["layers"][layer]["status"] for layer in LAYERS]
        lines.append("| %s | **%s** | %s | %s | %s |" % (_md(name), e["verdict"], " | ".join(cells),
                                                         _md(e["signature"]), _md(e["points_to"])))
    lines += ["", "## Counts", ""]
    lines += _count_table("By verdict", report["counts"]["by_verdict"], "verdict")
    lines += _count_table("By failing layer", report["counts"]["by_failing_layer"], "layer")
    lines += _count_table("By signature", report["counts"]["by_signature"], "signature")
    lines += ["## Drift from pins", ""]
    if report["drift"]:
        lines += ["| host | pin | expected | observed | state |", "|---|---|---|---|---|"]
        for d in report["drift"]:
            cells = (_md(d["host"]), _md(d["key"]), _md(d["expected"]), _md(d["observed"]), d["state"], _md(d.get("note")))
            lines.append("| %s | %s | %s | %s | %s: %s |" % cells)
    else:
        lines.append("No host differs from its pins (or no pins were declared).")
    lines.append("")
    lines += crosscheck_markdown(report.get("k8s_crosscheck"))
    if "drills" in report:
        lines += render_drills_markdown(report["drills"]).splitlines() + [""]
    lines += ["## Per-host detail", ""]
    for name, e in report["hosts"].items():
        lines += ["### %s — %s" % (_md(name), e["verdict"]), "", "%s" % _md(e["reason"]), ""]
        lines += because_markdown(e.get("because"))
        if e.get("gpus"):
            lines += ["| GPU index | UUID | model | expected | status | signature | reason |", "|---|---|---|---|---|---|---|"]
            lines += ["| %s |" % " | ".join(_md(_gpu_cell(r, k, depth)) for k in GPU_COLUMNS) for depth, r in gpu_tree(e["gpus"])]
            lines.append("")
        for layer in LAYERS:
            rec = e["layers"][layer]
            lines.append("#### %s: %s" % (layer, rec["status"]))
            lines.append("")
            if rec.get("reason"):
                lines += ["Reason: %s" % _md(rec["reason"]), ""]
            if rec.get("checks"):
                lines += ["| check | status | subject | expected | observed | hint |", "|---|---|---|---|---|---|"]
                for c in rec["checks"]:
                    lines.append("| %s | %s | %s | %s | %s | %s |" % (
                        _md(c.get("id")), c.get("status"), _md(c.get("subject")), _md(c.get("expected")),
                        _md(c.get("observed")), _md(c.get("hint"))))
                lines.append("")
            if rec.get("not_proven") and rec["status"] in (PASS, WARN):
                lines += ["Not proven by this result: %s" % _md("; ".join(rec["not_proven"])), ""]
    return "\n".join(lines) + "\n"


GPU_COLUMNS = ("index", "uuid", "model", "expected", "status", "signature", "reason")
MIG_MARK = "\u21b3 MIG "      # an instance row, under its GPU: "↳ MIG MIG-…"


def gpu_tree(gpus):
    """(depth, row) of a host entry's GPUs in reading order: each physical GPU (depth 0), then its MIG instances (1)."""
    for gpu in gpus or []:
        yield 0, gpu
        for inst in gpu.get("instances") or []:
            yield 1, inst


def _gpu_cell(row, key, depth):
    """A GPU table cell: an instance row leaves the index to its GPU's row and marks its UUID as a MIG instance."""
    if depth and key == "index":
        return ""
    if depth and key == "uuid":
        return MIG_MARK + _text(row.get("uuid") or "#%s" % row.get("ordinal"))
    return row.get(key)


def because_markdown(because):
    """The "because ..." lines of a verdict attributed to the spec (the cdi checks that explain it)."""
    if not because:
        return []
    return ["Because:", ""] + ["- %s (%s)" % (_md(because_text(b)), _md(b.get("status"))) for b in because] + [""]


def crosscheck_markdown(findings):
    """The k8s cross-check section: what the scheduler is told vs the node verdicts."""
    if findings is None:
        return []
    lines = ["## Kubernetes vs node verdicts", ""]
    if not findings:
        return lines + ["No finding (or no k8s record named a verified host).", ""]
    lines += ["| host | k8s node | finding | severity | observed | meaning |", "|---|---|---|---|---|---|"]
    for f in findings:
        cells = (_md(f["host"]), _md(f["k8s_node"]), _md(f["finding"]), f["severity"], _md(f["observed"]), _md(f["message"]))
        lines.append("| %s | %s | %s | %s | %s | %s |" % cells)
    return lines + [""]


def render_drills_markdown(rows):
    lines = ["## Fault drills: predicted vs observed", "",
             "| host | variant | predicted layer | predicted signature | observed verdict | observed signature | match |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append("| %s | %s | %s | %s | %s | %s | %s |" % (
            _md(r.get("host")), _md(r.get("variant")), _md(_predicted_text(r)),
            _md(r.get("predicted_signature")), _md(r.get("observed_verdict")), _md(r.get("observed_signature")),
            "yes" if r.get("match") else "**no**"))
    if not rows:
        lines.append("| (no drill ran) | | | | | | |")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------------
# HTML (self-contained: inline CSS and SVG, no scripts, every text escaped)

def _h(value):
    return html.escape(_text(value), quote=True)


def _badge(status):
    colour = STATUS_COLOURS.get(status) or VERDICT_COLOURS.get(status) or (
        STATUS_COLOURS[FAIL] if str(status).startswith("FAILED_AT_") else "#6e7781")
    return '<span class="badge" style="background:%s">%s</span>' % (colour, _h(status))


def svg_bar_chart(counts, title, width=420, bar_height=22):
    """An inline SVG horizontal bar chart of ``counts`` (label -> number)."""
    items = list(counts.items())
    label_w = 110
    height = 28 + bar_height * max(len(items), 1) + 6
    top = max([value for _label, value in items] or [1]) or 1
    parts = ['<svg xmlns="http://www.w3.org/2000/svg" role="img" width="%d" height="%d" viewBox="0 0 %d %d">'
             % (width, height, width, height),
             '<title>%s</title>' % _h(title),
             '<text x="0" y="16" font-size="13" font-weight="bold">%s</text>' % _h(title)]
    if not items:
        parts.append('<text x="0" y="40" font-size="12">none</text>')
    for i, (label, value) in enumerate(items):
        y = 26 + i * bar_height
        w = int((width - label_w - 40) * value / top)
        parts.append('<text x="0" y="%d" font-size="12">%s</text>' % (y + 14, _h(label)))
        parts.append('<rect x="%d" y="%d" width="%d" height="%d" fill="%s"><title>%s: %d</title></rect>'
                     % (label_w, y + 2, max(w, 1), bar_height - 6, STATUS_COLOURS[FAIL], _h(label), value))
        parts.append('<text x="%d" y="%d" font-size="12">%d</text>' % (label_w + w + 6, y + 14, value))
    parts.append("</svg>")
    return "".join(parts)


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:24px;color:#1f2328}
table{border-collapse:collapse;margin:8px 0 16px}th,td{border:1px solid #d0d7de;padding:4px 8px;
text-align:left;vertical-align:top;font-size:13px}th{background:#f6f8fa}
td.s-PASS{background:#dafbe1}td.s-FAIL{background:#ffebe9}td.s-WARN{background:#fff8c5}
td.s-NOT_RUN{background:#eaeef2;color:#57606a}
.badge{color:#fff;border-radius:4px;padding:1px 6px;font-size:12px;font-weight:600}
.counts{display:flex;gap:32px;flex-wrap:wrap}details{margin:6px 0}summary{cursor:pointer}
code{font-size:12px}tr.mig td:nth-child(2){padding-left:24px}
"""


def _count_html(title, counts, head):
    rows = "".join("<tr><td>%s</td><td>%d</td></tr>" % (_h(k), v) for k, v in counts.items())
    return "<div><h3>%s</h3><table><tr><th>%s</th><th>hosts</th></tr>%s</table></div>" % (
        _h(title), _h(head), rows or "<tr><td>(none)</td><td>0</td></tr>")


def crosscheck_html(findings):
    if findings is None:
        return []
    out = ["<h2>Kubernetes vs node verdicts</h2>"]
    if not findings:
        return out + ["<p>No finding (or no k8s record named a verified host).</p>"]
    out.append("<table><tr><th>host</th><th>k8s node</th><th>finding</th><th>severity</th><th>observed</th>"
               "<th>meaning</th></tr>")
    for f in findings:
        out.append('<tr><td>%s</td><td>%s</td><td><code>%s</code></td><td class="s-%s">%s</td><td>%s</td><td>%s</td></tr>'
                   % (_h(f["host"]), _h(f["k8s_node"]), _h(f["finding"]), _h(f["severity"]), _h(f["severity"]),
                      _h(f["observed"]), _h(f["message"])))
    return out + ["</table>"]


def _gpu_tr(depth, row):
    """One row of a host's GPU table: a GPU, or (class mig) one of its MIG instances under it."""
    cells = "".join(('<td class="s-%s">%s</td>' % (_h(row.get(k)), _h(row.get(k))) if k == "status"
                     else "<td>%s</td>" % _h(_gpu_cell(row, k, depth))) for k in GPU_COLUMNS)
    return '<tr%s>%s</tr>' % (' class="mig"' if depth else "", cells)


def render_html(report):
    run = report.get("run") or {}
    s = report["summary"]
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           "<title>gpuprobe fleet report %s</title>" % _h(report["generated_at"]),
           "<style>%s</style></head><body>" % _CSS,
           "<h1>gpuprobe fleet report</h1>",
           "<p>generated %s (schema %s) &middot; mode %s &middot; CDI source %s</p>" % (
               _h(report["generated_at"]), _h(report["schema_version"]), _h(run.get("mode")), _h(run.get("cdi_source"))),
           "<p>%d host(s): %d COMPUTE_VERIFIED, %d failed, %d inconclusive, %d unreachable, %d drifted</p>" % (
               s["hosts"], s["compute_verified"], s["failed"], s["inconclusive"], s["unreachable"], s["drifted"]),
           "<p>%s</p>" % _h(gpu_line(s.get("gpus")))]
    unverifiable = _unverifiable(report)
    if unverifiable:
        out.append("<p><strong>could not be verified</strong> (the run fails for them in every mode): %s</p>"
                   % "; ".join("%s: %s" % (_h(name), _h(why)) for name, why in unverifiable))
    out.append("<h2>Hosts &times; layers</h2><table><tr><th>host</th><th>verdict</th>")
    out.append("".join("<th>%s</th>" % _h(layer) for layer in LAYERS) + "<th>signature</th><th>points to</th></tr>")
    for name, e in report["hosts"].items():
        cells = "".join('<td class="s-%s" title="%s">%s</td>' % (
            _h(e["layers"][layer]["status"]), _h(e["layers"][layer].get("reason")), _h(e["layers"][layer]["status"]))
            for layer in LAYERS)
        out.append('<tr><td><a href="#host-%s">%s</a></td><td>%s</td>%s<td><code>%s</code></td><td>%s</td></tr>' % (
            _h(name), _h(name), _badge(e["verdict"]), cells, _h(e["signature"] or ""), _h(e["points_to"] or "")))
    out.append("</table><h2>Counts</h2><div class=\"counts\">")
    out.append(_count_html("By verdict", report["counts"]["by_verdict"], "verdict"))
    out.append(_count_html("By failing layer", report["counts"]["by_failing_layer"], "layer"))
    out.append(_count_html("By signature", report["counts"]["by_signature"], "signature"))
    failing = dict((layer, report["counts"]["by_failing_layer"][layer])
                   for layer in ORDERED_LAYERS if layer in report["counts"]["by_failing_layer"])
    out.append("<div>%s</div></div>" % svg_bar_chart(failing, "hosts by failing layer"))
    out.append("<h2>Drift from pins</h2>")
    if report["drift"]:
        out.append("<table><tr><th>host</th><th>pin</th><th>expected</th><th>observed</th><th>state</th></tr>")
        for d in report["drift"]:
            out.append("<tr><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s: %s</td></tr>" % (
                _h(d["host"]), _h(d["key"]), _h(d["expected"]), _h(d["observed"]), _h(d["state"]), _h(d.get("note"))))
        out.append("</table>")
    else:
        out.append("<p>No host differs from its pins (or no pins were declared).</p>")
    out += crosscheck_html(report.get("k8s_crosscheck"))
    if "drills" in report:
        out.append("<h2>Fault drills: predicted vs observed</h2><table><tr><th>host</th><th>variant</th>"
                   "<th>predicted layer</th><th>predicted signature</th><th>observed verdict</th>"
                   "<th>observed signature</th><th>match</th></tr>")
        for r in report["drills"]:
            out.append("<tr><td>%s</td><td>%s</td><td>%s</td><td><code>%s</code></td><td>%s</td>"
                       "<td><code>%s</code></td><td class=\"s-%s\">%s</td></tr>" % (
                           _h(r.get("host")), _h(r.get("variant")), _h(_predicted_text(r)),
                           _h(r.get("predicted_signature")), _badge(r.get("observed_verdict")),
                           _h(r.get("observed_signature")), PASS if r.get("match") else FAIL,
                           "yes" if r.get("match") else "no"))
        out.append("</table>")
    out.append("<h2>Per-host detail</h2>")
    for name, e in report["hosts"].items():
        out.append('<h3 id="host-%s">%s %s</h3><p>%s</p>' % (_h(name), _h(name), _badge(e["verdict"]), _h(e["reason"])))
        if e.get("because"):
            out.append("<p>because:</p><ul>%s</ul>" % "".join(
                "<li><code>%s</code> (%s)</li>" % (_h(because_text(b)), _h(b.get("status"))) for b in e["because"]))
        if e.get("gpus"):
            out.append("<table><tr>%s</tr>%s</table>" % ("".join("<th>%s</th>" % _h(k) for k in GPU_COLUMNS),
                                                         "".join(_gpu_tr(depth, r) for depth, r in gpu_tree(e["gpus"]))))
        for layer in LAYERS:
            rec = e["layers"][layer]
            out.append("<details%s><summary>%s %s %s</summary>" % (
                " open" if rec["status"] in (FAIL, WARN) else "", _h(layer), _badge(rec["status"]), _h(rec.get("reason") or "")))
            if rec.get("checks"):
                out.append("<table><tr><th>check</th><th>status</th><th>subject</th><th>expected</th>"
                           "<th>observed</th><th>hint</th></tr>")
                for c in rec["checks"]:
                    out.append('<tr><td><code>%s</code></td><td class="s-%s">%s</td><td>%s</td><td>%s</td>'
                               "<td>%s</td><td>%s</td></tr>" % (
                                   _h(c.get("id")), _h(c.get("status")), _h(c.get("status")), _h(c.get("subject")),
                                   _h(c.get("expected")), _h(c.get("observed")), _h(c.get("hint"))))
                out.append("</table>")
            if rec.get("versions"):
                out.append("<p>versions: %s</p>" % _h(", ".join(
                    "%s=%s" % (k, "unknown" if v is None else _text(v)) for k, v in sorted(rec["versions"].items()))))
            if rec.get("not_proven") and rec["status"] in (PASS, WARN):
                out.append("<p>not proven by this result: %s</p>" % _h("; ".join(rec["not_proven"])))
            out.append("</details>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------------------------------
# JUnit XML

def _check_lines(record, statuses):
    lines = []
    for c in record.get("checks") or []:
        if c.get("status") in statuses:
            lines.append("%s %s %s: expected %s, observed %s%s" % (
                c.get("status"), c.get("id"), _text(c.get("subject")), _text(c.get("expected")) or "-",
                _text(c.get("observed")) or "-",
                ("; next: %s" % c["hint"]) if c.get("hint") else ""))
    return "\n".join(lines)


def gpu_properties(gpus):
    """The GPUs of a host as JUnit properties, each MIG instance under its GPU: ("gpu <index>", "<uuid> <status>[
    <signature>][: reason]"), then ("gpu <index> mig <MIG uuid>", "<status>[ <signature>][: reason]")."""
    out = []
    for depth, row in gpu_tree(gpus):
        text = "%s%s%s" % (row.get("status"), " %s" % row["signature"] if row.get("signature") else "",
                           ": %s" % row["reason"] if row.get("reason") else "")
        if depth:
            out.append(("%s mig %s" % (parent_name, _instance_name(row)), text))
        else:
            parent_name = "gpu %s" % (row.get("index") if row.get("index") is not None else row.get("uuid") or "?")
            out.append((parent_name, "%s %s" % (row.get("uuid") or "?", text)))
    return out


def render_junit(report):
    """JUnit XML: a testsuite per host, a testcase per layer (NOT_RUN -> skipped, FAIL -> failure).

    On a node that could not be verified (unreachable, no usable Python, the verify run stopped: the entry's
    ``unverifiable``), every layer without a result is an <error> instead of skipped, in every mode, so
    that CI gating on JUnit does not go green over nodes nobody looked at.
    """
    suites = ET.Element("testsuites", name="gpuprobe fleet report %s" % report["generated_at"])
    total = dict(tests=0, failures=0, errors=0, skipped=0)
    for name, e in report["hosts"].items():
        suite = ET.SubElement(suites, "testsuite", name=name, timestamp=str(report["generated_at"]))
        counts = dict(tests=0, failures=0, errors=0, skipped=0)
        unverifiable = e.get("unverifiable")
        seconds = 0.0
        for layer in LAYERS:
            rec = e["layers"][layer]
            t = float(rec.get("duration_ms") or 0.0) / 1000.0
            seconds += t
            case = ET.SubElement(suite, "testcase", classname="gpuprobe.%s" % name, name=layer, time="%.3f" % t)
            counts["tests"] += 1
            if rec["status"] == FAIL:
                counts["failures"] += 1
                failure = ET.SubElement(case, "failure", message=str(rec.get("reason") or ""),
                                        type=str(rec.get("signature") or "%s.failed" % layer))
                failure.text = _check_lines(rec, (FAIL,))
            elif rec["status"] == NOT_RUN and unverifiable:
                counts["errors"] += 1
                error = ET.SubElement(case, "error", message=str(rec.get("reason") or unverifiable),
                                      type="gpuprobe.unverifiable")
                error.text = unverifiable
            elif rec["status"] == NOT_RUN:
                counts["skipped"] += 1
                ET.SubElement(case, "skipped", message=str(rec.get("reason") or "not run"))
            elif rec["status"] == WARN:
                out = ET.SubElement(case, "system-out")
                out.text = "WARN: %s\n%s" % (rec.get("reason") or "", _check_lines(rec, (WARN,)))
        props = ET.Element("properties")
        for key in ("verdict", "signature", "points_to"):
            ET.SubElement(props, "property", name=key, value=str(e.get(key) or ""))
        if e.get("because"):
            ET.SubElement(props, "property", name="because", value="; ".join(because_text(b) for b in e["because"]))
        for name_, value in gpu_properties(e.get("gpus")):
            ET.SubElement(props, "property", name=name_, value=value)
        suite.insert(0, props)
        for key, value in counts.items():
            suite.set(key, str(value))
            total[key] += value
        suite.set("time", "%.3f" % seconds)
    for key, value in total.items():
        suites.set(key, str(value))
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + xml_safe(ET.tostring(suites, encoding="unicode")) + "\n"


# characters XML 1.0 does not allow anywhere, even escaped (control characters other than tab, LF, CR; surrogates;
# U+FFFE/U+FFFF): a node's text (an event message, a slice attribute) may hold them and would make the file unreadable
_XML_INVALID = re.compile(u"[^\u0009\u000a\u000d\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_safe(text):
    """``text`` with every character XML 1.0 forbids replaced by U+FFFD."""
    return _XML_INVALID.sub(u"\ufffd", text)


def render_json(report):
    return json.dumps(report, indent=2, sort_keys=False, default=str) + "\n"


RENDERERS = {
    "json": (".json", render_json),
    "markdown": (".md", render_markdown),
    "html": (".html", render_html),
    "junit": (".junit.xml", render_junit),
}


# ---------------------------------------------------------------------------------------------------
# the options of the fleet_report action (shared by the action plugin and its documentation stub module)

FLEET_REPORT_ARGSPEC = dict(
    hosts=dict(type="list", elements="str", required=True),
    active_hosts=dict(type="list", elements="str"),
    report_dir=dict(type="path", required=True),
    basename=dict(type="str", default="gpuprobe-report"),
    formats=dict(type="list", elements="str", default=list(RENDERERS), choices=list(RENDERERS)),
    result_var=dict(type="str", default="verify_result"),
    records_var=dict(type="str"),
    pins_var=dict(type="str", default="gpuprobe_pins"),
    require_verified=dict(type="bool", default=False),
    drills_var=dict(type="str"),
    run=dict(type="dict", default={}),
    status_file=dict(type="path"),
)
