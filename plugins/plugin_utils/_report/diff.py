# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: what changed between two fleet reports, per node (the filters report_diff and report_diff_markdown,
playbooks/compare-reports.yml). Not public API. docs/usage.md, "Comparing two reports".
"""

from __future__ import annotations

from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report.compact import is_compact, restore
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report.model import dig, norm


# ---------------------------------------------------------------------------------------------------
# comparing two reports

def _host_view(entry):
    view = {"verdict": entry.get("verdict"), "signature": entry.get("signature")}
    for layer, record in (entry.get("layers") or {}).items():
        view["layers.%s.status" % layer] = record.get("status")
        for key, value in sorted((record.get("versions") or {}).items()):
            view["layers.%s.versions.%s" % (layer, key)] = norm(value)
    cdi = (entry.get("layers") or {}).get("cdi") or {}
    view["layers.cdi.evidence.spec_digest"] = norm(dig(cdi, ("evidence", "spec_digest")))
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
        # a host written against its shape (schema 3: a verified one, 4: any) is compared as its full entry
        before, after = (_host_view(restore(r, hosts[name]) if is_compact(hosts[name]) else hosts[name])
                         for r, hosts in ((old, old_hosts), (new, new_hosts)))
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
