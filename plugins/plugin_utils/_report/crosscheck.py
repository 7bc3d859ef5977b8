# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: what Kubernetes is told about a node against what the node showed, for the fleet report. Not public API.
docs/k8s.md.
"""

from __future__ import annotations

import json

from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import NOT_RUN, WARN

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


SOURCES_KEPT = 3   # the first few sources named per view: every host's record lists every Node


def _k8s_nodes():
    """The k8s layer's node functions (match_node, advertising_findings), loaded only when there are k8s records."""
    from ansible_collections.gpuprobe.layers.plugins.module_utils._k8s import nodes  # pylint: disable=import-outside-toplevel
    return nodes


def _map(value):
    return value if isinstance(value, dict) else {}


def _devices(node):
    devices = _map(node.get("dra")).get("devices")
    return [d for d in devices if isinstance(d, dict)] if isinstance(devices, list) else []


def _claims(node):
    """What the cross-check rests on, of one record's entry for a Node (two records agree about the Node when these
    are equal): what is allocatable, the GPU path, the DRA devices, the feature labels' driver version, the
    kubernetes.io/hostname label."""
    allocatable = sorted((str(r), str(q)) for r, q in _map(node.get("allocatable")).items() if q)
    devices = sorted([str(d.get(k)) for k in ("name", "uuid", "parent_uuid", "type")] for d in _devices(node))
    return json.dumps([allocatable, str(node.get("path")), devices, label_driver_version(_map(node.get("gpu_labels"))),
                       str(node.get("hostname_label"))])


def _view_text(node):
    allocatable = dict((str(r), q) for r, q in _map(node.get("allocatable")).items() if q)
    text = "allocatable %s, path %s, %d DRA device(s)" % (_k8s_nodes().fmt_counts(allocatable) or "none", node.get("path"),
                                                          len(_devices(node)))
    label = label_driver_version(_map(node.get("gpu_labels")))
    return text + (", feature label driver %s" % label if label else "")


def _sources_text(view):
    names = ", ".join(str(s) for s in view["sources"])
    more = view["count"] - len(view["sources"])
    return names + (" and %d more" % more if more > 0 else "")


class K8sViews(object):
    """What the hosts' k8s records say about each Node, by the host whose record says it (its source). A host's own
    record (the Node is the host's exactly, ``match_node`` among the Nodes that record lists) speaks for the host's
    Node; the records of other hosts speak for it only where they all agree. Kept per Node: each distinct view
    (``_claims``) once, with its first few sources and how many records gave it (every record lists every Node)."""

    def __init__(self):
        self.views = {}   # Node name -> {claims: {"node": entry, "sources": [host, ...], "count": n}}
        self.own = {}     # host -> (its Node's name, the claims of its own record's entry)
        self._label_cache = None

    def add(self, source, record):
        """Add one k8s record, that of inventory host ``source`` (None: a record of no host, a controller's read)."""
        if not isinstance(record, dict) or record.get("status") == NOT_RUN:
            return
        nodes = _map(record.get("evidence")).get("nodes")
        entries = [n for n in nodes if isinstance(n, dict) and isinstance(n.get("name"), str) and n["name"]] \
            if isinstance(nodes, list) else []
        mine, self._label_cache = None, None
        if source is not None and entries:
            mine = _k8s_nodes().match_node([n["name"] for n in entries], source,
                                           dict((n["name"], n.get("hostname_label")) for n in entries)).get("name")
        for node in entries:
            key = _claims(node)
            view = self.views.setdefault(node["name"], {}).setdefault(key, {"node": node, "sources": [], "count": 0})
            view["count"] += 1
            if len(view["sources"]) < SOURCES_KEPT and source not in view["sources"]:
                view["sources"].append(source)
            if node["name"] == mine and source not in self.own:
                self.own[source] = (mine, key)

    def _labels(self):
        """Node name -> its kubernetes.io/hostname label where every record agrees on it (else None: matches nothing)."""
        if self._label_cache is None:
            self._label_cache = {}
            for name, views in self.views.items():
                found = set(v["node"].get("hostname_label") if isinstance(v["node"].get("hostname_label"), str) else None
                            for v in views.values())
                self._label_cache[name] = found.pop() if len(found) == 1 else None
        return self._label_cache

    def seen(self, host):
        """What the records say about ``host``'s Node: None when no record lists a Node that is the host's exactly;
        else {name, own: whether the host's own record lists it, chosen: the view the cross-check uses (the host's own,
        else the one view all records agree on, else None), others: the views that differ from it}."""
        if host in self.own:
            name, key = self.own[host]
        elif self.views:
            name, key = _k8s_nodes().match_node(list(self.views), host, self._labels()).get("name"), None
            if name is None:
                return None
        else:
            return None
        views = self.views[name]
        if key is None and len(views) == 1:
            key = next(iter(views))
        return {"name": name, "own": host in self.own, "chosen": views.get(key),
                "others": [v for k, v in views.items() if k != key]}


def k8s_nodes(k8s_records, views=None):
    """The ``K8sViews`` of ``k8s_records``: {host: that host's k8s record}, or a list of records of no host; added to
    ``views`` when given."""
    views = K8sViews() if views is None else views
    items = k8s_records.items() if isinstance(k8s_records, dict) else ((None, r) for r in k8s_records or [])
    for source, record in items:
        views.add(source, record)
    return views


def _disagreement(host, seen):
    chosen, own = seen["chosen"], seen["own"]
    parts = [(host if own else _sources_text(chosen), chosen["node"])] if chosen else []
    parts += [(_sources_text(v), v["node"]) for v in seen["others"]]
    why = "the cross-check rests on %s" % ("%s's own record" % host if own else "the records of %s" % _sources_text(chosen)) \
        if chosen else "no record is this host's own, so the Node is not cross-checked"
    return {"host": host, "k8s_node": seen["name"], "finding": "k8s_records_disagree", "severity": WARN,
            "observed": "; ".join("record of %s: %s" % (who, _view_text(node)) for who, node in parts), "source": None,
            "message": "the nodes' k8s records disagree about this Node (read at different times, or a node reports "
                       "falsely): %s" % why}


def k8s_crosscheck(verdicts, k8s_records, drivers=None):
    """What the scheduler is told about a node, on either GPU path (device plugin or DRA), against what the node
    verdict proved.

    ``verdicts``: {host: verdict (string, or a node_verdict dict, whose per-GPU rows say which GPUs computed)};
    ``k8s_records``: {host: its k8s record} or a list of records of no host (their evidence.nodes, a host's Node
    matched exactly: ``match_node``); ``drivers``: {host: the host layer's driver version}. One node cannot speak for
    another: a host's own record decides for its Node, other hosts' records only where they all agree. Returns
    findings {host, k8s_node, finding, severity, observed, message, source (whose record it rests on)}: those of
    ``_k8s.advertising_findings`` (allocatable_on_unverified_node, dra_device_compute_failed,
    dra_devices_on_unverified_node, nothing_advertised); stale_driver_label: the feature labels' driver version
    differs from the host's (WARN); k8s_records_disagree: two records say different things about the host's Node
    (WARN, naming the sources).
    """
    return crosscheck_nodes(verdicts, k8s_nodes(k8s_records), drivers)


def crosscheck_nodes(verdicts, views, drivers=None):
    """``k8s_crosscheck`` against the ``K8sViews`` of the records (``k8s_nodes``)."""
    drivers = drivers or {}
    findings = []
    for host in sorted(verdicts):
        seen = views.seen(host)
        if seen is None:
            continue
        if seen["others"]:
            findings.append(_disagreement(host, seen))
        if seen["chosen"] is None:
            continue
        node = seen["chosen"]["node"]
        found = _k8s_nodes().advertising_findings(host, verdicts[host], node)
        label = label_driver_version(_map(node.get("gpu_labels")))
        driver = drivers.get(host)
        if label and driver and str(driver) != label:
            found.append({"host": host, "k8s_node": node["name"], "finding": "stale_driver_label", "severity": WARN,
                          "observed": "feature label driver %s, host driver %s" % (label, driver),
                          "message": "stale labels: GPU feature discovery has not relabelled the node since the "
                                     "driver changed"})
        for finding in found:
            finding["source"] = host if seen["own"] else _sources_text(seen["chosen"])
        findings.extend(found)
    return findings
