# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE (runtime layer): the runtime record: one probe container started with the requested CDI devices,
its inventory compared with the expected edits (``record``, the layer's entry)."""

from __future__ import annotations

import os
import shutil

from ansible_collections.gpuprobe.layers.plugins.module_utils._common import owner as _owner
from ansible_collections.gpuprobe.layers.plugins.module_utils._probe import script as _probe
from ansible_collections.gpuprobe.layers.plugins.module_utils._probe import contract as _probe_contract
from ansible_collections.gpuprobe.layers.plugins.module_utils._host.busy import busy_plan, touch_only
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.options import check_device, check_image, check_timeout, check_user
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import FAIL, NOT_RUN, PASS, LayerBuilder, not_run, with_checks
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime.catalogue import (
    CHECKS, SIGNATURES, classify_start_error, error_line, probe_in_container,
)
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.vocab import check_run_id
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime.cleanup import probe_parent_dir
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime.compare import build_observed, clean_path, observed_checks, resolve_request
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime.adapters import adapter, container_name
# registers the CRI adapter (containerd, CRI-O) with adapters.adapter: nothing else imports it since __init__ re-exports
# nothing (issue 33)
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import cri as _cri_adapter  # noqa: F401  pylint: disable=unused-import
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import handler as _handler
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import probe_file as _probe_file
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime.select import check_endpoint, engine_label, parse_runtime_option, select_runtimes
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime.signals import ControllerWatch, deferred_signals, interruptible


def _probe_config(expected_edits, compute, plan=None, resolve_paths=None):
    """The probe's config; ``plan`` (_busy.busy_plan): the only devices it may touch (idle_uuids: those NVML reported
    idle; absent where no busy check was asked), or why compute must not run at all (skip_reason: the busy state is
    unknown); a fresh token and kernel (a, b) per run;
    ``resolve_paths``: container paths whose realpath the inventory reports (resolved_paths), beside the spec's own
    paths (resolve_request); spec_mounts: the container paths of the spec's mounts (the probe's mapped_libraries)."""
    nodes = []
    for n in (expected_edits or {}).get("deviceNodes") or []:
        for path in (n.get("path"), clean_path(n.get("path"))):  # '/dev/x/' cannot be lstat'ed; runc makes /dev/x
            if isinstance(path, str) and path and path not in nodes:
                nodes.append(path)
    request = list(resolve_request(expected_edits))
    request += [str(p) for p in resolve_paths or [] if str(p) not in request]
    # the spec mounts' container paths: a file mapped in the probe's process from under one is reported with its digest
    mounts = sorted(set(m.get("containerPath") for m in (expected_edits or {}).get("mounts") or []
                        if isinstance(m.get("containerPath"), str) and m["containerPath"].startswith("/")))
    config = dict(_probe_contract.new_run_keys(), nodes=nodes, compute=bool(compute), resolve_paths=request,
                  spec_mounts=mounts)
    plan = plan or {}
    if plan.get("skip_reason"):
        config["skip_compute_reason"] = plan["skip_reason"]
    if touch_only(plan) is not None:
        config["idle_uuids"] = touch_only(plan)
    return config


def check_params(params):
    """ValueError with one clear message for options that cannot work (before any container exists)."""
    check_run_id(params.get("run_id"))
    if params.get("timeout") is not None:
        check_timeout(params["timeout"])
    devices = params.get("cdi_devices") or []
    if not isinstance(devices, list):
        raise ValueError("cdi_devices must be a list of fully qualified CDI names vendor/class=name (got %r)" % (devices,))
    for device in devices:
        check_device(device)
    if "image" in params:
        check_image(params.get("image"))
    expected = params.get("expected_edits")
    if expected is not None and not isinstance(expected, dict):
        raise ValueError("expected_edits must be a dict (got %s)" % type(expected).__name__)
    for key in ("env", "deviceNodes", "mounts", "hooks", "additionalGids"):
        if (expected or {}).get(key) is not None and not isinstance(expected[key], list):
            raise ValueError("expected_edits.%s must be a list (got %s)" % (key, type(expected[key]).__name__))
    for key in ("deviceNodes", "mounts", "hooks"):
        if any(not isinstance(e, dict) for e in (expected or {}).get(key) or []):
            raise ValueError("expected_edits.%s must be a list of dicts" % key)
    check_user(params.get("user"))
    _owner.normalize(params.get("owner"))
    if len(parse_runtime_option(params.get("runtime"))) != 1:
        raise ValueError("runtime: one record speaks for one runtime; name one engine or auto (got %r)" % (params.get("runtime"),))
    check_endpoint(params.get("runtime_endpoint"))


def record(params, check_mode=False):
    """Returns (runtime record, probe dict or None). ``params``: the module's options."""
    check_params(params)
    if params.get("isolation") == "per_device" and params.get("compute") and not check_mode \
            and len(params.get("cdi_devices") or []) > 1:
        return _record_per_device(params)
    run_id = params.get("run_id") or ""
    devices = list(params.get("cdi_devices") or [])
    expected = params.get("expected_edits") or {}
    evidence = {"requested_devices": devices, "expected_edits": expected, "run_id": run_id}
    if check_mode:
        return not_run("runtime", "check mode: no container was started", evidence), None
    if not devices:
        return not_run("runtime", "no CDI device requested (cdi_devices is empty)", evidence), None
    chosen = params.get("engine") or {}
    if chosen.get("name") and chosen.get("usable") is not None and (chosen.get("path") or chosen.get("endpoint")):
        # the probe stage: the engine the inspect stage selected, detected and the cdi layer judged (why it was
        # chosen, its CDI library and configuration), not detected a second time, usable or not (a podman info
        # that failed or timed out there is not run again); podman, of which an audit's inspect stage read the
        # version only (usable None), is detected in full here (podman info)
        info = dict(chosen)
    else:
        # detected here with the probe's own timeout (the option), as every call of the probe
        info = select_runtimes(params.get("runtime") or "auto", timeout=params.get("timeout") or 60,
                               endpoint=params.get("runtime_endpoint"), descriptor=params.get("cri_descriptor"))[0]
        for key in ("selected_because", "cdi_library", "cdi_config"):
            if chosen.get("name") == info.get("name") and chosen.get(key) is not None:
                info[key] = chosen[key]
    evidence["engine"] = info
    library = (info.get("cdi_library") or {}).get("library")
    versions = {"runtime": ("%s %s" % (info.get("name"), info.get("version") or "")).strip() if info.get("name") else None,
                "oci_runtime": info.get("oci_runtime"), "probe": _probe.PROBE_VERSION,
                "cdi_library": library}
    if not info["usable"]:
        return not_run("runtime", info["reason"], evidence, versions), None
    engine = adapter(info)

    builder = LayerBuilder("runtime", CHECKS)
    builder.evidence = evidence
    builder.versions = versions
    builder.add("runtime.engine.available", PASS, subject=engine_label(info), expected="installed, CDI capable",
                observed="%s (%s; %s; CDI library %s); selected because %s" % (
                    versions["runtime"], info.get("oci_runtime"), info.get("cdi"), library or "unknown",
                    info.get("selected_because") or "named"))
    handler = info.get("runtime_handler")
    if handler:
        notes = "".join("; %s" % n for n in handler.get("notes") or [])
        builder.add("runtime.engine.handler", PASS, subject=engine_label(info), expected="the handler GPU Pods use",
                    observed="%s; selected because %s%s" % (_handler.summary(handler), handler.get("why"), notes))
    if info.get("version") == "unknown":
        builder.add("runtime.engine.version", NOT_RUN, subject=info["name"], expected="a version string",
                    observed="not understood: %r (recorded as unknown, not trusted)" % info.get("version_text"))
    else:
        builder.add("runtime.engine.version", PASS, subject=info["name"], expected="a version string",
                    observed=info.get("version"))

    plan = busy_plan(params.get("host"), params.get("allow_busy_gpu")) if params.get("compute") else None
    timeout = params.get("timeout") or 60
    name = container_name(run_id)
    owner = _owner.resolve(params.get("owner"), fallback_pid=os.getpid())
    evidence["owner"] = owner
    with interruptible(), ControllerWatch(owner):
        probe_dir = probe_parent_dir()
        own_dir, probe_path = _probe.write_probe(directory=probe_dir)
        written = after = _probe_file.state(own_dir, probe_path)  # looked at again once the container is gone
        cleanup = None
        config = _probe_config(expected, params.get("compute"), plan, params.get("resolve_paths"))
        request = {"name": name, "run_id": run_id, "image": params["image"], "devices": devices,
                   "probe_path": probe_path, "in_container": probe_in_container(), "config": config, "user": params.get("user"),
                   "pull": params.get("pull") or "never", "owner": owner, "timeout": timeout,
                   "runtime_handler": (handler or {}).get("request") or ""}
        result = {"rc": None, "stdout": "", "stderr": "", "duration_ms": 0, "timed_out": False, "error": None}
        try:
            result = engine.run_probe(request)
        finally:
            # also on an interrupt (SIGINT/SIGTERM/SIGHUP raise Interrupted; _run killed the runtime client's
            # group): the container lives on in the runtime's monitor, so remove it by name, then the probe dir
            with deferred_signals():
                cleanup = engine.remove(name)
                after = _probe_file.state(own_dir, probe_path)
                shutil.rmtree(probe_dir, ignore_errors=True)
    parsed = _probe_contract.parse_output(result["stdout"], token=config["token"], kernel=(config["a"], config["b"]))
    started = parsed["start"] is not None
    evidence["container"] = {
        "name": name, "image": params["image"], "rc": result["rc"], "wall_ms": result["duration_ms"],
        "timed_out": result["timed_out"], "started": started, "stderr": (result["stderr"] or "")[-4000:],
        "cleanup": cleanup, "user": params.get("user"), "probe_in_container": request["in_container"], "stdout_bytes": result.get("stdout_bytes"),
        "stderr_bytes": result.get("stderr_bytes"), "output_truncated": result.get("truncated"),
        "noise_count": parsed["noise_count"],
    }
    evidence["container"].update(result.get("request") or {})
    _probe_file.check(builder, written, after, name)
    probe = None
    signature = None
    if not started:
        signature = classify_start_error(result["stderr"], result["timed_out"])
        message = error_line(result["stderr"]) or result["error"] or "no output"
        builder.add("runtime.container.started", FAIL, subject=name, expected="the probe runs in the container",
                    observed=message, hint=SIGNATURES[signature]["next"])
        evidence["start_signature"] = signature
        if expected.get("hooks"):  # which hook a runtime names by number: the spec's beside the engine's own
            from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime.own_hooks import engine_hooks  # pylint: disable=import-outside-toplevel
            evidence["engine_hooks"] = engine_hooks(info)
        return builder.build(signature=signature, points_to=SIGNATURES[signature]["points_to"],
                             reason="%s: %s" % (signature, message)), None

    builder.add("runtime.container.started", PASS, subject=name, expected="the probe runs in the container",
                observed="started in %s ms (probe %s, python %s, uid %s)" % (
                    result["duration_ms"], parsed["start"].get("probe_version"), parsed["start"].get("python"),
                    parsed["start"].get("uid")))
    probe = dict(parsed)
    probe.update({"executed": True, "runtime": versions["runtime"], "cdi_devices": devices, "container_name": name,
                  "engine": dict([(k, info.get(k)) for k in ("name", "version", "endpoint", "path", "cdi_library")
                                  if info.get(k) is not None], label=engine_label(info)),
                  "image": params["image"], "timed_out": result["timed_out"], "rc": result["rc"],
                  "wall_ms": result["duration_ms"], "stderr": (result["stderr"] or "")[-4000:]})
    inventory = parsed["inventory"]
    if inventory is None:
        builder.add("runtime.probe.inventory", FAIL, subject=name, expected="the probe's inventory",
                    observed="none (rc %s, %s)" % (result["rc"], error_line(result["stderr"]) or result["error"]))
        signature = "runtime.start.timeout" if result["timed_out"] else "runtime.probe.inventory"
        return builder.build(signature=signature), probe
    builder.add("runtime.probe.inventory", PASS, subject=name, observed="%d nodes, %d mounts seen" % (
        len(inventory.get("nodes") or {}), len(inventory.get("mounts") or [])))
    loader_points_to = observed_checks(builder, expected, inventory, parsed["start"])
    return build_observed(builder, inventory, loader_points_to), probe


def _record_per_device(params):
    """isolation=per_device: the runtime layer from one container with every device (no compute), then one
    compute container per requested CDI device (each sees exactly its GPU). The probe dict is the shared
    container's with ``containers``: one probe per device, in order (a stub with executed false and the runtime's
    reason when that device's container did not run)."""
    shared, probe = record(dict(params, isolation="shared", compute=False))
    if probe is None:
        return shared, None
    containers = []
    # the engine the shared container ran through, detected once: each device's container reuses it
    engine = (shared.get("evidence") or {}).get("engine") or params.get("engine")
    for device in params["cdi_devices"]:
        sub_record, sub_probe = record(dict(params, engine=engine, isolation="shared", cdi_devices=[device],
                                            expected_edits={}))
        if sub_probe is None:
            sub_probe = {"executed": False, "cdi_devices": [], "requested_devices": [device],
                         "reason": "%s %s: %s" % (sub_record["status"], sub_record.get("signature") or "", sub_record["reason"])}
        sub_probe["requested_devices"] = [device]
        containers.append(sub_probe)
        # each device's container ran a probe file of its own: its look after the run counts for the node as well
        own = [c for c in sub_record.get("checks") or [] if c.get("id") == _probe_file.CHECK]
        shared = with_checks(shared, list(shared["checks"]) + own) if own else shared
    probe = dict(probe, containers=containers, isolation="per_device", compute_requested=True)
    shared["evidence"]["isolation"] = {"mode": "per_device", "containers": [
        {"device": c["requested_devices"][0], "name": c.get("container_name"), "executed": c["executed"],
         "reason": c.get("reason")} for c in containers]}
    return shared, probe
