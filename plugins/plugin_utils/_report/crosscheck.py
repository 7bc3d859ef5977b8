# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: what Kubernetes is told about a node against what the node showed, for the fleet report. Not public API.
docs/k8s.md.
"""

from __future__ import annotations

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


def k8s_nodes(k8s_records, nodes=None):
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
    return crosscheck_nodes(verdicts, k8s_nodes(k8s_records), drivers)


def crosscheck_nodes(verdicts, nodes, drivers=None):
    """``k8s_crosscheck`` against the k8s nodes of the records (``k8s_nodes``)."""
    from ansible_collections.gpuprobe.layers.plugins.module_utils._k8s.nodes import advertising_findings  # pylint: disable=import-outside-toplevel

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
