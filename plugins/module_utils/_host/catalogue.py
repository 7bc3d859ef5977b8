# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: the host layer's catalogue: every check id the host layer can emit, with what it checks, what a FAIL
means and where to look next (scripts/gen_checks_doc.py prints it into docs/checks.md). Not public API.

``CHECKS`` is the whole catalogue the host record is built against (LayerBuilder refuses an id not in it):
the driver, NVML, device node and MIG checks, ``HEALTH_CHECKS`` (host.health.*, judged by _host/health/judge.py
against the thresholds of _host/health/limits.py) and one informational check per tool of ``TOOLS``.
"""

from __future__ import annotations

from ansible_collections.gpuprobe.layers.plugins.module_utils._host.health.limits import DEFAULT_THRESHOLDS

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


T = DEFAULT_THRESHOLDS
HEALTH_CHECKS = {
    "host.health.ecc_mode": _check(
        "per GPU: ECC is enabled, and the pending ECC mode is the current one (nvmlDeviceGetEccMode)",
        "(WARN) ECC off: memory errors go undetected; or an ECC mode change waits for a GPU reset",
        "nvidia-smi -q -d ECC; who changed the ECC mode (the probe never changes it)"),
    "host.health.ecc_errors": _check(
        "per GPU: no uncorrectable ECC error (nvmlDeviceGetTotalEccErrors, volatile = since the last driver load, "
        "aggregate = lifetime); corrected counts are recorded, not judged",
        "uncorrectable volatile ECC errors >= %d (ecc_uncorrected_volatile_fail): memory failed since the driver loaded "
        "(FAIL); uncorrectable aggregate >= %d (ecc_uncorrected_aggregate_warn) with none volatile: failed before (WARN)"
        % (T["ecc_uncorrected_volatile_fail"], T["ecc_uncorrected_aggregate_warn"]),
        "nvidia-smi -q -d ECC,ROW_REMAPPER,PAGE_RETIREMENT; dmesg for Xid 48/63/64/94/95; drain the GPU and reset it"),
    "host.health.retired_pages": _check(
        "per GPU with page retirement (before Ampere): no page retirement pending, fewer retired pages than "
        "retired_pages_fail (nvmlDeviceGetRetiredPages, nvmlDeviceGetRetiredPagesPendingStatus)",
        "%d or more retired pages (retired_pages_fail): NVIDIA's replacement threshold (FAIL); a retirement pending "
        "until the next driver load (WARN)" % T["retired_pages_fail"],
        "nvidia-smi -q -d PAGE_RETIREMENT; reset the GPU (or reboot) to retire pending pages"),
    "host.health.row_remap": _check(
        "per GPU with row remapping (Ampere and later): no remapping failure and none pending (nvmlDeviceGetRemappedRows), "
        "and every memory bank has spare rows left (nvmlDeviceGetRowRemapperHistogram)",
        "a row remapping failure: the GPU could not remap a failed row (FAIL); a remapping pending until the GPU is "
        "reset, or %d or more banks without a spare row (row_remap_banks_exhausted_warn) (WARN)"
        % T["row_remap_banks_exhausted_warn"],
        "nvidia-smi -q -d ROW_REMAPPER; drain and reset the GPU; a failure means the GPU needs replacing"),
    "host.health.clock_events": _check(
        "per GPU: no hardware slowdown, HW thermal slowdown or HW power brake is active now, and no SW thermal slowdown "
        "(nvmlDeviceGetCurrentClocksEventReasons, else ...ThrottleReasons); idle, power cap, sync boost and "
        "application clocks are recorded, not judged",
        "hardware slowdown, HW thermal or HW power brake active (FAIL: the GPU runs far below its clocks); SW thermal "
        "slowdown active (WARN)",
        "nvidia-smi -q -d PERFORMANCE,TEMPERATURE,POWER; the cooling, the power supply and the chassis' power brake"),
    "host.health.temperature": _check(
        "per GPU: the GPU temperature is more than temperature_margin_c below its slowdown threshold "
        "(nvmlDeviceGetTemperature, nvmlDeviceGetTemperatureThreshold SLOWDOWN)",
        "at or above the slowdown threshold (FAIL: the GPU slows itself down); within %d C of it "
        "(temperature_margin_c) (WARN)" % T["temperature_margin_c"],
        "nvidia-smi -q -d TEMPERATURE; the airflow and cooling of the node"),
    "host.health.pcie_link": _check(
        "per GPU: the PCIe link runs at its maximum width (nvmlDeviceGetCurrPcieLinkWidth vs ...MaxPcieLinkWidth); "
        "the generation is recorded, not judged (an idle GPU may lower its link generation to save power)",
        "(WARN) the link trained narrower than its maximum (e.g. x8 of x16): a seating, riser or slot problem that "
        "halves host-to-device bandwidth",
        "nvidia-smi -q -d PCI under load; lspci -vv -s <bus id> (LnkSta vs LnkCap); reseat the GPU or riser"),
    "host.health.pcie_replay": _check(
        "per GPU: the PCIe replays since the driver loaded stay below pcie_replay_warn, and those between two readings "
        "of the run stay within DCGM's replay rate limit for the link (nvmlDeviceGetPcieReplayCounter, read twice)",
        "(WARN) replays since the driver loaded >= %d (pcie_replay_warn, DCGM's diagnostic limit), or more replays "
        "between the two readings than DCGM's health watch allows for the link's generation and width over max(interval, "
        "1 minute) (pcie_replay_rate_percent); a lower count is recorded, not judged" % T["pcie_replay_warn"],
        "nvidia-smi -q -d PCI twice under load (does it rise?); dcgmi health with the PCIe watch; reseat the GPU or riser"),
    "host.health.recovery_action": _check(
        "per GPU: the driver asks for no recovery action and no reset (nvmlDeviceGetFieldValues "
        "NVML_FI_DEV_GET_GPU_RECOVERY_ACTION; on drivers without it NVML_FI_DEV_RESET_STATUS and "
        "NVML_FI_DEV_DRAIN_AND_RESET_STATUS)",
        "the driver asks for a GPU reset, a drain and reset, a bus reset or a reboot, or says a reset is required (FAIL); "
        "a peer-to-peer drain or IMEX domain recovery (WARN)",
        "nvidia-smi -q (GPU Reset Status / Recovery Action); drain the node and do what the driver asks"),
    "host.health.fabric": _check(
        "per GPU on an NVSwitch (NVLink fabric) system: the GPU's fabric registration completed successfully, and its "
        "health mask (every NVML_GPU_FABRIC_HEALTH_MASK_* field) is healthy (nvmlDeviceGetGpuFabricInfoV, else "
        "...GpuFabricInfo); NOT_RUN where the GPU has no fabric",
        "registration completed with an error, a route unhealthy or an incorrect configuration (FAIL): CUDA cannot "
        "start on the GPU or its NVLink traffic fails; not started or in progress, degraded bandwidth, route or access "
        "timeout recovery, no partition assigned, the fabric manager disconnected, or an unknown value or bit (WARN)",
        "the nvidia-fabricmanager service's state and log; nvidia-smi -q | grep -A6 Fabric"),
    "host.health.nvlink": _check(
        "per GPU with NVLink: every NVLink is up (nvmlDeviceGetNvLinkState for links 0 to NVML_NVLINK_MAX_LINKS - 1); "
        "NOT_RUN with NVML's code where the GPU or VM exposes no NVLink, where no link is up on a GPU without fabric "
        "(no bridge, no NVSwitch), and where no link is up on a GPU in MIG mode whose fabric reports no fault (MIG "
        "enabled: NVLink not used); a link unread for another reason is never a PASS",
        "%d or more links inactive (nvlink_inactive_fail) while others are up, or every link down on a GPU of an "
        "NVLink fabric (FAIL); a link up with its traffic disabled (WARN)" % T["nvlink_inactive_fail"],
        "nvidia-smi nvlink -s; nvidia-smi nvlink -e (error counters); the fabric manager log; reseat or replace the "
        "GPU baseboard cable"),
    "host.health.mig_ecc": _check(
        "per MIG device: no uncorrectable volatile error in its non-DRAM memories (nvmlDeviceGetMemoryErrorCounter on "
        "the MIG device handle: the per-instance counts NVML gives); NOT_RUN with NVML's code where it gives none",
        "%d or more uncorrected volatile SRAM errors in the instance (mig_sram_uncorrected_fail) (FAIL)"
        % T["mig_sram_uncorrected_fail"],
        "nvidia-smi -q -d ECC; dmesg for Xid 94/95 with GPU-I of that instance; drain the instance's work and reset the GPU"),
    "host.health.xid": _check(
        "per GPU: no NVRM Xid event in this boot's kernel log (journalctl -k -b, else dmesg), each mapped to its "
        "documented meaning and, on MIG, to the GPU instance it names; Xid lines of a PCI address no GPU has are "
        "reported under that address",
        "Xid 48 (double-bit ECC), 63/64 (row remap / page retirement event or failure), 79 (fallen off the bus), 94/95 "
        "(contained / uncontained ECC) since boot (FAIL); any other Xid (WARN: often an application's fault, 13/31/43)",
        "journalctl -k -b | grep Xid; NVIDIA's Xid catalogue; a FAIL Xid stays until the node reboots"),
    "host.health.dcgm_diag": _check(
        "where asked (dcgm_diag: level, default 0 = not run) and dcgmi is installed: each test of dcgmi diag -r <level> -j "
        "per GPU (level 1: deployment and software checks in seconds, no load on the GPU); never while a GPU is busy",
        "a DCGM test failed on the GPU (FAIL) or warned (WARN); dcgmi ran but gave no result (timeout, output not "
        "understood, runtime error) or exited non-zero with every test passing (WARN); NOT_RUN with the reason where "
        "not asked, dcgmi is absent or could not be started, a GPU is busy, or a level above 1 in check or audit mode",
        "dcgmi diag -r 1 by hand; the test's warning text and DCGM's error id; whether nv-hostengine (the DCGM service) runs"),
}
del T
CHECKS.update(HEALTH_CHECKS)
for _name in TOOLS:
    CHECKS["host.tool.%s" % _name] = _check(
        "%s is installed and answers --version (informational: what the next layers can use)" % _name,
        "(WARN) %s is on PATH but did not answer --version" % _name,
        "run %s --version by hand" % _name)
del _name
