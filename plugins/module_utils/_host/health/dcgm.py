# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: dcgmi diag, where asked (the option ``dcgm_diag``), for host.health.dcgm_diag. Not public API.

``read_dcgm_diag`` runs ``dcgmi diag -r <level> -j`` through _common/run.py's ``run`` with the level's time limit
(``DCGM_TIMEOUTS`` in _host/health/limits.py), only when asked, dcgmi is installed, root is / and NVML knows every GPU
idle (_host/busy.py reads that from the NVML evidence), and never a level that loads the GPU in check or audit mode.
``parse_dcgm_diag`` reads both JSON shapes DCGM has printed into one result per test and GPU; ``DCGM_STATUSES`` maps
DCGM's words to the record's statuses (_host/health/judge.py applies them).
"""

from __future__ import annotations

import json
import os

from ansible_collections.gpuprobe.layers.plugins.module_utils._host.busy import busy_reason, gpu_compute_processes
from ansible_collections.gpuprobe.layers.plugins.module_utils._host.health.limits import DCGM_TIMEOUTS
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import FAIL, NOT_RUN, PASS, WARN
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.run import run, which

# DCGM's JSON result statuses (dcgmi/Diag.cpp HelperDisplayDiagResult; DCGM 3 printed them in capitals)
DCGM_STATUSES = {"pass": PASS, "fail": FAIL, "warn": WARN, "skip": NOT_RUN, "not run": NOT_RUN}


def check_dcgm_level(value, name="dcgm_diag"):
    """0 (do not run dcgmi diag) or the run level 1-4."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 4:
        raise ValueError("%s must be 0 (off) or a dcgmi diag run level 1-4 (got %r)" % (name, value))
    return value


def _busy_gpus(nvml):
    """Why dcgmi diag must not run now ('' when every GPU is known idle): a busy GPU or instance, or a busy state
    NVML could not give (_host/busy.py reads it from the same evidence the compute layer uses)."""
    busy = gpu_compute_processes({"evidence": {"nvml": nvml}})
    if busy is None:
        return "cannot tell whether the GPUs are in use (no NVML list of compute processes)"
    return busy_reason(busy) if busy else ""


def _dcgm_list(value, what):
    """A JSON list of objects, or ValueError naming what was not one (a missing value is an empty list)."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise ValueError("%s is not a list of objects: %s" % (what, json.dumps(value)[:120]))
    return value


def _dcgm_texts(value, key):
    """Warnings or info of one result: a list of strings or of {key: text} objects (DCGM 4's warnings)."""
    if value is None:
        return []
    if not isinstance(value, list):
        value = [value]
    return [str(v.get(key) if isinstance(v, dict) else v) for v in value]


def parse_dcgm_diag(text):
    """The per-test results of ``dcgmi diag -j`` output: {version, runtime_error, tests: [{category, test, entity
    (GPU id or None for the test's summary), gpu_uuid (where dcgmi names the GPU's UUID), status (DCGM's word),
    warnings: [text], info: [text]}]}.

    Both JSON shapes DCGM has printed: DCGM 4 ("DCGM Diagnostic", results per entity with entity_group/entity_id and a
    test_summary, dcgmi/Diag.cpp HelperJsonBuildOutput) and DCGM 3 ("DCGM GPU Diagnostic", results with a gpu_ids
    string). ValueError, never another exception, when the text holds no such JSON object or its shape is not one
    of these (a list where an object belongs, a result that is a string, ...)."""
    start, end = (text or "").find("{"), (text or "").rfind("}")
    if start < 0 or end < start:
        raise ValueError("no JSON object in the output")
    try:
        doc = json.loads(text[start:end + 1])
    except RecursionError:
        raise ValueError("the JSON is nested too deeply")
    if not isinstance(doc, dict):
        raise ValueError("the JSON is not an object")
    body = doc.get("DCGM Diagnostic") or doc.get("DCGM GPU Diagnostic")
    if not isinstance(body, dict):
        raise ValueError("no 'DCGM Diagnostic' object in the JSON")
    meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
    version = meta.get("version") or body.get("version")
    tests = []
    for category in _dcgm_list(body.get("test_categories"), "test_categories"):
        for test in _dcgm_list(category.get("tests"), "tests of %s" % category.get("category")):
            entries = [(r, _dcgm_entities(r)) for r in _dcgm_list(test.get("results"), "results of %s" % test.get("name"))]
            summary = test.get("test_summary")
            if isinstance(summary, dict) and (not entries or _dcgm_worse(summary, [r for r, _e in entries])):
                # the summary alone (no result per GPU), or it says worse than every GPU's result: an error of no
                # single GPU (DCGM 4 puts those in the summary only)
                entries.append((summary, [None]))
            for result, entities in entries:
                for entity in entities:
                    tests.append({"category": str(category.get("category")), "test": str(test.get("name")), "entity": entity,
                                  "gpu_uuid": _dcgm_uuid(result) if entity is not None else None,
                                  "status": str(result.get("status") or ""),
                                  "warnings": _dcgm_texts(result.get("warnings"), "warning"),
                                  "info": _dcgm_texts(result.get("info"), "info")})
    runtime_error = body.get("runtime_error")
    return {"version": None if version is None else str(version),
            "runtime_error": None if runtime_error in (None, "") else str(runtime_error), "tests": tests}


def _dcgm_uuid(result):
    """The GPU's UUID where dcgmi names it in a result (entity_uuid, gpu_uuid or uuid), else None."""
    for key in ("entity_uuid", "gpu_uuid", "uuid"):
        value = result.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def _dcgm_rank(result):
    return {FAIL: 3, WARN: 2}.get(DCGM_STATUSES.get(str(result.get("status") or "").strip().lower(), WARN), 1)


def _dcgm_worse(summary, results):
    return _dcgm_rank(summary) > max(_dcgm_rank(r) for r in results)


def _dcgm_entities(result):
    """The GPU ids (DCGM's entity ids) one result is for: DCGM 4's entity_id of entity_group GPU, DCGM 3's gpu_ids
    "0,1,2"; ValueError for an id that is not a number."""
    if "entity_id" in result:
        group = str(result.get("entity_group") or "GPU")
        entity = result["entity_id"]
        if group.upper() == "GPU":
            if isinstance(entity, bool) or not isinstance(entity, (int, str)) or not str(entity).strip().isdigit():
                raise ValueError("a GPU result's entity_id is not a number: %s" % json.dumps(entity)[:60])
            return [int(str(entity).strip())]
        return ["%s %s" % (group, entity)]
    ids = [i.strip() for i in str(result.get("gpu_ids", result.get("gpu_id", ""))).split(",") if i.strip()]
    return [int(i) if i.isdigit() else i for i in ids] or [None]


def read_dcgm_diag(level, nvml, root="/", no_gpu_load=None):
    """{asked (the level, 0 = not asked), ran, why (not run), argv, rc, duration_ms, error, version, runtime_error,
    tests}: ``dcgmi diag -r <level> -j`` through _common/run.py's run with DCGM_TIMEOUTS[level], only when asked, dcgmi is
    installed, root is / and no GPU is busy. ``no_gpu_load``: why nothing that loads the GPU may run now ("check
    mode", "audit mode"): levels 2-4 (minutes to hours of load) are then not run; level 1 (deployment and software
    checks, seconds, no load on the GPU) still is."""
    out = {"asked": level, "ran": False, "why": None, "tests": []}
    if not level:
        out["why"] = "not asked (dcgm_diag: 0)"
        return out
    if no_gpu_load and level >= 2:
        out["why"] = "%s: dcgmi diag -r %d loads the GPU, not run (level 1 does not)" % (no_gpu_load, level)
        return out
    if os.path.realpath(root) != "/":
        out["why"] = "dcgmi diag only runs when root is /"
        return out
    path = which("dcgmi")
    if path is None:
        out["why"] = "dcgmi is not installed (no DCGM on this node)"
        return out
    if not nvml.get("ok"):
        out["why"] = "NVML unavailable, so whether a GPU is busy is unknown: %s" % nvml.get("error")
        return out
    busy = _busy_gpus(nvml)
    if busy:
        out["why"] = "%s: dcgmi diag not run" % busy
        return out
    argv = [path, "diag", "-r", str(level), "-j"]
    res = run(argv, timeout=DCGM_TIMEOUTS[level])
    out.update(ran=True, argv=argv, rc=res["rc"], duration_ms=res["duration_ms"], error=res["error"],
               timed_out=bool(res["timed_out"]), stderr=(res["stderr"] or "").strip()[-2000:] or None)
    if res["timed_out"] or res["error"]:
        return out
    try:
        out.update(parse_dcgm_diag(res["stdout"]))
    except ValueError as exc:
        out["error"] = "dcgmi diag output not understood (rc %s): %s; %s" % (
            res["rc"], exc, ((res["stdout"] or "") + (res["stderr"] or "")).strip()[-300:])
    return out
