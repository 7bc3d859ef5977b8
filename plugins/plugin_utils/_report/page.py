# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: the data of the HTML report's page script: one row per host, and the detail of every host not verified.

Not public API. The page (templates/report.html.j2) draws the dashboard itself; its one script (templates/report.js)
draws the hosts table from ``page_data`` (filters, search, rows a page at a time, failures first) and a host's
detail when it is opened. A verified host is its row (its layers' statuses and reasons; its records are in the JSON
report). A host that is not verified has its detail (``detail_view``: what the page shows of its records, as text),
written compactly against the first host of its cause (``_report.compact``: a patch, and its name and GPU UUIDs as
tokens), so that hosts that failed alike cost little. The data is JSON inside the script, "<", ">" and "&" escaped,
one host's row or detail per line.
"""

from __future__ import annotations

import json

from ansible_collections.gpuprobe.layers.plugins.module_utils._verdict.attribution import because_text
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import LAYERS, NOT_RUN, PASS, WARN
from ansible_collections.gpuprobe.layers.plugins.module_utils._host.health.reasons import SHORT, reason
from ansible_collections.gpuprobe.layers.plugins.module_utils._verdict.verdict import COMPUTE_VERIFIED
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report.compact import Shape, host_tokens
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report.escape import visible
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report.health import HEALTH_PREFIX, health_checks
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report.states import RUN_FAILED, UNREACHABLE
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report.where import place_label, places

GPU_COLUMNS = ("index", "uuid", "model", "expected", "status", "signature", "reason")
MIG_MARK = "\u21b3 MIG "      # an instance row, under its GPU: "↳ MIG MIG-…"
STATUS_CODES = {"PASS": "P", "WARN": "W", "FAIL": "F", "NOT_RUN": "N"}
DETAIL_SHAPES = 500         # shapes of the detail (one per cause); a host of a cause beyond them is written whole
VERIFIED_WORDS = ("Verified: every layer's record of this host is in the JSON report (hosts.<name>; a verified host is "
                  "written there against the shape of its kind, docs/usage.md), not repeated in this page.")


def text(value):
    """Plain text of a report value: "" for None, JSON for lists and mappings (null, never Python's None)."""
    if value is None:
        return ""
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value, sort_keys=True, default=str)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def gpu_tree(gpus):
    """(depth, row) of a host entry's GPUs in reading order: each physical GPU (depth 0), then its MIG instances (1)."""
    for gpu in gpus or []:
        yield 0, gpu
        for inst in gpu.get("instances") or []:
            yield 1, inst


def gpu_cell(row, key, depth):
    """A GPU table cell: an instance row leaves the index to its GPU's row and marks its UUID as a MIG instance."""
    if depth and key == "index":
        return ""
    if depth and key == "uuid":
        return MIG_MARK + text(row.get("uuid") or "#%s" % row.get("ordinal"))
    return row.get(key)


def health_rows(entry):
    """The per-GPU health rows of a host (its host layer's host.health.* checks, one row per GPU or subject): subject,
    passed (how many readings PASSed), findings [(reading, status, observed)] for WARN/FAIL, not_read [(reading (why,
    _health_reasons.SHORT), observed)] for NOT_RUN. A GPU whose readings all passed is one short row."""
    rows = {}
    for c in health_checks(entry):
        row = rows.setdefault(c.get("subject") or "", {"subject": c.get("subject") or "", "passed": 0, "findings": [],
                                                       "not_read": []})
        short = c["id"][len(HEALTH_PREFIX):]
        if c.get("status") == PASS:
            row["passed"] += 1
        elif c.get("status") == NOT_RUN:
            row["not_read"].append(("%s (%s)" % (short, SHORT[reason(c.get("observed"))]), c.get("observed")))
        else:
            row["findings"].append((short, c.get("status"), c.get("observed")))
    return list(rows.values())


CHECK_ORDER = {"FAIL": 0, "WARN": 1, "NOT_RUN": 2}


def layer_checks(record):
    """The checks of a layer record shown in its table: all but the host.health.* readings (their per-GPU rows say them),
    what failed first, then the warnings, then what did not run, then what passed (each in the record's order)."""
    checks = [c for c in record.get("checks") or [] if not str(c.get("id") or "").startswith(HEALTH_PREFIX)]
    return sorted(checks, key=lambda c: CHECK_ORDER.get(c.get("status"), 3))


def detail_view(entry):
    """What the page shows of a host that is not verified, every value as text: its reason (or why it could not be
    verified), the cdi checks that explain it, its GPU rows, one health row per GPU, and every layer with its checks."""
    out = {"reason": text(entry.get("reason")), "unverifiable": text(entry.get("unverifiable"))}
    if entry.get("state") in (UNREACHABLE, RUN_FAILED):
        return out
    out["because"] = ["%s (%s)" % (because_text(b), text(b.get("status"))) for b in entry.get("because") or []]
    out["gpus"] = [[depth] + [text(gpu_cell(row, k, depth)) for k in GPU_COLUMNS] for depth, row in gpu_tree(entry.get("gpus"))]
    out["health"] = [[text(h["subject"]), h["passed"], [[text(n), text(st), text(obs)] for n, st, obs in h["findings"]],
                      [[text(n), text(obs)] for n, obs in h["not_read"]]] for h in health_rows(entry)]
    layers = []
    for layer in LAYERS:
        rec = entry["layers"][layer]
        versions = rec.get("versions") or {}
        layers.append({
            "layer": layer, "status": text(rec.get("status")), "reason": text(rec.get("reason")),
            "checks": [[text(c.get(k)) for k in ("id", "status", "subject", "expected", "observed", "hint")] for c in layer_checks(rec)],
            "versions": ", ".join("%s=%s" % (k, "unknown" if versions[k] is None else text(versions[k])) for k in sorted(versions)),
            "not_proven": "; ".join(text(x) for x in rec.get("not_proven") or []) if rec.get("status") in (PASS, WARN) else ""})
    out["layers"] = layers
    return out


def script_json(value):
    """JSON that cannot end the <script> it is in, nor open a comment there: "<", ">" and "&" as \\u escapes; every
    control character of its strings (bidi, zero-width, C0/C1) a visible escape (``_escape.visible``): the script shows
    them as text, where they would reorder or hide it."""
    text = json.dumps(visible(value, keep="\n\t"), separators=(",", ":"), sort_keys=False, allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def host_order(report):
    """The hosts in the order of the table: by cause (the report's groups: failures first, the largest cause first),
    then by name."""
    for g in report.get("groups") or []:
        yield from g["hosts"]


def findings(report):
    """[{id, words}] of the hosts' findings a filter can pick (each health finding, each drift state), and host ->
    the indexes of its findings."""
    labels, of_host = [], {}
    for f in (report.get("health") or {}).get("findings") or []:
        for name in f.get("host_names") or []:
            of_host.setdefault(name, []).append(len(labels))
        labels.append({"id": "%s/%s" % (f["check"], f["status"]), "words": "%s: %s" % (f["status"], f["words"])})
    for state, words in (("differs", "a pin differs"), ("unknown", "a pinned value not observed")):
        hosts = sorted(set(d["host"] for d in report.get("drift") or [] if d.get("state") == state))
        if hosts:
            for name in hosts:
                of_host.setdefault(name, []).append(len(labels))
            labels.append({"id": "drift/%s" % state, "words": "drift: %s" % words})
    return labels, of_host


def page_places(report):
    """[[dimension, value, label, 1 when it holds more than half the fleet]] of every place of the report's ``where``
    (the filter's choices; a row shows the others: gpu_nodes, where every host is, tells none apart)."""
    where = (report.get("where") or {}).get("places") or {}
    total = (report.get("summary") or {}).get("hosts") or 0
    return [[dim, value, place_label(dim, value), 1 if 2 * row["hosts"] > total else 0]
            for dim, rows in where.items() for value, row in rows.items()]


def page_data(report, full):
    """The page script's data as JSON text in pieces (``full``: name -> a host's full entry, read only for the hosts not
    verified): layers, states, causes, places, findings, the host rows in table order, the strings they share, and
    the detail of each host not verified with the shapes it is written against."""
    groups = report.get("groups") or []
    cause_index = dict((g["id"], i) for i, g in enumerate(groups))
    place_list = page_places(report)
    place_index = dict(((p[0], p[1]), i) for i, p in enumerate(place_list))
    labels, host_findings = findings(report)
    states = list(dict.fromkeys(list((report.get("counts") or {}).get("by_state") or {}) + [g["state"] for g in groups]))
    state_index = dict((s, i) for i, s in enumerate(states))
    strings, string_index = [], {}

    def intern(value):
        if value is None:
            return -1
        value = text(value)
        if value not in string_index:
            string_index[value] = len(strings)
            strings.append(value)
        return string_index[value]

    yield '{"layers":%s,"statuses":%s,"states":%s,"causes":%s,"places":%s,"findings":%s,"gpu_columns":%s,"verified_words":%s,' % (
        script_json(list(LAYERS)), script_json(dict((c, s) for s, c in STATUS_CODES.items())), script_json(states),
        script_json([{"id": g["id"], "state": g["state"], "words": text(g["cause"]), "count": g["count"]} for g in groups]),
        script_json(place_list), script_json(labels), script_json(list(GPU_COLUMNS)), script_json(VERIFIED_WORDS))
    yield '"hosts":['
    details = []
    for n, name in enumerate(host_order(report)):
        e = report["hosts"][name]
        layers = [e["layers"][layer] for layer in LAYERS]
        row = [name, state_index[e["state"]], cause_index[e["group"]],
               "".join(STATUS_CODES.get(rec.get("status"), "N") for rec in layers),
               [intern(rec.get("reason")) for rec in layers], intern(e.get("signature") or e.get("cause")), intern(e.get("points_to")),
               [place_index[p] for p in places(e.get("where")) if p in place_index], host_findings.get(name, []),
               -1 if e["state"] == COMPUTE_VERIFIED else len(details)]
        if e["state"] != COMPUTE_VERIFIED:
            details.append(name)
        yield (",\n" if n else "\n") + script_json(row)
    yield '],"str":%s,"detail":[' % script_json(strings)
    shapes, shape_of = [], {}
    for n, name in enumerate(details):
        entry = full(name)
        doc = detail_view(entry)
        tokens = host_tokens(entry)
        shape = shape_of.get(entry.get("group"))
        item = None
        if shape is None and len(shapes) < DETAIL_SHAPES:
            shape = shape_of[entry.get("group")] = Shape(len(shapes), tokens, doc)
            shapes.append(shape)
        if shape is not None:
            got = shape.patch_of(tokens, doc)
            if got is not None:
                item = {"shape": shape.id, "tokens": got[0], "patch": got[1]}
        yield (",\n" if n else "\n") + script_json(item if item is not None else {"doc": doc})
    yield '],"shapes":['
    for n, shape in enumerate(shapes):
        yield (",\n" if n else "\n") + script_json({"tokens": shape.tokens, "doc": shape.rest})
    yield "]}"
