# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: the host layer's catalogue: every check id the host layer can emit, with what it checks, what a FAIL
means and where to look next (scripts/gen_checks_doc.py prints it into docs/checks.md). Not public API.

``CHECKS`` is the whole catalogue the host record is built against (LayerBuilder refuses an id not in it):
the driver, NVML, device node and MIG checks, ``HEALTH_CHECKS`` (host.health.*, catalogued and judged in
_host/health/checks.py) and one informational check per tool of ``TOOLS``.
"""

from __future__ import annotations

from ansible_collections.gpuprobe.layers.plugins.module_utils._host.health.checks import CHECKS as HEALTH_CHECKS

# the programs the host layer asks for --version (what the next layers can use)
TOOLS = ("nvidia-ctk", "podman", "docker", "containerd", "runc", "crio")


def _check(title, fail, nxt):
    return {"title": title, "fail": fail, "next": nxt}


CHECKS = {
    "host.driver.present": _check(
        "some sign of an NVIDIA driver exists: /proc/driver/nvidia/version, a loaded nvidia module, /dev/nvidia* or NVML",
        "no NVIDIA driver / device nodes: this node has no usable NVIDIA GPU (every later layer is meaningless)",
        "install/load the NVIDIA driver, or run on a GPU node; lspci -d 10de: shows whether a GPU is on the bus"),
    "host.kernel_module.loaded": _check(
        "the nvidia and nvidia_uvm kernel modules are loaded (/proc/modules, else /sys/module)",
        "the module is not loaded: without nvidia no GPU, without nvidia_uvm no CUDA (NVML still works)",
        "dmesg | grep -i nvrm; how the driver is installed (driver container, DKMS); the probe never loads modules"),
    "host.kernel_module.nouveau": _check(
        "the open-source nouveau module is not loaded",
        "nouveau holds the GPU, the NVIDIA driver cannot bind it",
        "blacklist nouveau in the kernel module configuration, rebuild the initramfs, reboot - outside this probe"),
    "host.nvml.init": _check(
        "pynvml imports and nvmlInit succeeds; reports NVML, driver and CUDA driver API versions",
        "NVML is unusable: the exact pynvml/NVML error is the observation (e.g. Driver/library version mismatch)",
        "the error text; nvidia-smi; host.driver.version_agreement (kernel module vs libnvidia-ml)"),
    "host.nvml.gpu": _check(
        "NVML enumerates the GPUs and reads index, name, UUID, PCI bus id and minor number of each",
        "no GPU enumerated, or a GPU whose identity could not be read (error per attribute in evidence)",
        "nvidia-smi -q; dmesg for Xid errors; lspci -d 10de:"),
    "host.nvml.persistence_mode": _check(
        "persistence mode is on (the driver keeps GPU state initialised between clients)",
        "(WARN) persistence off: every first client re-initialises the GPU (slower cuInit, state reset when idle)",
        "nvidia-persistenced should be running on compute nodes"),
    "host.nvml.compute_mode": _check(
        "the compute mode allows the probe to create a context",
        "Prohibited: no CUDA context can be created on this GPU (WARN for Exclusive_Process: one context at a time)",
        "nvidia-smi -q -d COMPUTE; who set the compute mode (the probe never changes it)"),
    "host.nvml.mig_mode": _check(
        "MIG is disabled, or enabled with no pending change",
        "(WARN) MIG enabled: CUDA needs a MIG device, not the whole GPU; or a MIG mode change waits for a GPU reset",
        "nvidia-smi -q -d MIG; use the MIG devices' CDI names"),
    "host.nvml.compute_processes": _check(
        "NVML lists the compute processes running on the GPU (what the compute layer looks at before it runs)",
        "the process list could not be read",
        "nvidia-smi --query-compute-apps=pid,used_memory --format=csv"),
    "host.driver_root.detected": _check(
        "a driver root holds libcuda.so.* / libnvidia-ml.so.* (given, or the first of /, /usr/local/nvidia, "
        "/run/nvidia/driver, /home/kubernetes/bin/nvidia)",
        "no driver libraries were found: a CDI spec cannot mount them into containers",
        "where the driver was installed (driver container: /run/nvidia/driver; GKE: /home/kubernetes/bin/nvidia); "
        "pass driver_root"),
    "host.library.present": _check(
        "the driver root holds libcuda, libnvidia-ml and libnvidia-ptxjitcompiler with a version suffix",
        "a driver library is missing (no libnvidia-ptxjitcompiler: PTX load fails with CUDA_ERROR_JIT_COMPILER_NOT_FOUND)",
        "ls -l <driver root>/lib64; reinstall the driver user-space"),
    "host.driver.version_agreement": _check(
        "NVML's driver version, the kernel module version and the libcuda / libnvidia-ml file suffixes are one version",
        "the kernel module and the user-space libraries differ (typically after a driver upgrade without reboot): "
        "NVML fails with Driver/library version mismatch, CUDA with CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
        "cat /proc/driver/nvidia/version; ls <driver root>/lib64/libcuda.so.*; reboot or reload the driver"),
    "host.device_node.present": _check(
        "/dev/nvidiactl exists (and, when no GPU inventory could be read, at least one /dev/nvidiaN)",
        "a device node is missing: containers cannot get any GPU",
        "ls -l /dev/nvidia*; the driver's device-node helper or the driver container creates the nodes"),
    "host.gpu.identity": _check(
        "per GPU: NVML and /proc/driver/nvidia/gpus/<bus id>/information describe the same GPU (joined by PCI bus id: "
        "same UUID and minor number), and no two GPUs share a UUID or minor number",
        "the two sources disagree (a GPU one of them does not list, another UUID or minor number), or an identity is "
        "not unique: device nodes and CDI names may point at another GPU than the one meant",
        "nvidia-smi --query-gpu=index,uuid,pci.bus_id --format=csv; cat /proc/driver/nvidia/gpus/*/information; dmesg for Xid"),
    "host.gpu.device_node": _check(
        "per GPU of the inventory: its /dev/nvidiaN (N = the GPU's minor number) exists",
        "the GPU has no device node: no container can be given this GPU",
        "ls -l /dev/nvidia*; the driver's device-node helper or the driver container creates it"),
    "host.device_node.unclaimed": _check(
        "every /dev/nvidiaN belongs to a GPU of the inventory (some GPU has minor number N)",
        "(WARN) a node of a GPU the driver does not report (stale after a GPU was removed or excluded): a CDI spec or "
        "container given it gets no GPU",
        "nvidia-smi -L; cat /proc/driver/nvidia/gpus/*/information; remove the stale node"),
    "host.mig.instance": _check(
        "per MIG device of a MIG-enabled GPU: GPU and compute instance ids read, and their caps nodes "
        "/dev/nvidia-caps/nvidia-cap<N> exist (N from /proc/driver/nvidia-caps/mig-minors)",
        "a caps node is missing: containers cannot be given this MIG device (WARN: MIG enabled without any MIG device)",
        "nvidia-smi mig -lgi; nvidia-smi mig -lci; ls -l /dev/nvidia-caps; grep gpu<minor>/ /proc/driver/nvidia-caps/mig-minors"),
    "host.device_node.uvm": _check(
        "/dev/nvidia-uvm (and /dev/nvidia-uvm-tools) exist as the nvidia-uvm character devices",
        "no /dev/nvidia-uvm: CUDA will fail (cuInit CUDA_ERROR_UNKNOWN) while NVML tools still work "
        "(WARN for nvidia-uvm-tools: profilers cannot attach)",
        "lsmod | grep nvidia_uvm; grep nvidia-uvm /proc/devices; the driver's device-node helper"),
    "host.device_node.char_device": _check(
        "every /dev/nvidia* node that exists is a character device",
        "a regular file or directory stands where a device node should be (e.g. a bind-mount target left behind)",
        "ls -l /dev/nvidia*; remove the stray file, let the driver recreate the node"),
    "host.device_node.minor": _check(
        "each node's major:minor matches its name (/dev/nvidiaN = 195:N, nvidiactl = 195:255, nvidia-uvm = <uvm major>:0)",
        "the node points at another device than its name says: the container gets the wrong GPU or none",
        "ls -l /dev/nvidia*; cat /proc/devices; recreate the node"),
    "host.device_node.mode": _check(
        "GPU device nodes are readable and writable by everyone (0666), as the driver creates them",
        "(WARN) non-root processes, and containers running as non-root users, cannot open the node",
        "the NVreg_DeviceFileMode / udev rule that changed the mode"),
}


CHECKS.update(HEALTH_CHECKS)
for _name in TOOLS:
    CHECKS["host.tool.%s" % _name] = _check(
        "%s is installed and answers --version (informational: what the next layers can use)" % _name,
        "(WARN) %s is on PATH but did not answer --version" % _name,
        "run %s --version by hand" % _name)
del _name
