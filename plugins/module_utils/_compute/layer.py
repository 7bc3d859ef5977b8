# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: the compute layer's entry (``record``): the container run(s) assessed, checked and rolled up into the
layer's record; not public API."""

from __future__ import annotations

import json

from ansible_collections.gpuprobe.layers.plugins.module_utils._probe import script as _probe
from ansible_collections.gpuprobe.layers.plugins.module_utils._probe import contract as _probe_contract
from ansible_collections.gpuprobe.layers.plugins.module_utils._host.busy import busy_plan, touch_only
from ansible_collections.gpuprobe.layers.plugins.module_utils._compute.assess import _busy_on, _pids, assess, not_idle, step_hint
from ansible_collections.gpuprobe.layers.plugins.module_utils._compute.binding import binding_check, host_driver_facts
from ansible_collections.gpuprobe.layers.plugins.module_utils._compute.catalogue import CHECKS, SIGNATURES
from ansible_collections.gpuprobe.layers.plugins.module_utils._compute.host_control import control_gpus, run_host_control
from ansible_collections.gpuprobe.layers.plugins.module_utils._compute.rows import _not_run_rows, _public_rows, gpu_rows, normalize_expected
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import FAIL, NOT_RUN, PASS, WARN, LayerBuilder, rollup_status
from ansible_collections.gpuprobe.layers.plugins.module_utils._verdict.verdict import compute_points_to


def _subject(where, step):
    if step.get("device") is None:
        return where
    return "%s GPU %s" % (where, step.get("uuid") or "#%s" % step.get("device"))


def step_checks(builder, parsed, outcome, where, lenient=None):
    """One check per executed step of the probe run ``where`` ('container' or 'host'); steps of the devices in
    ``lenient`` (ordinals of GPUs the container was not asked for) are WARN instead of FAIL."""
    lenient = set(lenient or [])
    for s in (parsed or {}).get("steps") or []:
        status = PASS if s.get("ok") else (WARN if s.get("device") in lenient and s.get("device") is not None else FAIL)
        subject = _subject(where, s)
        if s.get("step") == "dlopen":
            builder.add("compute.dlopen", status, subject="%s: libcuda.so.1" % where, expected="a loadable libcuda.so.1",
                        observed=s.get("realpath") or s.get("path") or s.get("error"),
                        hint=None if s.get("ok") else step_hint(s, parsed))
        elif s.get("step") == "verify":
            builder.add("compute.kernel.verify", status, subject="%s: %s x uint32" % (subject, s.get("checked")),
                        expected="out[i] == i*%s+%s for every i" % (s.get("a", _probe.DEFAULT_A), s.get("b", _probe.DEFAULT_B)),
                        observed="%d mismatches%s" % (s.get("mismatches", 0),
                                                      "" if s.get("ok") else ", first %s" % json.dumps(s.get("first_bad"))))
        else:
            builder.add("compute.cuda.call", status, subject="%s: %s" % (subject, s.get("call")), expected="CUDA_SUCCESS",
                        observed="%s (rc %s) in %s ms" % (s.get("name"), s.get("rc"), s.get("ms")),
                        hint=None if s.get("ok") else step_hint(s, parsed))
    if outcome and outcome["signature"] in ("compute.timeout", "compute.probe.incomplete", "compute.probe.crashed"):
        builder.add("compute.probe.finished", FAIL, subject=where, expected="the probe finishes",
                    observed=outcome["reason"])
    elif (parsed or {}).get("complete") and (parsed or {}).get("rc") not in (None, 0):
        builder.add("compute.probe.finished", WARN, subject=where, expected="exit status 0 after the done line",
                    observed="exit status %s after the done line (a crash at exit)" % parsed.get("rc"))


def _nvml_check(builder, parsed, where):
    nvml = (parsed or {}).get("nvml")
    if not nvml:
        return
    library = nvml.get("library") or {}
    if not library.get("ok"):
        builder.add("compute.nvml.init", NOT_RUN, subject="%s: libnvidia-ml.so.1" % where,
                    observed="not loaded: %s" % library.get("error"))
    else:
        builder.add("compute.nvml.init", PASS if nvml.get("ok") else WARN, subject="%s: nvmlInit_v2" % where,
                    expected="NVML_SUCCESS", observed="%s (%s devices, driver %s)" % (
                        nvml.get("name"), nvml.get("device_count"), nvml.get("driver_version")))


def container_probes(container_probe):
    """The probe runs that hold the compute steps: the one shared container, or with per-device isolation
    (runtime_facts isolation=per_device) one per requested CDI device (``containers``)."""
    probe = container_probe or {}
    if isinstance(probe.get("containers"), list):
        return [p or {} for p in probe["containers"]]
    return [probe]


def container_evidence(container_probe, runtime_record=None):  # pylint: disable=unused-argument
    """What the container(s) did. ``cdi_devices`` are the devices the runtime gave a container that ran
    (observed), never the requested ones: a container that did not run gave none."""
    probe = container_probe or {}
    executed = bool(probe.get("executed"))
    return {
        "executed": executed,
        "cdi_devices": list(probe.get("cdi_devices") or []) if executed else [],
        "runtime": probe.get("runtime") or ((runtime_record or {}).get("versions") or {}).get("runtime"),
        # the runtime the container ran through: name, version, endpoint or path, label, CDI library
        "engine": probe.get("engine") or (((runtime_record or {}).get("evidence") or {}).get("engine") or None),
        "container_name": probe.get("container_name"),
        "image": probe.get("image"),
        "compute_requested": bool(probe.get("compute_requested")),
        "compute_skipped": probe.get("compute_skipped"),
        "steps": list(probe.get("steps") or []),
        "nvml": probe.get("nvml"),
        "facts": probe.get("facts") or {},
        "hung_step": probe.get("hung_step"),
        "hung_device": probe.get("hung_device"),
        "timed_out": bool(probe.get("timed_out")),
        "rc": probe.get("rc"),
        "complete": probe.get("complete"),
        "noise_count": probe.get("noise_count", 0),
        "noise": list(probe.get("noise") or [])[:_probe_contract.NOISE_KEPT],
        "token_checked": probe.get("token_checked"),
        "inconsistent": list(probe.get("inconsistent") or []),
        "wall_ms": probe.get("wall_ms"),
        "libraries": ((probe.get("inventory") or {}).get("libraries")),
        "requested_devices": list(probe.get("requested_devices") or []),
        "reason": probe.get("reason"),
    }


def _merged_container_evidence(evidences, isolation):
    if len(evidences) == 1 and isolation != "per_device":
        return evidences[0]
    ran = [e for e in evidences if e["executed"]]
    merged = dict(ran[0] if ran else evidences[0])
    devices = []
    for e in ran:
        devices.extend(d for d in e["cdi_devices"] if d not in devices)
    steps = []
    for e in evidences:
        steps.extend(dict(s, container=e["container_name"]) for s in e["steps"])
    merged.update({"executed": bool(ran), "cdi_devices": devices, "steps": steps,
                   "compute_requested": any(e["compute_requested"] for e in ran),
                   "compute_skipped": ran[0]["compute_skipped"] if ran and all(e["compute_skipped"] for e in ran) else None,
                   "timed_out": any(e["timed_out"] for e in evidences), "isolation": isolation,
                   "container_name": ", ".join(e["container_name"] or "?" for e in ran)})
    return merged


def _container_reason(container_probe, runtime_record):
    runtime_record = runtime_record or {}
    if runtime_record.get("status") == FAIL:
        return "the probe container never ran: runtime FAIL %s (%s)" % (runtime_record.get("signature"),
                                                                        runtime_record.get("reason"))
    if runtime_record.get("status") == NOT_RUN:
        return "the probe container never ran: runtime NOT_RUN (%s)" % runtime_record.get("reason")
    return "no in-container probe output was given (run runtime_facts with compute: true first)"


def _gpu_checks(builder, rows, unlisted, plan):
    busy = plan["busy"]
    for row in rows:
        subject = "GPU %s" % (row["uuid"] or "#%s" % row["ordinal"])
        procs = _busy_on(busy, row["uuid"])
        # idle only where NVML said so of this device (the probe's positive list), never "not known busy"
        why = not_idle(plan, row["uuid"])
        if busy is None:
            builder.add("compute.gpu.idle", NOT_RUN, subject=subject,
                        observed="unknown: no host NVML evidence (allow_busy_gpu: true)")
        elif why and plan["allow_busy_gpu"]:
            builder.add("compute.gpu.idle", WARN, subject=subject, expected="no compute process (NVML reported it idle)",
                        observed="%s (allow_busy_gpu: true)" % ("pid %s" % _pids(procs) if procs else why))
        elif why:
            builder.add("compute.gpu.idle", NOT_RUN, subject=subject, expected="no compute process (NVML reported it idle)",
                        observed=why)
        else:
            builder.add("compute.gpu.idle", PASS, subject=subject, expected="no compute process", observed="none")
        if row["expected"]:
            if row["seen_in_container"]:
                builder.add("compute.gpu.seen", PASS, subject=subject, expected="listed by CUDA in the container",
                            observed="ordinal %s (%s)" % (row["ordinal"], row["model"]))
            elif unlisted is not None:
                builder.add("compute.gpu.seen", NOT_RUN, subject=subject, expected="listed by CUDA in the container",
                            observed="the probe could not list devices: %s" % unlisted["reason"])
            elif row["status"] == NOT_RUN:  # identity unknown: nothing to match it with
                builder.add("compute.gpu.seen", NOT_RUN, subject=subject, expected="listed by CUDA in the container",
                            observed=row["reason"])
            else:
                builder.add("compute.gpu.seen", FAIL, subject=subject, expected="listed by CUDA in the container",
                            observed="missing: %s" % row["reason"])
        else:
            builder.add("compute.gpu.unexpected", WARN, subject=subject, expected="only the expected GPUs",
                        observed="ordinal %s (%s) seen in the container" % (row["ordinal"], row["model"]))


def _host_control_scope(rows, plan):
    """The GPUs the host control runs on: the container's (expected or seen) by UUID, those NVML reported idle."""
    uuids = []
    for row in rows:
        if row["uuid"] and row["uuid"] not in uuids and (touch_only(plan) is None or not not_idle(plan, row["uuid"])):
            uuids.append(row["uuid"])
    return uuids


def record(container_probe, runtime_record=None, host_record=None, host_control=True,  # pylint: disable=too-many-locals
           allow_busy_gpu=False, timeout=60, host_runner=None, expected_gpus=None):
    """The compute layer record. ``expected_gpus``: the cdi layer's identity.expected_gpus (empty: every GPU
    seen in the container is expected). ``host_runner`` (tests) replaces run_host_control."""
    plan = busy_plan(host_record, allow_busy_gpu)
    busy = plan["busy"]
    probes = container_probes(container_probe)
    isolation = "per_device" if isinstance((container_probe or {}).get("containers"), list) else "shared"
    evidences = [container_evidence(p, runtime_record) for p in probes]
    container = _merged_container_evidence(evidences, isolation)
    builder = LayerBuilder("compute", CHECKS)
    builder.evidence["busy"] = busy
    builder.evidence["container"] = container
    if isolation == "per_device":
        builder.evidence["containers"] = evidences
    builder.evidence["expected_gpus"] = normalize_expected(expected_gpus)
    builder.evidence["expected_source"] = ("cdi identity (expected_gpus)" if expected_gpus else
                                           "none given: every GPU seen in the container is expected")
    if plan["skip_reason"] and container["executed"]:
        # not one GPU may be touched (busy state unknown): no container compute, no host control
        builder.evidence["gpus"] = _public_rows(_not_run_rows(expected_gpus, plan["skip_reason"]))
        builder.evidence["host_control"] = {"status": NOT_RUN, "reason": plan["skip_reason"], "gpus": [], "failed_step": None}
        builder.add("compute.gpu.idle", NOT_RUN, subject="compute processes", observed=plan["skip_reason"])
        return _finish(builder, NOT_RUN, plan["skip_reason"], None, NOT_RUN)

    skip_reason = None
    if not container["executed"] and isolation == "per_device" and (container_probe or {}).get("executed"):
        skip_reason = "no per-device compute container ran: %s" % "; ".join(
            "%s: %s" % (", ".join(e["requested_devices"]) or "?", e["reason"]) for e in evidences)
    elif not container["executed"]:
        skip_reason = _container_reason(container_probe, runtime_record)
    elif container["compute_skipped"]:
        skip_reason = container["compute_skipped"]
    elif not container["compute_requested"]:
        skip_reason = "the probe container ran without compute (runtime_facts compute: false)"
    runs = [(p, "container" if isolation == "shared" else "container %s" % (e["container_name"] or i))
            for i, (p, e) in enumerate(zip(probes, evidences)) if e["executed"] and e["compute_requested"] and not e["compute_skipped"]]
    rows, unlisted = gpu_rows(runs, expected_gpus, plan, timeout, shared=isolation == "shared") if not skip_reason else (
        _not_run_rows(expected_gpus, skip_reason), None)
    builder.evidence["gpus"] = _public_rows(rows)

    # The host control runs whatever happened in the container, on the same GPUs: it tells injection from host.
    host_result = None
    if host_control and not plan["skip_reason"]:
        runner = host_runner or run_host_control
        host_result, _host_parsed, _host_outcome = runner(host_record, timeout, None,
                                                          only_uuids=_host_control_scope(rows, plan),
                                                          idle_uuids=touch_only(plan))
        if "gpus" not in host_result:  # a runner that did not say (tests): what its output shows
            host_result["gpus"], host_result["failed_step"] = control_gpus(
                _host_parsed, _host_control_scope(rows, plan), host_result.get("timed_out"), timeout)
        builder.evidence["host_control"] = host_result
        builder.versions["cuda_driver_api_host"] = (host_result.get("facts") or {}).get("cuda_driver_api")
    else:
        builder.evidence["host_control"] = {"status": NOT_RUN, "gpus": [], "failed_step": None,
                                            "reason": plan["skip_reason"] if host_control else "host_control: false"}
    host_status = builder.evidence["host_control"]["status"]
    if skip_reason:
        _host_checks(builder, host_result, host_status, NOT_RUN)
        return _finish(builder, NOT_RUN, skip_reason, None, host_status)

    for e in evidences:
        if isolation == "shared" or e["executed"]:
            builder.add("compute.container.cdi", PASS if e["cdi_devices"] else FAIL, subject=e["container_name"],
                        expected="a container with CDI devices", observed=", ".join(e["cdi_devices"]) or "no CDI device")
        else:
            builder.add("compute.container.cdi", FAIL, subject=", ".join(e["requested_devices"]) or "a per-device container",
                        expected="a container with this CDI device", observed="did not run: %s" % (e["reason"] or "?"))
    outcomes = []
    host_facts = host_driver_facts(host_record)
    binding = {"host": host_facts, "runs": []}  # host: with every driver root file the runs were compared with
    builder.evidence["driver_binding"] = binding
    for parsed, where in runs:
        outcome = assess(parsed, parsed.get("timed_out"), timeout)
        outcomes.append((parsed, outcome))
        lenient = [r["ordinal"] for r in rows if not r["expected"] and r.get("where") == where]
        _nvml_check(builder, parsed, where)
        step_checks(builder, parsed, outcome, where, lenient=lenient)
        output_check(builder, parsed, where)
        binding["runs"].append(binding_check(builder, parsed, where, host_facts))
        builder.versions["cuda_driver_api"] = (parsed.get("facts") or {}).get("cuda_driver_api")
    builder.versions["probe"] = _probe.PROBE_VERSION
    _gpu_checks(builder, rows, unlisted, plan)
    # the status is the roll-up of the container's checks; the host control (added after) only attributes
    container_status = rollup_status(builder.checks)
    _host_checks(builder, host_result, host_status, container_status)
    builder.evidence["gpus"] = _public_rows(rows)
    return _finish_rows(builder, container_status, rows, unlisted, outcomes, host_status)


def _finish_rows(builder, status, rows, unlisted, outcomes, host_status):  # pylint: disable=too-many-arguments
    """``status``: the roll-up of the container's checks; the signature and reason name the first failure (a
    global step, else the first expected GPU that failed, else the first failed check)."""
    expected = [r for r in rows if r["expected"]]
    reason = signature = None
    if status == FAIL:
        failed_row = next((r for r in expected if r["status"] == FAIL), None)
        if unlisted is not None:
            signature, reason = unlisted["signature"], unlisted["reason"]
            parsed = next((p for p, o in outcomes if o.get("failed") is unlisted.get("failed")), None)
            if unlisted.get("failed") is not None:
                reason = "%s; hint: %s" % (reason, step_hint(unlisted["failed"], parsed))
        elif failed_row is not None:
            signature = failed_row["signature"]
            reason = "GPU %s: %s" % (failed_row["uuid"] or "#%s" % failed_row["ordinal"], failed_row["reason"])
            parsed, failed = next(((p, o["failed"]) for p, o in outcomes
                                   if o.get("failed") is not None and o["failed"].get("uuid") == failed_row["uuid"]), (None, None))
            if failed is not None:
                reason = "%s; hint: %s" % (reason, step_hint(failed, parsed))
        else:
            culprit = next(c for c in builder.checks if c["status"] == FAIL)
            signature = culprit["id"] if culprit["id"] in ("compute.container.cdi", "compute.driver.binding",
                                                           "compute.probe.output") else next(
                (o["signature"] for _p, o in outcomes if o["signature"]), culprit["id"])
            reason = reason or "%s: %s" % (culprit["id"], culprit.get("observed"))
    elif status in (PASS, WARN):
        not_verified = [r for r in expected if r["status"] != PASS]
        if expected and len(not_verified) == len(expected):
            # nothing the container asked for was proven (every expected GPU busy): a documented NOT_RUN
            status = NOT_RUN
            reason = "no requested GPU was verified: %s" % "; ".join(
                "GPU %s: %s" % (r["uuid"], r["reason"]) for r in not_verified)
        elif not expected:
            status, reason = NOT_RUN, "the container listed no GPU to verify"
        elif not_verified:
            # some requested GPU was not proven (busy, left alone): never PASS (a JUnit gate would go green)
            status = WARN if status == PASS else status
            reason = "; ".join("GPU %s not verified: %s" % (r["uuid"], r["reason"]) for r in not_verified)
    if status in (PASS, WARN) and host_status == FAIL:
        # a container PASS beside a host-control FAIL is never silent: the two runs disagree on the same GPUs
        control = builder.evidence.get("host_control") or {}
        status = WARN
        reason = "; ".join(x for x in (reason, "the container passed but the host control FAILed (%s: %s): the two runs "
                                       "of the same probe disagree" % (control.get("signature"), control.get("reason"))) if x)
    return _finish(builder, status, reason, signature, host_status)


def output_check(builder, parsed, where):
    """compute.probe.output: lines bound to this run (token), noise counted, step lines consistent with the probe's
    own observations. FAIL on an inconsistency; PASS otherwise (NOT_RUN for output read without a token)."""
    parsed = parsed or {}
    noise = "%d noise lines ignored" % parsed.get("noise_count", 0)
    if parsed.get("inconsistent"):
        builder.add("compute.probe.output", FAIL, subject=where, expected="the step lines agree with the probe's observations",
                    observed="; ".join(parsed["inconsistent"]) + " (%s)" % noise)
    elif not parsed.get("token_checked"):
        builder.add("compute.probe.output", NOT_RUN, subject=where, expected="every line carries this run's token",
                    observed="output read without a token (recorded before tokens existed); %s" % noise)
    else:
        builder.add("compute.probe.output", PASS, subject=where, expected="every line carries this run's token",
                    observed="consistent; %s" % noise)


def _host_checks(builder, host_result, host_status, container_status):
    if host_result is None:
        builder.add("compute.host_control", NOT_RUN, subject="host",
                    observed=builder.evidence.get("host_control", {}).get("reason") or "host_control: false")
        return
    # The record's status comes from the container; a control that fails where the container passed is
    # a named oddity (WARN on the check), not a failure of compute.
    status = WARN if host_status == FAIL and container_status in (PASS, WARN) else host_status
    builder.add("compute.host_control", status, subject="host (%s)" % host_result.get("python"),
                expected="PASS", observed="%s%s" % (host_status, ": %s" % host_result["reason"] if host_result.get("reason") else ""))


def _finish(builder, status, reason, signature, host_status):
    points_to = compute_points_to(status, host_status) if status == FAIL else None
    if status == FAIL and (SIGNATURES.get(signature) or {}).get("points_to") == "image":
        points_to = "image"  # the probe image (its env or its libraries): not the spec, runtime or host
    record = builder.build(status=status, reason=reason, signature=signature, points_to=points_to,
                           not_proven=None if status == PASS else ["that a CUDA kernel runs in this container"])
    return record
