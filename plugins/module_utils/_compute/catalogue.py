# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: the compute layer's catalogue: its checks and failure signatures (docs/checks.md prints them); not public API."""

from __future__ import annotations

CHECKS = {
    "compute.gpu.idle": {
        "title": "each GPU (or MIG instance) runs no compute process before the probe touches it: the probe touches "
                 "only a device whose UUID host NVML reported idle (idle_uuids); any other one (busy, busy state "
                 "unknown, a UUID NVML never listed, a device named by its MIG parent's UUID or by none) is NOT_RUN for "
                 "it alone (never touched), and one probed with allow_busy_gpu: true is a WARN",
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
                 "the content (sha256) of the driver root's libcuda.so.<running driver version> AND every driver library "
                 "mapped in the probe's process (by name: libcuda*, libnvidia-*, ...; or any file under a spec mount: the "
                 "probe's mapped_libraries, e.g. NVML and the PTX JIT compiler CUDA loads) has the content of the driver "
                 "root's file of that library, libX.so.<running driver version>; NOT_RUN when the host facts are unknown "
                 "(no NVML, no such file in the driver root: named), the probe did not hash a library or did not report "
                 "them, or the container did not get that far",
        "fail": "the container answered with another driver than the host's (version or file content differ), or a driver "
                "library loaded into the probe's process is not the driver root's file (named in the subject)",
        "next": "the hostPath of the spec's mount of that library (libcuda.so.1, libnvidia-ml.so.1, ...): it must be the "
                "driver root's libX.so.<driver version>; evidence.driver_binding (runs[].libraries)",
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
                   "of the loaded libcuda, or of another driver library the probe's process loaded (NVML, the JIT "
                   "compiler), differs from the host (NVML's CUDA driver version, the driver root's file)",
        "next": "the spec's mount of the library named (hostPath), the image's own copy, evidence.driver_binding",
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
