#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: node_layers
short_description: The host, cdi and k8s layers of one node in one process (the node side of verify_node)
version_added: "0.2.0"
description:
  - Runs the host layer (as M(gpuprobe.layers.host_facts)), the cdi layer (as M(gpuprobe.layers.cdi_facts); with
    O(cdi_source=self-built) it first writes this run's spec as M(gpuprobe.layers.cdi_spec) does) and the k8s layer
    (as M(gpuprobe.layers.k8s_facts)), the ones listed in O(layers), in one module execution on the node, so that
    they cost one round trip instead of one each. P(gpuprobe.layers.verify_node#module) calls it first;
    M(gpuprobe.layers.node_probe) runs the runtime and compute layers. It can also be used alone.
  - Each layer is the same code as its own module. A layer whose code raises is recorded C(NOT_RUN) with the error
    and the next layers still run; options that cannot work fail the module without any record.
  - >-
    The module decides nothing across layers (whether the probe may run, the verdict): that is the controller's
    (P(gpuprobe.layers.verify_node#module)).
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpuprobe.layers._attributes
attributes:
  check_mode:
    support: full
    details: >-
      Only reads; a self-built spec is not written, so its cdi layer finds nothing.
options:
  layers:
    description: The layers to run, always in the order host, cdi, k8s.
    type: list
    elements: str
    choices: [host, cdi, k8s]
    default: [host, cdi]
  run_id:
    description: The run's id (C([a-z0-9-])); it names the self-built spec and its kind. Required with O(cdi_source=self-built).
    type: str
    default: ""
  root:
    description: As the O(gpuprobe.layers.host_facts#module:root) option (fixture trees only when not C(/)).
    type: path
    default: /
  driver_root:
    description: As the O(gpuprobe.layers.host_facts#module:driver_root) option.
    type: path
  nvml:
    description: Read NVML (host layer).
    type: bool
    default: true
  cdi_source:
    description:
      - V(node) reads the node's own specs from O(cdi_spec_dirs); V(self-built) reads this run's spec (written
        here unless O(cdi_spec) names one already written).
    type: str
    choices: [node, self-built]
    default: node
  cdi_spec_dirs:
    description: As the O(gpuprobe.layers.cdi_facts#module:spec_dirs) option.
    type: list
    elements: path
    default: [/etc/cdi, /var/run/cdi]
  cdi_kinds:
    description: As the O(gpuprobe.layers.cdi_facts#module:kinds) option.
    type: list
    elements: str
    default: [nvidia.com/gpu]
  cdi_devices:
    description: As the O(gpuprobe.layers.cdi_facts#module:devices) option.
    type: list
    elements: str
    default: []
  cdi_spec:
    description: The result of a M(gpuprobe.layers.cdi_spec) call of this run (C(path), C(kind), C(devices)) to read instead of writing one.
    type: dict
    default: {}
  self_built_spec_dir:
    description: Where the self-built spec is written and removed (never under C(/etc/cdi)).
    type: path
    default: /var/run/cdi
  self_built_variant:
    description: As the O(gpuprobe.layers.cdi_spec#module:variant) option.
    type: str
    choices: [full, no_ptxjit_mount, no_uvm_node, cgroup_read_only, stub_libcuda, file_mode_0000, missing_hostpath, stale_library]
    default: full
  stub_libcuda:
    description: As the O(gpuprobe.layers.cdi_spec#module:stub_libcuda) option.
    type: path
  health_thresholds:
    description: As the O(gpuprobe.layers.host_facts#module:health_thresholds) option.
    type: dict
    default: {}
  dcgm_diag:
    description: As the O(gpuprobe.layers.host_facts#module:dcgm_diag) option.
    type: int
    default: 0
    choices: [0, 1, 2, 3, 4]
  mode:
    description:
      - The run's mode (the O(gpuprobe.layers.verify_node#module:mode) option). In V(audit) mode, as in check mode,
        nothing that loads the GPU runs - O(dcgm_diag) levels 2 to 4 are C(NOT_RUN) with the reason; level 1 (no load
        on the GPU) runs.
    type: str
    default: full
    choices: [full, audit]
  runtime:
    description:
      - The runtime(s) the verdict speaks for - V(auto), one of V(podman), V(docker), V(containerd), V(crio), or a
        list of them. The cdi layer selects them (V(auto) - the kubelet's CRI runtime, else a running docker daemon,
        else podman), reads each one's own CDI configuration and judges the spec versions and dirs for each
        (C(cdi.engine.config), C(cdi.runtime.*)); C(evidence.engines) lists them with why each was chosen.
    type: raw
    default: auto
  runtime_endpoint:
    description:
      - The socket (C(unix:///path.sock)) of V(containerd) or V(crio) (default - the kubelet's, else the engine's default
        socket), or of docker's daemon when V(docker) alone is named.
    type: str
  cri_descriptor:
    description: The CRI API descriptor set on the node, to ask V(containerd) or V(crio) through the CRI (default - C(GPUPROBE_CRI_DESCRIPTOR)).
    type: path
seealso:
  - module: gpuprobe.layers.verify_node
  - module: gpuprobe.layers.node_probe
"""

EXAMPLES = r"""
- name: Host, cdi and k8s layers of this node in one call
  gpuprobe.layers.node_layers:
    layers: [host, cdi, k8s]
  register: inspected

- name: Show the verdict those records give (the probe did not run, so at best INCONCLUSIVE)
  ansible.builtin.debug:
    msg: "{{ inspected.records | gpuprobe.layers.node_verdict }}"

- name: The cdi layer of one device of a driver-container node, without NVML
  gpuprobe.layers.node_layers:
    driver_root: /run/nvidia/driver
    nvml: false
    cdi_devices: [nvidia.com/gpu=0]
"""

RETURN = r"""
records:
  description: The records of the layers that ran, layer name -> record (docs/contract.md).
  returned: always
  type: dict
spec:
  description: With O(cdi_source=self-built), the spec read (C(path), C(kind), C(devices), ...).
  returned: when a self-built spec was used
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpuprobe.layers.plugins.module_utils._node import NODE_LAYERS_ARGSPEC, inspect


def main():
    module = AnsibleModule(argument_spec=NODE_LAYERS_ARGSPEC, supports_check_mode=True)
    try:
        out = inspect(module.params, check_mode=module.check_mode)
    except ValueError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(changed=bool(out.get("spec") and not module.params["cdi_spec"] and not module.check_mode), **out)


if __name__ == "__main__":
    main()
