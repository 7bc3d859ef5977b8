# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: the probe stage of one node (module gpuprobe.layers.node_probe, and the second half of
gpuprobe.layers.node_verify): runtime and compute in one process. Not public API. The inspect stage is
_node.inspect, the gate before this stage _node.gate, the options _common.args.NODE_PROBE_ARGSPEC."""

from __future__ import annotations

import os

from ansible_collections.gpuprobe.layers.plugins.module_utils._host.busy import busy_plan, touch_only
from ansible_collections.gpuprobe.layers.plugins.module_utils._compute.host_control import EarlyControl, concurrent_scope
from ansible_collections.gpuprobe.layers.plugins.module_utils._compute.layer import record as compute_record
from ansible_collections.gpuprobe.layers.plugins.module_utils._compute.binding import prefetch_host_driver_facts
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.digest import NotRegularFile, file_sha256
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.options import check_environment, check_record
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import crashed, not_run
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.signals import Interrupted, interruptible
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime.cleanup import remove_own_spec
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime.layer import record as runtime_record

MAX_SPEC_READ = 1024 * 1024 + 1  # the cdi layer's spec size cap (+1: a longer file is changed, whatever it holds)
SPEC_CHANGED = "spec changed since the cdi layer read it"


def _file_sha256(path):
    """sha256 of a spec file, bounded (a longer file is changed, whatever it holds), or why it cannot be read."""
    try:
        return file_sha256(path, MAX_SPEC_READ), None
    except NotRegularFile:
        return None, "is no longer a regular file"
    except OSError as exc:
        return None, "cannot be read (%s)" % (exc.strerror or exc)


def spec_changes(cdi_evidence):
    """The spec files that provide the requested devices (the cdi record's device_sources) whose content is not
    what the cdi layer read (its files[].sha256): one line each. Empty when every such file is unchanged; a
    cdi record without that evidence gives one line saying so (nothing proves which spec the runtime reads)."""
    evidence = cdi_evidence or {}
    sources = evidence.get("device_sources") or {}
    digests = dict((f.get("path"), f.get("sha256")) for f in evidence.get("files") or [] if isinstance(f, dict))
    paths = sorted(set(v for k, v in sources.items() if k in (evidence.get("requested_devices") or [])))
    if not paths:
        return ["the cdi record names no spec file providing the requested devices (evidence.device_sources)"]
    changes = []
    for path in paths:
        want = digests.get(path)
        got, why = _file_sha256(path)
        if not want:
            changes.append("%s: the cdi layer recorded no digest" % path)
        elif why:
            changes.append("%s %s" % (path, why))
        elif got != want:
            changes.append("%s: sha256 %s, the cdi layer read %s" % (path, got[:12], want[:12]))
    return changes


def _spec_changed_records(changes, when):
    reason = "%s (%s): %s; the cdi verdict does not speak for this spec" % (SPEC_CHANGED, when, "; ".join(changes))
    return {"runtime": not_run("runtime", reason, {"spec_changes": changes}),
            "compute": not_run("compute", "blocked: %s" % reason)}


def _probe_layers(p, params, records, check_mode, expected_gpus, forced=None):  # pylint: disable=too-many-arguments
    """The runtime and compute records. The spec the cdi layer judged must be the spec the runtime reads: the
    files that provide the devices are rechecked before the container starts (changed: it is not started) and
    after it ran (changed: the records are discarded; the runtime read the file at some moment in between)."""
    evidence = (records.get("cdi") or {}).get("evidence") or {}
    changes = [] if check_mode or not params["cdi_devices"] else spec_changes(evidence)
    if changes:
        return _spec_changed_records(changes, "before the probe container was started")
    out = {}
    if not check_mode and params["cdi_devices"]:  # the driver root's libcuda hashed while the container runs
        prefetch_host_driver_facts(records.get("host"))  # (compute.driver.binding reads it after)
    early = _early_control(p, params, records, check_mode, expected_gpus)
    try:
        with interruptible():  # an interrupt while the early host control runs stops it (its thread gets no signal)
            try:
                runtime, container_probe = runtime_record(params, check_mode=check_mode)
            except (Interrupted, ValueError):
                raise  # the caller's / the options' error
            except Exception as exc:  # pylint: disable=broad-except
                runtime, container_probe = crashed("runtime", exc), None
            if forced and isinstance(runtime.get("evidence"), dict):
                runtime["evidence"]["isolation_forced"] = forced
            out["runtime"] = runtime
            try:
                out["compute"] = compute_record(
                    container_probe, runtime_record=runtime, host_record=records.get("host"),
                    host_control=p["host_control"] and not check_mode, allow_busy_gpu=p["allow_busy_gpu"],
                    timeout=p["timeout"], expected_gpus=expected_gpus, host_runner=early.runner if early else None)
            except Exception as exc:  # pylint: disable=broad-except
                out["compute"] = crashed("compute", exc)
    finally:
        if early:  # interrupted, or the compute layer never asked for its result: its process group is killed
            early.stop()
    changes = [] if check_mode or container_probe is None else spec_changes(evidence)
    if changes:
        discarded = dict((layer, "%s: %s" % (r.get("status"), r.get("reason"))) for layer, r in out.items())
        out = _spec_changed_records(changes, "while the probe container ran")
        out["runtime"]["evidence"]["discarded"] = discarded
    return out


def _early_control(p, params, records, check_mode, expected_gpus):
    """The host control started now, to run while the probe container runs (``EarlyControl``), when it may: asked
    for, one shared container, no busy state that stops compute, and two contexts allowed on each GPU
    (``concurrent_scope``). None: it runs after the container, inside the compute layer's record."""
    if not p["host_control"] or check_mode or params["isolation"] != "shared":
        return None
    plan = busy_plan(records.get("host"), p["allow_busy_gpu"])
    scope = None if plan["skip_reason"] else concurrent_scope(records.get("host"), expected_gpus, touch_only(plan))
    return EarlyControl(records.get("host"), p["timeout"], scope, touch_only(plan)) if scope else None


def isolation_for(isolation, cdi_devices, expected_gpus):
    """(isolation to use, why it was changed or None). One CUDA process enumerates a single MIG instance, so two or
    more MIG devices in one shared container cannot all be proven: with as many CDI devices, each gets its own
    container (per_device); with fewer, the rows left unproven are NOT_RUN (_compute.gpu_rows)."""
    migs = [g for g in expected_gpus or [] if isinstance(g, dict) and g.get("mig_uuid")]
    if isolation == "shared" and len(migs) >= 2 and len(cdi_devices or []) >= 2:
        return "per_device", ("isolation per_device instead of shared: %d MIG devices requested, and one CUDA process "
                              "enumerates a single MIG instance" % len(migs))
    return isolation, None


def chosen_engine(cdi_evidence, runtime):
    """The engine the cdi layer selected and judged (its evidence.engines) that this probe runs through: the one named
    ``runtime``, or with ``auto`` the first (the selection's only one). {} when the cdi layer selected none (root not /,
    an older record): the runtime layer then selects itself."""
    engines = [e for e in (cdi_evidence or {}).get("engines") or [] if isinstance(e, dict)]
    if runtime in (None, "", "auto"):
        return dict(engines[0]) if engines else {}
    for engine in engines:
        if engine.get("name") == runtime:
            return dict(engine)
    return {}


def probe(p, check_mode=False):
    """The probe stage: the probe container with the cdi record's devices (runtime layer), the compute layer
    from its output and the host control, then this run's self-built spec removed (``remove_spec``).

    Returns {"records": {"runtime", "compute"}, "spec_removed": text or None}, or {"interrupted": message}
    when SIGINT/SIGTERM/SIGHUP arrived (after the container, and the spec when asked, are gone).
    ValueError: unusable options.
    """
    records = p["records"] or {}
    check_record(records.get("host"), "records.host", "host")
    check_record(records.get("cdi"), "records.cdi", "cdi")
    cdi = records.get("cdi") or {}
    evidence = cdi.get("evidence") or {}
    expected_gpus = (evidence.get("identity") or {}).get("expected_gpus") or []
    isolation, forced = isolation_for(p["isolation"], evidence.get("requested_devices") or [], expected_gpus)
    engine = chosen_engine(evidence, p["runtime"])
    params = {
        "runtime": engine.get("name") or p["runtime"], "engine": engine,
        "runtime_endpoint": p.get("runtime_endpoint") or engine.get("endpoint"),
        "image": p["image"], "pull": "never", "cdi_devices": list(evidence.get("requested_devices") or []),
        "expected_edits": evidence.get("expected_edits") or {}, "run_id": p["run_id"], "timeout": p["timeout"],
        "compute": True, "isolation": isolation, "allow_busy_gpu": p["allow_busy_gpu"],
        "host": records.get("host"), "user": p["user"] or None, "owner": None,
        "spec_dir": p["self_built_spec_dir"] if p["remove_spec"] else None,
    }
    check_environment(p["environment"] or {})
    for key, value in (p["environment"] or {}).items():
        os.environ[str(key)] = str(value)
    out = {"records": {}, "spec_removed": None}
    try:
        out["records"] = _probe_layers(p, params, records, check_mode, expected_gpus, forced)
    except Interrupted as exc:
        # raised in the probe container's run or in the host control's: either was stopped and its temp dir removed
        return {"interrupted": "%s: the probe container and the host control were stopped and removed; %s" % (
            exc, remove_own_spec(params))}
    if p["remove_spec"] and not check_mode:
        out.update(remove_run_spec(p["run_id"], p["self_built_spec_dir"]))
    return out


def remove_run_spec(run_id, spec_dir):
    """Remove this run's self-built spec: {"spec_removed": its path, or "" when there was none} or {"spec_error": why}."""
    from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import spec as _cdi_spec  # pylint: disable=import-outside-toplevel
    try:
        removed = _cdi_spec.ensure_spec(run_id, state="absent", spec_dir=spec_dir)
        return {"spec_removed": removed["path"] if removed["changed"] else ""}
    except (_cdi_spec.SpecError, OSError) as exc:
        return {"spec_error": str(exc)}
