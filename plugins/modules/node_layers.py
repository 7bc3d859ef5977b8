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
  - gpuprobe.layers._node
attributes:
  check_mode:
    support: full
    details: >-
      Only reads; a self-built spec is not written, so its cdi layer finds nothing.
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

from ansible_collections.gpuprobe.layers.plugins.module_utils._common.limits import cap_strings
from ansible_collections.gpuprobe.layers.plugins.module_utils._node.stages import NODE_LAYERS_ARGSPEC, inspect


def main():
    module = AnsibleModule(argument_spec=NODE_LAYERS_ARGSPEC, supports_check_mode=True)
    try:
        out = inspect(module.params, check_mode=module.check_mode)
    except ValueError as exc:
        module.fail_json(msg=str(exc))
    cap_strings({"records": out.get("records"), "probes": out.get("probes")})  # an honest node stays within the controller's cap
    module.exit_json(changed=bool(out.get("spec") and not module.params["cdi_spec"] and not module.check_mode), **out)


if __name__ == "__main__":
    main()
