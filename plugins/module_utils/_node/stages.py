# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: the layers of one node in as few node-side calls as possible. Not public API.

A node is verified by two groups of layers, each one process on the node:

* inspect (module gpuprobe.layers.node_layers, ``inspect`` here): host, cdi (after writing the self-built spec
  of the run when asked) and k8s, in that order;
* probe (module gpuprobe.layers.node_probe, _node_probe.probe): runtime and compute in one probe container (and
  the host control), then the removal of the run's self-built spec.

Two modules, not one: AnsiballZ ships every module_utils a module can import and the node compiles what it
imports from source on each call, so an audit never carries the probe's code (docs/performance.md).

The controller (action gpuprobe.layers.verify_node) decides between the two calls whether the probe can run
at all (``layer_gate``), builds the NOT_RUN records of the layers that did not run and the verdict. This
module holds what both sides share: the option specs, the layer selection from tags, the gate, and the
inspect stage.
"""

from __future__ import annotations

import os
import threading

from ansible_collections.gpuprobe.layers.plugins.module_utils._common.limits import RECORD_LIMITS_SPEC
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import LAYERS, cdi_for_runtime, crashed, not_run

INSPECT_LAYERS = ("host", "cdi", "k8s")
PROBE_LAYERS = ("runtime", "compute")
# a layer runs when any of its tags is selected and none is skipped: a layer's tag also runs the layers it
# needs (the same tags the verify role's tasks carried: --tags compute runs host, cdi, runtime and compute)
LAYER_TAGS = {
    "host": ("host", "cdi", "runtime", "compute"),
    "cdi": ("cdi", "runtime", "compute"),
    "runtime": ("runtime", "compute"),
    "compute": ("runtime", "compute"),
    "k8s": ("k8s",),
}
# what a layer needs to have run first; skipping one of them (--skip-tags) skips the layer too
NEEDS = {
    "host": ("host",),
    "cdi": ("host", "cdi"),
    "runtime": ("host", "cdi", "runtime", "compute"),
    "compute": ("host", "cdi", "runtime", "compute"),
    "k8s": ("k8s",),
}
# the key of verify_node's result that the gpuprobe_summary callback reads for its progress line
PROGRESS_KEY = "gpuprobe_host_done"
NOT_SELECTED = "not selected in this run (tags)"
K8S_DISABLED = "disabled (verify_k8s is false)"
VARIANTS = ["full", "no_ptxjit_mount", "no_uvm_node", "cgroup_read_only", "stub_libcuda", "file_mode_0000",
            "missing_hostpath", "stale_library"]
RUNTIMES = ["auto", "podman", "docker", "containerd", "crio"]
DEFAULT_RUNTIME_TIMEOUT = 120   # the runtime_timeout option's default (verify_probe_timeout's)

# The options of the node-side inspect module (gpuprobe.layers.node_layers): host, cdi and k8s.
NODE_LAYERS_ARGSPEC = dict(
    layers=dict(type="list", elements="str", default=["host", "cdi"], choices=list(INSPECT_LAYERS)),
    run_id=dict(type="str", default=""),
    root=dict(type="path", default="/"),
    driver_root=dict(type="path"),
    nvml=dict(type="bool", default=True),
    cdi_source=dict(type="str", default="node", choices=["node", "self-built"]),
    cdi_spec_dirs=dict(type="list", elements="path", default=["/etc/cdi", "/var/run/cdi"]),
    cdi_kinds=dict(type="list", elements="str", default=["nvidia.com/gpu"]),
    cdi_devices=dict(type="list", elements="str", default=[]),
    cdi_spec=dict(type="dict", default={}),
    self_built_spec_dir=dict(type="path", default="/var/run/cdi"),
    self_built_variant=dict(type="str", default="full", choices=VARIANTS),
    stub_libcuda=dict(type="path"),
    runtime=dict(type="raw", default="auto"),
    runtime_endpoint=dict(type="str"),
    cri_descriptor=dict(type="path"),
    # seconds each question to a runtime may take while the runtimes are selected and their CDI configuration read
    # (verify_node passes its probe_timeout: verify_probe_timeout)
    runtime_timeout=dict(type="int", default=120),
    health_thresholds=dict(type="dict", default={}),
    dcgm_diag=dict(type="int", default=0, choices=[0, 1, 2, 3, 4]),
    mode=dict(type="str", default="full", choices=["full", "audit"]),
)

# The options of the controller-side action (gpuprobe.layers.verify_node): the verify role's options without
# their verify_ prefix. plugins/modules/verify_node.py documents them; roles/verify passes them 1:1.
VERIFY_NODE_ARGSPEC = dict(
    dict((name, spec) for name, spec in NODE_LAYERS_ARGSPEC.items()
         if name not in ("layers", "runtime", "runtime_endpoint", "cri_descriptor", "runtime_timeout")),
    mode=dict(type="str", default="full", choices=["full", "audit"]),
    layers=dict(type="list", elements="str", choices=list(LAYERS)),
    layer_timeout=dict(type="int", default=300),
    probe_image=dict(type="str", default="localhost/gpuprobe-probe:local"),
    probe_runtime=dict(type="raw", default="auto"),
    probe_runtime_endpoint=dict(type="str"),
    probe_timeout=dict(type="int", default=120),
    probe_user=dict(type="str", default=""),
    probe_environment=dict(type="dict", default={}),
    cri_descriptor=dict(type="str", default=""),
    probe_isolation=dict(type="str", default="shared", choices=["shared", "per_device"]),
    allow_busy_gpu=dict(type="bool", default=False),
    host_control=dict(type="bool", default=True),
    k8s=dict(type="bool", default=True),
    spool=dict(type="bool", default=False),
    record_limits=RECORD_LIMITS_SPEC,
    # node_exporter's textfile directory on the node: the node's metrics file is written there (node_metrics); "": none
    metrics_dir=dict(type="path", default=""),
    # every option not given is read from the host's variable <prefix><option> (the verify role passes verify_)
    vars_prefix=dict(type="str"),
)
# options whose empty value means "not set" when read from the variables (the verify role's default(omit, true))
EMPTY_IS_UNSET = ("driver_root", "stub_libcuda", "probe_runtime_endpoint")


def selected_layers(run_tags=None, skip_tags=None, k8s=True):
    """The layers a run selects with ``--tags``/``--skip-tags``, in LAYERS order (k8s only when enabled).

    ``--tags L`` runs L and what it needs (LAYER_TAGS); ``--skip-tags L`` skips L and the layers that need it
    (NEEDS): --skip-tags compute leaves host, cdi and k8s.
    """
    run = set(run_tags or ["all"])
    skip = set(skip_tags or [])
    chosen = []
    for layer in LAYERS:
        wanted = bool(run & ({"all", "tagged"} | set(LAYER_TAGS[layer])))
        if wanted and not (skip & (set(NEEDS[layer]) | {"tagged"})) and (layer != "k8s" or k8s):
            chosen.append(layer)
    return chosen


def needed_layers(layers):
    """``layers`` with what they need: runtime and compute run together and need host and cdi."""
    chosen = set(layers)
    if chosen & set(PROBE_LAYERS):
        chosen |= {"host", "cdi", "runtime", "compute"}
    elif "cdi" in chosen:
        chosen.add("host")
    return [layer for layer in LAYERS if layer in chosen]


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


def _k8s(layers, host_record=None):
    """The k8s record when asked for (the last layer of the inspect stage); with this node's host record, the k8s
    layer compares the node's DRA devices with its GPUs (k8s.dra.host_match)."""
    if "k8s" not in layers:
        return {}
    try:
        from ansible_collections.gpuprobe.layers.plugins.module_utils._k8s.layer import collect_k8s  # pylint: disable=import-outside-toplevel
        return {"k8s": collect_k8s(host_record=host_record)}
    except Exception as exc:  # pylint: disable=broad-except
        return {"k8s": crashed("k8s", exc)}


def selected_engines(p, probe_follows=False):
    """The runtimes this run verifies through (``_runtime_select``), each with its own CDI configuration read
    (``cdi_config``): what the cdi layer judges per runtime and the probe stage starts its container through.
    None when the node's root is not / (the engines of another root cannot be asked). ``probe_follows``: the probe
    stage runs next in this process (node_verify), so each engine is detected in full here (podman info), beside the
    host layer, instead of by the probe stage before its container (docs/performance.md); an audit asks podman's
    version only. Every question to an engine (podman info, docker info, the CRI Version and Status calls, containerd
    config dump, crio status config) may take ``runtime_timeout`` seconds."""
    if os.path.realpath(p["root"]) != "/":
        return None
    from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi.engine import describe, read_engine_config  # pylint: disable=import-outside-toplevel
    from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime.select import select_runtimes  # pylint: disable=import-outside-toplevel
    timeout = p.get("runtime_timeout") or DEFAULT_RUNTIME_TIMEOUT
    engines = [describe(info) for info in select_runtimes(p["runtime"], timeout=timeout, endpoint=p.get("runtime_endpoint"),
                                                          descriptor=p.get("cri_descriptor"), inspect=not probe_follows)]
    for info in engines:
        info["cdi_config"] = read_engine_config(info, timeout=timeout)
    return engines


class _Selection(object):
    """``selected_engines(p, probe_follows)`` started in a thread at once, joined when the cdi layer needs it: the engines' own
    queries (podman info, docker info, the CRI Version call; ~0.5 s on a node) run while the host layer reads the
    node, instead of after it (docs/performance.md). The thread is not a daemon: at exit the interpreter waits for
    it, so every process it started still ends by its own timeout (``_run``)."""

    def __init__(self, p, probe_follows=False):
        self._out = {}
        self._thread = threading.Thread(target=self._select, args=(p, probe_follows), name="gpuprobe-runtime-selection")
        self._thread.start()

    def _select(self, p, probe_follows):
        try:
            self._out["engines"] = selected_engines(p, probe_follows)
        except BaseException as exc:  # pylint: disable=broad-except
            self._out["error"] = exc

    def result(self):
        """The selected engines; raises what the selection raised."""
        self._thread.join()
        if "error" in self._out:
            raise self._out["error"]
        return self._out["engines"]


def _cdi_record(p, host, check_mode, cdi_layer, selection=None, probe_follows=False):
    """(the cdi record, the self-built spec read or None): the node's own specs, or this run's (written first).
    ``selection``: the runtime selection already started (``_Selection``), else it runs here."""
    try:
        engines = selection.result() if selection is not None else selected_engines(p, probe_follows)
    except Exception as exc:  # pylint: disable=broad-except
        return crashed("cdi", exc), None
    if p["cdi_source"] != "self-built":
        try:
            return cdi_layer(spec_dirs=p["cdi_spec_dirs"], devices=p["cdi_devices"], kinds=p["cdi_kinds"], host=host,
                             root=p["root"], runtime=_single(p["runtime"]), engines=engines), None
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
        return cdi_layer(spec_dirs=request["spec_dirs"], devices=request["devices"], kinds=request["kinds"], host=host,
                         root="/", runtime=_single(p["runtime"]), engines=engines), spec
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
    """The inspect stage: host, cdi (self-built spec written first when asked), k8s. Returns
    {"records": {layer: record}, "spec": the written spec or None}. ValueError: unusable options.
    ``probe_follows``: the probe stage runs next in this process (``selected_engines``)."""
    # imported here, and only what the stage runs: a module's imports are compiled from source on every run
    # on the node (AnsiballZ ships sources), which is most of a node-side call's own cost
    from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi.layer import cdi_layer  # pylint: disable=import-outside-toplevel
    from ansible_collections.gpuprobe.layers.plugins.module_utils._host.layer import collect_host  # pylint: disable=import-outside-toplevel
    from ansible_collections.gpuprobe.layers.plugins.module_utils._common.options import check_root, check_timeout  # pylint: disable=import-outside-toplevel

    from ansible_collections.gpuprobe.layers.plugins.module_utils._host.health.checks import check_thresholds  # pylint: disable=import-outside-toplevel
    from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import select as _runtime_select  # pylint: disable=import-outside-toplevel

    check_root(p["root"])
    check_thresholds(p["health_thresholds"])
    check_timeout(p.get("runtime_timeout") or DEFAULT_RUNTIME_TIMEOUT, "runtime_timeout")
    p = dict(p, runtime=_runtime_select.parse_runtime_option(p.get("runtime")),
             runtime_endpoint=_runtime_select.check_endpoint(p.get("runtime_endpoint")))
    layers = [layer for layer in INSPECT_LAYERS if layer in p["layers"]]
    records = {}
    spec = None
    # the runtime selection asks no question of the host record: it runs beside the host layer
    probe_follows = probe_follows and not check_mode
    selection = _Selection(p, probe_follows) if "cdi" in layers and "host" in layers else None
    if "host" in layers:
        try:
            records["host"] = collect_host(root=p["root"], driver_root=p["driver_root"], use_nvml=p["nvml"],
                                           health_thresholds=p["health_thresholds"], dcgm_diag=p["dcgm_diag"],
                                           no_gpu_load="check mode" if check_mode else (
                                               "audit mode" if p.get("mode") == "audit" else None))
        except Exception as exc:  # pylint: disable=broad-except
            records["host"] = crashed("host", exc)
    if "cdi" in layers:
        records["cdi"], spec = _cdi_record(p, records.get("host"), check_mode, cdi_layer, selection, probe_follows)
    records.update(_k8s(layers, records.get("host")))
    return {"records": records, "spec": spec}
