# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: the single node-verdict function of gpuprobe.layers (DESIGN.md, "Node verdict").

Not public API. Modules, the role, the filter plugin and the fleet report all call ``node_verdict``;
nothing else decides a verdict.
"""

from __future__ import annotations

from ansible_collections.gpuprobe.layers.plugins.module_utils._result import (
    FAIL, NOT_RUN, ORDERED_LAYERS, PASS, WARN,
)

COMPUTE_VERIFIED = "COMPUTE_VERIFIED"
INCONCLUSIVE = "INCONCLUSIVE"
VERDICTS = (COMPUTE_VERIFIED, INCONCLUSIVE) + tuple("FAILED_AT_" + layer.upper() for layer in ORDERED_LAYERS)


def compute_points_to(container_status, host_control_status):
    """Where a compute result points, from the same probe run in the container and on the host.

    container FAIL + host PASS -> "runtime" (the injection lost something the host has);
    container FAIL + host FAIL -> "host" (driver/host problem, the container is not to blame);
    container FAIL + host not run -> "compute" (cannot tell which side).
    """
    if container_status != FAIL:
        return None
    if host_control_status == PASS:
        return "runtime"
    if host_control_status == FAIL:
        return "host"
    return "compute"


def _layer_status(records, layer):
    record = records.get(layer)
    return record["status"] if record else NOT_RUN


def _cdi_injected(compute_record):
    evidence = (compute_record or {}).get("evidence") or {}
    container = evidence.get("container") or {}
    return bool(container.get("cdi_devices")) and bool(container.get("executed"))


def node_verdict(records):
    """Verdict of one node from its layer records (a mapping layer -> record; a missing layer is NOT_RUN).

    Returns a dict: verdict, layer (the failing one or None), signature, points_to, reason.
    - FAILED_AT_<LAYER> for the first FAIL in order host -> cdi -> runtime -> compute;
    - COMPUTE_VERIFIED only when compute PASSed inside a container that received the GPU through the
      runtime's CDI injection, and the runtime layer itself did not fail;
    - INCONCLUSIVE otherwise, with the reason naming what did not run.
    """
    records = records or {}
    for layer in ORDERED_LAYERS:
        record = records.get(layer)
        if record and record.get("status") == FAIL:
            return {
                "verdict": "FAILED_AT_" + layer.upper(),
                "layer": layer,
                "signature": record.get("signature") or "%s.failed" % layer,
                "points_to": record.get("points_to") or layer,
                "reason": record.get("reason"),
            }
    compute = records.get("compute")
    if (_layer_status(records, "compute") == PASS and _cdi_injected(compute)
            and _layer_status(records, "runtime") in (PASS, WARN)):
        return {"verdict": COMPUTE_VERIFIED, "layer": None, "signature": None, "points_to": None,
                "reason": "a CUDA kernel ran and was verified inside a container that got the GPU through CDI"}
    missing = []
    for layer in ORDERED_LAYERS:
        record = records.get(layer)
        if record is None:
            missing.append("%s: no record" % layer)
        elif record.get("status") == NOT_RUN:
            missing.append("%s: %s" % (layer, record.get("reason") or "not run"))
    if not missing and not _cdi_injected(compute):
        missing.append("compute: did not run inside a CDI-injected container")
    return {"verdict": INCONCLUSIVE, "layer": None, "signature": None, "points_to": None,
            "reason": "; ".join(missing) or "no layer failed, but compute was not verified"}
