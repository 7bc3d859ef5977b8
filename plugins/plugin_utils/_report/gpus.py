# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: a host's GPUs in the fleet report: one row per physical GPU (MIG instances under their GPU), and the fleet
counted in physical GPUs. Not public API. docs/usage.md, "GPUs and MIG instances".
"""

from __future__ import annotations

from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import FAIL, NOT_RUN, PASS, WARN
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report.sentences import unknown_gpus


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


def gpu_key(gpu):
    """How a GPU row or a host inventory entry is told apart: its UUID (as NVML and CUDA share it), else its index."""
    return _uuid_key(gpu.get("uuid")) or "index:%s" % gpu.get("index")


class Listed(object):
    """The GPUs the host layer of a host entry lists (its evidence.gpus): the only GPUs that can count as verified (a
    row for any other GPU speaks of a GPU the node's host layer never saw). ``len`` is how many it lists."""

    def __init__(self, entry):
        host_gpus = ((entry["layers"].get("host") or {}).get("evidence") or {}).get("gpus") or []
        host_gpus = [g for g in host_gpus if isinstance(g, dict)]
        self.keys = set(gpu_key(g) for g in host_gpus)
        # index -> whether the host knows that GPU's UUID (a host layer without NVML may list a GPU without one)
        self.indexes = {}
        for g in host_gpus:
            if g.get("index") is not None:
                self.indexes[g["index"]] = self.indexes.get(g["index"], False) or bool(_uuid_key(g.get("uuid")))

    def __len__(self):
        return len(self.keys)

    def __contains__(self, row):
        """Whether the host lists the GPU of a row: by its UUID; a row without one, or on a GPU whose UUID the host
        does not know, by its index."""
        if gpu_key(row) in self.keys:
            return True
        index = row.get("index")
        return index in self.indexes and (not _uuid_key(row.get("uuid")) or not self.indexes[index])


def listed_gpus(entry):
    """The GPUs the host layer of a host entry lists (``Listed``)."""
    return Listed(entry)


def trusted_rows(entry):
    """Whether a host entry's PASS rows may count: unless an earlier layer failed. A kernel that ran on a GPU the
    node's spec lies about (FAILED_AT_CDI) or that the runtime did not inject as asked proves the GPU, not that a
    container asking for it gets it. (On a node with one failing GPU, its other GPUs were proven: they count.)"""
    return entry.get("failing_layer") in (None, "compute")


def gpu_proven(row, listed, trusted):
    """Whether a physical GPU row (``physical_gpus``) counts as verified: requested, PASSed, the host layer lists it
    (``listed``: ``listed_gpus``), and ``trusted`` (``trusted_rows``)."""
    return bool(trusted and row.get("expected") and row.get("status") == PASS and row in listed)


def gpu_counts(entry):
    """Per-GPU counts of one host entry, in physical GPUs, as seen: total (the GPUs the host inventory lists), verified
    (those of them requested that PASSed: a kernel verified in the container on the GPU, or on every MIG instance
    requested on it; ``gpu_proven``), failed (those requested that FAILed: the GPU, or one instance on it), not_run (the
    rest: busy, or compute did not reach them, or not requested). ``unlisted``: the GPUs of the compute rows the host
    layer does not list (never counted as verified, nor in the total). ``mig_instances`` counts the requested MIG
    instances on listed GPUs the same way (total, verified, failed, not_run)."""
    listed = listed_gpus(entry)
    gpus = [g for g in entry.get("gpus") or [] if isinstance(g, dict)]
    seen = [g for g in gpus if g in listed]
    trusted = trusted_rows(entry)
    verified = sum(1 for g in seen if gpu_proven(g, listed, trusted))
    failed = sum(1 for g in seen if g.get("expected") and g.get("status") == FAIL)
    instances = [i for g in seen for i in g.get("instances") or [] if i.get("expected")]
    inst_verified = sum(1 for i in instances if i.get("status") == PASS) if trusted else 0
    inst_failed = sum(1 for i in instances if i.get("status") == FAIL)
    return {"total": len(listed), "verified": verified, "failed": failed, "not_run": max(len(listed) - verified - failed, 0),
            "unlisted": len(set(gpu_key(g) for g in gpus if g not in listed)),
            "unknown": unknown_gpus(entry) if not listed else None, "none_listed": not listed and not unknown_gpus(entry),
            "mig_instances": {"total": len(instances), "verified": inst_verified, "failed": inst_failed,
                              "not_run": len(instances) - inst_verified - inst_failed},
            "mig_gpus": sum(1 for g in seen if g.get("mig"))}


def gpu_totals():
    return {"total": 0, "verified": 0, "failed": 0, "not_run": 0, "hosts_with_failed_gpu": 0, "hosts_with_unknown_gpus": 0,
            "unknown_gpus_why": {}, "hosts_without_gpus": 0, "mig_gpus": 0, "mig_instances": dict((k, 0) for k in ("total", "verified", "failed", "not_run"))}
