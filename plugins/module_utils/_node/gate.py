# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: the gate between a node's inspect stage and its probe stage. Not public API.

Whether the runtime and compute layers can run at all on a node (``layer_gate``), and, per runtime the cdi layer
selected (``probe_engines``), with the records as they speak for that runtime (``engine_gate``). Both sides apply
the same functions: the node in gpuprobe.layers.node_verify (_node.verify) before each probe, the controller
(action gpuprobe.layers.verify_node) when it makes the NOT_RUN records of a probe that did not run (audit mode, a
node-side call that failed), and the filter gpuprobe.layers.layer_gate for a playbook of its own.
"""

from __future__ import annotations

from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import cdi_for_runtime, not_run
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.vocab import PROBE_LAYERS, RUNTIMES

HEALTH_PREFIX = "host.health."


def health_only_fail(record):
    """True when every FAIL check of a host record is a host.health.* check: the GPU is unfit for work but usable,
    so the probe still runs to keep the compute evidence (the verdict stays FAILED_AT_HOST with that signature)."""
    failed = [c for c in (record or {}).get("checks") or [] if c.get("status") == "FAIL"]
    return bool(failed) and all(str(c.get("id", "")).startswith(HEALTH_PREFIX) for c in failed)


def layer_gate(records, mode="full"):
    """Why the runtime and compute layers cannot run on this node ('' when they can).

    They need a container with an injected device: not in audit mode, not after a host or cdi FAIL (no
    device could be injected; a host FAIL of host.health.* checks alone does not block: ``health_only_fail``),
    not when host or cdi did not run (the busy-GPU check and the device list come from them), and not when the
    cdi layer resolved no device.
    """
    if mode == "audit":
        return "audit mode: no container is started"
    for layer in ("host", "cdi"):
        record = records.get(layer) or {}
        status = record.get("status") or "NOT_RUN"
        if status == "FAIL" and layer == "host" and health_only_fail(record):
            continue
        if status == "FAIL":
            return "blocked by %s FAIL" % layer
        if status == "NOT_RUN":
            return "blocked: the %s layer did not run (%s)" % (layer, record.get("reason") or "no record")
    devices = ((records.get("cdi") or {}).get("evidence") or {}).get("requested_devices")
    if not devices:
        return "blocked: the cdi layer resolved no device to inject"
    return ""


def probe_engines(cdi_record, option):
    """The runtimes the probe stage runs through: the ones the cdi layer selected and judged (its evidence.engines), or,
    when it selected none (root not /, no cdi record), the option's own name (``auto`` unless it names one runtime)."""
    engines = [e for e in ((cdi_record or {}).get("evidence") or {}).get("engines") or [] if isinstance(e, dict)]
    return engines or [{"name": option if isinstance(option, str) and option in RUNTIMES else "auto"}]


def engine_gate(records, engine, mode, blocked=None):
    """(the records as they speak for ``engine``'s runtime, why its probe cannot run or ''). ``blocked``: why the node
    could not be verified so far (a node-side call that failed), which blocks every probe."""
    name = engine.get("name")
    own = dict(records, cdi=cdi_for_runtime(records.get("cdi"), name))
    gate = "blocked: %s" % blocked if blocked else layer_gate(own, mode)
    if not gate and not name:
        gate = "no runtime: %s" % engine.get("reason")
    return own, gate


def gated(gate):
    """The runtime and compute records of a probe that did not run, and why."""
    return dict((layer, not_run(layer, gate)) for layer in PROBE_LAYERS)
