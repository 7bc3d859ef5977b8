# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: the compute layer of gpuprobe.layers; not public API.

Turns the compute steps the probe recorded inside the CDI-injected container (``gpuprobe_probe`` from
runtime_facts) into the compute record, runs the SAME probe on the host as the control, and asks
``_verdict.compute_points_to`` where a failure points (host PASS + container FAIL -> runtime; both FAIL ->
host). A busy GPU is not touched: compute is NOT_RUN "GPU in use, not preempting" unless allowed.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import sys
import time

from ansible_collections.gpuprobe.layers.plugins.module_utils import _host, _probe
from ansible_collections.gpuprobe.layers.plugins.module_utils._busy import busy_plan
from ansible_collections.gpuprobe.layers.plugins.module_utils._result import (
    FAIL, NOT_RUN, PASS, WARN, LayerBuilder, rollup_status,
)
from ansible_collections.gpuprobe.layers.plugins.module_utils._run import run
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import deferred_signals, interruptible, probe_parent_dir
from ansible_collections.gpuprobe.layers.plugins.module_utils._verdict import compute_points_to

CHECKS = {
    "compute.gpu.idle": {
        "title": "each GPU runs no compute process before the probe touches it (host NVML evidence); a busy GPU is "
                 "NOT_RUN for that GPU alone (never touched), a busy one probed with allow_busy_gpu: true is a WARN",
        "fail": "compute processes are running: the probe does not preempt them",
        "next": "run again when the GPU is idle, or set allow_busy_gpu: true to probe anyway",
    },
    "compute.gpu.seen": {
        "title": "each expected GPU (the cdi layer's identity map, by UUID) is listed by CUDA inside the container "
                 "(cuDeviceGetUuid); NOT_RUN when the probe could not list devices (a global step failed)",
        "fail": "an expected GPU is missing from the container (signature compute.gpu.missing)",
        "next": "the devices the container saw (evidence.gpus, evidence.container.facts.devices) vs the CDI "
                "device's deviceNodes (cdi identity); NVIDIA_VISIBLE_DEVICES in the container env",
    },
    "compute.gpu.unexpected": {
        "title": "the container sees no GPU beyond the expected ones (WARN: a GPU it did not ask for)",
        "fail": "WARN: the container sees a GPU that no requested CDI device gives (isolation risk)",
        "next": "the spec's device nodes (an extra /dev/nvidiaN, or an 'all' device) and the runtime's defaults",
    },
    "compute.container.cdi": {
        "title": "the compute probe ran inside a container that got the GPU through the runtime's CDI injection",
        "fail": "the probe container did not run, or got no CDI device",
        "next": "the runtime record: runtime.container.started and its signature",
    },
    "compute.dlopen": {
        "title": "dlopen(libcuda.so.1) succeeds; the file actually loaded is recorded (/proc/self/maps)",
        "fail": "no usable libcuda.so.1 for the loader (not mounted, not on the loader path, not an ELF, wrong arch)",
        "next": "the CDI mounts of libcuda.so.1 and the runtime.mount checks; the dlopen error text",
    },
    "compute.cuda.call": {
        "title": "one CUDA driver API call (subject) returned CUDA_SUCCESS; its CUresult name and milliseconds",
        "fail": "the call returned an error CUresult (the signature compute.cuda.<name> says which)",
        "next": "the signature's row in this document",
    },
    "compute.kernel.verify": {
        "title": "every element written by the PTX kernel (out[i] = i*a+b, a and b drawn per run) is read back and equals "
                 "the expected value",
        "fail": "the kernel ran but produced wrong values",
        "next": "GPU health (Xid errors in the kernel log, ECC); rerun on an idle GPU",
    },
    "compute.probe.finished": {
        "title": "the probe finished (no hang past the timeout, no crash: exit status 0 and its done line; a non-zero exit "
                 "after the done line is a WARN)",
        "fail": "the probe was killed at the timeout (compute.timeout) or crashed (compute.probe.crashed: exit status or signal)",
        "next": "the hung step (evidence.container.hung_step); a hung cuInit points at the driver/uvm; a crash names its "
                "last step and signal",
    },
    "compute.probe.output": {
        "title": "the probe's output is this run's and agrees with itself: every line read carries this run's token (other "
                 "lines are noise, counted), the step lines agree with the probe's own observations (the dlopen step's file "
                 "is the inventory's libcuda, per-device steps name listed devices, the kernel used this run's a and b)",
        "fail": "the step lines contradict the probe's own observations: the output cannot be trusted",
        "next": "evidence.container.inconsistent and .noise: something in the container writes probe-like lines",
    },
    "compute.driver.binding": {
        "title": "one per container run: the container's CUDA driver is the host's: cuDriverGetVersion equals the host "
                 "NVML CUDA driver version AND the libcuda file loaded in the container (realpath from /proc/self/maps) has "
                 "the content (sha256) of the driver root's libcuda.so.<running driver version>; NOT_RUN when the host "
                 "facts are unknown (no NVML, no such file in the driver root) or the container did not get that far",
        "fail": "the container answered with another driver than the host's (version or file content differ)",
        "next": "the hostPath of the spec's libcuda.so.1 mount: it must be the driver root's libcuda.so.<driver version>; "
                "evidence.driver_binding",
    },
    "compute.nvml.init": {
        "title": "nvmlInit_v2 through libnvidia-ml.so.1 in the same place (NOT_RUN when that library is not there)",
        "fail": "libnvidia-ml.so.1 loaded but nvmlInit failed",
        "next": "NVML tools would fail here too; compare with the host layer's NVML evidence",
    },
    "compute.host_control": {
        "title": "the same probe run on the host outside any container, on the container's GPUs (only_uuids; CUDA_* "
                 "enumeration variables cleared); WARN when only the host fails, or 'partial' when a GPU it was asked for "
                 "was not proven there (evidence.host_control.gpus)",
        "fail": "the host itself cannot run the probe: the driver/host is at fault, not the injection",
        "next": "the host record; evidence.host_control.steps",
    },
}

_UVM_HINT = "/dev/nvidia-uvm absent in the container: inject it (cuInit needs it)"

SIGNATURES = {
    "compute.dlopen.image_glibc": {
        "points_to": "image",
        "meaning": "dlopen(libcuda.so.1) failed because the probe image's glibc is older than the driver's libcuda "
                   "needs (the loader said version `GLIBC_2.xx' not found)",
        "next": "a probe image with a newer glibc (docs/probe-image.md); the loader's words are in the check",
    },
    "compute.dlopen.dependency": {
        "points_to": "cdi",
        "meaning": "dlopen(libcuda.so.1) found the library but not a library it depends on (the loader names it)",
        "next": "the missing dependency named by the loader: mount it from the driver root, or see whether the mounted "
                "libcuda is the driver's",
    },
    "compute.driver.binding": {
        "points_to": "runtime / cdi",
        "meaning": "the CUDA driver that answered in the container is not the host's: its cuDriverGetVersion or the content "
                   "of the loaded libcuda differs from the host (NVML's CUDA driver version, the driver root's file)",
        "next": "the spec's libcuda.so.1 mount (hostPath), the image's own libcuda, evidence.driver_binding",
    },
    "compute.probe.crashed": {
        "points_to": "compute",
        "meaning": "the probe exited with a non-zero status or a signal before its done line (not a timeout): the reason "
                   "names the last step and the signal",
        "next": "the last step and the signal (SIGSEGV after a step points at that library call); the probe's stderr",
    },
    "compute.probe.output": {
        "points_to": "compute",
        "meaning": "the probe's step lines contradict its own observations (e.g. the dlopen step names another file than "
                   "the inventory's libcuda)",
        "next": "evidence.container.inconsistent; what else in the container writes to the probe's stdout",
    },
    "compute.dlopen.libcuda": {
        "points_to": "runtime (host when the host control fails too)",
        "meaning": "dlopen(libcuda.so.1) failed: not mounted, not on the loader path, or not a loadable ELF",
        "next": "the CDI mount of libcuda.so.1 (containerPath on the loader path), the file's type on the host",
    },
    "compute.cuda.CUDA_ERROR_STUB_LIBRARY": {
        "points_to": "runtime / cdi",
        "meaning": "rc 34: the CUDA toolkit's stub libcuda was loaded instead of the driver's (cuGetErrorName gives nothing)",
        "next": "the hostPath of the libcuda.so.1 mount: it must be the driver's libcuda.so.<driver version>",
    },
    "compute.cuda.CUDA_ERROR_INSUFFICIENT_DRIVER": {
        "points_to": "cdi / host",
        "meaning": "rc 35: the libcuda loaded is older than what is required / does not match the kernel module",
        "next": "libcuda version vs /proc/driver/nvidia/version (cdi.library.version)",
    },
    "compute.cuda.CUDA_ERROR_NO_DEVICE": {
        "points_to": "runtime",
        "meaning": "rc 100: cuInit saw no usable device; the nodes may be visible but not openable (cgroup permissions)",
        "next": "runtime.device_node.open (EPERM = device cgroup), the deviceNodes' permissions in the spec",
    },
    "compute.cuda.CUDA_ERROR_JIT_COMPILER_NOT_FOUND": {
        "points_to": "runtime / cdi",
        "meaning": "rc 221: cuInit and context fine, PTX load failed: libnvidia-ptxjitcompiler.so.1 not injected",
        "next": "add a mount of libnvidia-ptxjitcompiler.so.1 from the driver root to the spec",
    },
    "compute.cuda.CUDA_ERROR_SYSTEM_NOT_READY": {
        "points_to": "host",
        "meaning": "rc 802: the system is not ready (fabric manager not running on NVSwitch systems)",
        "next": "fabric manager state on the host",
    },
    "compute.cuda.CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE": {
        "points_to": "cdi",
        "meaning": "rc 804: a forward-compatibility libcuda was loaded on a GPU that does not support it",
        "next": "which libcuda was loaded (compute.dlopen observed); mount the driver's own libcuda",
    },
    "compute.cuda.CUDA_ERROR_UNKNOWN": {
        "points_to": "runtime",
        "meaning": "rc 999 at cuInit: typically /dev/nvidia-uvm missing in the container (NVML still works)",
        "next": "whether /dev/nvidia-uvm (and /dev/nvidiactl) are injected; the hint says what the probe saw",
    },
    "compute.cuda.<CUresult name>": {
        "points_to": "compute",
        "meaning": "any other CUresult a CUDA call returned (cuda.h names it)",
        "next": "the failing call (check subject) and CUDA's documentation of that CUresult",
    },
    "compute.cuda.SYMBOL_NOT_FOUND": {
        "points_to": "cdi",
        "meaning": "the libcuda loaded lacks a driver API entry point the probe calls (not a real/complete libcuda)",
        "next": "which file was loaded (compute.dlopen observed)",
    },
    "compute.verify.mismatch": {
        "points_to": "host",
        "meaning": "the kernel ran but wrong values came back",
        "next": "GPU health: Xid errors in the kernel log, ECC counters",
    },
    "compute.timeout": {
        "points_to": "host",
        "meaning": "a CUDA call did not return before the timeout; the container/process was killed",
        "next": "the hung step; a hung cuInit points at the driver (persistence mode, uvm)",
    },
    "compute.gpu.missing": {
        "points_to": "cdi",
        "meaning": "an expected GPU (the identity map of the requested CDI devices) is not listed by CUDA in the container",
        "next": "the CDI device's deviceNodes (which /dev/nvidiaN), runtime.device_node checks, evidence.gpus",
    },
    "compute.probe.incomplete": {
        "points_to": "compute",
        "meaning": "the probe stopped before finishing with exit status 0 or an unknown one, without a timeout",
        "next": "the probe's stderr in the evidence",
    },
}


def _busy_on(busy, uuid):
    key = _probe.norm_uuid(uuid) if uuid else None
    return [p for p in busy or [] if key and _probe.norm_uuid(p.get("gpu_uuid")) == key]


def _pids(procs):
    return ", ".join(str(p.get("pid")) for p in procs)


def step_signature(step):
    """Failure signature of one failed probe step."""
    if step.get("step") == "dlopen":
        return "compute.dlopen.%s" % _probe.dlopen_class(step.get("error"))
    if step.get("step") == "verify":
        return "compute.verify.mismatch"
    return "compute.cuda.%s" % (step.get("name") or "CUDA_ERROR_%s" % step.get("rc"))


def _node_present(parsed, path):
    inventory = (parsed or {}).get("inventory") or {}
    node = (inventory.get("nodes") or {}).get(path)
    return bool(node and node.get("present"))


def step_hint(step, parsed):
    """A hint for a failed step, from what the same probe saw (e.g. 999 with no /dev/nvidia-uvm)."""
    sig = step_signature(step)
    if sig == "compute.cuda.CUDA_ERROR_UNKNOWN" and not _node_present(parsed, "/dev/nvidia-uvm"):
        return _UVM_HINT
    if step.get("step") == "dlopen" and step.get("error"):
        return "the loader said: %s" % step["error"]
    entry = SIGNATURES.get(sig) or SIGNATURES["compute.cuda.<CUresult name>"]
    return entry["next"]


def _step_reason(failed):
    return "%s failed: %s%s" % (failed.get("call") or failed.get("step"), failed.get("name"),
                                " (rc %s)" % failed["rc"] if failed.get("rc") is not None else "")


def _fail(signature, reason, failed=None, hung=None):
    return {"status": FAIL, "signature": signature, "failed": failed, "hung": hung, "reason": reason}


_LISTING_STEPS = ("cuDeviceGet", "cuDeviceGetName", "cuDeviceGetUuid")


def signal_of(rc, in_container):
    """The signal number an exit status means: a container's 128+N (the runtime passes the process's status on), the
    host's -N (subprocess); None for a plain exit."""
    if rc is None:
        return None
    if rc < 0:
        return -rc
    if in_container and 128 < rc < 160:
        return rc - 128
    return None


def _signal_name(num):
    try:
        return signal.Signals(num).name
    except ValueError:
        return "signal %d" % num


def crash_outcome(parsed, timed_out=False):
    """A FAIL compute.probe.crashed when the probe exited non-zero (or by a signal) without its done line and was not
    killed at the timeout; None otherwise. The reason names the last step (a begun one: the call it died in) and the
    signal."""
    parsed = parsed or {}
    rc = parsed.get("rc")
    if timed_out or parsed.get("timed_out") or parsed.get("complete") or rc in (None, 0):
        return None
    in_container = parsed.get("where", "container") != "host"
    sig = signal_of(rc, in_container)
    hung = parsed.get("hung_step")
    where = "in %s (begun, never returned)" % hung if hung else (
        "after %s" % parsed.get("last_step") if parsed.get("last_step") else "before any compute step")
    how = "%s (exit status %s)" % (_signal_name(sig), rc) if sig else "exit status %s" % rc
    return _fail("compute.probe.crashed", "the probe crashed %s: %s, no done line" % (where, how), hung=hung)


def assess(parsed, timed_out=False, timeout=None):
    """Outcome of one probe run (container or host): dict status, signature, reason, failed (step), hung.
    PASS only when every device the probe ran on verified its kernel (older output without per-device
    steps: when a kernel was verified). A crash (non-zero exit, no done line) is compute.probe.crashed, a kill
    at the timeout compute.timeout."""
    steps = (parsed or {}).get("steps") or []
    failed = _probe.first_failed_step(steps)
    if failed is not None:
        return _fail(step_signature(failed), _step_reason(failed), failed=failed)
    crash = crash_outcome(parsed, timed_out)
    if crash is not None:
        return crash
    hung = (parsed or {}).get("hung_step")
    if timed_out or (hung and hung != "nvmlInit"):
        return _fail("compute.timeout", "no answer from %s within %ss" % (hung or "the probe", timeout), hung=hung)
    ran = set(s.get("device") for s in steps if s.get("device") is not None and s.get("step") not in _LISTING_STEPS)
    verified = set(s.get("device") for s in steps if s.get("step") == "verify" and s.get("ok"))
    devices = ((parsed or {}).get("facts") or {}).get("devices") or []
    if devices and not ran and all(d.get("skipped") for d in devices):
        return {"status": NOT_RUN, "signature": None, "failed": None, "hung": None,
                "reason": "every device was skipped: %s" % "; ".join(sorted(set(d["skipped"] for d in devices)))}
    if verified and ran <= verified:
        return {"status": PASS, "signature": None, "failed": None, "hung": None, "reason": None}
    return _fail("compute.probe.incomplete",
                 "the probe stopped before verifying a kernel on every device it ran on (%d steps recorded)" % len(steps))


def assess_global(parsed, timed_out=False, timeout=None):
    """The part of a run every device shares (dlopen, cuInit, cuDriverGetVersion, cuDeviceGetCount, a hang or
    a kill outside any device): a FAIL outcome, or None when the probe got as far as listing devices."""
    parsed = parsed or {}
    steps = [s for s in parsed.get("steps") or [] if s.get("device") is None]
    failed = _probe.first_failed_step(steps)
    if failed is not None:
        return _fail(step_signature(failed), _step_reason(failed), failed=failed)
    crash = crash_outcome(parsed, timed_out)
    if crash is not None and parsed.get("hung_device") is None:
        return crash
    hung = parsed.get("hung_step")
    if hung and hung != "nvmlInit" and parsed.get("hung_device") is None:
        return _fail("compute.timeout", "no answer from %s within %ss" % (hung, timeout), hung=hung)
    if (parsed.get("facts") or {}).get("devices") is None:
        if timed_out:
            return _fail("compute.timeout", "no answer from the probe within %ss" % timeout, hung=hung)
        return _fail("compute.probe.incomplete", "the probe stopped before listing the devices (%d steps recorded)"
                     % len(steps))
    return None


def assess_device(parsed, device, busy=None, timed_out=False, timeout=None):
    """Outcome of one device of a probe run (``device``: an entry of facts.devices)."""
    parsed = parsed or {}
    ordinal = device.get("ordinal")
    if device.get("skipped"):
        procs = _busy_on(busy, device.get("uuid"))
        reason = "GPU in use, not preempting: pid %s" % _pids(procs) if procs else device["skipped"]
        return {"status": NOT_RUN, "signature": None, "failed": None, "hung": None, "reason": reason}
    steps = [s for s in parsed.get("steps") or [] if s.get("device") == ordinal]
    failed = _probe.first_failed_step(steps)
    if failed is not None:
        return _fail(step_signature(failed), _step_reason(failed), failed=failed)
    if any(s.get("step") == "verify" and s.get("ok") for s in steps):
        return {"status": PASS, "signature": None, "failed": None, "hung": None,
                "reason": None}
    crash = crash_outcome(parsed, timed_out)
    if crash is not None:
        return crash
    if parsed.get("hung_device") == ordinal or timed_out:
        return _fail("compute.timeout", "no answer from %s within %ss" % (parsed.get("hung_step") or "the probe", timeout),
                     hung=parsed.get("hung_step"))
    return _fail("compute.probe.incomplete", "the probe stopped before verifying this device (%d steps)" % len(steps))


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
        "noise": list(probe.get("noise") or [])[:_probe.NOISE_KEPT],
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


def _libcuda_dirs(driver_root):
    out = []
    for sub in ("lib64", "lib", "lib/x86_64-linux-gnu", "usr/lib64", "usr/lib/x86_64-linux-gnu"):
        d = os.path.join(driver_root, sub)
        if os.path.exists(os.path.join(d, _probe.LIBCUDA)) and os.path.realpath(d) not in [os.path.realpath(x) for x in out]:
            out.append(d)
    return out


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
    dirs = _libcuda_dirs(root)
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


def run_host_control(host_record, timeout, uuid=None, python=None, only_uuids=None, skip_uuids=None):
    """The same probe on the host, outside any container, through _run.run with a timeout, in an isolated
    interpreter (-I -S), without the CUDA_* enumeration variables; on the GPUs in ``only_uuids`` when given (the
    container's), never on those in ``skip_uuids`` (busy). An interrupt (SIGINT/SIGTERM/SIGHUP) kills its process
    group, removes its temp dir (named after this process, so the sweep finds a crashed run's) and raises Interrupted."""
    env, dirs = host_control_env(host_record)
    cleared = env_cleared(os.environ)
    config = dict(_probe.new_run_keys(), compute=True, nodes=["/dev/nvidiactl", "/dev/nvidia-uvm"], capture_env=False)
    if uuid:
        config["uuid"] = uuid
    if only_uuids:
        config["only_uuids"] = list(only_uuids)
    if skip_uuids:
        config["skip_uuids"] = list(skip_uuids)
    with interruptible():
        d = probe_parent_dir()
        try:
            _unused, path = _probe.write_probe(directory=d)
            result = run([python or sys.executable or "python3"] + list(_probe.ISOLATED_FLAGS) + [path, json.dumps(config)],
                         timeout=timeout, env=env)
        finally:
            # also on an interrupt: _run.run killed the probe's process group before the exception got here
            with deferred_signals():
                shutil.rmtree(d, ignore_errors=True)
    parsed = _probe.parse_output(result["stdout"], token=config["token"], kernel=(config["a"], config["b"]))
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
        "isolated": list(_probe.ISOLATED_FLAGS),
        "env_cleared": cleared,
        "ld_library_path_added": dirs,
        "only_uuids": list(only_uuids or []) or None,
        "skip_uuids": list(skip_uuids or []),
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


# ---- the binding of the proof to the host's driver ----------------------------------------------------------------

_DIGESTS = {}


def file_digest(path):
    """sha256 of the file at ``path`` (streamed), with size, st_dev, st_ino and the ms it took; cached within the
    process by (dev, ino, size, mtime)."""
    st = os.stat(path)
    key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    if key in _DIGESTS:
        return dict(_DIGESTS[key], cached=True)
    t0 = time.monotonic()
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    info = {"path": path, "size": st.st_size, "dev": st.st_dev, "ino": st.st_ino, "sha256": digest.hexdigest(),
            "sha256_ms": round((time.monotonic() - t0) * 1000.0, 3)}
    _DIGESTS[key] = info
    return dict(info, cached=False)


def host_driver_facts(host_record):
    """What the host says the running driver is: cuda_driver_api (NVML's CUDA driver version, an int like 13000),
    driver_version (NVML, else the kernel module), and libcuda: the driver root's libcuda.so.<driver_version>
    hashed (file_digest); ``unknown`` lists what could not be told."""
    evidence = (host_record or {}).get("evidence") or {}
    nvml = evidence.get("nvml") or {}
    module = evidence.get("kernel_module") or {}
    facts = {"cuda_driver_api": nvml.get("cuda_driver_version_int"),
             "driver_version": nvml.get("driver_version") or module.get("proc_driver_version")
             or module.get("sys_module_version"), "driver_root": evidence.get("driver_root"), "libcuda": None, "unknown": []}
    if isinstance(facts["driver_root"], dict):
        facts["driver_root"] = facts["driver_root"].get("path")
    if not isinstance(facts["cuda_driver_api"], int):
        facts["cuda_driver_api"] = None
        facts["unknown"].append("the host's CUDA driver version (NVML: %s)" % (
            nvml.get("error") or ("not read" if host_record else "no host record")))
    if not facts["driver_version"] or not facts["driver_root"]:
        facts["unknown"].append("the running driver's libcuda file (driver version %s, driver root %s)" % (
            facts["driver_version"], facts["driver_root"]))
        return facts
    root = evidence.get("root") or "/"
    name = "libcuda.so.%s" % facts["driver_version"]
    for sub in _host.LIB_DIRS:
        rel = os.path.join(facts["driver_root"], sub, name)
        full = os.path.join(root, rel.lstrip("/"))
        if os.path.isfile(full):
            try:
                facts["libcuda"] = dict(file_digest(full), host_path=rel)
            except OSError as exc:
                facts["unknown"].append("%s could not be read: %s" % (rel, exc))
            break
    else:
        facts["unknown"].append("no %s in the driver root %s" % (name, facts["driver_root"]))
    return facts


def _loaded_identity(parsed):
    dlopen = next((s for s in (parsed or {}).get("steps") or [] if s.get("step") == "dlopen"), None)
    if dlopen is None or not dlopen.get("ok"):
        return None, dlopen
    return dlopen.get("identity") or {}, dlopen


def binding_check(builder, parsed, where, host_facts):
    """compute.driver.binding for one container run: PASS only when cuDriverGetVersion equals the host's NVML CUDA
    driver version AND the loaded libcuda's sha256 equals the driver root file's. Returns the evidence row."""
    identity, dlopen = _loaded_identity(parsed)
    cuda = ((parsed or {}).get("facts") or {}).get("cuda_driver_api")
    host_lib = host_facts.get("libcuda") or {}
    row = {"where": where, "cuda_driver_api": cuda, "libcuda": identity, "status": None, "differs": []}
    expected = "CUDA driver %s, libcuda sha256 %s (%s)" % (host_facts.get("cuda_driver_api"), host_lib.get("sha256"),
                                                           host_lib.get("host_path"))
    subject = "%s: libcuda.so.1" % where
    if dlopen is None or identity is None:
        row["status"] = NOT_RUN
        observed = "no libcuda was loaded in the container (%s)" % ((dlopen or {}).get("error") or "no dlopen step")
    elif not identity.get("sha256"):
        row["status"] = NOT_RUN
        observed = "the probe recorded no digest of the loaded file %s (%s)" % (
            dlopen.get("realpath"), identity.get("error") or "an older probe")
    else:
        if host_lib.get("sha256") and identity["sha256"] != host_lib["sha256"]:
            row["differs"].append("the loaded file %s (%s bytes, sha256 %s) is not the driver root's %s (%s bytes, sha256 %s)" % (
                identity.get("path") or dlopen.get("realpath"), identity.get("size"), identity["sha256"][:16],
                host_lib.get("host_path"), host_lib.get("size"), host_lib["sha256"][:16]))
        if cuda is not None and host_facts.get("cuda_driver_api") is not None and cuda != host_facts["cuda_driver_api"]:
            row["differs"].append("cuDriverGetVersion %s in the container, the host's NVML CUDA driver version %s" % (
                cuda, host_facts["cuda_driver_api"]))
        if row["differs"]:
            row["status"] = FAIL
            observed = "; ".join(row["differs"])
        elif host_facts["unknown"]:
            row["status"] = NOT_RUN
            observed = "cannot tell: unknown on the host: %s" % "; ".join(host_facts["unknown"])
        elif cuda is None:
            row["status"] = NOT_RUN
            observed = "the container did not get to cuDriverGetVersion (its libcuda's content is the host's)"
        else:
            row["status"] = PASS
            observed = "CUDA driver %s, %s has the content of %s (sha256 %s)" % (
                cuda, identity.get("path") or dlopen.get("realpath"), host_lib.get("host_path"), identity["sha256"][:16])
    builder.add("compute.driver.binding", row["status"], subject=subject, expected=expected, observed=observed,
                hint=None if row["status"] != FAIL else CHECKS["compute.driver.binding"]["next"])
    return row


def _container_reason(container_probe, runtime_record):
    runtime_record = runtime_record or {}
    if runtime_record.get("status") == FAIL:
        return "the probe container never ran: runtime FAIL %s (%s)" % (runtime_record.get("signature"),
                                                                        runtime_record.get("reason"))
    if runtime_record.get("status") == NOT_RUN:
        return "the probe container never ran: runtime NOT_RUN (%s)" % runtime_record.get("reason")
    return "no in-container probe output was given (run runtime_facts with compute: true first)"


def normalize_expected(expected_gpus):
    """The cdi layer's identity.expected_gpus (I2), each {uuid, index, minor, name, mig_uuid}; rows without a
    UUID are kept (they can only be reported missing or matched by nothing)."""
    out = []
    for gpu in expected_gpus or []:
        if isinstance(gpu, dict):
            out.append(dict((k, gpu.get(k)) for k in ("uuid", "index", "minor", "name", "mig_uuid")))
    return out


MIG_UUID_SYMBOL = "cuDeviceGetUuid_v2"


def _matches(expected, device):
    """A seen device proves an expected GPU only by its own UUID: a MIG request only by its MIG UUID, and only when
    cuDeviceGetUuid_v2 gave it (the unversioned cuDeviceGetUuid of drivers < 470 gives a MIG device its parent GPU's
    UUID, which proves no particular instance)."""
    uuid = device.get("uuid")
    key = _probe.norm_uuid(uuid) if uuid else None
    if not key:
        return False
    if expected.get("mig_uuid"):
        return key == _probe.norm_uuid(expected["mig_uuid"]) and device.get("uuid_symbol") == MIG_UUID_SYMBOL
    return bool(expected.get("uuid")) and key == _probe.norm_uuid(expected["uuid"])


def _seen_devices(runs, busy, timeout):
    """Every device listed in every container run: dicts run (index), where, device, outcome."""
    seen = []
    for i, (parsed, where) in enumerate(runs):
        for device in (parsed.get("facts") or {}).get("devices") or []:
            seen.append({"run": i, "where": where, "device": device,
                         "outcome": assess_device(parsed, device, busy, parsed.get("timed_out"), timeout)})
    return seen


_ROW_RANK = {FAIL: 0, PASS: 1, WARN: 2, NOT_RUN: 3}


def gpu_rows(runs, expected_gpus, busy=None, timeout=None, skip_uuids=(), shared=False):  # pylint: disable=too-many-locals
    """The per-GPU rows of the compute record (TEAM-PLAN I3), from the container run(s) ``runs`` (list of
    (parsed probe output, where)) and the expected GPUs (empty: every GPU seen is expected).

    Row: index, uuid, model, expected, seen_in_container, ordinal, status, signature, reason (+ where: the
    container that saw it). Returns (rows, unlisted): unlisted is the global FAIL outcome when no run got as far
    as listing devices (then an expected GPU is not 'missing': the probe could not tell). ``shared``: one container
    held every requested device; there one CUDA process enumerates a single MIG instance, so with two or more MIG
    devices expected, one not listed is NOT_RUN (not provable in that container), never compute.gpu.missing."""
    expected = normalize_expected(expected_gpus)
    skip = set(_probe.norm_uuid(u) for u in skip_uuids or ())
    # listed: some run got the device list from CUDA (even an empty one: then every expected GPU is missing)
    listed = any((parsed.get("facts") or {}).get("devices") is not None for parsed, _where in runs)
    globals_ = [assess_global(parsed, parsed.get("timed_out"), timeout) for parsed, _where in runs]
    unlisted = None if listed else next((g for g in globals_ if g is not None), None)
    seen = _seen_devices(runs, busy, timeout)
    # one row per GPU: a GPU seen by several containers keeps its worst outcome, a PASS before a NOT_RUN
    by_uuid = {}
    anonymous = []
    for item in seen:
        key = _probe.norm_uuid(item["device"].get("uuid")) if item["device"].get("uuid") else None
        if key is None:
            anonymous.append(item)
        elif key not in by_uuid or _ROW_RANK[item["outcome"]["status"]] < _ROW_RANK[by_uuid[key]["outcome"]["status"]]:
            by_uuid[key] = item
    # one shared container, two or more MIG instances asked for, and CUDA listed one of them: it enumerates one
    # instance per process, so the others cannot be shown there (they are not missing)
    migs = [g for g in expected if g.get("mig_uuid")]
    mig_shared = shared and len(migs) >= 2 and any(_matches(g, item["device"]) for g in migs for item in by_uuid.values())
    rows = []
    used = set()
    for gpu in expected:
        # each seen device proves at most one expected GPU
        match = next((k for k, item in by_uuid.items() if k not in used and _matches(gpu, item["device"])), None)
        row = {"index": gpu.get("index"), "uuid": gpu.get("mig_uuid") or gpu.get("uuid"), "model": gpu.get("name"),
               "expected": True, "seen_in_container": match is not None, "ordinal": None}
        if match is not None:
            used.add(match)
            item = by_uuid[match]
            row.update(ordinal=item["device"].get("ordinal"), model=item["device"].get("name") or gpu.get("name"),
                       status=item["outcome"]["status"], signature=item["outcome"]["signature"],
                       reason=item["outcome"]["reason"], where=item["where"])
        elif not (gpu.get("mig_uuid") or gpu.get("uuid")):
            # the host inventory gave no UUID (no NVML): no container GPU can be matched to it, which is not "missing"
            row.update(status=NOT_RUN, signature=None, where=None,
                       reason="identity unknown: the host inventory has no UUID for GPU minor %s (no NVML), so no GPU "
                              "in the container can be matched to it" % gpu.get("minor"))
        elif unlisted is not None and _busy_on(busy, gpu.get("uuid")) and _probe.norm_uuid(gpu.get("uuid")) in skip:
            # busy: it would not have been touched had the probe listed it
            row.update(status=NOT_RUN, signature=None, where=None,
                       reason="GPU in use, not preempting: pid %s" % _pids(_busy_on(busy, gpu.get("uuid"))))
        elif unlisted is not None:
            row.update(status=FAIL, signature=unlisted["signature"], where=None,
                       reason="not listed: the probe stopped before listing devices (%s)" % unlisted["reason"])
        elif mig_shared and gpu.get("mig_uuid"):
            row.update(status=NOT_RUN, signature=None, where=None,
                       reason="not provable in one shared container: one CUDA process enumerates a single MIG instance "
                              "and %d MIG devices were requested (isolation per_device runs one container each)" % sum(
                                  1 for g in expected if g.get("mig_uuid")))
        else:
            row.update(status=FAIL, signature="compute.gpu.missing", where=None,
                       reason="expected GPU not seen in the container (it saw %s)" % (
                           ", ".join(sorted(i["device"].get("uuid") or "?" for i in seen)) or "no GPU"))
        rows.append(row)
    extra = [item for k, item in sorted(by_uuid.items(), key=lambda kv: (kv[1]["run"], kv[1]["device"].get("ordinal")))
             if k not in used] + anonymous
    for item in extra:
        dev, outcome = item["device"], item["outcome"]
        row = {"index": None, "uuid": dev.get("uuid"), "model": dev.get("name"), "expected": not expected,
               "seen_in_container": True, "ordinal": dev.get("ordinal"), "where": item["where"]}
        if expected:
            ran = "kernel %s" % outcome["status"] + (": %s" % outcome["reason"] if outcome["reason"] else "")
            row.update(status=WARN, signature=outcome["signature"],
                       reason="the container sees a GPU it did not ask for (%s)" % ran)
        else:
            row.update(status=outcome["status"], signature=outcome["signature"], reason=outcome["reason"])
        rows.append(row)
    return rows, unlisted


def _not_run_rows(expected_gpus, reason):
    return [{"index": g.get("index"), "uuid": g.get("mig_uuid") or g.get("uuid"), "model": g.get("name"),
             "expected": True, "seen_in_container": False, "ordinal": None, "status": NOT_RUN, "signature": None,
             "reason": reason, "where": None} for g in normalize_expected(expected_gpus)]


ROW_KEYS = ("index", "uuid", "model", "expected", "seen_in_container", "ordinal", "status", "signature", "reason")


def _public_rows(rows):
    """The rows as the contract has them (TEAM-PLAN I3): exactly ROW_KEYS."""
    return [dict((k, r.get(k)) for k in ROW_KEYS) for r in rows]


def _gpu_checks(builder, rows, unlisted, busy, allow_busy_gpu):
    for row in rows:
        subject = "GPU %s" % (row["uuid"] or "#%s" % row["ordinal"])
        procs = _busy_on(busy, row["uuid"])
        if busy is None:
            builder.add("compute.gpu.idle", NOT_RUN, subject=subject,
                        observed="unknown: no host NVML evidence (allow_busy_gpu: true)")
        elif procs and allow_busy_gpu:
            builder.add("compute.gpu.idle", WARN, subject=subject, expected="no compute process",
                        observed="pid %s (allow_busy_gpu: true)" % _pids(procs))
        elif procs:
            builder.add("compute.gpu.idle", NOT_RUN, subject=subject, expected="no compute process",
                        observed="GPU in use, not preempting: pid %s" % _pids(procs))
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


def _host_control_scope(rows, skip_uuids):
    """The GPUs the host control runs on: the container's (expected or seen) by UUID, less the busy ones."""
    uuids = []
    for row in rows:
        if row["uuid"] and row["uuid"] not in skip_uuids and row["uuid"] not in uuids:
            uuids.append(row["uuid"])
    return uuids


def compute_record(container_probe, runtime_record=None, host_record=None, host_control=True,  # pylint: disable=too-many-locals
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
            for i, (p, e) in enumerate(zip(probes, evidences)) if e["executed"] and e["compute_requested"]
            and not e["compute_skipped"]]
    rows, unlisted = gpu_rows(runs, expected_gpus, busy, timeout, plan["skip_uuids"], shared=isolation == "shared") if not skip_reason else (
        _not_run_rows(expected_gpus, skip_reason), None)
    builder.evidence["gpus"] = _public_rows(rows)

    # The host control runs whatever happened in the container, on the same GPUs: it tells injection from host.
    host_result = None
    if host_control and not plan["skip_reason"]:
        runner = host_runner or run_host_control
        host_result, _host_parsed, _host_outcome = runner(host_record, timeout, None,
                                                          only_uuids=_host_control_scope(rows, plan["skip_uuids"]),
                                                          skip_uuids=plan["skip_uuids"])
        if "gpus" not in host_result:  # a runner that did not say (tests): what its output shows
            host_result["gpus"], host_result["failed_step"] = control_gpus(
                _host_parsed, _host_control_scope(rows, plan["skip_uuids"]), host_result.get("timed_out"), timeout)
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
    binding = {"host": dict((k, v) for k, v in host_facts.items()), "runs": []}
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
    _gpu_checks(builder, rows, unlisted, busy, allow_busy_gpu)
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
