# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: the host control: the same probe on the host, on the container's GPUs, isolated and interruptible; not public API."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import threading

from ansible_collections.gpuprobe.layers.plugins.module_utils._host.driver import library_dirs_with
from ansible_collections.gpuprobe.layers.plugins.module_utils._probe import script as _probe
from ansible_collections.gpuprobe.layers.plugins.module_utils._probe import contract as _probe_contract
from ansible_collections.gpuprobe.layers.plugins.module_utils._compute.assess import _fail, assess, assess_device, assess_global
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import FAIL, NOT_RUN, PASS, WARN
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.run import run
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.signals import deferred_signals, interruptible
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime.cleanup import probe_parent_dir


# Variables that decide which GPUs CUDA enumerates, or through what (MPS): never inherited by the host control, so
# that it proves the container's GPUs and no others (the node's or verify_probe_environment's CUDA_VISIBLE_DEVICES).
CONTROL_ENV_CLEARED = re.compile(r"^(CUDA_|PYTHON)")


def host_control_env(host_record, environ=None):
    """Environment for the host control: CUDA_* (CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER, CUDA_MPS_*, ...) and
    PYTHON* removed; when the host record names a driver root whose libcuda is not where the loader looks, that
    root's library dirs put on LD_LIBRARY_PATH. Returns (env, added dirs); the removed names are env_cleared()."""
    env = dict(os.environ if environ is None else environ)
    for key in env_cleared(env):
        env.pop(key)
    evidence = (host_record or {}).get("evidence") or {}
    root = evidence.get("driver_root")
    if isinstance(root, dict):
        root = root.get("path")
    if not root or root in ("/", "/usr"):
        return env, []
    dirs = library_dirs_with(root, _probe.LIBCUDA)
    if dirs:
        current = [p for p in (env.get("LD_LIBRARY_PATH") or "").split(":") if p]
        env["LD_LIBRARY_PATH"] = ":".join(dirs + [p for p in current if p not in dirs])
    return env, dirs


def env_cleared(environ):
    """The names host_control_env removes from ``environ``."""
    return sorted(k for k in environ if CONTROL_ENV_CLEARED.match(k))


def control_gpus(parsed, only_uuids, timed_out=False, timeout=None):
    """What the host control did on each GPU it was asked for (``only_uuids``; none given: every device it listed):
    list of {uuid, status, signature, step}; and the global step where it failed (None when it got past them)."""
    parsed = parsed or {}
    glob = assess_global(parsed, timed_out, timeout)
    failed_step = None
    if glob is not None:
        failed_step = (glob.get("failed") or {}).get("step") or glob.get("hung") or glob["signature"]
    devices = (parsed.get("facts") or {}).get("devices") or []
    wanted = list(only_uuids or []) or [d.get("uuid") for d in devices if not d.get("skipped")]
    out = []
    for uuid in wanted:
        dev = next((d for d in devices if d.get("uuid") and _probe.norm_uuid(d["uuid"]) == _probe.norm_uuid(uuid)), None)
        if dev is not None:
            o = assess_device(parsed, dev, None, timed_out, timeout)
            out.append({"uuid": uuid, "status": o["status"], "signature": o["signature"],
                        "step": (o.get("failed") or {}).get("step") or o.get("hung"), "reason": o["reason"]})
        elif glob is not None:
            out.append({"uuid": uuid, "status": glob["status"], "signature": glob["signature"], "step": failed_step,
                        "reason": glob["reason"]})
        else:
            out.append({"uuid": uuid, "status": FAIL, "signature": "compute.gpu.missing", "step": None,
                        "reason": "not listed by CUDA on the host (it listed %s)" % (
                            ", ".join(d.get("uuid") or "?" for d in devices) or "no GPU")})
    return out, failed_step


def control_status(outcome, gpus):
    """(status, reason) of the host control: its outcome, but a PASS only when every GPU it was asked for verified
    (``gpus``: control_gpus); else WARN 'partial: ...' naming the GPUs it did not prove."""
    status, reason = outcome["status"], outcome["reason"]
    unproven = [g for g in gpus if g["status"] != PASS]
    if status == PASS and (unproven or not gpus):
        status = WARN
        reason = "partial: the control did not prove %s" % (
            "; ".join("GPU %s (%s)" % (g["uuid"], g["reason"] or g["status"]) for g in unproven) or "any GPU (it listed none)")
    return status, reason


def run_host_control(host_record, timeout, uuid=None, python=None, only_uuids=None, idle_uuids=None, cancel=None):  # pylint: disable=too-many-arguments
    """The same probe on the host, outside any container, through _common.run.run with a timeout, in an isolated
    interpreter (-I -S), without the CUDA_* enumeration variables; on the GPUs in ``only_uuids`` when given (the
    container's), and only on those in ``idle_uuids`` when given (_busy.touch_only: the ones NVML reported idle).
    An interrupt (SIGINT/SIGTERM/SIGHUP) kills its process group, removes its temp dir (named after this process, so
    the sweep finds a crashed run's) and raises Interrupted.
    ``cancel`` (a threading.Event): run from another thread (``EarlyControl``), where no signal reaches it, the probe's
    process group is killed once it is set."""
    env, dirs = host_control_env(host_record)
    cleared = env_cleared(os.environ)
    config = dict(_probe_contract.new_run_keys(), compute=True, nodes=["/dev/nvidiactl", "/dev/nvidia-uvm"], capture_env=False)
    if uuid:
        config["uuid"] = uuid
    if only_uuids:
        config["only_uuids"] = list(only_uuids)
    if idle_uuids is not None:
        config["idle_uuids"] = list(idle_uuids)
    with interruptible():
        d = probe_parent_dir()
        try:
            _unused, path = _probe.write_probe(directory=d)
            result = run([python or sys.executable or "python3"] + list(_probe_contract.ISOLATED_FLAGS) + [path, json.dumps(config)],
                         timeout=timeout, env=env, keep_prefix=_probe_contract.LINE_PREFIX, cancel=cancel)
        finally:
            # also on an interrupt: _common.run.run killed the probe's process group before the exception got here
            with deferred_signals():
                shutil.rmtree(d, ignore_errors=True)
    parsed = _probe_contract.parse_output(result["stdout"], token=config["token"], kernel=(config["a"], config["b"]))
    parsed.update(rc=result["rc"], where="host", timed_out=result["timed_out"])
    outcome = assess(parsed, result["timed_out"], timeout)
    if parsed["inconsistent"] and outcome["status"] == PASS:
        outcome = _fail("compute.probe.output", "the host control's output contradicts itself: %s" % "; ".join(
            parsed["inconsistent"]))
    if result["error"] and not result["timed_out"]:
        outcome = {"status": NOT_RUN, "signature": None, "failed": None, "hung": None,
                   "reason": "could not run the host control: %s" % result["error"]}
    gpus, failed_step = control_gpus(parsed, only_uuids, result["timed_out"], timeout)
    status, reason = control_status(outcome, gpus)
    return {
        "status": status,
        "signature": outcome["signature"],
        "reason": reason,
        "python": python or sys.executable,
        "isolated": list(_probe_contract.ISOLATED_FLAGS),
        "env_cleared": cleared,
        "ld_library_path_added": dirs,
        "only_uuids": list(only_uuids or []) or None,
        "idle_uuids": None if idle_uuids is None else list(idle_uuids),
        "gpus": gpus,
        "failed_step": failed_step,
        "rc": result["rc"],
        "wall_ms": result["duration_ms"],
        "timed_out": result["timed_out"],
        "stderr": (result["stderr"] or "")[-2000:],
        "steps": parsed["steps"],
        "nvml": parsed["nvml"],
        "facts": parsed["facts"],
        "hung_step": parsed["hung_step"],
        "noise_count": parsed["noise_count"],
        "inconsistent": parsed["inconsistent"],
        "libraries": (parsed.get("inventory") or {}).get("libraries"),
    }, parsed, outcome


def concurrent_scope(host_record, expected_gpus, idle_uuids):
    """The GPUs the host control may prove while the probe container runs on them (``EarlyControl``): the expected
    GPUs by UUID, those in ``idle_uuids`` when given (_busy.touch_only). None (run it after the container, as before) unless two CUDA contexts on
    each of them at once are known to be allowed: every one listed by the host layer's NVML reading with compute mode
    Default and MIG mode disabled (or not supported); none of them a MIG device."""
    gpus = [g for g in expected_gpus or [] if isinstance(g, dict)]
    if not gpus or any(g.get("mig_uuid") or not g.get("uuid") for g in gpus):
        return None
    evidence = (host_record or {}).get("evidence") or {}
    nvml = dict((_probe.norm_uuid(g.get("uuid") or ""), g) for g in ((evidence.get("nvml") or {}).get("gpus") or [])
                if isinstance(g, dict))
    scope = []
    for gpu in gpus:
        if idle_uuids is not None and _probe.norm_uuid(gpu["uuid"]) not in set(_probe.norm_uuid(u) for u in idle_uuids):
            continue
        seen = nvml.get(_probe.norm_uuid(gpu["uuid"])) or {}
        mig = seen.get("mig_mode")
        if seen.get("compute_mode") != "Default" or (mig is not None and (not isinstance(mig, dict) or mig.get("current") != 0)):
            return None  # not read, another compute mode, MIG on (or mode unreadable): the control runs after the container
        scope.append(gpu["uuid"])
    return scope or None


class EarlyControl(object):
    """The host control started in a thread of its own before the probe container, on ``scope`` (concurrent_scope),
    so that the two run at the same time. ``runner`` (run_host_control's signature, the compute layer's record(host_runner=...))
    gives its result when asked for the same GPUs, else runs the control then. ``stop`` (on an interrupt of the
    main thread) kills its process group and waits for its temp dir to be removed."""

    def __init__(self, host_record, timeout, scope, idle_uuids):
        self.scope = list(scope)
        self.cancel = threading.Event()
        # waited on instead of Thread.join: a signal handler raising inside join() (the interrupt of the main thread)
        # can leave the thread marked stopped while it still runs (CPython's tstate-lock handling), and the wait hung
        self._done = threading.Event()
        self._out = {}
        self._thread = threading.Thread(target=self._run, args=(host_record, timeout, idle_uuids), name="gpuprobe-host-control")
        self._thread.start()

    def _run(self, host_record, timeout, idle_uuids):
        try:
            self._out["result"] = run_host_control(host_record, timeout, only_uuids=self.scope, idle_uuids=idle_uuids,
                                                   cancel=self.cancel)
        except BaseException as exc:  # pylint: disable=broad-except
            self._out["error"] = exc
        finally:
            self._done.set()

    def runner(self, host_record, timeout, uuid=None, only_uuids=None, idle_uuids=None):
        """This control's (result, parsed, outcome) when it ran on ``only_uuids``; else the control run now."""
        while not self._done.wait(0.5):
            pass
        if "result" in self._out and not uuid and sorted(only_uuids or []) == sorted(self.scope):
            result = self._out["result"]
            result[0]["concurrent"] = True  # it ran while the probe container ran
            return result
        return run_host_control(host_record, timeout, uuid, only_uuids=only_uuids, idle_uuids=idle_uuids)

    def stop(self):
        self.cancel.set()
        self._done.wait(30)
