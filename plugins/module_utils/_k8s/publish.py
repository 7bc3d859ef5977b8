# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: publish each node's verdict where the cluster reads it: a Node condition, optionally a Node label.
Not public API.

Opt-in (module gpuprobe.layers.k8s_publish). The condition goes through the Node's ``status`` subresource as a
strategic merge patch (``kubectl patch node N --subresource=status --type=strategic``): Node ``status.conditions``
merges by ``type`` (patchMergeKey), so the patch replaces this one condition and leaves the kubelet's (Ready,
MemoryPressure, ...) and other writers' conditions alone, the way node-problem-detector writes its own. The label
is a merge patch of ``metadata.labels`` with one key. Nothing else is written: no Pod, no taint, no spec (the
command allowlist in _common/allowlist.py refuses any other patch). Only what this run decided is written (``why_kept``:
True for COMPUTE_VERIFIED, False for FAILED_AT_<LAYER>, an audit only its host or cdi failure), and only on the
Node the host is exactly (``match_node`` or the explicit ``node_names``). ``plan`` is pure; ``publish`` reads the Nodes once, plans,
and writes (or, in check mode, only returns what it would write), a few Nodes at a time within an overall deadline
and stopping after consecutive timeouts. A write that fails, or is not made, is returned as an error. With
``diff``, ``publish`` also returns Ansible's diff: per Node written (or, in check mode, to be written), the condition
and label it had and the ones written.
"""

from __future__ import annotations

import concurrent.futures
import datetime
import json
import re
import threading
import time

from ansible_collections.gpuprobe.layers.plugins.module_utils._k8s.catalogue import DEFAULT_TIMEOUT
from ansible_collections.gpuprobe.layers.plugins.module_utils._k8s.kubectl import _items, _kubectl_json, kubectl_base, resolve_kubectl
from ansible_collections.gpuprobe.layers.plugins.module_utils._k8s.nodes import match_node
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.allowlist import node_condition_type_refused, reserved_prefix
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.run import first_line, last_line, run

CONDITION_TYPE = "GPUComputeVerified"
COMPUTE_VERIFIED = "COMPUTE_VERIFIED"
MESSAGE_LIMIT = 1024
_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?"
_LABEL_KEY = re.compile(r"^(?:(?P<prefix>[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*)/)?(?P<name>%s)$" % _NAME)
_LABEL_VALUE = re.compile(r"^(%s)?$" % _NAME)
_CONDITION_TYPE = re.compile(r"^(?:[a-z0-9.-]+/)?[A-Za-z][A-Za-z0-9_.-]*$")


def label_key_error(key):
    """Why ``key`` is not a valid label key (prefix a DNS subdomain <= 253, name <= 63), or None."""
    match = _LABEL_KEY.match(key or "")
    if not match:
        return "label key %r is not a qualified name ([prefix/]name, name [A-Za-z0-9][-A-Za-z0-9_.]*)" % key
    if len(match.group("name")) > 63 or len(match.group("prefix") or "") > 253:
        return "label key %r is too long (name <= 63, prefix <= 253 characters)" % key
    if reserved_prefix(key):
        return "label key %r is in the namespace %s reserved for Kubernetes (kubernetes.io/, *.kubernetes.io/, k8s.io/, " \
               "*.k8s.io/): use a prefix of your own, such as gpuprobe.layers/" % (key, reserved_prefix(key))
    return None


def condition_type_error(value):
    """Why ``value`` may not be the published condition type (not a CamelCase name; the kubelet's own Ready,
    MemoryPressure, DiskPressure, PIDPressure, NetworkUnavailable; a reserved namespace), or None."""
    if not _CONDITION_TYPE.match(value or ""):
        return "condition type %r is not a CamelCase name (optionally prefixed: example.com/Name)" % value
    return node_condition_type_refused(value)


def _verdict_fields(entry, signature=None):
    if isinstance(entry, dict):
        return (entry.get("verdict") or "INCONCLUSIVE", entry.get("signature") or signature, entry.get("points_to"),
                entry.get("reason"))
    return (str(entry or "INCONCLUSIVE"), signature, None, None)


def condition_status(verdict):
    """True: the node computed on its GPUs; False: it failed at a layer; Unknown: not verified either way."""
    if verdict == COMPUTE_VERIFIED:
        return "True"
    return "False" if str(verdict).startswith("FAILED_AT_") else "Unknown"


def build_condition(entry, now, previous=None, condition_type=CONDITION_TYPE, signature=None, run_id=None):
    """The Node condition for one verdict. ``lastTransitionTime`` stays the previous one while the status does not
    change (the condition convention); ``lastHeartbeatTime`` is ``now``."""
    verdict, signature, points_to, reason = _verdict_fields(entry, signature)
    status = condition_status(verdict)
    parts = ["gpuprobe.layers verdict %s" % verdict]
    if signature:
        parts.append("signature %s" % signature)
    if points_to:
        parts.append("points to %s" % points_to)
    if reason:
        parts.append(str(reason))
    if run_id:
        parts.append("run %s" % run_id)
    message = "; ".join(parts)
    if len(message) > MESSAGE_LIMIT:
        message = message[:MESSAGE_LIMIT - 3] + "..."
    transition = now
    if previous and previous.get("status") == status and previous.get("lastTransitionTime"):
        transition = previous["lastTransitionTime"]
    return {"type": condition_type, "status": status, "reason": re.sub(r"[^A-Za-z0-9_]", "_", verdict) or "Unknown",
            "message": message, "lastHeartbeatTime": now, "lastTransitionTime": transition}


def label_value(verdict):
    """The label value of a verdict (COMPUTE_VERIFIED, FAILED_AT_CDI, ...), cut to 63 characters."""
    value = re.sub(r"[^A-Za-z0-9_.-]", "_", str(verdict))[:63].strip("_.-")
    return value if _LABEL_VALUE.match(value) else "INCONCLUSIVE"


def _previous(node, condition_type):
    for cond in ((node.get("status") or {}).get("conditions") or []):
        if cond.get("type") == condition_type:
            return cond
    return None


def _same(cond, previous):
    return bool(previous) and all(previous.get(k) == cond[k] for k in ("status", "reason", "message"))


MODES = ("full", "postcheck", "audit")
DECIDED = ("FAILED_AT_HOST", "FAILED_AT_CDI", "FAILED_AT_RUNTIME", "FAILED_AT_COMPUTE")
AUDIT_PROVES = ("FAILED_AT_HOST", "FAILED_AT_CDI")


def why_kept(verdict, mode="full"):
    """Why the verdict of one host is not written (its Node keeps its condition and label), or None: it is written.
    A full run or a post-check writes what it decided: COMPUTE_VERIFIED (True) and FAILED_AT_<LAYER> (False). An
    audit runs no container: it writes only the host or cdi failure it proves (False), never True and never a
    verified Node's condition away. INCONCLUSIVE (unreachable, run failed, a layer not run, the GPU busy) is never
    written in any mode."""
    if mode == "audit":
        if verdict in AUDIT_PROVES:
            return None
        return "%s in an audit, which runs no container: an audit writes only FAILED_AT_HOST or FAILED_AT_CDI" % verdict
    if verdict == COMPUTE_VERIFIED or verdict in DECIDED:
        return None
    return "%s: not decided in this run (unreachable, run failed, or a layer not run)" % verdict


def plan(nodes_json, verdicts, now, signatures=None, node_names=None, condition_type=CONDITION_TYPE, label_key=None,
         run_id=None, mode="full"):
    """What to write per host (pure). ``verdicts``: {host: verdict string or node_verdict dict}; ``node_names``:
    {host: Node name}, the explicit map (otherwise the Node is matched exactly by ``match_node``: its name, or the one
    Node whose kubernetes.io/hostname label is the host's name; never a short name); ``mode``: the run's mode
    (``why_kept``). Returns (plans, unmatched, kept): plans [{host, node, condition, previous, label, changed,
    patches}]; unmatched [{host, reason}]: hosts with a verdict to write and no Node, an ambiguous match, or a Node
    that two or more hosts resolve to (which verdict is that Node's cannot be told: none is written); kept [{host,
    node, verdict, reason}]: hosts whose Node is not written (``why_kept``; node None when none was matched)."""
    nodes = dict((((n.get("metadata") or {}).get("name")), n) for n in _items(nodes_json))
    labels = dict((name, ((n.get("metadata") or {}).get("labels") or {}).get("kubernetes.io/hostname")) for name, n in nodes.items())
    plans, unmatched, kept, resolved, matches = [], [], [], {}, {}
    for host in sorted(verdicts):
        wanted = (node_names or {}).get(host)
        if wanted:
            match = {"name": wanted if wanted in nodes else None, "reason": "no Node named %s (node_names)" % wanted}
        else:
            match = match_node(list(nodes), host, labels)
        matches[host] = match
        if match.get("name"):
            resolved.setdefault(match["name"], []).append(host)
    for name, hosts in sorted(resolved.items()):
        if len(hosts) > 1:   # every host that claims the Node, those not to be written too
            for host in hosts:
                matches[host] = {"name": None, "reason": "Node %s is the Node of %d inventory hosts (%s): refused, set "
                                                         "node_names" % (name, len(hosts), ", ".join(hosts))}
    for host in sorted(verdicts):
        match, verdict = matches[host], _verdict_fields(verdicts[host])[0]
        why = why_kept(verdict, mode)
        if why:
            kept.append({"host": host, "node": match.get("name"), "verdict": verdict, "reason": why})
            continue
        if not match.get("name"):
            unmatched.append({"host": host, "reason": match.get("reason") or "no matching Node"})
            continue
        node = nodes[match["name"]]
        previous = _previous(node, condition_type)
        cond = build_condition(verdicts[host], now, previous, condition_type, (signatures or {}).get(host), run_id)
        patches = [["--subresource=status", "--type=strategic", "-p", json.dumps({"status": {"conditions": [cond]}}, sort_keys=True)]]
        label = label_before = None
        changed = not _same(cond, previous)
        if label_key:
            label = {label_key: label_value(verdict)}
            current = ((node.get("metadata") or {}).get("labels") or {}).get(label_key)
            label_before = {label_key: current}
            if current != label[label_key]:
                changed = True
            patches.append(["--type=merge", "-p", json.dumps({"metadata": {"labels": label}}, sort_keys=True)])
        plans.append({"host": host, "node": match["name"], "condition": cond, "previous": previous, "label": label,
                      "label_before": label_before, "changed": changed, "patches": patches})
    return plans, unmatched, kept


# bounds of the whole publish (options deadline, max_consecutive_timeouts, workers of k8s_publish): against an API server
# that answers nothing, 2,000 Nodes one at a time at the 30 s kubectl timeout would take about 17 hours
DEFAULT_DEADLINE = 600
DEFAULT_MAX_CONSECUTIVE_TIMEOUTS = 5
DEFAULT_WORKERS = 8
_TIMED_OUT = re.compile(r"timed? ?out|deadline exceeded|Client\.Timeout|i/o timeout", re.I)


def _timed_out(res):
    """Whether a kubectl call ended by a timeout: ours (the process killed) or kubectl's own request timeout."""
    return bool(res.get("timed_out")) or (res["rc"] != 0 and bool(_TIMED_OUT.search("%s %s" % (res.get("error") or "",
                                                                                               res.get("stderr") or ""))))


class _Bounds(object):
    """The deadline of the whole publish and the stop after consecutive timeouts, shared by the workers."""

    def __init__(self, deadline, max_timeouts):
        self.end = time.monotonic() + deadline
        self.deadline = deadline
        self.max_timeouts = max_timeouts
        self.lock = threading.Lock()
        self.streak = 0
        self.stopped = None
        self.cancel = threading.Event()

    def why_not(self, at_deadline=False):
        """Why no further call may start (None: it may); ``at_deadline``: a call was killed at the deadline."""
        with self.lock:
            if self.stopped is None and (at_deadline or time.monotonic() >= self.end):
                self.stopped = "the publish deadline (%d s) passed" % self.deadline
                self.cancel.set()
            return self.stopped

    def remaining(self):
        return self.end - time.monotonic()

    def count(self, timed_out):
        with self.lock:
            self.streak = self.streak + 1 if timed_out else 0
            if self.streak >= self.max_timeouts and self.stopped is None:
                self.stopped = "stopped after %d consecutive kubectl timeouts (the API server does not answer)" % self.streak
                self.cancel.set()


def _write(path, entry, bounds, timeout):
    """Run ``entry``'s kubectl writes in order; (written, error or None, why not written or None)."""
    for argv in entry["commands"]:
        why = bounds.why_not()
        if why:
            return False, None, why
        res = run([path] + argv[1:], timeout=max(min(timeout + 5, bounds.remaining()), 1), cancel=bounds.cancel)
        if res["rc"] == 0:
            bounds.count(False)
            continue
        if res.get("error") == "cancelled" or (res.get("timed_out") and bounds.remaining() < 1):
            return False, None, bounds.why_not(at_deadline=True)
        bounds.count(_timed_out(res))
        detail = res["error"] or last_line(res["stderr"]) or first_line(res["stdout"]) or "rc %s" % res["rc"]
        return False, "kubectl %s: %s" % (" ".join(argv[argv.index("patch"):argv.index("-p")]), detail), None
    return True, None, None


def node_diff(item, label_key=None):
    """Ansible's diff of one planned Node write: the condition (and label) the Node had, and the ones written."""
    header = "Node %s (condition %s%s)" % (item["node"], item["condition"]["type"], ", label %s" % label_key if label_key else "")
    before, after = {"condition": item["previous"]}, {"condition": item["condition"]}
    if label_key:
        before["label"], after["label"] = item["label_before"], item["label"]
    return {"before_header": header, "after_header": header, "before": before, "after": after}


def publish(verdicts, kubectl="kubectl", kubeconfig=None, context=None, timeout=DEFAULT_TIMEOUT, signatures=None,
            node_names=None, condition_type=CONDITION_TYPE, label_key=None, run_id=None, check_mode=False, now=None,
            deadline=DEFAULT_DEADLINE, max_consecutive_timeouts=DEFAULT_MAX_CONSECUTIVE_TIMEOUTS, workers=DEFAULT_WORKERS,
            diff=False, mode="full"):
    """Read the Nodes, plan, write (not in check mode). Returns {changed, published, unmatched, kept, errors,
    not_written, kubectl}: every failed read or write is in ``errors``, every host whose verdict has no Node to go to
    in ``unmatched`` (the module fails on either, after writing what it could), every host whose Node is left as it
    is (``why_kept``: not decided in this run, or not proven by an audit) in ``kept``.

    Bounded: at most ``workers`` Nodes are written at a time, no kubectl call outlives ``deadline`` seconds from the
    start (the calls in flight then are killed), and after ``max_consecutive_timeouts`` timeouts in a row no further
    write starts (those in flight are killed). Every Node not written because of either is in ``not_written`` (host,
    node, reason) and in ``errors``.

    ``diff``: ``out["diff"]``, a list of Ansible diffs, one per Node whose condition or label this call changed (in check
    mode: would change), before -> after: ``{"condition": ..., "label": ...}`` (``label`` only with ``label_key``;
    null where the Node had none)."""
    bounds = _Bounds(deadline, max_consecutive_timeouts)
    now = now or datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    out = {"changed": False, "published": [], "unmatched": [], "kept": [], "errors": [], "not_written": [],
           "check_mode": check_mode, "condition_type": condition_type, "label_key": label_key}
    if diff:
        out["diff"] = []
    path, reason = resolve_kubectl(kubectl, kubeconfig)
    if reason:
        out["errors"].append({"host": None, "node": None, "error": reason})
        return out
    base = kubectl_base(path, kubeconfig, context, timeout)
    nodes, error = _kubectl_json(base, ["get", "nodes"], min(timeout, deadline))
    if error:
        out["errors"].append({"host": None, "node": None, "error": error})
        return out
    plans, out["unmatched"], out["kept"] = plan(nodes, verdicts, now, signatures, node_names, condition_type, label_key,
                                                run_id, mode)
    entries = []
    for item in plans:
        entry = dict((k, item[k]) for k in ("host", "node", "condition", "label", "changed"))
        entry["commands"] = [["kubectl"] + base[1:] + ["patch", "node", item["node"]] + p + ["-o", "json"] for p in item["patches"]]
        entry["written"] = False
        entries.append(entry)
    if not check_mode and entries:
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, min(workers, len(entries)))) as pool:
            done = list(pool.map(lambda e: _write(path, e, bounds, timeout), entries))
        for entry, (written, failure, why_not) in zip(entries, done):
            entry["written"] = written
            if failure:
                out["errors"].append({"host": entry["host"], "node": entry["node"], "error": failure})
            elif why_not:
                out["not_written"].append({"host": entry["host"], "node": entry["node"], "reason": why_not})
    for entry, item in zip(entries, plans):
        changed = entry["changed"] and (entry["written"] or check_mode)
        out["changed"] = out["changed"] or changed
        out["published"].append(entry)
        if diff and changed:
            out["diff"].append(node_diff(item, label_key))
    if out["not_written"]:
        names = [n["node"] for n in out["not_written"]]
        out["errors"].append({"host": None, "node": None, "error": "%d Node(s) not written: %s (%s%s)" % (
            len(names), out["not_written"][0]["reason"], ", ".join(names[:10]), ", ..." if len(names) > 10 else "")})
    return out
