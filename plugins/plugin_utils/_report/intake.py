# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE (controller): where a node's records enter the controller; not public API.

A node is not trusted (docs/safety.md, "What the controller accepts from a node"). Everything it returns passes
``admit`` before anything else reads it: first the per-node cap (``_intake_limits``: total size, checks in one record,
string length), then the result contract (``_result.validate_record``, and the layer a record is given under),
the types of every field the report reads and every number (finite, within 64 bits; ``shape_errors``). What the verdict asks beyond the shape (a runtime PASS
that compared an edit, the statuses of the compute record's GPU rows) stays the verdict's: INCONCLUSIVE "malformed
record", as docs/contract.md says. A node whose records do not pass
is RUN_FAILED with ``MALFORMED`` and the violations named; its records are dropped, never read further, and every other
node is reported as usual.

Records are also bound to the run that asked for them (``run_errors``, where the run is known: verify_node as the
node's result arrives, fleet_report for a result that names its run): every layer's ``started_at`` lies between the
run's start and now, each widened by the allowed clock skew (``record_limits.max_clock_skew``), and every name the
records give to what the run made (the runtime record's run id, the probe containers' names, the CDI devices of the
self-built kind, the self-built spec's kind and file) is this run's. A node whose records are another run's is
RUN_FAILED with ``OTHER_RUN`` and why, never its verdict.
"""

from __future__ import annotations

import datetime
import math
import re

from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi.spec import VENDOR as _SELF_BUILT_VENDOR, run_kind, spec_file_name
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.limits import DEFAULT_LIMITS, cut, over_limits
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import LAYERS, validate_record

MALFORMED = "malformed record from the node"
OTHER_RUN = "record of another run from the node"
MAX_NAMED = 8          # violations named in the message (then "and N more")

_TEXT = (str, type(None))
_NUMBER = (int, float)
# every number a node honestly reports (a count, an index, a size, an inode, a duration) fits a 64-bit integer, signed
# or not; a float beyond that, NaN or an infinity is no reading, and NaN/Infinity cannot be written as strict JSON
INT_RANGE = (-(1 << 63), (1 << 64) - 1)
NUMBER_BOUND = float(1 << 64)
NUMBER_WORDS = "the 64-bit range"

# the record's own fields the report reads, with the types it reads them as (None allowed everywhere: not said)
RECORD_TYPES = (("reason", _TEXT, "a string"), ("signature", _TEXT, "a string"), ("started_at", _TEXT, "a string"))
CHECK_TYPES = (("id", (str,), "a string"), ("subject", _TEXT, "a string"), ("expected", _TEXT, "a string"),
               ("observed", _TEXT, "a string"), ("hint", _TEXT, "a string"), ("runtime", _TEXT, "a string"))

# (layer or None for every layer, path in its evidence, kind): what the report and the verdict read of the evidence.
# "[]" walks every element of a list; kinds: "map", "list", "maps" (a list of mappings), "text", "number".
EVIDENCE_SHAPES = (
    (None, "container", "map"), (None, "observed", "map"), (None, "expected_edits", "map"),
    ("host", "gpus", "maps"), ("host", "gpus[].mig", "map"), ("host", "gpus[].mig.instances", "maps"),
    ("host", "gpus[].name", "text"), ("host", "nvml", "map"),
    ("cdi", "identity", "map"), ("cdi", "identity.expected_gpus", "maps"), ("cdi", "engines", "maps"),
    ("compute", "gpus", "maps"), ("compute", "gpus[].uuid", "text"), ("compute", "gpus[].model", "text"), ("compute", "gpus[].reason", "text"),
    ("compute", "gpus[].signature", "text"), ("compute", "gpus[].instances", "maps"),
    ("compute", "host_control", "map"), ("compute", "host_control.gpus", "maps"), ("compute", "driver_binding", "map"),
    ("compute", "driver_binding.runs", "maps"), ("compute", "container.cdi_devices", "list"),
    ("k8s", "nodes", "maps"), ("k8s", "nodes[].name", "text"), ("k8s", "nodes[].gpu_labels", "map"),
    ("k8s", "nodes[].status", "map"),
)
_KINDS = {"map": (dict, "a mapping"), "list": (list, "a list"), "maps": (list, "a list of mappings"),
          "text": (_TEXT, "a string"), "number": (_NUMBER, "a number")}


def _walk(value, parts, where):
    """(where, value) of every match of ``parts`` (a path split on '.') under ``value``; absent parts match nothing."""
    if not parts:
        yield where, value
        return
    head, rest = parts[0], parts[1:]
    many = head.endswith("[]")
    key = head[:-2] if many else head
    if not isinstance(value, dict) or value.get(key) is None:
        return
    value = value[key]
    if not many:
        yield from _walk(value, rest, "%s.%s" % (where, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _walk(item, rest, "%s.%s[%d]" % (where, key, i))


def _kind_error(where, value, kind):
    types, words = _KINDS[kind]
    if isinstance(value, bool) and kind == "number" or not isinstance(value, types):
        return "%s is %s, not %s" % (where, type(value).__name__, words)
    if kind == "maps":
        for i, item in enumerate(value):
            if not isinstance(item, dict):
                return "%s[%d] is %s, not a mapping" % (where, i, type(item).__name__)
    return None


def _number_fault(value):
    """Why ``value`` (an int or a float, not a bool) is a number the controller does not read, or None."""
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return "%s, not a finite number" % value
        return None if -NUMBER_BOUND <= value <= NUMBER_BOUND else "%.3g, beyond %s" % (value, NUMBER_WORDS)
    if INT_RANGE[0] <= value <= INT_RANGE[1]:
        return None
    return "an integer of %d bits, beyond %s" % (value.bit_length(), NUMBER_WORDS)


def _any_bad_number(value):
    """Whether ``value`` holds, at any depth, a number ``_number_fault`` refuses (one walk, no paths: the common case)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
        elif isinstance(item, (int, float)) and not isinstance(item, bool) and _number_fault(item):
            return True
    return False


def number_errors(value, where):
    """'<where>.<path> is <why>' for each number of ``value`` that is not finite or is beyond NUMBER_WORDS: what the
    report renders or sums (a duration, a count, an index) and what a strict JSON file can hold. Empty when none."""
    if not _any_bad_number(value):
        return []
    out = []
    stack = [(value, where)]
    while stack and len(out) <= MAX_NAMED:
        item, path = stack.pop()
        if isinstance(item, dict):
            stack.extend((sub, "%s.%s" % (path, key) if path else str(key)) for key, sub in item.items())
        elif isinstance(item, (list, tuple)):
            stack.extend((sub, "%s[%d]" % (path, i)) for i, sub in enumerate(item))
        elif isinstance(item, (int, float)) and not isinstance(item, bool):
            why = _number_fault(item)
            if why:
                out.append("%s is %s" % (path, why))
    return out


def shape_errors(layer, record):
    """The fields of a (contract-valid) record that the report reads as another type than the record gives, and every
    number in it that the report could not render, sum or write as strict JSON (``number_errors``)."""
    errors = []
    for key, types, words in RECORD_TYPES:
        if not isinstance(record.get(key), types):
            errors.append("%s is %s, not %s" % (key, type(record[key]).__name__, words))
    duration = record.get("duration_ms")
    if duration is not None and (isinstance(duration, bool) or not isinstance(duration, _NUMBER)):
        errors.append("duration_ms is %s, not a number" % type(duration).__name__)
    elif duration is not None and not _number_fault(duration) and duration < 0:
        errors.append("duration_ms is %s, not a duration (below 0)" % duration)
    errors.extend(number_errors(record, ""))
    if any(not isinstance(item, str) for item in record["not_proven"]):
        errors.append("not_proven holds something other than strings")
    for i, check in enumerate(record["checks"]):
        for key, types, words in CHECK_TYPES:
            if not isinstance(check.get(key), types):
                errors.append("check %d: %s is %s, not %s" % (i, key, type(check.get(key)).__name__, words))
    for only, path, kind in EVIDENCE_SHAPES:
        if only not in (None, layer):
            continue
        for where, value in _walk(record["evidence"], path.split("."), "evidence"):
            error = _kind_error(where, value, kind)
            if error:
                errors.append(error)
    return errors


def violations(records, runtimes=None):
    """Every way ``records`` (layer -> record, as the node gave them) and ``runtimes`` (verify_node's per-runtime
    entries, or None) break the contract or hold a field of another type than the report reads: a list of texts,
    each naming the layer (empty when they conform)."""
    if records is None:
        records = {}
    if not isinstance(records, dict):
        return ["the records are %s, not a mapping of layer -> record" % type(records).__name__]
    out = []
    for layer, record in records.items():
        if layer not in LAYERS:
            out.append("unknown layer name %r" % (layer,))
            continue
        try:
            errors = validate_record(record)
        except Exception as exc:  # pylint: disable=broad-except  # a record the contract's validator cannot even read
            errors = ["cannot be read (%s: %s)" % (type(exc).__name__, exc)]
        if not errors and record["layer"] != layer:
            errors.append("given as the %s record but its layer is %r" % (layer, record["layer"]))
        out.extend("%s: %s" % (layer, e) for e in (errors or shape_errors(layer, record)))
    if runtimes is not None:
        if not isinstance(runtimes, list):
            return out + ["runtimes is %s, not a list" % type(runtimes).__name__]
        for i, entry in enumerate(runtimes):
            if not isinstance(entry, dict) or not isinstance(entry.get("records"), dict):
                out.append("runtimes[%d] is not a mapping with records" % i)
                continue
            if not isinstance(entry.get("runtime"), _TEXT):
                out.append("runtimes[%d].runtime is not a string" % i)
            out.extend("runtimes[%d].%s" % (i, v) for v in violations(entry["records"]))
    return out


def malformed_message(found, why=MALFORMED):
    """'malformed record from the node: <the first MAX_NAMED violations>[; and N more]' (each clipped, one line)."""
    named = [clip(v, 300) for v in found[:MAX_NAMED]]
    more = "; and %d more" % (len(found) - MAX_NAMED) if len(found) > MAX_NAMED else ""
    return "%s: %s%s" % (why, "; ".join(named), more)


def message(text, limits=None):
    """A node's message (a failed task's msg, an unreachable reason) as the controller keeps it: at most max_string."""
    return None if text is None else cut(str(text), (limits or DEFAULT_LIMITS)["max_string"])


def screen(out, limits=None, run=None):
    """A node-side module's result (node_layers, node_verify) as verify_node may read it: itself when its records
    (``records``, and each of ``probes``' records) pass ``admit`` (with ``run``: are this run's, and, where ``run``'s
    ``self_built`` is true, so is the self-built ``spec`` it names), else a failed result whose msg says why (the records dropped: what was not run is
    NOT_RUN with that message, and the node is RUN_FAILED in the report)."""
    if not isinstance(out, dict):
        return {"failed": True, "msg": "%s: the result is %s, not a mapping" % (MALFORMED, type(out).__name__)}
    probes = out.get("probes")
    runtimes = [p for p in probes if isinstance(p, dict) and p.get("records") is not None] if isinstance(probes, list) else probes
    _records, _runtimes, why = admit(out.get("records"), runtimes if probes is not None else None, limits, run)
    if why is None and run is not None and run.get("self_built") and spec_errors(out.get("spec"), run["id"]):
        why = malformed_message(spec_errors(out.get("spec"), run["id"]), OTHER_RUN)
    if why is None:
        return out
    return {"failed": True, "msg": why}


def clip(text, limit):
    """``text`` on one line, at most ``limit`` characters (cut with '...')."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def admit(records, runtimes=None, limits=None, run=None):
    """(records, runtimes, why) of what a node returned: ``why`` is None when they may be read (returned as they are),
    else the RUN_FAILED message (over the cap: the sizes; not conforming: the violations; with ``run``, a mapping
    with the run's ``id`` and ``started`` (epoch seconds): records that are not this run's, ``run_errors``), and both
    are None."""
    limits = limits or DEFAULT_LIMITS
    over = over_limits({"records": records, "runtimes": runtimes}, limits)
    if over:
        return None, None, "%s: over the cap: %s" % (MALFORMED, "; ".join(over))
    found = violations(records, runtimes)
    if found:
        return None, None, malformed_message(found)
    if run is not None:
        found = run_errors(records, runtimes, run, limits["max_clock_skew"])
        if found:
            return None, None, malformed_message(found, OTHER_RUN)
    return records, runtimes, None


_ISO_UTC = re.compile(r"^(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)$")


def epoch_of(text):
    """Epoch seconds of an ISO-8601 time with a zone (``Z`` or +hh:mm; the contract's ``started_at``), else None."""
    match = _ISO_UTC.match(text) if isinstance(text, str) else None
    if not match:
        return None
    year, month, day, hour, minute, second, fraction, zone = match.groups()
    try:
        moment = datetime.datetime(int(year), int(month), int(day), int(hour), int(minute), int(second),
                                   tzinfo=datetime.timezone.utc)
    except ValueError:
        return None
    offset = 0 if zone == "Z" else (1 if zone[0] == "+" else -1) * (int(zone[1:3]) * 3600 + int(zone[4:6]) * 60)
    return moment.timestamp() - offset + (float("0." + fraction) if fraction else 0.0)


def iso_time(epoch):
    """Epoch seconds as the ISO-8601 UTC time ``epoch_of`` reads back (to the microsecond)."""
    return datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _iso(epoch):
    return datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _container_names(layer, evidence):
    """(where, name) of every probe container a runtime or compute record names."""
    if layer == "runtime":
        container = evidence.get("container") if isinstance(evidence.get("container"), dict) else {}
        if container.get("name") is not None:
            yield "evidence.container.name", container["name"]
        isolation = evidence.get("isolation") if isinstance(evidence.get("isolation"), dict) else {}
        for i, item in enumerate(isolation.get("containers") if isinstance(isolation.get("containers"), list) else []):
            if isinstance(item, dict) and item.get("name") is not None:
                yield "evidence.isolation.containers[%d].name" % i, item["name"]
    elif layer == "compute":
        container = evidence.get("container") if isinstance(evidence.get("container"), dict) else {}
        if container.get("container_name") is not None:
            # several containers (per_device) are named as one text, "a, b"
            for name in str(container["container_name"]).split(", "):
                yield "evidence.container.container_name", name
        for i, item in enumerate(evidence.get("containers") if isinstance(evidence.get("containers"), list) else []):
            if isinstance(item, dict) and item.get("container_name") is not None:
                yield "evidence.containers[%d].container_name" % i, item["container_name"]


def _devices(layer, evidence):
    """(where, name) of every CDI device a runtime or compute record says was requested or given."""
    lists = [("evidence.requested_devices", evidence.get("requested_devices"))]
    container = evidence.get("container") if isinstance(evidence.get("container"), dict) else {}
    if layer == "compute":
        lists += [("evidence.container.cdi_devices", container.get("cdi_devices")),
                  ("evidence.container.requested_devices", container.get("requested_devices"))]
    for where, items in lists:
        for item in items if isinstance(items, list) else []:
            yield where, item


def _record_run_errors(layer, record, run, low, high):
    errors = []
    when = epoch_of(record.get("started_at"))
    if when is None:
        errors.append("%s: started_at %r is not an ISO-8601 time with a zone" % (layer, clip(record.get("started_at"), 60)))
    elif not low <= when <= high:
        errors.append("%s: started_at %s is outside this run (%s to %s, clock skew allowed)" % (
            layer, clip(record["started_at"], 60), _iso(low), _iso(high)))
    if layer not in ("runtime", "compute"):
        return errors
    evidence = record["evidence"]
    if layer == "runtime" and (record["status"] != "NOT_RUN" or evidence.get("run_id")) and evidence.get("run_id") != run["id"]:
        errors.append("runtime: evidence.run_id is %r, not this run's %r" % (clip(evidence.get("run_id"), 80), run["id"]))
    prefix = "gpuprobe-%s-" % run["id"]
    names = list(_container_names(layer, evidence))
    for where, name in names:
        if not isinstance(name, str) or not name.startswith(prefix):
            errors.append("%s: %s %r is not a container of this run (%s...)" % (layer, where, clip(name, 80), prefix))
    container = evidence.get("container") if isinstance(evidence.get("container"), dict) else {}
    if layer == "compute" and container.get("executed") and not names:
        errors.append("compute: a container ran (evidence.container.executed) but the record names none")
    kind = run_kind(run["id"])
    for where, device in _devices(layer, evidence):
        if isinstance(device, str) and device.startswith(_SELF_BUILT_VENDOR + "/") and device.split("=", 1)[0] != kind:
            errors.append("%s: %s %r is not of this run's kind %s" % (layer, where, clip(device, 80), kind))
    return errors


def run_errors(records, runtimes, run, skew, now=None):
    """How ``records`` and ``runtimes`` (conforming: ``violations`` found nothing) are not the run ``run`` ({"id":
    its run id, "started": epoch seconds}) asked for: a ``started_at`` before the run's start or after ``now`` (each
    widened by ``skew`` seconds, the clocks' allowed difference) or that is no time; a runtime record that ran (or names
    a run id) naming another run id; a probe container not named gpuprobe-<run id>-...; a compute record whose container
    ran naming none; a CDI device of the self-built vendor (gpuprobe.local) of another kind than this run's."""
    now = now if now is not None else datetime.datetime.now(datetime.timezone.utc).timestamp()
    low, high = run["started"] - skew, now + skew
    out = []
    for layer, record in (records or {}).items():
        out.extend(_record_run_errors(layer, record, run, low, high))
    for i, entry in enumerate(runtimes or []):
        for layer, record in entry["records"].items():
            out.extend("runtimes[%d].%s" % (i, e) for e in _record_run_errors(layer, record, run, low, high))
    return out


def spec_errors(spec, run_id):
    """How the self-built spec a node says it wrote (node_layers' and node_verify's ``spec``) is not this run's."""
    if not isinstance(spec, dict):
        return []
    errors = []
    if spec.get("kind") is not None and spec.get("kind") != run_kind(run_id):
        errors.append("spec: kind %r is not this run's %s" % (clip(spec.get("kind"), 80), run_kind(run_id)))
    path = spec.get("path")
    if path is not None and (not isinstance(path, str) or path.rsplit("/", 1)[-1] != spec_file_name(run_id)):
        errors.append("spec: path %r is not this run's file %s" % (clip(path, 120), spec_file_name(run_id)))
    return errors
