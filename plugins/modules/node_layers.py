#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: node_layers
short_description: Run a group of GPU layers of one node in one process (the node side of verify_node)
version_added: "0.2.0"
description:
  - Runs several layers of docs/contract.md in one module execution on the node, so that verifying a node costs
    one round trip per group of layers instead of one per layer. P(gpuprobe.layers.verify_node#module) calls it
    twice at most; it can also be used alone.
  - "O(stage=inspect): the host layer (as M(gpuprobe.layers.host_facts)), the cdi layer (as
    M(gpuprobe.layers.cdi_facts); with O(cdi_source=self-built) it first writes this run's spec as
    M(gpuprobe.layers.cdi_spec) does) and the k8s layer (as M(gpuprobe.layers.k8s_facts)), the ones listed in O(layers)."
  - "O(stage=probe): the runtime layer (probe container with the devices the cdi record in O(records) resolved, as
    M(gpuprobe.layers.runtime_facts) with compute) and the compute layer from its output plus the host control (as
    M(gpuprobe.layers.compute_facts)); the probe container is removed before the module returns, also on SIGINT,
    SIGTERM or SIGHUP. With O(remove_spec) this run's self-built spec is removed at the end (also on an interrupt)."
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
      inspect only reads (a self-built spec is not written, so its cdi layer finds nothing); probe starts no
      container and returns runtime and compute C(NOT_RUN) "check mode".
options:
  stage:
    description: Which group of layers to run.
    type: str
    required: true
    choices: [inspect, probe]
  layers:
    description: With O(stage=inspect), the layers to run, always in the order host, cdi, k8s.
    type: list
    elements: str
    choices: [host, cdi, k8s]
    default: [host, cdi]
  records:
    description:
      - With O(stage=probe), the C(host) and C(cdi) records of the inspect stage (the cdi record's
        C(evidence.requested_devices), C(expected_edits) and C(identity.expected_gpus) drive the probe).
    type: dict
    default: {}
  run_id:
    description:
      - >-
        The run's id (letters, digits, C(_ . -)): it names the probe container and the self-built spec and kind.
      - Required with O(stage=probe) and with O(cdi_source=self-built).
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
  runtime:
    description:
      - The container runtime the probe uses, and for which the cdi layer judges the spec versions.
    type: str
    choices: [auto, podman, docker, containerd, crio]
    default: auto
  image:
    description: The probe image (O(stage=probe)); never pulled.
    type: str
    default: localhost/gpuprobe-probe:local
  timeout:
    description: Seconds the probe container and the host control may each take.
    type: int
    default: 120
  user:
    description: Run the probe as this uid[:gid] or name[:group]; empty for the image's user.
    type: str
    default: ""
  environment:
    description: Environment variables set for the probe (for example C(CONTAINERS_CONF)).
    type: dict
    default: {}
  isolation:
    description: As the O(gpuprobe.layers.runtime_facts#module:isolation) option.
    type: str
    choices: [shared, per_device]
    default: shared
  allow_busy_gpu:
    description: Probe GPUs that run compute processes of others (never by default).
    type: bool
    default: false
  host_control:
    description: Run the same probe on the host as the control of the compute layer.
    type: bool
    default: true
  remove_spec:
    description: With O(stage=probe), remove this run's self-built spec from O(self_built_spec_dir) at the end.
    type: bool
    default: false
seealso:
  - module: gpuprobe.layers.verify_node
"""

EXAMPLES = r"""
- name: Host and cdi layers in one call
  gpuprobe.layers.node_layers:
    stage: inspect
  register: inspected

- name: The probe with the devices the cdi layer resolved
  gpuprobe.layers.node_layers:
    stage: probe
    run_id: manual-1
    records: "{{ inspected.records }}"
  when: inspected.records.cdi.status != 'FAIL'
"""

RETURN = r"""
records:
  description: The records of the layers that ran, layer name -> record (docs/contract.md).
  returned: always
  type: dict
spec:
  description: With O(stage=inspect) and O(cdi_source=self-built), the spec read (C(path), C(kind), C(devices), ...).
  returned: when a self-built spec was used
  type: dict
spec_removed:
  description: With O(remove_spec), the path of the spec removed (empty when there was none).
  returned: with stage probe
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpuprobe.layers.plugins.module_utils._node import NODE_LAYERS_ARGSPEC, inspect, probe


def main():
    module = AnsibleModule(argument_spec=NODE_LAYERS_ARGSPEC, supports_check_mode=True)
    p = module.params
    try:
        out = (inspect if p["stage"] == "inspect" else probe)(p, check_mode=module.check_mode)
    except ValueError as exc:
        module.fail_json(msg=str(exc))
    if out.get("interrupted"):
        module.fail_json(msg=out["interrupted"])
    module.exit_json(changed=bool(out.get("spec") and not p["cdi_spec"]) or bool(out.get("spec_removed")), **out)


if __name__ == "__main__":
    main()
