# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: the fleet report's model for gpuprobe.layers: aggregation, grouping, comparison.

This file is not public API; it may change without notice. Pure functions only (no I/O): the action
plugin ``gpuprobe.layers.fleet_report`` collects the per-host inputs from hostvars one host at a time, counts each
host's entry in a ``Fleet`` (what ``build_report`` does with every entry in memory) and writes the renderers of
``_report_render`` (Jinja2 templates for HTML and Markdown) to the files piece by piece. The JSON rendering of
``build_report``'s dict is the source of truth; every other format is rendered from it. The verdict of every host
comes from ``_verdict.node_verdict`` (never decided here); a layer without a record becomes a ``_result.not_run``
record carrying the reason.

The JSON report schema (``SCHEMA_VERSION``) is documented in docs/usage.md ("Reading the report").
"""

from __future__ import annotations

import copy
import json
import re

from ansible_collections.gpuprobe.layers.plugins.module_utils._common.args import FORMATS
from ansible_collections.gpuprobe.layers.plugins.module_utils._host.health.reasons import NotRead, is_gpu
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report.sentences import drift_hosts, drift_lines, gpu_line, plural, unknown_gpus
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import (
    FAIL, LAYERS, NOT_RUN, ORDERED_LAYERS, PASS, WARN, not_run,
)
from ansible_collections.gpuprobe.layers.plugins.module_utils._verdict.verdict import (
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


# ---------------------------------------------------------------------------------------------------
# the state of a host and the cause it is grouped by

UNREACHABLE = "UNREACHABLE"     # a state of its own: the node was never looked at (its verdict is INCONCLUSIVE)
RUN_FAILED = "RUN_FAILED"       # the verify run stopped on the node (no usable Python, a node-side call failed)
# host states in reading order: what needs a person first
STATES = tuple("FAILED_AT_" + layer.upper() for layer in ORDERED_LAYERS) + (
    UNREACHABLE, RUN_FAILED, INCONCLUSIVE, COMPUTE_VERIFIED)
UNREACHABLE_REASON = "host unreachable"
RUN_FAILED_REASON = "verify run failed before this layer"

# why a node could not be reached, from the connection plugin's message (ssh, paramiko, winrm say it alike)
UNREACHABLE_CAUSES = (
    (r"Could not resolve hostname|Name or service not known|Temporary failure in name resolution|"
     r"nodename nor servname|No address associated", "name does not resolve (DNS)"),
    (r"Connection refused", "connection refused (no SSH server listening)"),
    (r"No route", "no route to host"),
    (r"Network is unreachable", "network unreachable"),
    (r"Host key verification failed|REMOTE HOST IDENTIFICATION HAS CHANGED", "SSH host key verification failed"),
    (r"Permission denied|Authentication failed|Too many authentication failures", "SSH authentication refused"),
    (r"timed out|Timeout", "connection timed out"),
    (r"Connection reset|Connection closed|closed by remote host|kex_exchange_identification|Broken pipe",
     "the node closed the connection"),
)
RUN_FAILED_CAUSES = (
    (r"malformed record from the node", "malformed record from the node"),
    (r"python[0-9.]*: (?:command )?not found|No such file or directory.*python|[Ii]nterpreter|"
     r"python.*(?:not found|No such file)", "no usable Python on the node"),
    (r"no verify record", "no verify record (the node failed or left during the verify play)"),
    (r"became unreachable or failed during the verify play", "the node left the run during the verify play"),
    (r"timed out|timeout", "the verify task timed out"), (r"MODULE FAILURE", "a node-side module failed (MODULE FAILURE)"),
)
_ADDRESS = re.compile(r"\b(?:\d{1,3}\.){3}\d{1,3}\b|\b(?:[0-9a-fA-F]{1,4}:){2,7}[0-9a-fA-F]{1,4}\b")
_UUID = re.compile(r"\b(?:GPU-|MIG-)?[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b")
_TMP = re.compile(r"/[^\s'\"]*ansible-tmp-[^\s'\"]*")
_PID = re.compile(r"\b(pids?|port) [0-9]+(?:, ?[0-9]+)*")


def normalise_message(text, host=None):
    """A message with what is particular to one node taken out (its name, addresses, UUIDs, pids, temporary
    paths), so that the nodes that failed the same way share it; one line, at most 240 characters."""
    text = " ".join(str(text or "").split())
    if host:
        for name in sorted({str(host), str(host).split(".", 1)[0]}, key=len, reverse=True):
            if len(name) > 1:
                text = text.replace(name, "<host>")
    text = _UUID.sub("<uuid>", text)
    text = _ADDRESS.sub("<address>", text)
    text = _TMP.sub("<tmp>", text)
    text = _PID.sub(lambda m: "%s <n>" % m.group(1), text)
    return text[:237] + "..." if len(text) > 240 else text


def classify(message, causes, host=None):
    """The first cause of ``causes`` ((regex, words) pairs) that ``message`` matches, else the message normalised."""
    for pattern, words in causes:
        if re.search(pattern, str(message or "")):
            return words
    return normalise_message(message, host) or "no message"


def host_state(verdict, unreachable=None, error=None, name=None):
    """(state, cause) of a host. The state is UNREACHABLE, RUN_FAILED (when the run stopped before any layer
    could decide), or the verdict; the cause is what the hosts of one group share: the unreachable or
    run-failed cause (``classify``), the failure signature, or the inconclusive reason normalised."""
    if unreachable:
        return UNREACHABLE, classify(unreachable, UNREACHABLE_CAUSES, name)
    if error and verdict["verdict"] == INCONCLUSIVE:
        return RUN_FAILED, classify(error, RUN_FAILED_CAUSES, name)
    if verdict["verdict"] == COMPUTE_VERIFIED:
        return COMPUTE_VERIFIED, "verified"
    if verdict["signature"]:
        return verdict["verdict"], verdict["signature"]
    return verdict["verdict"], normalise_message(verdict["reason"], name) or "no reason given"


def _state_rank(state):
    return STATES.index(state) if state in STATES else len(STATES)


def group_hosts(entries):
    """The hosts grouped by (state, cause), most pressing state first, then the largest group. Each group:
    id, state, cause, layer, signature, points_to, count, hosts (names), example (the first host) and its
    message (its ``unverifiable`` or its verdict's reason): what every host of the group shares is said here once."""
    groups = {}
    for e in entries:
        key = (e["state"], e["cause"], e.get("points_to"))
        groups.setdefault(key, []).append(e)
    out = []
    for (state, cause, points_to), members in sorted(groups.items(), key=lambda kv: (
            _state_rank(kv[0][0]), -len(kv[1]), str(kv[0][1]), str(kv[0][2]))):
        first = members[0]
        out.append({"id": "g%d" % (len(out) + 1), "state": state, "cause": cause,
                    "layer": first.get("failing_layer"), "signature": first.get("signature"), "points_to": points_to,
                    "count": len(members), "hosts": [m["name"] for m in members], "example": first["name"],
                    "message": first.get("unverifiable") or first.get("reason")})
    return out


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
    driver = _norm((host.get("versions") or {}).get("driver"))
    runtime = _norm(((layers.get("runtime") or {}).get("versions") or {}).get("runtime"))
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


# ---------------------------------------------------------------------------------------------------
# GPU health (the host layer's host.health.* checks, one per GPU and reading)

HEALTH_PREFIX = "host.health."
# what a WARN or FAIL of a health check means for a GPU, in the words of "3 GPUs with pending row remaps"
HEALTH_WORDS = {
    ("host.health.row_remap", WARN): "pending row remaps or memory banks without a spare row",
    ("host.health.row_remap", FAIL): "a row remapping failure",
    ("host.health.ecc_errors", FAIL): "uncorrectable ECC errors since the driver loaded",
    ("host.health.ecc_errors", WARN): "uncorrectable ECC errors in their lifetime",
    ("host.health.ecc_mode", WARN): "ECC off or an ECC mode change pending",
    ("host.health.retired_pages", FAIL): "too many retired pages",
    ("host.health.retired_pages", WARN): "a page retirement pending",
    ("host.health.clock_events", FAIL): "a hardware slowdown active",
    ("host.health.clock_events", WARN): "a software thermal slowdown or an unknown slowdown reason active",
    ("host.health.temperature", FAIL): "a temperature at the slowdown threshold",
    ("host.health.temperature", WARN): "a temperature near the slowdown threshold",
    ("host.health.pcie_link", WARN): "a PCIe link narrower than its maximum",
    ("host.health.pcie_replay", WARN): "PCIe replays above DCGM's limits",
    ("host.health.recovery_action", FAIL): "the driver asking for a reset or a reboot",
    ("host.health.recovery_action", WARN): "the driver asking for a drain or a recovery",
    ("host.health.fabric", FAIL): "an NVLink fabric registration error",
    ("host.health.fabric", WARN): "NVLink fabric registration not completed, or a degraded fabric",
    ("host.health.xid", FAIL): "Xid errors that need a reset (48, 63, 64, 79, 94, 95)",
    ("host.health.xid", WARN): "other Xid events",
    ("host.health.nvlink", FAIL): "NVLink links down",
    ("host.health.nvlink", WARN): "NVLink links inactive or with traffic disabled",
    ("host.health.mig_ecc", FAIL): "uncorrected SRAM errors in a MIG instance",
    ("host.health.dcgm_diag", FAIL): "a failed DCGM diagnostic",
    ("host.health.dcgm_diag", WARN): "a DCGM diagnostic warning or no DCGM result",
}


def health_words(check_id, status):
    return HEALTH_WORDS.get((check_id, status)) or "%s %s" % (check_id, status)


def health_checks(entry):
    """The host.health.* checks of a host entry's host layer."""
    return [c for c in ((entry["layers"].get("host") or {}).get("checks") or [])
            if isinstance(c, dict) and str(c.get("id") or "").startswith(HEALTH_PREFIX)]


class HealthTally(object):
    """The fleet's GPU health gathered one host entry at a time (``add``, each host once, in name order); ``summary``
    is ``health_summary``'s result. Only counts are kept per GPU: a GPU is (host, subject), so one host's distinct
    subjects add up across hosts."""

    def __init__(self):
        self.found, self.not_read, self.gpus_read, self.hosts_read = {}, NotRead(), 0, 0

    def add(self, e):
        found, read, checks = {}, set(), health_checks(e)
        for c in checks:
            if c.get("status") in (FAIL, WARN):
                found.setdefault((c["id"], c["status"]), set()).add(c.get("subject"))
            if c.get("status") != NOT_RUN and is_gpu(c.get("subject")):   # a GPU, not the kernel log or dcgmi
                read.add(c.get("subject"))
        for key, gpus in found.items():
            item = self.found.setdefault(key, {"gpus": 0, "hosts": []})
            item["gpus"] += len(gpus)
            item["hosts"].append(e["name"])
        # why each reading was NOT_RUN (not asked, not exposed, an error, ...): _health_reasons
        self.not_read.add([c for c in checks if c.get("status") == NOT_RUN])
        self.gpus_read += len(read)
        self.hosts_read += 1 if read else 0

    def summary(self):
        findings = [{"check": cid, "status": status, "gpus": item["gpus"], "hosts": len(item["hosts"]),
                     "words": health_words(cid, status), "host_names": item["hosts"]}
                    for (cid, status), item in self.found.items()]
        findings.sort(key=lambda f: (f["status"] != FAIL, -f["gpus"], f["check"]))
        return {"findings": findings, "not_read": self.not_read.by_check(), "not_read_why": self.not_read.summary(),
                "gpus_read": self.gpus_read, "hosts_read": self.hosts_read}


def health_summary(entries):
    """The fleet's GPU health: findings (one per health check and status WARN/FAIL: the GPUs (subjects) and hosts
    concerned, FAIL first, then the most GPUs), not_read (per check: the subjects whose reading was NOT_RUN), not_read_why
    (the same per reason: _health_reasons.NotRead.summary) and how many GPUs and hosts had any health reading."""
    tally = HealthTally()
    for e in entries:
        tally.add(e)
    return tally.summary()


def health_line(finding):
    """'3 GPUs with pending row remaps on 2 hosts'."""
    return "%s with %s on %s" % (plural(finding["gpus"], "GPU"), finding["words"], plural(finding["hosts"], "host"))


def host_entry(name, records=None, unreachable=None, error=None, pins=None, extra=None, runtimes=None):
    """The report entry of one host: verdict (from ``node_verdict``), every layer record, drift. ``runtimes``: the
    per-runtime results of a node verified through several runtimes (verify_node's ``runtimes``): the verdict then
    speaks for every one of them, and the entry's ``runtimes`` rows say which were proven."""
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
        "drift": drift,
        "runtime": verdict.get("runtime"),
        "runtimes": verdict.get("runtimes") or [],
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


def _k8s_nodes(k8s_records, nodes=None):
    """k8s node name -> the first of ``k8s_records`` (in order) to list it, added to ``nodes`` when given."""
    nodes = {} if nodes is None else nodes
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
    """What the scheduler is told about a node, on either GPU path (device plugin or DRA), against what the node
    verdict proved.

    ``verdicts``: {host: verdict (string, or a node_verdict dict, whose per-GPU rows say which GPUs computed)};
    ``k8s_records``: k8s layer records (their evidence.nodes, matched to hosts by name or short name); ``drivers``:
    {host: the host layer's driver version}. Returns findings {host, k8s_node, finding, severity, observed,
    message}: those of ``_k8s.advertising_findings`` (allocatable_on_unverified_node, dra_device_compute_failed,
    dra_devices_on_unverified_node, nothing_advertised), and stale_driver_label: the feature labels' driver
    version differs from the host's (WARN).
    """
    return _crosscheck_nodes(verdicts, _k8s_nodes(k8s_records), drivers)


def _crosscheck_nodes(verdicts, nodes, drivers=None):
    """``k8s_crosscheck`` against the k8s nodes of the records (``_k8s_nodes``)."""
    from ansible_collections.gpuprobe.layers.plugins.module_utils._k8s.layer import advertising_findings  # pylint: disable=import-outside-toplevel

    drivers = drivers or {}
    findings = []
    for host in sorted(verdicts):
        node = _k8s_node_of(host, nodes)
        if node is None:
            continue
        findings.extend(advertising_findings(host, verdicts[host], node))
        label = label_driver_version(node.get("gpu_labels"))
        driver = drivers.get(host)
        if label and driver and str(driver) != label:
            findings.append({"host": host, "k8s_node": node["name"], "finding": "stale_driver_label", "severity": WARN,
                             "observed": "feature label driver %s, host driver %s" % (label, driver),
                             "message": "stale labels: GPU feature discovery has not relabelled the node since the "
                                        "driver changed"})
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
            "unknown": unknown_gpus(entry) if not keys else None, "none_listed": not keys and not unknown_gpus(entry),
            "mig_instances": {"total": len(instances), "verified": inst_verified, "failed": inst_failed,
                              "not_run": len(instances) - inst_verified - inst_failed},
            "mig_gpus": sum(1 for g in gpus if g.get("mig"))}


# what a host's brief entry keeps of its full entry (Fleet): every figure of the fleet and the hosts table, not its
# evidence; its layers keep only their status and reason
BRIEF_KEYS = ("name", "verdict", "failing_layer", "signature", "points_to", "reason", "state", "cause", "reachable",
              "error", "unverifiable", "drift")


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
    """The host entry of one item of ``build_report``'s ``hosts``."""
    return host_entry(item["name"], item.get("records"), item.get("unreachable"), item.get("error"), item.get("pins"),
                      item.get("extra"), item.get("runtimes"))


def _gpu_totals():
    return {"total": 0, "verified": 0, "failed": 0, "not_run": 0, "hosts_with_failed_gpu": 0, "hosts_with_unknown_gpus": 0,
            "unknown_gpus_why": {}, "hosts_without_gpus": 0, "mig_gpus": 0, "mig_instances": dict((k, 0) for k in ("total", "verified", "failed", "not_run"))}


class Fleet(object):
    """The fleet report gathered one host entry at a time, so that what is kept grows by a brief entry per host.

    ``add`` every host's full entry (``host_entry``) once, in name order; ``report`` then gives the report whose
    ``hosts`` are the brief entries (``brief``, with their group): a host's full entry is the caller's to keep
    (``build_report`` keeps them in memory, the fleet_report action in a file) and to give the renderers, with
    ``grouped``, when they write that host's part.
    """

    def __init__(self):
        self.hosts = {}
        self.health = HealthTally()
        self.breakdown = dict((dim, {}) for dim in BREAKDOWN)
        self.gpus = _gpu_totals()
        self.k8s_nodes = {}
        self.drivers = {}

    def add(self, entry):
        self.hosts[entry["name"]] = brief(entry)
        self.health.add(entry)
        _tally_breakdown(self.breakdown, entry)
        c = gpu_counts(entry)
        for key in ("total", "verified", "failed", "not_run", "mig_gpus"):
            self.gpus[key] += c[key]
        self.gpus["hosts_with_failed_gpu"] += 1 if c["failed"] else 0
        self.gpus["hosts_with_unknown_gpus"] += 1 if c["unknown"] else 0
        self.gpus["hosts_without_gpus"] += 1 if c["none_listed"] else 0
        if c["unknown"]:
            self.gpus["unknown_gpus_why"][c["unknown"]] = self.gpus["unknown_gpus_why"].get(c["unknown"], 0) + 1
        for key in self.gpus["mig_instances"]:
            self.gpus["mig_instances"][key] += c["mig_instances"][key]
        _k8s_nodes([entry["layers"]["k8s"]], self.k8s_nodes)
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
        crosscheck = _crosscheck_nodes(dict((e["name"], e["verdict"]) for e in ordered), self.k8s_nodes, self.drivers)
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
                "by_state": dict(sorted(_count(e["state"] for e in ordered).items(), key=lambda kv: _state_rank(kv[0]))),
                "by_verdict": _count(e["verdict"] for e in ordered),
                "by_failing_layer": _count(e["failing_layer"] for e in ordered if e["failing_layer"]),
                "by_signature": _count(e["signature"] for e in ordered if e["signature"]),
                "by_layer_status": layer_status,
            },
            "groups": group_hosts(ordered),
            "breakdown": _sorted_breakdown(self.breakdown),
            "health": self.health.summary(),
            "drift": drift,
            "k8s_crosscheck": crosscheck,
            "hosts": dict((e["name"], e) for e in ordered),
        }
        report["counts"]["drift_by_pin"] = dict(
            (key, _count(d["state"] for d in drift if d["key"] == key)) for key in sorted(set(d["key"] for d in drift)))
        for group in report["groups"]:
            for name in group["hosts"]:
                report["hosts"][name]["group"] = group["id"]
        report["summary"].update(("drift_" + state, n) for state, n in drift_hosts(drift).items())
        report["summary"]["k8s_findings"] = len(crosscheck)
        report["summary"]["gpus"] = copy.deepcopy(self.gpus)
        if drills is not None:
            report["drills"] = list(drills)
            report["summary"]["drills"] = len(drills)
            report["summary"]["drills_matched"] = sum(1 for d in drills if d.get("match"))
        return report


def build_report(hosts, generated_at, run=None, drills=None):
    """The fleet report (a JSON-serialisable dict, schema ``SCHEMA_VERSION``), every host's full entry in memory.

    ``hosts`` is a list of dicts with keys name, records (layer -> record), unreachable (reason or
    None), error (reason or None), pins (gpuprobe_pins or None), runtimes (verify_node's per-runtime results when
    the node was verified through several runtimes, else None). ``drills`` is an optional list of
    fault-drill rows (see ``drill_row``).
    """
    entries = {}
    for item in hosts:
        entries[item["name"]] = entry_of(item)
    fleet = Fleet()
    for name in sorted(entries):
        fleet.add(entries[name])
    report = fleet.report(generated_at, run=run, drills=drills)
    report["hosts"] = dict((e["name"], grouped(e, report["hosts"][e["name"]])) for e in (entries[n] for n in sorted(entries)))
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
        lines.append("  %s %s: %s%s (e.g. %s)" % (plural(g["count"], "host"), g["state"], g["cause"], points, g["example"]))
    for f in (report.get("health") or {}).get("findings") or []:
        lines.append("  health %s: %s" % (f["status"], health_line(f)))
    lines.extend("  " + line for line in drift_lines(s, (report.get("counts") or {}).get("drift_by_pin"), report.get("drift")))
    return lines


STATE_WORDS = {COMPUTE_VERIFIED: "verified", UNREACHABLE: "unreachable", RUN_FAILED: "run failed",
               INCONCLUSIVE: "inconclusive"}


def state_words(state):
    """'verified', 'failed at cdi', 'unreachable', ... (a state as a person says it)."""
    if str(state).startswith("FAILED_AT_"):
        return "failed at %s" % state[len("FAILED_AT_"):].lower()
    return STATE_WORDS.get(state, str(state))


def fleet_line(report):
    """'500 hosts: 480 verified, 12 failed at cdi, 8 unreachable' (zero counts left out)."""
    s = report["summary"]
    states = (report.get("counts") or {}).get("by_state") or {}
    parts = ["{0:,} {1}".format(n, state_words(state)) for state, n in states.items() if n]
    return "%s: %s" % (plural(s["hosts"], "host"), ", ".join(parts) or "none")


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


def _compact(value):
    return json.dumps(value, separators=(",", ":"), sort_keys=False, default=str)


def json_chunks(report, full=None):
    """The report's JSON (``render_json``) in pieces, one host at a time: ``full`` (name -> that host's full entry,
    ``grouped``) gives the entries when ``report``'s hosts are brief (Fleet.report), else they are its own."""
    full = full or report["hosts"].__getitem__
    yield "{\n"
    for i, (key, value) in enumerate(report.items()):
        if i:
            yield ",\n"
        if key == "hosts" and isinstance(value, dict):
            if not value:
                yield '"hosts": {}'
                continue
            yield '"hosts": {\n'
            for j, name in enumerate(value):
                yield "%s  %s: %s" % (",\n" if j else "", _compact(name), _compact(full(name)))
            yield "\n}"
        else:
            yield "%s: %s" % (_compact(key), _compact(value))
    yield "\n}\n"


def render_json(report, full=None):
    """The report's JSON: the source of truth, from which every other rendering is made. One top-level key per line
    and one host per line under "hosts" (grep and diff find a host's line; the C encoder writes it: a 2,000-host report
    is ~6x faster to write and ~40% smaller than indented JSON, docs/performance.md)."""
    return "".join(json_chunks(report, full))


# ---------------------------------------------------------------------------------------------------
# the options of the fleet_report action (shared by the action plugin and its documentation stub module)
