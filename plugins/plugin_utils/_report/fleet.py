# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: the fleet report gathered one host at a time: states, groups, the fleet by hardware and software, GPU health
and GPU counts, drift, the Kubernetes cross-check; the end-of-run summary. Not public API.

The action plugin ``gpuprobe.layers.fleet_report`` collects the per-host inputs from hostvars one host at a time,
counts each host's entry (``model.host_entry``) in a ``Fleet`` (what ``build_report`` does with every entry in memory)
and writes the renderings (``jsonfile``, ``render``) to the files piece by piece.
"""

from __future__ import annotations

import copy

from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import LAYERS
from ansible_collections.gpuprobe.layers.plugins.module_utils._verdict.verdict import COMPUTE_VERIFIED, INCONCLUSIVE
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report.compact import Shapes
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report.crosscheck import K8sViews, crosscheck_nodes
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report.gpus import gpu_counts, gpu_totals
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report.health import HealthTally, health_line
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report.model import SCHEMA_VERSION, brief, entry_of, grouped, norm
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report.sentences import drift_hosts, drift_lines, gpu_line, plural
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report.states import RUN_FAILED, group_hosts, state_rank, state_words
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report.todo import TodoTally, todo_text
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report.where import WhereTally, concentration, concentration_line, concentration_words


# ---------------------------------------------------------------------------------------------------
# the fleet by hardware and software: GPU model, driver branch, runtime

def _most_common(values):
    counts = {}
    for value in values:
        if value not in (None, ""):
            counts[value] = counts.get(value, 0) + 1
    return sorted(counts.items(), key=lambda kv: (-kv[1], str(kv[0])))[0][0] if counts else None


def host_profile(entry):
    """{gpu_model, driver_branch, runtime} of a host entry ("unknown" where its records do not say)."""
    layers = entry["layers"]
    host = layers.get("host") or {}
    models = [g.get("name") for g in (host.get("evidence") or {}).get("gpus") or [] if isinstance(g, dict)]
    models += [g.get("model") for g in entry.get("gpus") or [] if isinstance(g, dict)]
    driver = norm((host.get("versions") or {}).get("driver"))
    runtime = norm(((layers.get("runtime") or {}).get("versions") or {}).get("runtime"))
    rows = entry.get("runtimes") or []
    if len(rows) > 1:  # verified through several runtimes: the fleet row names them all
        runtime = " + ".join(str(r.get("runtime")) for r in rows)
    return {"gpu_model": _most_common(models) or "unknown",
            "driver_branch": driver.split(".", 1)[0] if driver else "unknown",
            "runtime": runtime or "unknown"}


BREAKDOWN = ("gpu_model", "driver_branch", "runtime")


def _tally_breakdown(out, entry):
    """Count ``entry`` in ``out`` ({dimension: {value: {"hosts": n, "states": {state: n}}}}, see ``breakdown``)."""
    for dim, value in host_profile(entry).items():
        row = out[dim].setdefault(value, {"hosts": 0, "states": {}})
        row["hosts"] += 1
        row["states"][entry["state"]] = row["states"].get(entry["state"], 0) + 1


def _sorted_breakdown(out):
    return dict((dim, dict(sorted(rows.items(), key=lambda kv: (kv[0] == "unknown", -kv[1]["hosts"], kv[0]))))
                for dim, rows in out.items())


def breakdown(entries):
    """{dimension: {value: {"hosts": n, "states": {state: n}}}} for the dimensions of ``BREAKDOWN``."""
    out = dict((dim, {}) for dim in BREAKDOWN)
    for e in entries:
        _tally_breakdown(out, e)
    return _sorted_breakdown(out)


def _count(values):
    out = {}
    for value in values:
        out[value] = out.get(value, 0) + 1
    return dict(sorted(out.items()))


class Fleet(object):
    """The fleet report gathered one host entry at a time, so that what is kept grows by a brief entry per host.

    ``add`` every host's full entry (``host_entry``) once, in name order; ``report`` then gives the report whose
    ``hosts`` are the brief entries (``brief``, with their group): a host's full entry is the caller's to keep
    (``build_report`` keeps them in memory, the fleet_report action in a file) and to give the renderers, with
    ``grouped``, when they write that host's part. ``group_by``: the host variables whose values place a host, besides
    its inventory groups (``_report.where``). The first host of each kind and failure becomes the shape those hosts
    are written against in the JSON report (``_report.compact``).
    """

    def __init__(self, group_by=None):
        self.hosts = {}
        self.where = WhereTally(group_by)
        self.todo = TodoTally()
        self.shapes = Shapes()
        self.health = HealthTally()
        self.breakdown = dict((dim, {}) for dim in BREAKDOWN)
        self.gpus = gpu_totals()
        self.k8s_nodes = K8sViews()   # what each host's k8s record says about each Node, by host
        self.drivers = {}

    def add(self, entry):
        self.hosts[entry["name"]] = brief(entry)
        self.where.add(entry)
        self.todo.add(entry)
        self.shapes.add(entry)
        self.health.add(entry)
        _tally_breakdown(self.breakdown, entry)
        c = gpu_counts(entry)
        for key in ("total", "verified", "failed", "not_run", "mig_gpus"):
            self.gpus[key] += c[key]
        if c["unlisted"]:  # GPUs the probe saw that no host layer lists: said only when there are some
            self.gpus["unlisted"] = self.gpus.get("unlisted", 0) + c["unlisted"]
        self.gpus["hosts_with_failed_gpu"] += 1 if c["failed"] else 0
        self.gpus["hosts_with_unknown_gpus"] += 1 if c["unknown"] else 0
        self.gpus["hosts_without_gpus"] += 1 if c["none_listed"] else 0
        if c["unknown"]:
            self.gpus["unknown_gpus_why"][c["unknown"]] = self.gpus["unknown_gpus_why"].get(c["unknown"], 0) + 1
        for key in self.gpus["mig_instances"]:
            self.gpus["mig_instances"][key] += c["mig_instances"][key]
        self.k8s_nodes.add(entry["name"], entry["layers"]["k8s"])
        self.drivers[entry["name"]] = (entry["layers"]["host"].get("versions") or {}).get("driver")

    def report(self, generated_at, run=None, drills=None):
        """The report (see ``build_report``), its hosts the brief entries."""
        ordered = list(self.hosts.values())
        layer_status = {}
        for layer in LAYERS:
            layer_status[layer] = _count(e["layers"][layer]["status"] for e in ordered)
        drift = []
        for entry in ordered:
            for item in entry["drift"]:
                row = {"host": entry["name"]}
                row.update(item)
                drift.append(row)
        crosscheck = crosscheck_nodes(dict((e["name"], e["verdict"]) for e in ordered), self.k8s_nodes, self.drivers)
        where = self.where.summary(COMPUTE_VERIFIED)
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
                "run_failed": sum(1 for e in ordered if e["state"] == RUN_FAILED),
                "unverifiable": sum(1 for e in ordered if e["unverifiable"]),
                "drifted": len(set(d["host"] for d in drift)),     # a pin that differs or was not observed: said apart
            },
            "counts": {
                "by_state": dict(sorted(_count(e["state"] for e in ordered).items(), key=lambda kv: state_rank(kv[0]))),
                "by_verdict": _count(e["verdict"] for e in ordered),
                "by_failing_layer": _count(e["failing_layer"] for e in ordered if e["failing_layer"]),
                "by_signature": _count(e["signature"] for e in ordered if e["signature"]),
                "by_layer_status": layer_status,
            },
            "groups": group_hosts(ordered),
            "breakdown": _sorted_breakdown(self.breakdown),
            "where": where,
            "health": self.health.summary(),
            "drift": drift,
            "drift_groups": drift_groups(drift, lambda name: self.hosts[name]["where"], where["places"], len(ordered)),
            "k8s_crosscheck": crosscheck,
            "shapes": self.shapes.as_json(),
            "hosts": dict((e["name"], e) for e in ordered),
        }
        report["counts"]["drift_by_pin"] = dict(
            (key, _count(d["state"] for d in drift if d["key"] == key)) for key in sorted(set(d["key"] for d in drift)))
        for group in report["groups"]:
            for name in group["hosts"]:
                report["hosts"][name]["group"] = group["id"]
            group["where"] = concentration([report["hosts"][name]["where"] for name in group["hosts"]],
                                           report["where"]["places"], len(ordered))
            group["todo"] = self.todo.of(group)
        report["summary"].update(("drift_" + state, n) for state, n in drift_hosts(drift).items())
        report["summary"]["k8s_findings"] = len(crosscheck)
        report["summary"]["gpus"] = copy.deepcopy(self.gpus)
        if drills is not None:
            report["drills"] = list(drills)
            report["summary"]["drills"] = len(drills)
            report["summary"]["drills_matched"] = sum(1 for d in drills if d.get("match"))
        return report


DRIFT_EXAMPLES = 3          # hosts named per pin value of the drift


def drift_groups(drift, where_of, where_places, total):
    """The drift by pin value (key, expected, observed, state, note), the most hosts first: {key, expected, observed,
    state, note, count (hosts), examples (the first DRIFT_EXAMPLES), where (where its hosts are, as for a cause:
    ``_report.where.concentration``)}. ``where_of``: a host's name -> its ``where``."""
    rows = {}
    for d in drift:
        key = (d.get("key"), d.get("expected"), d.get("observed"), d.get("state"), d.get("note"))
        rows.setdefault(key, []).append(d.get("host"))
    out = []
    for (key, expected, observed, state, note), names in rows.items():
        out.append({"key": key, "expected": expected, "observed": observed, "state": state, "note": note,
                    "count": len(names), "examples": names[:DRIFT_EXAMPLES],
                    "where": concentration([where_of(name) for name in names], where_places, total)})
    return sorted(out, key=lambda r: (-r["count"], str(r["key"]), str(r["expected"]), str(r["observed"])))


def build_report(hosts, generated_at, run=None, drills=None, group_by=None):
    """The fleet report (a JSON-serialisable dict, schema ``SCHEMA_VERSION``), every host's full entry in memory.

    ``hosts`` is a list of dicts with keys name, records (layer -> record), unreachable (reason or
    None), error (reason or None), pins (gpuprobe_pins or None), runtimes (verify_node's per-runtime results when
    the node was verified through several runtimes, else None), groups (its inventory groups) and vars (its group_by
    variables). ``drills`` is an optional list of fault-drill rows (see ``drill_row``). ``group_by``: the variables
    that place a host (default: every name of the hosts' ``vars``).
    """
    entries = {}
    names = set()
    for item in hosts:
        entries[item["name"]] = entry_of(item)
        names.update((item.get("vars") or {}).keys())
    fleet = Fleet(sorted(names) if group_by is None else group_by)
    for name in sorted(entries):
        fleet.add(entries[name])
    report = fleet.report(generated_at, run=run, drills=drills)
    report["hosts"] = dict((e["name"], grouped(e, report["hosts"][e["name"]])) for e in (entries[n] for n in sorted(entries)))
    return report


def summary_lines(report):
    """The end-of-run summary: one line per group of hosts (state, count, cause), the fleet in GPUs, the health
    findings. One line per host is the progress line of the gpuprobe_summary callback; the hosts of a group are in
    the report."""
    s = report["summary"]
    lines = [fleet_line(report), gpu_line(s.get("gpus"), (report.get("run") or {}).get("mode"))]
    for g in report.get("groups") or []:
        if g["state"] == COMPUTE_VERIFIED:
            continue
        points = " -> %s" % g["points_to"] if g.get("points_to") else ""
        where = "; %s" % concentration_line(g, cause=False) if (g.get("where") or {}).get("concentrated") else ""
        lines.append("  %s %s: %s%s (e.g. %s%s)" % (plural(g["count"], "host"), g["state"], g["cause"], points, g["example"], where))
        todo = todo_text(g)
        if todo:
            lines.append("    what to do: %s" % todo)
    for f in (report.get("health") or {}).get("findings") or []:
        lines.append("  health %s: %s" % (f["status"], health_line(f)))
    lines.extend("  " + line for line in drift_lines(s, (report.get("counts") or {}).get("drift_by_pin"), report.get("drift")))
    lines.extend("    " + drift_where_line(row) for row in report.get("drift_groups") or [] if (row.get("where") or {}).get("concentrated"))
    return lines


def drift_where_line(row):
    """'driver_version differs (expected 580.159.04, observed 570.1): 40 hosts, all of them in rack_r03' of a drift
    group (``drift_groups``) whose hosts are concentrated in one place."""
    def short(value):
        text = " ".join(str(value).split())
        return text if len(text) <= 100 else text[:97] + "..."
    what = "differs (expected %s, observed %s)" % (short(row.get("expected")), short(row.get("observed"))) \
        if row.get("state") == "differs" else "not observed (expected %s)" % short(row.get("expected"))
    return "%s %s: %s, %s" % (row.get("key"), what, plural(row["count"], "host"), concentration_words(row["count"], row["where"]["concentrated"]))


def fleet_line(report):
    """'500 hosts: 480 verified, 12 failed at cdi, 8 unreachable' (zero counts left out)."""
    s = report["summary"]
    states = (report.get("counts") or {}).get("by_state") or {}
    parts = ["{0:,} {1}".format(n, state_words(state)) for state, n in states.items() if n]
    return "%s: %s" % (plural(s["hosts"], "host"), ", ".join(parts) or "none")
