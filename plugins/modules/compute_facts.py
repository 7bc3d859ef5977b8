#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: compute_facts
short_description: The compute layer of GPU-in-container readiness (a verified CUDA kernel in the container)
version_added: 1.0.0
description:
  - Builds the compute layer record
    (L(docs/contract.md,https://github.com/gpuprobe/gpuprobe.layers/blob/main/docs/contract.md)), returned as the fact
    C(gpuprobe_compute), from the
    compute steps that M(gpuprobe.layers.runtime_facts) ran inside the CDI-injected container
    (O(container_probe)), that is dlopen of C(libcuda.so.1) (and the file actually loaded), C(cuInit), driver API
    version, device count/name/UUID, primary context, a PTX kernel loaded through the JIT, launched on 1024
    values, copied back, every value verified, freed and released; each step with its CUresult name and
    milliseconds; and C(nvmlInit_v2) in the same container.
  - Runs the same probe on the host outside any container (O(host_control)), so that host PASS + container
    FAIL points at the injection (C(points_to=runtime)) and both FAIL points at the host.
  - A failure's signature is C(compute.dlopen.libcuda), C(compute.cuda.<CUresult name>),
    C(compute.verify.mismatch) or C(compute.timeout) (L(docs/checks.md,https://github.com/gpuprobe/gpuprobe.layers/blob/main/docs/checks.md)).
  - Every GPU is proven on its own; C(evidence.gpus) holds one row per expected GPU (O(expected_gpus)) and per
    GPU seen in the container beyond them - C(index), C(uuid), C(model), C(expected), C(seen_in_container),
    C(ordinal), C(status), C(signature), C(reason).
  - "A GPU with compute processes in the host record is C(NOT_RUN) for that GPU alone (C(GPU in use, not
    preempting: pid ...)), never touched, and the others are still verified; so is one NVML did not report idle
    (C(not known idle: ...), e.g. a MIG instance NVML never listed); without host NVML evidence of
    compute processes compute is C(NOT_RUN) (C(cannot tell whether the GPU is in use)); O(allow_busy_gpu=true)
    probes anyway."
  - The status is the roll-up of the container's checks; it is C(NOT_RUN) when the container never ran, ran
    without compute, the busy state is unknown, or no expected GPU could be verified because all were busy.
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpuprobe.layers._attributes.facts
attributes:
  check_mode:
    details: In check mode the host control is not run; the container part is evaluated as given.
options:
  container_probe:
    description:
      - The C(gpuprobe_probe) fact of M(gpuprobe.layers.runtime_facts), null when the container never ran.
      - A value that is not of that shape (for example C(steps) not a list of dicts) fails the task with a message
        naming the key; it is never evaluated as a node's result.
    type: dict
  runtime_record:
    description: The runtime layer record (C(gpuprobe_runtime)), to say why the container did not run.
    type: dict
  expected_gpus:
    description:
      - The GPUs the requested CDI devices give (the cdi record's C(evidence.identity.expected_gpus)), each with
        C(uuid), C(index), C(minor), C(name) and C(mig_uuid).
      - Each becomes a row of C(evidence.gpus); one the container does not list is a FAIL
        (C(compute.gpu.missing)), a GPU the container lists beyond them is a WARN (C(compute.gpu.unexpected)).
      - Empty, every GPU seen in the container is expected (C(evidence.expected_source) says so).
    type: list
    elements: dict
    default: []
  host:
    description: The host layer record (C(gpuprobe_host)), read for running compute processes and the driver root.
    type: dict
  host_control:
    description:
      - Run the same probe on the host with the host's python through a subprocess with O(timeout).
      - When the driver root's C(libcuda.so.1) is not where the loader looks, its library directory is put on
        C(LD_LIBRARY_PATH) for that run and recorded.
    type: bool
    default: true
  allow_busy_gpu:
    description: Evaluate compute even on GPUs with compute processes, or when their busy state is unknown.
    type: bool
    default: false
  timeout:
    description: Seconds the host control may take before it is killed (C(compute.timeout)); must be > 0.
    type: int
    default: 60
seealso:
  - module: gpuprobe.layers.runtime_facts
"""

EXAMPLES = r"""
- name: Compute layer from the probe container, with the host as control
  gpuprobe.layers.compute_facts:
    container_probe: "{{ ansible_facts.gpuprobe_probe }}"
    runtime_record: "{{ ansible_facts.gpuprobe_runtime }}"
    host: "{{ ansible_facts.gpuprobe_host }}"
"""

RETURN = r"""
ansible_facts:
  description: The compute layer's record, as the fact C(gpuprobe_compute).
  returned: always
  type: dict
  contains:
    gpuprobe_compute:
      description:
        - The compute layer record (L(docs/contract.md,https://github.com/gpuprobe/gpuprobe.layers/blob/main/docs/contract.md)).
        - C(evidence.gpus) holds the per-GPU rows (see the description); C(evidence.expected_gpus) and
          C(evidence.expected_source) say what was expected.
        - C(evidence.container) holds C(executed), C(cdi_devices) (the devices of a container that ran, never the
          requested list), C(runtime), C(steps), C(nvml), C(facts) (cuda_driver_api, devices), C(hung_step),
          C(hung_device), C(libraries), C(rc), C(noise_count), C(noise), C(inconsistent); with per-device isolation
          C(evidence.containers) holds one such entry per container. C(evidence.host_control) holds C(status),
          C(steps), C(only_uuids), C(idle_uuids), C(gpus) (one C(uuid), C(status), C(signature), C(step) per GPU
          it was asked for), C(failed_step), C(env_cleared), C(ld_library_path_added) and the same probe facts
          for the host.
        - C(evidence.driver_binding) holds the host's driver facts (C(cuda_driver_api), C(driver_version), the
          driver root's C(libcuda) with its sha256) and one entry per container run (check C(compute.driver.binding)).
      returned: always
      type: dict
      sample:
        layer: compute
        status: FAIL
        signature: compute.cuda.CUDA_ERROR_JIT_COMPILER_NOT_FOUND
        points_to: runtime
"""

from ansible_collections.gpuprobe.layers.plugins.module_utils._common.module import run_layer_module
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.options import check_container_probe, check_record, check_timeout
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.signals import Interrupted
from ansible_collections.gpuprobe.layers.plugins.module_utils._compute.layer import record


def compute_facts(p, check_mode):
    check_container_probe(p["container_probe"])
    check_record(p["runtime_record"], "runtime_record", "runtime")
    check_record(p["host"], "host", "host")
    check_timeout(p["timeout"])
    try:
        compute = record(p["container_probe"], runtime_record=p["runtime_record"], host_record=p["host"],
                         host_control=p["host_control"] and not check_mode,
                         allow_busy_gpu=p["allow_busy_gpu"], timeout=p["timeout"], expected_gpus=p["expected_gpus"])
    except Interrupted as exc:
        return {"failed": True, "msg": "%s: the host control's probe was stopped and its temp dir removed" % exc}
    return {"ansible_facts": {"gpuprobe_compute": compute}}


def main():
    run_layer_module(dict(
        container_probe=dict(type="dict"),
        runtime_record=dict(type="dict"),
        expected_gpus=dict(type="list", elements="dict", default=[]),
        host=dict(type="dict"),
        host_control=dict(type="bool", default=True),
        allow_busy_gpu=dict(type="bool", default=False),
        timeout=dict(type="int", default=60),
    ), compute_facts)


if __name__ == "__main__":
    main()
