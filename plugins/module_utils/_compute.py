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

import json
import os
import sys
import tempfile

from ansible_collections.gpuprobe.layers.plugins.module_utils import _probe
from ansible_collections.gpuprobe.layers.plugins.module_utils._host import gpu_compute_processes
from ansible_collections.gpuprobe.layers.plugins.module_utils._result import (
    FAIL, NOT_RUN, PASS, WARN, LayerBuilder, not_run,
)
from ansible_collections.gpuprobe.layers.plugins.module_utils._run import run
from ansible_collections.gpuprobe.layers.plugins.module_utils._verdict import compute_points_to

CHECKS = {
    "compute.gpu.idle": {
        "title": "the GPU runs no compute process before the probe touches it (host NVML evidence)",
        "fail": "compute processes are running: the probe does not preempt them",
        "next": "run again when the GPU is idle, or set allow_busy_gpu: true to probe anyway",
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
        "title": "every element written by the PTX kernel (out[i] = i*3+7) is read back and equals the expected value",
        "fail": "the kernel ran but produced wrong values",
        "next": "GPU health (Xid errors in the kernel log, ECC); rerun on an idle GPU",
    },
    "compute.probe.finished": {
        "title": "the probe finished (no hang past the timeout, no crash)",
        "fail": "the probe was killed at the timeout or died before finishing",
        "next": "the hung step (evidence.container.hung_step); a hung cuInit points at the driver/uvm",
    },
    "compute.nvml.init": {
        "title": "nvmlInit_v2 through libnvidia-ml.so.1 in the same place (NOT_RUN when that library is not there)",
        "fail": "libnvidia-ml.so.1 loaded but nvmlInit failed",
        "next": "NVML tools would fail here too; compare with the host layer's NVML evidence",
    },
    "compute.host_control": {
        "title": "the same probe run on the host outside any container (the control; WARN when only the host fails)",
        "fail": "the host itself cannot run the probe: the driver/host is at fault, not the injection",
        "next": "the host record; evidence.host_control.steps",
    },
}

_UVM_HINT = "/dev/nvidia-uvm absent in the container: inject it (cuInit needs it)"

SIGNATURES = {
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
    "compute.probe.incomplete": {
        "points_to": "compute",
        "meaning": "the probe stopped before finishing without a timeout (crash, killed)",
        "next": "the probe's stderr in the evidence",
    },
}


def busy_processes(host_record):
    """Compute processes the host layer saw (``_host.gpu_compute_processes``): None when there is no NVML
    evidence to look at, else the list of {gpu_index, gpu_uuid, pid, used_gpu_memory_bytes}."""
    if not host_record:
        return None
    return gpu_compute_processes(host_record)


def busy_reason(busy):
    gpus = sorted(set(str(p.get("gpu_uuid") or p.get("gpu_index")) for p in busy))
    return "GPU in use, not preempting: %d compute process(es) on %s" % (len(busy), ", ".join(gpus))


def step_signature(step):
    """Failure signature of one failed probe step."""
    if step.get("step") == "dlopen":
        return "compute.dlopen.libcuda"
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
        return "dlopen said: %s" % step["error"]
    entry = SIGNATURES.get(sig) or SIGNATURES["compute.cuda.<CUresult name>"]
    return entry["next"]


def assess(parsed, timed_out=False, timeout=None):
    """Outcome of one probe run (container or host): dict status, signature, reason, failed (step), hung."""
    steps = (parsed or {}).get("steps") or []
    failed = _probe.first_failed_step(steps)
    if failed is not None:
        sig = step_signature(failed)
        return {"status": FAIL, "signature": sig, "failed": failed, "hung": None,
                "reason": "%s failed: %s%s" % (failed.get("call") or failed.get("step"), failed.get("name"),
                                               " (rc %s)" % failed["rc"] if failed.get("rc") is not None else "")}
    hung = (parsed or {}).get("hung_step")
    if timed_out or (hung and hung != "nvmlInit"):
        return {"status": FAIL, "signature": "compute.timeout", "failed": None, "hung": hung,
                "reason": "no answer from %s within %ss" % (hung or "the probe", timeout)}
    if any(s.get("step") == "verify" and s.get("ok") for s in steps):
        return {"status": PASS, "signature": None, "failed": None, "hung": None,
                "reason": None}
    return {"status": FAIL, "signature": "compute.probe.incomplete", "failed": None, "hung": hung,
            "reason": "the probe stopped before verifying a kernel (%d steps recorded)" % len(steps)}


def step_checks(builder, parsed, outcome, where):
    """One check per executed step of the probe run ``where`` ('container' or 'host')."""
    for s in (parsed or {}).get("steps") or []:
        status = PASS if s.get("ok") else FAIL
        if s.get("step") == "dlopen":
            builder.add("compute.dlopen", status, subject="%s: libcuda.so.1" % where, expected="a loadable libcuda.so.1",
                        observed=s.get("realpath") or s.get("path") or s.get("error"),
                        hint=None if s.get("ok") else step_hint(s, parsed))
        elif s.get("step") == "verify":
            builder.add("compute.kernel.verify", status, subject="%s: %s x uint32" % (where, s.get("checked")),
                        expected="out[i] == i*3+7 for every i",
                        observed="%d mismatches%s" % (s.get("mismatches", 0),
                                                      "" if s.get("ok") else ", first %s" % json.dumps(s.get("first_bad"))))
        else:
            builder.add("compute.cuda.call", status, subject="%s: %s" % (where, s.get("call")), expected="CUDA_SUCCESS",
                        observed="%s (rc %s) in %s ms" % (s.get("name"), s.get("rc"), s.get("ms")),
                        hint=None if s.get("ok") else step_hint(s, parsed))
    if outcome["signature"] in ("compute.timeout", "compute.probe.incomplete"):
        builder.add("compute.probe.finished", FAIL, subject=where, expected="the probe finishes",
                    observed=outcome["reason"])


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


def container_evidence(container_probe, runtime_record):
    probe = container_probe or {}
    runtime_evidence = (runtime_record or {}).get("evidence") or {}
    return {
        "executed": bool(probe.get("executed")),
        "cdi_devices": list(probe.get("cdi_devices") or runtime_evidence.get("requested_devices") or []),
        "runtime": probe.get("runtime") or ((runtime_record or {}).get("versions") or {}).get("runtime"),
        "container_name": probe.get("container_name"),
        "image": probe.get("image"),
        "compute_requested": bool(probe.get("compute_requested")),
        "compute_skipped": probe.get("compute_skipped"),
        "steps": list(probe.get("steps") or []),
        "nvml": probe.get("nvml"),
        "facts": probe.get("facts") or {},
        "hung_step": probe.get("hung_step"),
        "timed_out": bool(probe.get("timed_out")),
        "wall_ms": probe.get("wall_ms"),
        "libraries": ((probe.get("inventory") or {}).get("libraries")),
    }


def probe_source():
    """The probe script's text (from the file, or from the zip AnsiballZ runs us from)."""
    loader = getattr(_probe, "__loader__", None)
    if loader is not None and hasattr(loader, "get_source"):
        try:
            text = loader.get_source(_probe.__name__)
            if isinstance(text, bytes):  # Ansible's collection loader returns bytes, zipimport text
                text = text.decode("utf-8")
            if text:
                return text
        except (ImportError, OSError):
            pass
    with open(_probe.__file__, "r") as f:
        return f.read()


def write_probe(directory=None):
    """Write the probe script to a fresh private directory; returns (directory, path)."""
    d = tempfile.mkdtemp(prefix="gpuprobe-probe-", dir=directory)
    os.chmod(d, 0o755)
    path = os.path.join(d, "gpuprobe_probe.py")
    with open(path, "w") as f:
        f.write(probe_source())
    os.chmod(path, 0o644)
    return d, path


def _libcuda_dirs(driver_root):
    out = []
    for sub in ("lib64", "lib", "lib/x86_64-linux-gnu", "usr/lib64", "usr/lib/x86_64-linux-gnu"):
        d = os.path.join(driver_root, sub)
        if os.path.exists(os.path.join(d, _probe.LIBCUDA)) and os.path.realpath(d) not in [os.path.realpath(x) for x in out]:
            out.append(d)
    return out


def host_control_env(host_record, environ=None):
    """Environment for the host control: when the host record names a driver root whose libcuda is not
    where the loader looks, put that root's library dirs on LD_LIBRARY_PATH. Returns (env, added dirs)."""
    env = dict(os.environ if environ is None else environ)
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


def run_host_control(host_record, timeout, uuid=None, python=None):
    """The same probe on the host, outside any container, through _run.run with a timeout."""
    env, dirs = host_control_env(host_record)
    d, path = write_probe()
    try:
        config = {"compute": True, "nodes": ["/dev/nvidiactl", "/dev/nvidia-uvm"], "capture_env": False}
        if uuid:
            config["uuid"] = uuid
        result = run([python or sys.executable or "python3", path, json.dumps(config)], timeout=timeout, env=env)
    finally:
        try:
            os.unlink(path)
            os.rmdir(d)
        except OSError:
            pass
    parsed = _probe.parse_output(result["stdout"])
    outcome = assess(parsed, result["timed_out"], timeout)
    if result["error"] and not result["timed_out"]:
        outcome = {"status": NOT_RUN, "signature": None, "failed": None, "hung": None,
                   "reason": "could not run the host control: %s" % result["error"]}
    return {
        "status": outcome["status"],
        "signature": outcome["signature"],
        "reason": outcome["reason"],
        "python": python or sys.executable,
        "ld_library_path_added": dirs,
        "rc": result["rc"],
        "wall_ms": result["duration_ms"],
        "timed_out": result["timed_out"],
        "stderr": (result["stderr"] or "")[-2000:],
        "steps": parsed["steps"],
        "nvml": parsed["nvml"],
        "facts": parsed["facts"],
        "hung_step": parsed["hung_step"],
        "libraries": (parsed.get("inventory") or {}).get("libraries"),
    }, parsed, outcome


def _container_reason(container_probe, runtime_record):
    runtime_record = runtime_record or {}
    if runtime_record.get("status") == FAIL:
        return "the probe container never ran: runtime FAIL %s (%s)" % (runtime_record.get("signature"),
                                                                        runtime_record.get("reason"))
    if runtime_record.get("status") == NOT_RUN:
        return "the probe container never ran: runtime NOT_RUN (%s)" % runtime_record.get("reason")
    return "no in-container probe output was given (run runtime_facts with compute: true first)"


def compute_record(container_probe, runtime_record=None, host_record=None, host_control=True,
                   allow_busy_gpu=False, timeout=60, host_runner=None):
    """The compute layer record. ``host_runner`` (tests) replaces run_host_control."""
    busy = busy_processes(host_record)
    if busy and not allow_busy_gpu:
        evidence = {"busy": busy, "container": {"executed": False, "cdi_devices": []}}
        return not_run("compute", busy_reason(busy), evidence=evidence)
    builder = LayerBuilder("compute", CHECKS)
    builder.evidence["busy"] = busy
    if busy is None:
        builder.add("compute.gpu.idle", NOT_RUN, subject="compute processes",
                    observed="no host NVML evidence to look at (host record missing or NVML failed)")
    elif busy:
        builder.add("compute.gpu.idle", WARN, subject="compute processes", expected="none",
                    observed=busy_reason(busy) + " (allow_busy_gpu: true)")
    else:
        builder.add("compute.gpu.idle", PASS, subject="compute processes", expected="none", observed="none")
    container = container_evidence(container_probe, runtime_record)
    builder.evidence["container"] = container
    parsed = container_probe or {}

    # The host control runs whatever happened in the container: it is what tells injection from host.
    host_result = None
    if host_control:
        uuid = ((container.get("facts") or {}).get("device") or {}).get("uuid")
        runner = host_runner or run_host_control
        host_result, host_parsed, host_outcome = runner(host_record, timeout, uuid)
        builder.evidence["host_control"] = host_result
        builder.versions["cuda_driver_api_host"] = (host_result.get("facts") or {}).get("cuda_driver_api")
    else:
        builder.evidence["host_control"] = {"status": NOT_RUN, "reason": "host_control: false"}
    host_status = builder.evidence["host_control"]["status"]

    skip_reason = None
    if not container["executed"]:
        skip_reason = _container_reason(container_probe, runtime_record)
    elif container["compute_skipped"]:
        skip_reason = container["compute_skipped"]
    elif not container["compute_requested"]:
        skip_reason = "the probe container ran without compute (runtime_facts compute: false)"
    if skip_reason:
        _host_checks(builder, host_result, host_status, NOT_RUN)
        return _finish(builder, NOT_RUN, skip_reason, None, host_status)

    builder.add("compute.container.cdi", PASS if container["cdi_devices"] else FAIL, subject=container["container_name"],
                expected="a container with CDI devices", observed=", ".join(container["cdi_devices"]) or "no CDI device")
    outcome = assess(parsed, parsed.get("timed_out"), timeout)
    _nvml_check(builder, parsed, "container")
    step_checks(builder, parsed, outcome, "container")
    builder.versions["cuda_driver_api"] = (parsed.get("facts") or {}).get("cuda_driver_api")
    builder.versions["probe"] = _probe.PROBE_VERSION
    _host_checks(builder, host_result, host_status, outcome["status"])
    status = outcome["status"] if container["cdi_devices"] else FAIL
    reason = outcome["reason"]
    signature = outcome["signature"]
    if outcome["failed"] is not None:
        hint = step_hint(outcome["failed"], parsed)
        reason = "%s; hint: %s" % (reason, hint) if hint else reason
    if not container["cdi_devices"] and status == FAIL and signature is None:
        signature, reason = "compute.container.cdi", "the probe container got no CDI device"
    return _finish(builder, status, reason, signature, host_status)


def _host_checks(builder, host_result, host_status, container_status):
    if host_result is None:
        builder.add("compute.host_control", NOT_RUN, subject="host", observed="host_control: false")
        return
    # The record's status comes from the container; a control that fails where the container passed is
    # a named oddity (WARN on the check), not a failure of compute.
    status = WARN if host_status == FAIL and container_status == PASS else host_status
    builder.add("compute.host_control", status, subject="host (%s)" % host_result.get("python"),
                expected="PASS", observed="%s%s" % (host_status, ": %s" % host_result["reason"] if host_result.get("reason") else ""))


def _finish(builder, status, reason, signature, host_status):
    points_to = compute_points_to(status, host_status) if status == FAIL else None
    record = builder.build(status=status, reason=reason, signature=signature, points_to=points_to,
                           not_proven=None if status == PASS else ["that a CUDA kernel runs in this container"])
    return record
