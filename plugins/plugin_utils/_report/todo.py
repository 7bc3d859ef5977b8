# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: what to do about a cause, from the hints of the checks that decided it. Not public API.

A host that failed has the ``hint`` of the checks its verdict rests on (``host_todo``): the failed checks of its
failing layer that its signature names (else the first that failed), else the checks the verdict names (``because``,
whose hints say what the spec makes fail rather than what to do, so they come last). The hints of a cause's hosts
are counted once per cause (``TodoTally``: the report's ``groups[].todo``), so a cause says what to do once, and says
so when its hosts were told different things (``todo_text``). A host that nobody could look at, or that is inconclusive, has no failed check: no hint is made
up.
"""

from __future__ import annotations

from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import FAIL
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report.sentences import plural
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report.states import normalise_message

TOP = 3         # hints listed per cause, the most hosts first (the hosts of the others counted)


def host_todo(entry):
    """What the checks a host's failure rests on say to do: their distinct hints (each with the host's name, addresses,
    UUIDs and pids taken out, ``normalise_message``) joined by '; ', at most 240 characters; None when the host did
    not fail, or no such check gave a hint."""
    layer = entry.get("failing_layer")
    if not layer or not str(entry.get("state") or "").startswith("FAILED_AT_"):
        return None
    signature = str(entry.get("signature") or "")
    record = (entry.get("layers") or {}).get(layer) or {}
    failed = [c for c in record.get("checks") or [] if isinstance(c, dict) and c.get("status") == FAIL and c.get("hint")]
    # the check the signature names (runtime.device_node.open of runtime.device_node.open.EPERM), else the first that
    # failed (compute.cuda.call of compute.cuda.CUDA_ERROR_*); else the checks the verdict names (a failure the layer's
    # own checks do not hold: cdi.inject.probe_integrity)
    checks = [c for c in failed if signature == c.get("id") or signature.startswith("%s." % c.get("id"))] or failed[:1] or [
        b for b in entry.get("because") or [] if isinstance(b, dict)]
    hints = []
    for c in checks:
        hint = normalise_message(c.get("hint"), entry.get("name")) if c.get("hint") not in (None, "") else ""
        if hint and hint not in hints:
            hints.append(hint)
    return normalise_message("; ".join(hints)) or None


def _key(entry):
    return (entry.get("state"), entry.get("cause"), entry.get("points_to"))


class TodoTally(object):
    """The hints of each cause's hosts, one host entry at a time (``add``); ``of(group)`` is that group's ``todo``.
    Every distinct hint is counted (one line of at most 240 characters each, so what is kept grows at most as the
    brief entries do): the hints listed are the most common ones, whatever order the hosts come in."""

    def __init__(self):
        self.counts = {}

    def add(self, entry):
        if not str(entry.get("state") or "").startswith("FAILED_AT_"):
            return
        row = self.counts.setdefault(_key(entry), {"hints": {}, "without": 0})
        hint = host_todo(entry)
        if hint is None:
            row["without"] += 1
        else:
            row["hints"][hint] = row["hints"].get(hint, 0) + 1

    def of(self, group):
        """{"hints": [{"hint", "hosts"}] (the most hosts first, at most TOP), "other": hosts told something else,
        "without": hosts no check told anything} of a report group that failed; None for any other group."""
        row = self.counts.get((group["state"], group["cause"], group.get("points_to")))
        if row is None:
            return None
        ranked = sorted(row["hints"].items(), key=lambda kv: (-kv[1], kv[0]))
        return {"hints": [{"hint": hint, "hosts": n} for hint, n in ranked[:TOP]],
                "other": sum(n for _hint, n in ranked[TOP:]), "without": row["without"]}


def todo_text(group):
    """What to do about a cause, in words: its one hint when every host of it was told the same; else each hint with
    its hosts ('mount X (12 hosts); check Y (3 hosts)'), then '2 hosts told something else' and '1 host: no check gave
    a hint'; '' for a cause that did not fail."""
    todo = group.get("todo") or {}
    hints = todo.get("hints") or []
    if len(hints) == 1 and not todo.get("other") and not todo.get("without"):
        return hints[0]["hint"]
    parts = ["%s (%s)" % (h["hint"], plural(h["hosts"], "host")) for h in hints]
    if todo.get("other"):
        parts.append("%s something else (see each host)" % plural(todo["other"], "host told", "hosts told"))
    if todo.get("without"):
        parts.append("%s: no check gave a hint" % plural(todo["without"], "host"))
    return "; ".join(parts)
