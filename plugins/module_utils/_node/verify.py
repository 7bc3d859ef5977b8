# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: a whole node in one process (module gpuprobe.layers.node_verify): the inspect stage (_node.inspect), the
gate per runtime (_node.gate.engine_gate), the probe stage through each runtime the gate lets run (_node.probe), and
this run's self-built spec removed at the end. Not public API.

verify_node calls it in full mode, one node-side call for the whole node (one Python start, one payload, one compile
of the shared code: docs/performance.md); node_layers (the inspect stage alone) serves audit mode and a run whose
tags leave the probe out. The gate is the same function the controller applies when it makes the records of a
probe that did not run."""

from __future__ import annotations

from ansible_collections.gpuprobe.layers.plugins.module_utils._node import gate as _gate
from ansible_collections.gpuprobe.layers.plugins.module_utils._node import inspect as _inspect
from ansible_collections.gpuprobe.layers.plugins.module_utils._node.probe import probe, remove_run_spec


def verify(p, check_mode=False):
    """Inspect, gate and probe one node. Returns {"records": the inspect stage's records, "spec": the self-built spec
    read or None, "probes": one entry per runtime of _node.gate.probe_engines, in that order, as far as the run got:
    {"runtime": name, "ran": whether its probe ran, "records": its runtime and compute records (None when the probe
    was interrupted)}}, with "spec_removed"/"spec_error" when this call wrote a spec, and "interrupted": message when
    SIGINT/SIGTERM/SIGHUP stopped a probe (its container gone, no further runtime probed). ValueError: unusable
    options."""
    inspected = _inspect.inspect(p, check_mode, probe_follows=True)  # each engine detected in full beside the host layer
    records = inspected["records"]
    own_spec = bool(inspected["spec"]) and not p["cdi_spec"] and not check_mode
    out = {"records": records, "spec": inspected["spec"], "probes": []}
    plan = [(engine,) + _gate.engine_gate(records, engine, p["mode"]) for engine in _gate.probe_engines(records.get("cdi"), p["runtime"])]
    runnable = [index for index, (_engine, _own, gate) in enumerate(plan) if not gate]
    for index, (engine, own, gate) in enumerate(plan):
        name = engine.get("name")
        if gate:
            out["probes"].append({"runtime": name, "ran": False, "records": _gate.gated(gate)})
            continue
        # the last probe removes the spec (and, interrupted, removes it before it returns)
        remove = own_spec and index == runnable[-1]
        got = probe(dict(p, records={"host": own.get("host"), "cdi": own.get("cdi")}, runtime=name,
                         runtime_endpoint=engine.get("endpoint") or p["runtime_endpoint"], remove_spec=remove), check_mode)
        if got.get("interrupted"):
            out["probes"].append({"runtime": name, "ran": True, "records": None})
            out["interrupted"] = got["interrupted"]
            break
        out["probes"].append({"runtime": name, "ran": True, "records": got["records"]})
        if remove:
            out.update((key, got[key]) for key in ("spec_removed", "spec_error") if key in got)
    if own_spec and "spec_removed" not in out and "spec_error" not in out:
        out.update(remove_run_spec(p["run_id"], p["self_built_spec_dir"]))
    return out
