#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: cdi_spec
short_description: Write or remove a self-built CDI spec for GPU experiments and fault drills
version_added: 1.0.0
description:
  - Builds a minimal CDI spec of the run's own kind C(gpuprobe.local/gpu-<run_id>) from the host's real device
    nodes and driver root and writes it to C(<spec_dir>/gpuprobe-<run_id>.yaml), or removes that file (O(state=absent)).
    Because the kind is unique to the run, concurrent runs and specs left by crashed runs never resolve the same
    device names (no CDI conflict between them).
  - The spec's env records its owner (C(GPUPROBE_RUN_ID), C(GPUPROBE_OWNER=host:pid:started), C(GPUPROBE_CREATED)).
    Before writing, specs of this collection's kind whose run is over (owner process gone on this host, or an
    owner that cannot be checked here and older than O(max_age)) are removed (C(swept)); the others are listed in C(live) and left alone. Specs of any other
    kind are never touched.
  - The spec has one device per GPU named by its index (C(0), C(1), ...) holding that GPU's node, and a device
    C(all) holding every selected GPU node. Spec-level edits hold C(/dev/nvidiactl), C(/dev/nvidia-uvm) and
    C(/dev/nvidia-uvm-tools) (those present), read-only bind mounts of the real versioned C(libcuda),
    C(libnvidia-ml) and C(libnvidia-ptxjitcompiler) files of the driver root at
    C(/usr/local/nvidia/lib64/<soname>) in the container and C(nvidia-smi) at C(/usr/local/nvidia/bin/nvidia-smi),
    and the env C(LD_LIBRARY_PATH=/usr/local/nvidia/lib64), C(GPUPROBE_RUN_ID) and C(GPUPROBE_CDI_VARIANT).
  - Device nodes carry C(hostPath) when O(root) is not C(/). C(cdiVersion) is the lowest the fields allow (0.5.0).
  - O(variant) selects a fault drill; the result's C(prediction) names the layer and failure signature it is
    expected to cause.
  - Never writes to C(/etc/cdi). A O(spec_dir) that is, or resolves under, C(/etc/cdi) is refused.
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpuprobe.layers._attributes
attributes:
  check_mode:
    details: Reports the spec that would be written (or the file that would be removed) and whether it would change.
  diff_mode:
    support: full
    details:
      - "The task's C(diff) (shown with C(--diff)) holds what it changed, or would change in check mode: each spec of
        RV(swept) as C({path, state: file, why}) -> C({path, state: absent}), then this run's spec file (RV(path)) as
        text, before -> after (empty where there is no file). Nothing when nothing changes."
options:
  run_id:
    description:
      - Identifies this run; the file is C(gpuprobe-<run_id>.yaml) and the kind C(gpuprobe.local/gpu-<run_id>).
        Letters, digits, C(_), C(.), C(-).
    type: str
    required: true
  owner:
    description:
      - The process that owns this run, as C(host), C(pid) and C(started) (its start time in clock ticks since boot,
        C(/proc/<pid>/stat) field 22; read from C(/proc) when omitted and the host is this one).
      - Default the C(ansible-playbook) process among the module's ancestors (a local connection), else unknown
        (then only O(max_age) can make the spec over for another run's sweep).
    type: dict
  max_age:
    description: Seconds after which a spec of this collection's kind whose owner cannot be checked from here counts
      as over (a spec whose owner runs on this host is never over).
    type: int
    default: 3600
  state:
    description:
      - V(present) writes the spec, V(absent) removes this run's spec.
    type: str
    choices: [present, absent]
    default: present
  variant:
    description:
      - "V(full): everything above (predicted: no failure)."
      - "V(no_ptxjit_mount): without the libnvidia-ptxjitcompiler mount (compute, C(compute.cuda.CUDA_ERROR_JIT_COMPILER_NOT_FOUND))."
      - "V(no_uvm_node): without C(/dev/nvidia-uvm) (compute, C(compute.cuda.CUDA_ERROR_UNKNOWN))."
      - "V(cgroup_read_only): every device node with cgroup permissions C(r) (runtime, C(runtime.device_node.open.EPERM))."
      - "V(stub_libcuda): the CUDA toolkit's stub C(libcuda.so) as C(libcuda.so.1) (cdi, C(cdi.trust.accounted): not a file of the
        driver, so the probe does not run; alone in a container cuInit answers C(CUDA_ERROR_STUB_LIBRARY))."
      - "V(file_mode_0000): C(fileMode) 0 on the GPU nodes (no failure: the runtime does not apply it)."
      - "V(missing_hostpath): an extra bind mount whose hostPath does not exist (cdi, C(cdi.host.mount_source))."
      - "V(stale_library): libcuda's hostPath names C(libcuda.so.<another driver version>) (cdi, C(cdi.host.library_version))."
    type: str
    choices: [full, no_ptxjit_mount, no_uvm_node, cgroup_read_only, stub_libcuda, file_mode_0000, missing_hostpath, stale_library]
    default: full
  spec_dir:
    description:
      - Directory to write to. C(/etc/cdi) and anything resolving under it are refused.
    type: path
    default: /var/run/cdi
  root:
    description:
      - Directory under which device nodes and the driver root are looked up (a fixture tree in tests).
    type: path
    default: /
  driver_root:
    description:
      - The driver root (for example C(/usr/local/nvidia)); default the host record's C(evidence.driver_root), else C(/).
    type: path
  host:
    description:
      - The host layer record (C(ansible_facts.gpuprobe_host)); its C(evidence.device_nodes) and
        C(evidence.driver_root) are used when given.
    type: dict
  stub_libcuda:
    description:
      - Path of the CUDA toolkit's stub C(libcuda.so), for O(variant=stub_libcuda); default the first found under
        C(/usr/local/cuda*).
    type: path
  gpus:
    description:
      - GPU nodes to include, as indexes (C(0)) or paths (C(/dev/nvidia0)); default every C(/dev/nvidiaN) present.
        Nodes given here are kept even when absent (a drill for a node without the GPU).
    type: list
    elements: str
requirements:
  - PyYAML on the managed node.
seealso:
  - module: gpuprobe.layers.cdi_facts
"""

EXAMPLES = r"""
- name: Fault drill with a self-built spec, always removed again
  block:
    - name: Write the spec without the PTX JIT compiler
      gpuprobe.layers.cdi_spec:
        run_id: "{{ run_id }}"
        variant: no_ptxjit_mount
        driver_root: /usr/local/nvidia
      register: drill_spec

    - name: Check it with the cdi layer
      gpuprobe.layers.cdi_facts:
        spec_dirs: [/var/run/cdi]
        devices: "{{ drill_spec.devices[:1] }}"
  always:
    - name: Remove the spec
      gpuprobe.layers.cdi_spec:
        run_id: "{{ run_id }}"
        state: absent
"""

RETURN = r"""
path:
  description: The spec file written or removed.
  returned: always
  type: str
  sample: /var/run/cdi/gpuprobe-20261202T183000.yaml
kind:
  description: The spec's kind, unique to the run.
  returned: always
  type: str
  sample: gpuprobe.local/gpu-20261202T183000
devices:
  description: Qualified names of the spec's devices (empty for O(state=absent)).
  returned: always
  type: list
  elements: str
  sample: [gpuprobe.local/gpu-20261202T183000=0, gpuprobe.local/gpu-20261202T183000=all]
owner:
  description: The owner recorded in the spec (C(host), C(pid), C(started); C(pid) null when unknown).
  returned: always
  type: dict
swept:
  description: Specs of other runs of this collection that were over and were removed (or would be, in check mode).
  returned: always
  type: list
  elements: str
live:
  description: Specs of other runs that are not over (C(path), C(run_id), C(why)); left alone.
  returned: always
  type: list
  elements: dict
variant:
  description: The variant built.
  returned: always
  type: str
  sample: full
spec:
  description: The spec's content (null for O(state=absent)).
  returned: always
  type: dict
prediction:
  description:
    - The layer (C(layer)) and failure signature (C(signature)) this variant is predicted to cause (both null when none),
      and its C(description).
    - C(probe_user) is the user the probe must run as for the prediction to hold (null = the image's default).
  returned: always
  type: dict
  sample: {layer: compute, signature: compute.cuda.CUDA_ERROR_JIT_COMPILER_NOT_FOUND, description: the full spec without the libnvidia-ptxjitcompiler mount}
"""

from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi.spec import SpecError, ensure_spec
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.module import run_layer_module
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.vocab import SELF_BUILT_SPEC_DIR, VARIANTS


def cdi_spec(p, check_mode, diff=False):
    try:
        return ensure_spec(p["run_id"], state=p["state"], spec_dir=p["spec_dir"], check_mode=check_mode,
                           variant=p["variant"], root=p["root"], driver_root=p["driver_root"], host=p["host"],
                           stub_libcuda=p["stub_libcuda"], gpus=p["gpus"], owner=p["owner"], max_age=p["max_age"],
                           diff=diff)
    except (SpecError, OSError) as exc:
        raise ValueError(str(exc))


def main():
    run_layer_module(dict(
        run_id=dict(type="str", required=True),
        state=dict(type="str", choices=["present", "absent"], default="present"),
        variant=dict(type="str", default="full", choices=list(VARIANTS)),
        spec_dir=dict(type="path", default=SELF_BUILT_SPEC_DIR),
        root=dict(type="path", default="/"),
        driver_root=dict(type="path"),
        host=dict(type="dict"),
        stub_libcuda=dict(type="path"),
        gpus=dict(type="list", elements="str"),
        owner=dict(type="dict"),
        max_age=dict(type="int", default=3600),
    ), cdi_spec, diff=True)


if __name__ == "__main__":
    main()
