# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: the per-GPU rows of the compute record (docs/contract.md); not public API."""

from __future__ import annotations

from ansible_collections.gpuprobe.layers.plugins.module_utils._probe import script as _probe
from ansible_collections.gpuprobe.layers.plugins.module_utils._host.busy import touch_only
from ansible_collections.gpuprobe.layers.plugins.module_utils._compute.assess import assess_device, assess_global, not_idle
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import FAIL, NOT_RUN, PASS, WARN


def normalize_expected(expected_gpus):
    """The cdi layer's identity.expected_gpus (I2), each {uuid, index, minor, name, mig_uuid}; rows without a
    UUID are kept (they can only be reported missing or matched by nothing)."""
    out = []
    for gpu in expected_gpus or []:
        if isinstance(gpu, dict):
            out.append(dict((k, gpu.get(k)) for k in ("uuid", "index", "minor", "name", "mig_uuid")))
    return out


MIG_UUID_SYMBOL = "cuDeviceGetUuid_v2"


def _matches(expected, device):
    """A seen device proves an expected GPU only by its own UUID: a MIG request only by its MIG UUID, and only when
    cuDeviceGetUuid_v2 gave it (the unversioned cuDeviceGetUuid of drivers < 470 gives a MIG device its parent GPU's
    UUID, which proves no particular instance)."""
    uuid = device.get("uuid")
    key = _probe.norm_uuid(uuid) if uuid else None
    if not key:
        return False
    if expected.get("mig_uuid"):
        return key == _probe.norm_uuid(expected["mig_uuid"]) and device.get("uuid_symbol") == MIG_UUID_SYMBOL
    return bool(expected.get("uuid")) and key == _probe.norm_uuid(expected["uuid"])


def _seen_devices(runs, plan, timeout):
    """Every device listed in every container run: dicts run (index), where, device, outcome."""
    seen = []
    for i, (parsed, where) in enumerate(runs):
        for device in (parsed.get("facts") or {}).get("devices") or []:
            seen.append({"run": i, "where": where, "device": device,
                         "outcome": assess_device(parsed, device, plan, parsed.get("timed_out"), timeout)})
    return seen


_ROW_RANK = {FAIL: 0, PASS: 1, WARN: 2, NOT_RUN: 3}


def gpu_rows(runs, expected_gpus, plan=None, timeout=None, shared=False):  # pylint: disable=too-many-locals
    """The per-GPU rows of the compute record (TEAM-PLAN I3), from the container run(s) ``runs`` (list of
    (parsed probe output, where)) and the expected GPUs (empty: every GPU seen is expected); ``plan``
    (_busy.busy_plan): which devices the probe was let touch.

    Row: index, uuid, model, expected, seen_in_container, ordinal, status, signature, reason (+ where: the
    container that saw it). Returns (rows, unlisted): unlisted is the global FAIL outcome when no run got as far
    as listing devices (then an expected GPU is not 'missing': the probe could not tell). ``shared``: one container
    held every requested device; there one CUDA process enumerates a single MIG instance, so with two or more MIG
    devices expected, one not listed is NOT_RUN (not provable in that container), never compute.gpu.missing."""
    expected = normalize_expected(expected_gpus)
    checked = touch_only(plan) is not None
    # listed: some run got the device list from CUDA (even an empty one: then every expected GPU is missing)
    listed = any((parsed.get("facts") or {}).get("devices") is not None for parsed, _where in runs)
    globals_ = [assess_global(parsed, parsed.get("timed_out"), timeout) for parsed, _where in runs]
    unlisted = None if listed else next((g for g in globals_ if g is not None), None)
    seen = _seen_devices(runs, plan, timeout)
    # one row per GPU: a GPU seen by several containers keeps its worst outcome, a PASS before a NOT_RUN
    by_uuid = {}
    anonymous = []
    for item in seen:
        key = _probe.norm_uuid(item["device"].get("uuid")) if item["device"].get("uuid") else None
        if key is None:
            anonymous.append(item)
        elif key not in by_uuid or _ROW_RANK[item["outcome"]["status"]] < _ROW_RANK[by_uuid[key]["outcome"]["status"]]:
            by_uuid[key] = item
    # one shared container, two or more MIG instances asked for, and CUDA listed one of them: it enumerates one
    # instance per process, so the others cannot be shown there (they are not missing)
    migs = [g for g in expected if g.get("mig_uuid")]
    mig_shared = shared and len(migs) >= 2 and any(_matches(g, item["device"]) for g in migs for item in by_uuid.values())
    rows = []
    used = set()
    for gpu in expected:
        # each seen device proves at most one expected GPU
        match = next((k for k, item in by_uuid.items() if k not in used and _matches(gpu, item["device"])), None)
        row = {"index": gpu.get("index"), "uuid": gpu.get("mig_uuid") or gpu.get("uuid"), "model": gpu.get("name"),
               "expected": True, "seen_in_container": match is not None, "ordinal": None}
        if match is not None:
            used.add(match)
            item = by_uuid[match]
            row.update(ordinal=item["device"].get("ordinal"), model=item["device"].get("name") or gpu.get("name"),
                       status=item["outcome"]["status"], signature=item["outcome"]["signature"],
                       reason=item["outcome"]["reason"], where=item["where"])
        elif not (gpu.get("mig_uuid") or gpu.get("uuid")):
            # the host inventory gave no UUID (no NVML): no container GPU can be matched to it, which is not "missing"
            row.update(status=NOT_RUN, signature=None, where=None,
                       reason="identity unknown: the host inventory has no UUID for GPU minor %s (no NVML), so no GPU "
                              "in the container can be matched to it" % gpu.get("minor"))
        elif unlisted is not None and checked and not_idle(plan, row["uuid"]):
            # not known idle: it would not have been touched had the probe listed it
            row.update(status=NOT_RUN, signature=None, where=None, reason=not_idle(plan, row["uuid"]))
        elif unlisted is not None:
            row.update(status=FAIL, signature=unlisted["signature"], where=None,
                       reason="not listed: the probe stopped before listing devices (%s)" % unlisted["reason"])
        elif mig_shared and gpu.get("mig_uuid"):
            row.update(status=NOT_RUN, signature=None, where=None,
                       reason="not provable in one shared container: one CUDA process enumerates a single MIG instance "
                              "and %d MIG devices were requested (isolation per_device runs one container each)" % sum(
                                  1 for g in expected if g.get("mig_uuid")))
        else:
            row.update(status=FAIL, signature="compute.gpu.missing", where=None,
                       reason="expected GPU not seen in the container (it saw %s)" % (
                           ", ".join(sorted(i["device"].get("uuid") or "?" for i in seen)) or "no GPU"))
        rows.append(row)
    extra = [item for k, item in sorted(by_uuid.items(), key=lambda kv: (kv[1]["run"], kv[1]["device"].get("ordinal")))
             if k not in used] + anonymous
    for item in extra:
        dev, outcome = item["device"], item["outcome"]
        row = {"index": None, "uuid": dev.get("uuid"), "model": dev.get("name"), "expected": not expected,
               "seen_in_container": True, "ordinal": dev.get("ordinal"), "where": item["where"]}
        if expected:
            ran = "kernel %s" % outcome["status"] + (": %s" % outcome["reason"] if outcome["reason"] else "")
            row.update(status=WARN, signature=outcome["signature"],
                       reason="the container sees a GPU it did not ask for (%s)" % ran)
        else:
            row.update(status=outcome["status"], signature=outcome["signature"], reason=outcome["reason"])
        rows.append(row)
    return rows, unlisted


def _not_run_rows(expected_gpus, reason):
    return [{"index": g.get("index"), "uuid": g.get("mig_uuid") or g.get("uuid"), "model": g.get("name"),
             "expected": True, "seen_in_container": False, "ordinal": None, "status": NOT_RUN, "signature": None,
             "reason": reason, "where": None} for g in normalize_expected(expected_gpus)]


ROW_KEYS = ("index", "uuid", "model", "expected", "seen_in_container", "ordinal", "status", "signature", "reason")


def _public_rows(rows):
    """The rows as the contract has them (TEAM-PLAN I3): exactly ROW_KEYS."""
    return [dict((k, r.get(k)) for k in ROW_KEYS) for r in rows]
