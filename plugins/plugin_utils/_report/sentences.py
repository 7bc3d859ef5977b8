# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: the fleet report's sentences about GPUs and pins, each said only where it is true of the run. Not public API.

Pure functions of the report's figures (``fleet.Fleet.report``); the end-of-run summary (``fleet.summary_lines``),
the dashboard (``_report_render.headlines``) and the JUnit properties say them in the same words. docs/usage.md
("Every sentence and when it is said") lists each sentence with the condition under which it is true.
"""

from __future__ import annotations

# why the GPUs of a host are unknown, in the order said: (key, words after a count of hosts)
UNKNOWN_GPUS = (("unreachable", "not reached"), ("run_failed", "whose run failed"),
                ("host_not_run", "whose host layer did not run"), ("not_listed", "whose host layer did not list them"))


def plural(n, one, many=None):
    """'1 GPU', '3 GPUs', '1,200 hosts'."""
    return "{0:,} {1}".format(n, one if n == 1 else (many or one + "s"))


def unknown_gpus(entry):
    """Why the GPUs of a host entry that shows none are unknown (a key of UNKNOWN_GPUS), or None when its host layer ran
    and listed its GPUs (none: the host has no GPU its host layer could find)."""
    host = entry["layers"].get("host") or {}
    if not entry.get("reachable", True):
        return "unreachable"
    if entry.get("error"):
        return "run_failed"
    if host.get("status") in (None, "NOT_RUN"):
        return "host_not_run"
    return None if isinstance((host.get("evidence") or {}).get("gpus"), list) else "not_listed"


def gpu_line(gpus, mode=None):
    """The fleet in physical GPUs, in words: '1,598 of 1,600 GPUs verified in a container; 2 failed (on 2 hosts)'.
    Only what is known is said: hosts whose host layer ran and found no GPU are said apart from hosts whose GPUs are
    unknown (and why). A GPU with MIG counts once ('; MIG: 2 of 2 requested instances verified on 1 GPU')."""
    gpus = gpus or {}
    total = gpus.get("total", 0)
    parts = []
    if total:
        parts.append("{0:,} of {1} verified in a container".format(gpus.get("verified", 0), plural(total, "GPU")))
        if gpus.get("failed"):
            parts.append("{0:,} failed (on {1})".format(gpus["failed"], plural(gpus.get("hosts_with_failed_gpu", 0), "host")))
        if gpus.get("not_run"):
            why = "an audit runs no container" if mode == "audit" else "busy, or compute did not reach them"
            parts.append("{0:,} not verified ({1})".format(gpus["not_run"], why))
    if gpus.get("unlisted"):
        parts.append("{0} seen by the probe that no host layer lists (not counted)".format(plural(gpus["unlisted"], "GPU")))
    none = gpus.get("hosts_without_gpus", 0)
    if none:
        parts.append("%s no GPU (%s host layer ran and found none)" % (plural(none, "host lists", "hosts list"),
                                                                       "its" if none == 1 else "their"))
    unknown = gpus.get("hosts_with_unknown_gpus", 0)
    if unknown:
        why = gpus.get("unknown_gpus_why") or {}
        parts.append("the GPUs of %s are unknown%s (%s)" % (plural(unknown, "host"), " and not counted" if total else "", ", ".join(
            "{0:,} {1}".format(why[key], words) for key, words in UNKNOWN_GPUS if why.get(key)) or "not listed"))
    mig = gpus.get("mig_instances") or {}
    if mig.get("total"):
        parts.append("MIG: {0:,} of {1} verified on {2}".format(
            mig.get("verified", 0), plural(mig["total"], "requested instance"), plural(gpus.get("mig_gpus", 0), "GPU")))
    if not total:
        return "No GPU was seen" + (": " + "; ".join(parts) if parts else "")
    return "; ".join(parts)


def drift_hosts(drift):
    """{"differs": hosts with a pin whose observed value differs, "unknown": hosts with a pin whose value was not
    observed} (a host with both is in both)."""
    return dict((state, len(set(d["host"] for d in drift if d.get("state") == state))) for state in ("differs", "unknown"))


def drift_lines(summary, drift_by_pin=None, drift=None):
    """The pins, said apart: '51 hosts differ from their pins: driver_version on 51 hosts' and '110 hosts have a pinned
    value that was not observed (...): runtime_version on 110 hosts'; nothing when no host drifts. ``drift`` (the
    report's list) says why a value was not observed: its layer did not run or report it, or the pin's name is unknown."""
    differs, unknown = summary.get("drift_differs", 0), summary.get("drift_unknown", 0)
    causes = set("name" if str(d.get("note") or "").startswith("unknown pin name") else "layer"
                 for d in drift or [] if d.get("state") == "unknown") or {"layer", "name"}
    why = " or ".join(text for key, text in (("layer", "its layer did not run or did not report it"),
                                             ("name", "the pin's name is not one the report knows")) if key in causes)
    out = []
    for state, n, words in (
            ("differs", differs, "%s from %s pins" % (plural(differs, "host differs", "hosts differ"), "its" if differs == 1 else "their")),
            ("unknown", unknown, "%s a pinned value that was not observed (%s; not counted as differing)" % (
                plural(unknown, "host has", "hosts have"), why))):
        if not n:
            continue
        pins = ", ".join("%s on %s" % (key, plural(states[state], "host")) for key, states in sorted((drift_by_pin or {}).items())
                         if states.get(state))
        out.append(words + (": " + pins if pins else ""))
    return out


def drift_text(item):
    """One pin of a host, as a JUnit property says it: 'driver_version differs: expected 580.159.04, observed 570.1'."""
    if item.get("state") == "differs":
        return "%s differs: expected %s, observed %s" % (item.get("key"), item.get("expected"), item.get("observed"))
    return "%s not observed: expected %s (%s)" % (item.get("key"), item.get("expected"), item.get("note"))


def gate_line(gated, report=None):
    """The fleet callback's last line: why the final gate fails each of ``gated`` (hosts already reported), from the
    fleet_report result (``unverifiable``, ``failing``): could not be verified (any mode), or not COMPUTE_VERIFIED in a
    post-check (only where the run asked for it: ``failing`` names the host and it is not unverifiable)."""
    report = report or {}
    unverifiable = [h for h in gated if h in (report.get("unverifiable") or {})]
    post = [h for h in gated if h not in unverifiable and h in (report.get("failing") or {})]
    other = len(gated) - len(unverifiable) - len(post)
    parts = [text % plural(n, "host") for n, text in (
        (len(unverifiable), "%s could not be verified"), (len(post), "%s not COMPUTE_VERIFIED in this post-check"),
        (other, "%s failed the final gate (see the play output)")) if n]
    return "the run fails for %s: %s; see the groups above and the report" % (plural(len(gated), "host"), ", ".join(parts))
