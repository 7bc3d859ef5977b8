#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: host_facts
short_description: The host layer of GPU-in-container readiness (GPU, driver, device nodes)
version_added: 1.0.0
description:
  - Reads what NVIDIA GPU, driver and device nodes the node has and returns the host layer record
    (L(docs/contract.md,https://github.com/gpuprobe/gpuprobe.layers/blob/main/docs/contract.md)) as the fact C(gpuprobe_host).
  - NVML is read through pynvml (model, UUID, PCI bus id, minor number, MIG, persistence and compute mode,
    memory, running compute processes, driver/NVML/CUDA driver API versions). The kernel module version
    (C(/proc/driver/nvidia/version), C(/sys/module/nvidia/version)) is compared with NVML's driver version and
    with the version suffix of C(libcuda.so.*) and C(libnvidia-ml.so.*) in the driver root.
  - The C(/dev/nvidia*) nodes are checked (character device, major:minor, mode, owner; one per GPU; minors
    equal to NVML's), as are the loaded kernel modules (nouveau loaded is a FAIL) and, for the next layers,
    the installed tools (nvidia-ctk, podman, docker, containerd, runc, crio) with their versions.
  - Every GPU is inventoried (C(evidence.gpus)) from NVML, else from C(/proc/driver/nvidia/gpus/*/information),
    joined with its C(/dev/nvidiaN) and, for MIG, the C(/dev/nvidia-caps) nodes named by
    C(/proc/driver/nvidia-caps/mig-minors); NVML and procfs are cross-checked per GPU.
  - On a machine without an NVIDIA GPU the record is a FAIL whose reason starts with
    C(no NVIDIA driver / device nodes), followed by the exact evidence; the module itself does not fail.
  - Each GPU's health is read too (C(host.health.*),
    L(docs/health.md,https://github.com/gpuprobe/gpuprobe.layers/blob/main/docs/health.md)), namely ECC mode and uncorrectable
    counts, retired
    pages or row remapping, clock event reasons, temperature against the slowdown threshold, PCIe link width and
    replays, the driver's recovery action, NVLink fabric registration, and this boot's NVRM Xid events from the
    kernel log (C(journalctl -k -b), else C(dmesg --notime)). A reading the driver does not expose is NOT_RUN with
    NVML's error code.
  - Read-only (counters are never reset, no mode is changed); never loads kernel modules or changes the driver.
    Check ids are listed in L(docs/checks.md,https://github.com/gpuprobe/gpuprobe.layers/blob/main/docs/checks.md).
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.actiongroups
  - gpuprobe.layers._attributes.facts
attributes:
  action_group:
    support: full
    membership: [gpuprobe.layers.facts]
  check_mode:
    details: Only reads the node; the same facts are returned in check mode.
options:
  root:
    description:
      - Directory under which C(/proc), C(/sys), C(/dev) and the driver root are read.
      - Anything other than C(/) is for fixture trees; the tools are then not probed (C(NOT_RUN)).
    type: path
    default: /
  driver_root:
    description:
      - Where the driver's user-space libraries live, as seen from the node (for example C(/usr/local/nvidia)).
      - When omitted, the first of C(/), C(/usr/local/nvidia), C(/run/nvidia/driver), C(/home/kubernetes/bin/nvidia)
        holding C(libcuda.so.*) or C(libnvidia-ml.so.*) as a regular file in a library directory.
    type: path
  nvml:
    description:
      - Read NVML through pynvml. When V(false) the NVML checks are C(NOT_RUN) with the reason C(disabled by option).
    type: bool
    default: true
  nvml_timeout:
    description:
      - Seconds NVML may take. The NVML reader runs in a child process that is killed after this; a hung
        C(nvmlInit) then makes C(host.nvml.init) FAIL with C(timeout after ...) and the other checks still run.
    type: int
    default: 30
  health_thresholds:
    description:
      - Overrides of the WARN/FAIL thresholds of the C(host.health.*) checks, threshold name -> whole number, or
        null to record the reading without judging it; the names and defaults are in
        L(docs/checks.md#health-thresholds,https://github.com/gpuprobe/gpuprobe.layers/blob/main/docs/checks.md#health-thresholds)
        and L(docs/health.md,https://github.com/gpuprobe/gpuprobe.layers/blob/main/docs/health.md). Unknown names and bad values
        fail the module before anything is read.
      - The thresholds in force are recorded in C(evidence.health.thresholds).
    type: dict
    default: {}
  dcgm_diag:
    description:
      - V(0) (default) does not run DCGM. V(1) runs C(dcgmi diag -r 1 -j) (deployment and software checks, seconds,
        no load on the GPU) where C(dcgmi) is installed and no GPU has a compute process, and makes each test result a
        C(host.health.dcgm_diag) check; V(2)-V(4) run those levels, which load the GPU for minutes to hours, only when
        set explicitly and never in check mode (level 1 loads nothing and runs in check mode). Otherwise the check
        is C(NOT_RUN) with the reason.
    type: int
    default: 0
    choices: [0, 1, 2, 3, 4]
requirements:
  - pynvml (the nvidia-ml-py package) on the managed node for the NVML checks; without it those checks FAIL
    with the import error and every other check still runs.
notes:
  - The NVML fallback loads C(libnvidia-ml.so.1) from the detected driver root when the dynamic loader cannot find it.
seealso:
  - module: gpuprobe.layers.k8s_facts
"""

EXAMPLES = r"""
- name: Read the host layer
  gpuprobe.layers.host_facts:

- name: Fail the play when the host layer failed
  ansible.builtin.assert:
    that: ansible_facts.gpuprobe_host.status != 'FAIL'
    fail_msg: "{{ ansible_facts.gpuprobe_host.reason }}"

- name: Read a node whose driver lives in a driver container, without NVML
  gpuprobe.layers.host_facts:
    driver_root: /run/nvidia/driver
    nvml: false
"""

RETURN = r"""
ansible_facts:
  description: The host layer's record, as the fact C(gpuprobe_host).
  returned: always
  type: dict
  contains:
    gpuprobe_host:
      description:
        - The host layer record (L(docs/contract.md,https://github.com/gpuprobe/gpuprobe.layers/blob/main/docs/contract.md)).
        - C(evidence) holds C(root), C(driver_root), C(nvml) (ok, error, driver_version, nvml_version,
          cuda_driver_version, cuda_driver_version_int, gpu_count, gpus; each raw NVML GPU with C(mig_devices)),
          C(kernel_module), C(libraries), C(device_nodes) (keyed by path as seen from the node), C(modules_loaded),
          C(tools), C(procfs_gpus) (the parsed C(/proc/driver/nvidia/gpus/*/information), null when absent),
          C(mig_minors_read), C(gpus) and C(health).
        - C(evidence.health) holds C(gpus) (per GPU C(index), C(uuid), C(pci_bus_id) and the raw readings behind the
          C(host.health.*) checks, namely C(ecc_mode), C(ecc_errors), C(retired_pages), C(remapped_rows),
          C(clock_event_reasons), C(clock_event_source), C(temperature_c), C(temperature_slowdown_c),
          C(temperature_shutdown_c), C(pcie), C(recovery_action), C(fabric) and C(errors), the NVML error of each
          reading that failed) and C(kernel_log) (C(source), C(error), C(lines) and C(events), each Xid with C(pci),
          C(xid), C(detail), C(meaning) and C(line)); L(docs/health.md,https://github.com/gpuprobe/gpuprobe.layers/blob/main/docs/health.md).
        - C(evidence.gpus) is the per-GPU inventory, sorted by index, one row per GPU with C(index) (null for procfs
          rows), C(uuid), C(minor), C(pci_bus_id) (Linux form C(0000:06:00.0)), C(name), C(memory_total_bytes),
          C(device_node) (C(/dev/nvidiaN) when that character device exists, else null), C(source) (C(nvml) or
          C(procfs)), C(compute_processes) (list of C(pid), C(used_gpu_memory_bytes), C(gpu_instance_id) and
          C(compute_instance_id) (the MIG instance NVML places the process on, null when it gives none); null when
          unknown) and C(mig) (C(mode_current), C(mode_pending) (C(enabled), C(disabled) or null) and C(instances),
          each with C(uuid), C(gi), C(ci), C(profile), C(caps_minors) (C(gi) and C(ci), the minor N of each one's
          C(/dev/nvidia-caps/nvidia-cap<N>)) and C(compute_processes) (the list NVML gives for that MIG device, null
          when it gives none)).
        - C(versions) holds C(driver), C(nvml), C(cuda_driver_api) and C(kernel_module).
      returned: always
      type: dict
      sample:
        layer: host
        status: PASS
        reason: null
        checks:
          - id: host.device_node.uvm
            status: PASS
            subject: /dev/nvidia-uvm
            expected: "char 238:0"
            observed: "char 238:0 mode 0666 root:root"
            hint: null
        evidence:
          root: /
          driver_root: /usr/local/nvidia
          gpus:
            - index: 0
              uuid: GPU-ba516a7a-2409-93cc-13ab-65c9ca66e084
              minor: 0
              pci_bus_id: "0000:00:06.0"
              name: NVIDIA H200
              memory_total_bytes: 150754820096
              device_node: /dev/nvidia0
              source: nvml
              compute_processes: []
              mig: {mode_current: disabled, mode_pending: disabled, instances: []}
        not_proven: ["that any CDI spec points at these devices", "that a container can compute on the GPU"]
        versions: {driver: 580.159.04, nvml: 13.580.159.04, cuda_driver_api: "13.0", kernel_module: 580.159.04}
        started_at: "2026-12-02T18:30:00.000000Z"
        duration_ms: 120.5
        signature: null
        points_to: null
"""

from ansible_collections.gpuprobe.layers.plugins.module_utils._common.module import run_layer_module
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.options import check_root, check_timeout
from ansible_collections.gpuprobe.layers.plugins.module_utils._host.health.limits import check_thresholds
from ansible_collections.gpuprobe.layers.plugins.module_utils._host.layer import record as host_record


def host_facts(p, check_mode):
    check_root(p["root"])
    check_timeout(p["nvml_timeout"], "nvml_timeout")
    check_thresholds(p["health_thresholds"])
    record = host_record(root=p["root"], driver_root=p["driver_root"], use_nvml=p["nvml"], nvml_timeout=p["nvml_timeout"],
                         health_thresholds=p["health_thresholds"], dcgm_diag=p["dcgm_diag"],
                         no_gpu_load="check mode" if check_mode else None)
    return {"ansible_facts": {"gpuprobe_host": record}}


def main():
    run_layer_module(dict(
        root=dict(type="path", default="/"),
        driver_root=dict(type="path"),
        nvml=dict(type="bool", default=True),
        nvml_timeout=dict(type="int", default=30),
        health_thresholds=dict(type="dict", default={}),
        dcgm_diag=dict(type="int", default=0, choices=[0, 1, 2, 3, 4]),
    ), host_facts)


if __name__ == "__main__":
    main()
