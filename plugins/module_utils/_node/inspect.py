# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: the inspect stage of one node (module gpuprobe.layers.node_layers, and the first half of
gpuprobe.layers.node_verify): host, k8s and cdi (after writing the run's self-built spec when asked), in that order
(k8s first: the runtime handler the GPU Pods use is what cdi judges), in one process. Not public API.

The stage also selects the runtimes the verdict speaks for (_runtime.select) and reads each one's own CDI
configuration (_cdi.engine), beside the host layer: the cdi layer judges the specs for each of them and the probe
stage runs through them (_node.probe). It imports no probe code: an audit (node_layers) never ships or compiles it
(docs/performance.md).
"""

from __future__ import annotations

import os

from ansible_collections.gpuprobe.layers.plugins.module_utils._common.args import DEFAULT_RUNTIME_TIMEOUT
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.run import Started
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import crashed, not_run
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.vocab import INSPECT_LAYERS


def _k8s(layers, host_record=None, processes_read=None):
    """The k8s record when asked for (the last layer of the inspect stage); with this node's host record, the k8s
    layer compares the node's DRA devices with its GPUs (k8s.dra.host_match). ``processes_read``: the stage's one read
    of /proc (``_common.run.Started``), or None."""
    if "k8s" not in layers:
        return {}
    try:
        from ansible_collections.gpuprobe.layers.plugins.module_utils._k8s.layer import record  # pylint: disable=import-outside-toplevel
        return {"k8s": record(host_record=host_record, procs=processes_read.result() if processes_read is not None else None)}
    except Exception as exc:  # pylint: disable=broad-except
        return {"k8s": crashed("k8s", exc)}


def k8s_handlers(k8s):
    """The k8s record's ``evidence.runtime_handlers`` (the GPU Pods' handlers), {"error": why} for a k8s record without
    them (NOT_RUN: no kubeconfig on the node, ...), None when the k8s layer was not asked for."""
    if not isinstance(k8s, dict):
        return None
    found = (k8s.get("evidence") or {}).get("runtime_handlers")
    if isinstance(found, dict):
        return found
    return {"error": "k8s %s: %s" % (k8s.get("status"), k8s.get("reason") or "the RuntimeClasses were not read")}


def selected_engines(p, probe_follows=False, k8s=None, processes_read=None):
    """The runtimes this run verifies through (``_runtime_select``), each with its own CDI configuration read
    (``cdi_config``): what the cdi layer judges per runtime and the probe stage starts its container through.
    None when the node's root is not / (the engines of another root cannot be asked). ``probe_follows``: the probe
    stage runs next in this process (node_verify), so each engine is detected in full here (podman info), beside the
    host layer, instead of by the probe stage before its container (docs/performance.md); an audit asks podman's
    version only. Every question to an engine (podman info, docker info, the CRI Version and Status calls, containerd
    config dump, crio status config) may take ``runtime_timeout`` seconds. ``processes_read``: the stage's one read of
    /proc (``_common.run.Started``; the kubelet's discovery reads it), or None (read here)."""
    if os.path.realpath(p["root"]) != "/":
        return None
    from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi.engine import describe, read_engine_config  # pylint: disable=import-outside-toplevel
    from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime.select import select_runtimes  # pylint: disable=import-outside-toplevel
    timeout = p.get("runtime_timeout") or DEFAULT_RUNTIME_TIMEOUT
    engines = [describe(info) for info in select_runtimes(p["runtime"], timeout=timeout, endpoint=p.get("runtime_endpoint"),
                                                          descriptor=p.get("cri_descriptor"), inspect=not probe_follows,
                                                          procs=processes_read.result() if processes_read is not None else None)]
    from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime.handler import attach  # pylint: disable=import-outside-toplevel
    runtime_handlers = k8s_handlers(k8s)
    for info in engines:
        info["cdi_config"] = read_engine_config(info, timeout=timeout)
        info.pop("cri_config", None)   # read into cdi_config; the record keeps what was judged, not the daemon's dump
        if info.get("name"):
            # the handler the probe runs with, its binary and who injects (from the running engine's configuration)
            attach(info, p.get("runtime_handler"), runtime_handlers)
    return engines


class _Selection(object):
    """``selected_engines(p, probe_follows)`` started in a thread at once (``_common.run.Started``), joined when the cdi
    layer needs it: the engines' own queries (podman info, docker info, the CRI Version call; ~0.5 s on a node) run
    while the host layer reads the node, instead of after it (docs/performance.md)."""

    def __init__(self, p, probe_follows=False, processes_read=None):
        self._started = Started(selected_engines, p, probe_follows, processes_read=processes_read)

    def result(self):
        """The selected engines; raises what the selection raised."""
        return self._started.result()

    def with_k8s(self, p, k8s):
        """The selected engines with the handler chosen from the k8s record (which the thread could not wait for)."""
        engines = self.result()
        if engines and isinstance(k8s, dict):
            from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime.handler import attach  # pylint: disable=import-outside-toplevel
            for info in engines:
                if info.get("name"):
                    attach(info, p.get("runtime_handler"), k8s_handlers(k8s))
        return engines


def _cdi_record(p, host, check_mode, cdi_record, selection=None, probe_follows=False, k8s=None):
    """(the cdi record, the self-built spec read or None): the node's own specs, or this run's (written first).
    ``selection``: the runtime selection already started (``_Selection``), else it runs here; ``k8s``: the k8s record
    of this run (the GPU Pods' runtime handlers), or None."""
    try:
        engines = selection.with_k8s(p, k8s) if selection is not None else selected_engines(p, probe_follows, k8s)
    except Exception as exc:  # pylint: disable=broad-except
        return crashed("cdi", exc), None
    if p["cdi_source"] != "self-built":
        try:
            return cdi_record(spec_dirs=p["cdi_spec_dirs"], devices=p["cdi_devices"], kinds=p["cdi_kinds"], host=host,
                              root=p["root"], runtime=_single(p["runtime"]), engines=engines,
                              trusted_edits=p.get("trusted_edits")), None
        except Exception as exc:  # pylint: disable=broad-except
            return crashed("cdi", exc), None
    spec = p["cdi_spec"] or None
    if spec is None:
        if check_mode:
            return not_run("cdi", "check mode: the self-built spec of this run is not written"), None
        from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import spec as _cdi_spec  # pylint: disable=import-outside-toplevel
        try:
            spec = _cdi_spec.ensure_spec(p["run_id"], state="present", spec_dir=p["self_built_spec_dir"],
                                         variant=p["self_built_variant"], root=p["root"], driver_root=p["driver_root"],
                                         host=host, stub_libcuda=p["stub_libcuda"])
        except Exception as exc:  # pylint: disable=broad-except
            return not_run("cdi", "the self-built spec of this run could not be written: %s" % exc), None
    request = self_built_request(spec)
    try:
        # a self-built spec lives in the real spec dir, its host paths already resolved under root
        return cdi_record(spec_dirs=request["spec_dirs"], devices=request["devices"], kinds=request["kinds"], host=host,
                          root="/", runtime=_single(p["runtime"]), engines=engines, trusted_edits=p.get("trusted_edits")), spec
    except Exception as exc:  # pylint: disable=broad-except
        return crashed("cdi", exc), spec


def _single(runtime):
    """The runtime name compat judges when no engine was selected (root is not /): the option's only name, or auto."""
    names = runtime if isinstance(runtime, list) else [runtime or "auto"]
    return names[0] if len(names) == 1 else "auto"


def self_built_request(spec):
    """What the cdi layer reads for a self-built spec: its own dir and kind, and one GPU device (not "all")."""
    devices = list(spec.get("devices") or [])
    gpus = [d for d in devices if not d.endswith("=all")]
    return {"spec_dirs": [os.path.dirname(spec["path"])], "kinds": [spec["kind"]], "devices": (gpus or devices)[:1]}


def inspect(p, check_mode=False, probe_follows=False):
    """The inspect stage: host, k8s, cdi (self-built spec written first when asked). Returns
    {"records": {layer: record}, "spec": the written spec or None}. ValueError: unusable options.
    ``probe_follows``: the probe stage runs next in this process (``selected_engines``)."""
    # imported here, and only what the stage runs: a module's imports are compiled from source on every run
    # on the node (AnsiballZ ships sources), which is most of a node-side call's own cost
    from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi.layer import record as cdi_record  # pylint: disable=import-outside-toplevel
    from ansible_collections.gpuprobe.layers.plugins.module_utils._host.layer import record as host_record  # pylint: disable=import-outside-toplevel
    from ansible_collections.gpuprobe.layers.plugins.module_utils._common.options import check_root, check_timeout  # pylint: disable=import-outside-toplevel

    from ansible_collections.gpuprobe.layers.plugins.module_utils._host.health.limits import check_thresholds  # pylint: disable=import-outside-toplevel
    from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import select as _runtime_select  # pylint: disable=import-outside-toplevel
    from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime.handler import check_handler  # pylint: disable=import-outside-toplevel

    check_root(p["root"])
    check_thresholds(p["health_thresholds"])
    check_timeout(p.get("runtime_timeout") or DEFAULT_RUNTIME_TIMEOUT, "runtime_timeout")
    p = dict(p, runtime=_runtime_select.parse_runtime_option(p.get("runtime")),
             runtime_endpoint=_runtime_select.check_endpoint(p.get("runtime_endpoint")),
             runtime_handler=check_handler(p.get("runtime_handler")))
    layers = [layer for layer in INSPECT_LAYERS if layer in p["layers"]]
    records = {}
    spec = None
    # the runtime selection asks no question of the host record: it runs beside the host layer
    probe_follows = probe_follows and not check_mode
    selecting = "cdi" in layers and "host" in layers
    # one read of /proc (every process's command line) for the kubelet's discovery in the runtime selection (at / only)
    # and the distribution the k8s layer asks for its kubectl and kubeconfig: each read it once before
    processes_read = None
    if selecting and os.path.realpath(p["root"]) == "/":
        from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime.nodefs import processes  # pylint: disable=import-outside-toplevel
        processes_read = Started(processes, "/")
    selection = _Selection(p, probe_follows, processes_read) if selecting else None
    if "host" in layers:
        try:
            records["host"] = host_record(root=p["root"], driver_root=p["driver_root"], use_nvml=p["nvml"],
                                          health_thresholds=p["health_thresholds"], dcgm_diag=p["dcgm_diag"],
                                          no_gpu_load="check mode" if check_mode else (
                                              "audit mode" if p.get("mode") == "audit" else None))
        except Exception as exc:  # pylint: disable=broad-except
            records["host"] = crashed("host", exc)
    # k8s before cdi: the handler the GPU Pods use (their RuntimeClasses) is what the cdi layer judges and the probe runs with
    records.update(_k8s(layers, records.get("host"), processes_read))
    if "cdi" in layers:
        records["cdi"], spec = _cdi_record(p, records.get("host"), check_mode, cdi_record, selection, probe_follows,
                                           records.get("k8s"))
    return {"records": records, "spec": spec}
