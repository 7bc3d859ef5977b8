# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: the outcome of one probe run (container or host): its failed step, crash or hang, per device; not public API."""

from __future__ import annotations

import signal

from ansible_collections.gpuprobe.layers.plugins.module_utils._probe import script as _probe
from ansible_collections.gpuprobe.layers.plugins.module_utils._probe import contract as _probe_contract
from ansible_collections.gpuprobe.layers.plugins.module_utils._host.busy import busy_on, not_idle_text
from ansible_collections.gpuprobe.layers.plugins.module_utils._compute.catalogue import _UVM_HINT, SIGNATURES
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import FAIL, NOT_RUN, PASS


def _busy_on(busy, uuid):
    """The busy entries of the device CUDA names ``uuid`` (its own, and a MIG GPU's instances' for its parent UUID)."""
    return busy_on(busy, uuid, norm=_probe.norm_uuid)


def not_idle(plan, uuid):
    """Why the device CUDA names ``uuid`` is not known idle (_busy.not_idle_text; None: NVML reported it idle)."""
    return not_idle_text(plan, uuid, norm=_probe.norm_uuid)


def _pids(procs):
    return ", ".join(str(p.get("pid")) for p in procs)


def step_signature(step):
    """Failure signature of one failed probe step."""
    if step.get("step") == "dlopen":
        return "compute.dlopen.%s" % _probe_contract.dlopen_class(step.get("error"))
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
    failed = _probe_contract.first_failed_step(steps)
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
    failed = _probe_contract.first_failed_step(steps)
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


def assess_device(parsed, device, plan=None, timed_out=False, timeout=None):
    """Outcome of one device of a probe run (``device``: an entry of facts.devices); ``plan`` (_busy.busy_plan): why a
    device the probe left alone was not known idle."""
    parsed = parsed or {}
    ordinal = device.get("ordinal")
    if device.get("skipped"):
        reason = (not_idle(plan, device.get("uuid")) if not (plan or {}).get("allow_busy_gpu") else None) or device["skipped"]
        return {"status": NOT_RUN, "signature": None, "failed": None, "hung": None, "reason": reason}
    steps = [s for s in parsed.get("steps") or [] if s.get("device") == ordinal]
    failed = _probe_contract.first_failed_step(steps)
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
