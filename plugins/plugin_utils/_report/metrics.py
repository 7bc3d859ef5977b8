# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE (controller): the verdicts as Prometheus metrics (docs/usage.md, "Metrics"); not public API.

Two renderings of the same series:

* ``node_text``: one node's last run, for node_exporter's textfile collector (Prometheus text format 0.0.4, no host
  label: the scrape's ``instance`` says which node). verify_node renders it on the controller and has the node write it
  (``gpuprobe.layers.node_metrics``), one file per mode (``gpuprobe-audit.prom``, ``gpuprobe-full.prom``), every series
  labelled with that mode, so that a nightly audit does not hide the last full verification.
* ``fleet_text``: every host of a run with a ``host`` label, plus the fleet's counts, as OpenMetrics text (``# EOF`` at
  the end, gauges only, ``# UNIT`` for the timestamps and durations): what the fleet_report action writes to its
  ``metrics_file``. Prometheus' text parser (node_exporter, promtool) reads it as well.

Conventions (https://prometheus.io/docs/practices/naming/): the ``gpuprobe_`` prefix, base units in the names
(``_seconds``), a state set as one series per possible value (1 for the current one, 0 for the others) where the set is
small (the verdict), and ``1`` with the value as a label where it is large (a layer's status, a health finding). Every
label value is bounded: verdicts, states, layers and statuses are the collection's own names (anything else becomes
``other``), a signature or a health check id must look like one (letters, digits, ``._:/-``, at most 160 characters,
else ``other``), a GPU UUID like a UUID (else empty), a runtime like a runtime name; host names are the inventory's. Every
value is escaped as the exposition formats say (backslash, double quote, new line), its control characters first
written as visible escapes (ESC, BEL, bidi), and no label value can end a line or open another series.
"""

from __future__ import annotations

import math
import re

from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import (
    COMPUTE_VERIFIED, FAIL, LAYERS, NOT_RUN, STATUSES, VERDICTS, WARN,
)
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report.escape import controls
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report.gpus import gpu_proven, listed_gpus, trusted_rows

NODE_FILE = "gpuprobe-%s.prom"        # on the node, per mode (the file name node_metrics accepts)
MODES = ("audit", "full")              # verify_node's modes (a post-check is a full run)
RUN_MODES = ("audit", "full", "postcheck")
HEALTH_PREFIX = "host.health."
UNREACHABLE, RUN_FAILED = "UNREACHABLE", "RUN_FAILED"
STATES = VERDICTS + (UNREACHABLE, RUN_FAILED)
OTHER = "other"
_TOKEN = re.compile(r"^[A-Za-z0-9_.:/-]{1,160}$")
_SHORT = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")
_CHECK = re.compile(r"^host\.health\.[a-z0-9_]{1,64}$")
_UUID = re.compile(r"\b((?:GPU|MIG)-[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12})\b")
_INDEX = re.compile(r"^GPU ([0-9]{1,4})\b")

# name -> (type, help, unit or None). Gauges only: OpenMetrics' stateset and info types are not read by Prometheus'
# text parser (node_exporter's textfile collector, promtool check metrics)
FAMILIES = {
    "gpuprobe_node_verified": (
        "1 when the node's last run proved a CUDA kernel in a container on every requested GPU (COMPUTE_VERIFIED), else 0"),
    "gpuprobe_node_checked": (
        "1 when the last run reached the node and its verify run finished (it has a verdict), 0 when it could not be "
        "checked (unreachable, no usable Python, the node-side call failed)"),
    "gpuprobe_node_verdict": "The node's verdict in its last run: 1 for the verdict it reached, 0 for the others",
    "gpuprobe_node_state": "The host's state in the run (its verdict, or UNREACHABLE, RUN_FAILED): 1 for the state",
    "gpuprobe_node_failure_info": (
        "The last run's failure: the failing layer, the failure signature and where it points, and the runtime the "
        "verdict speaks for (empty when none); always 1"),
    "gpuprobe_layer_status": "Each layer's status in the node's last run (PASS, WARN, FAIL, NOT_RUN): 1 for the status",
    "gpuprobe_node_last_run_timestamp_seconds": "When the node's last run was decided (Unix time)",
    "gpuprobe_node_run_duration_seconds": "How long the node's verification took on the controller's clock (its node-side calls)",
    "gpuprobe_gpu_verified": (
        "1 when a CUDA kernel was verified inside a container on this GPU in the last run (and no earlier layer failed), "
        "else 0"),
    "gpuprobe_gpu_health_findings": "The GPU's health checks that found something in the last run, by status (FAIL, WARN)",
    "gpuprobe_gpu_health_finding": "A GPU health check that found something in the last run (FAIL or WARN); always 1",
    "gpuprobe_fleet_hosts": "The run's hosts by state",
    "gpuprobe_fleet_gpus": "The run's GPUs: verified in a container, failed, neither (busy, not reached, not requested)",
    "gpuprobe_fleet_report_timestamp_seconds": "When the fleet report of the run was made (Unix time)",
}
UNITS = {"gpuprobe_node_last_run_timestamp_seconds": "seconds", "gpuprobe_node_run_duration_seconds": "seconds",
         "gpuprobe_fleet_report_timestamp_seconds": "seconds"}


def escape(value):
    """A label value as the text formats want it: every control character first written as a visible escape
    (``_escape.controls``: ESC, BEL, CR, a newline, bidi and zero-width characters), then backslash and double quote
    escaped. The value then holds the escape as text (a host name with ESC reads ``\\x1b``): a file printed on a
    terminal or shown by a dashboard acts on nothing."""
    return controls(value).replace("\\", "\\\\").replace('"', '\\"')


def bounded(value, allowed=None, pattern=None):
    """``value`` when it is one of ``allowed`` or matches ``pattern``, "" when empty or None, else ``other``."""
    if value is None or value == "":
        return ""
    value = str(value)
    if allowed is not None and value in allowed:
        return value
    if pattern is not None and pattern.match(value):
        return value
    return OTHER


def _number(value):
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    value = float(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(value)


def _labels(labels):
    return "{%s}" % ",".join('%s="%s"' % (k, escape(v)) for k, v in labels) if labels else ""


def render(samples, openmetrics=False):
    """The text of ``samples``: (family, labels as ((name, value), ...), value) in any order, grouped by family in the
    order of FAMILIES, each with its HELP and TYPE (and UNIT in OpenMetrics)."""
    by_family = {}
    for family, labels, value in samples:
        if family not in FAMILIES:
            raise KeyError("not a gpuprobe metric family: %s" % family)
        by_family.setdefault(family, []).append("%s%s %s\n" % (family, _labels(labels), _number(value)))
    out = []
    for family, help_text in FAMILIES.items():
        if family not in by_family:
            continue
        out.append("# HELP %s %s.\n" % (family, help_text.replace("\\", "\\\\").replace("\n", " ")))
        out.append("# TYPE %s gauge\n" % family)
        if openmetrics and family in UNITS:
            out.append("# UNIT %s %s\n" % (family, UNITS[family]))
        out.extend(by_family[family])
    if openmetrics:
        out.append("# EOF\n")
    return "".join(out)


_UUID_WHOLE = re.compile(r"^(?:GPU|MIG)-[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}$")


def _gpu_labels(uuid, index):
    """The GPU's labels: its index, and its UUID when it is one (else empty), also as ``UUID``, dcgm-exporter's name for
    it, so that a query joins the two exporters' GPU series ``on(UUID)`` without label_replace (docs/usage.md)."""
    index = index if isinstance(index, int) and not isinstance(index, bool) and 0 <= index < 100000 else None
    uuid = str(uuid) if uuid and _UUID_WHOLE.match(str(uuid)) else ""
    return (("gpu", "" if index is None else str(index)), ("uuid", uuid), ("UUID", uuid))


def _health_subject(subject):
    """(uuid, index) of a health check's subject ("GPU 0 GPU-…"), or None when it is not a GPU (the kernel log, dcgmi)."""
    text = str(subject or "")
    uuid = _UUID.search(text)
    index = _INDEX.match(text)
    if not uuid and not index:
        return None
    return (uuid.group(1) if uuid else None, int(index.group(1)) if index else None)


def _runtime(entry):
    names = [str((r or {}).get("runtime") or "") for r in entry.get("runtimes") or [] if isinstance(r, dict)]
    if not names and isinstance(entry.get("runtime"), dict):
        names = [str(entry["runtime"].get("name") or "")]
    names = sorted(set(bounded(n, pattern=_SHORT) for n in names if n))
    return ",".join(names)


def node_samples(entry, mode, finished_at, duration=None, host=None):
    """The series of one host's report entry (``model.host_entry`` or a full entry of the report), in run mode ``mode``
    (RUN_MODES), decided at ``finished_at`` (Unix time). ``host``: the host label (the fleet file), or None (the node's
    own file)."""
    base = (("host", host),) if host is not None else ()
    base += (("mode", bounded(mode, RUN_MODES)),)
    verdict = bounded(entry.get("verdict"), VERDICTS)
    checked = not entry.get("unverifiable")
    out = [("gpuprobe_node_checked", base, 1 if checked else 0),
           ("gpuprobe_node_verified", base, 1 if checked and verdict == COMPUTE_VERIFIED else 0)]
    out += [("gpuprobe_node_verdict", base + (("verdict", v),), 1 if v == verdict else 0) for v in VERDICTS]
    if host is not None:
        state = entry.get("state")
        state = state if state in STATES else (RUN_FAILED if not checked and entry.get("reachable", True) else
                                               UNREACHABLE if not checked else verdict)
        out.append(("gpuprobe_node_state", base + (("state", bounded(state, STATES)),), 1))
    layers = ("host", "cdi", "runtime", "compute")
    out.append(("gpuprobe_node_failure_info", base + (
        ("failing_layer", bounded(entry.get("failing_layer"), layers)),
        ("signature", bounded(entry.get("signature"), pattern=_TOKEN)),
        ("points_to", bounded(entry.get("points_to"), pattern=_SHORT)),
        ("runtime", _runtime(entry))), 1))
    for layer in LAYERS:
        status = ((entry.get("layers") or {}).get(layer) or {}).get("status")
        out.append(("gpuprobe_layer_status", base + (("layer", layer), ("status", bounded(status, STATUSES))), 1))
    out.append(("gpuprobe_node_last_run_timestamp_seconds", base, float(finished_at)))
    if duration is not None:
        out.append(("gpuprobe_node_run_duration_seconds", base, round(float(duration), 3)))
    # verified as the report counts it (_report.gpus): only a GPU the host layer lists, proven by the probe
    trusted, listed = trusted_rows(entry), listed_gpus(entry)
    for gpu in entry.get("gpus") or []:
        if not isinstance(gpu, dict) or not gpu.get("expected"):
            continue
        labels = base + _gpu_labels(gpu.get("uuid"), gpu.get("index"))
        out.append(("gpuprobe_gpu_verified", labels, 1 if gpu_proven(gpu, listed, trusted) else 0))
    found = {}
    checks = ((entry.get("layers") or {}).get("host") or {}).get("checks") or []
    for check in checks:
        if not isinstance(check, dict) or not str(check.get("id") or "").startswith(HEALTH_PREFIX):
            continue
        subject = _health_subject(check.get("subject"))
        if subject is None:
            continue
        key = _gpu_labels(*subject)
        counts = found.setdefault(key, {FAIL: 0, WARN: 0})
        if check.get("status") in (FAIL, WARN):
            counts[check["status"]] += 1
            out.append(("gpuprobe_gpu_health_finding", base + key + (
                ("check", bounded(check.get("id"), pattern=_CHECK)), ("status", check["status"])), 1))
    for key, counts in found.items():
        out += [("gpuprobe_gpu_health_findings", base + key + (("status", status),), counts[status]) for status in (FAIL, WARN)]
    return out


def node_text(entry, mode, finished_at, duration=None):
    """The node's own textfile (no host label): Prometheus text format, for node_exporter's textfile collector."""
    return render(node_samples(entry, mode, finished_at, duration))


def fleet_samples(report, full, mode, generated_at, durations=None):
    """Every host's series (``full(name)``: the host's full entry; ``report["hosts"]``: the brief ones, in name
    order) and the fleet's counts."""
    durations = durations or {}
    out = []
    for name in report["hosts"]:
        out += node_samples(full(name), mode, generated_at, durations.get(name), host=name)
    base = (("mode", bounded(mode, RUN_MODES)),)
    by_state = (report.get("counts") or {}).get("by_state") or {}
    out += [("gpuprobe_fleet_hosts", base + (("state", state),), int(by_state.get(state, 0))) for state in STATES]
    gpus = (report.get("summary") or {}).get("gpus") or {}
    out += [("gpuprobe_fleet_gpus", base + (("status", status),), int(gpus.get(status) or 0))
            for status in ("verified", "failed", "not_run")]
    out.append(("gpuprobe_fleet_report_timestamp_seconds", base, float(generated_at)))
    return out


def fleet_text(report, full, mode, generated_at, durations=None):
    """The fleet's OpenMetrics file."""
    return render(fleet_samples(report, full, mode, generated_at, durations), openmetrics=True)


__all__ = ["NODE_FILE", "MODES", "FAMILIES", "escape", "bounded", "render", "node_samples", "node_text", "fleet_samples",
           "fleet_text", "NOT_RUN"]
