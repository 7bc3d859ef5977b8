#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: node_layers
short_description: Internal - the host, cdi and k8s layers of one node in one process (called by verify_node)
version_added: 1.0.0
description:
  - >-
    B(Internal module, not meant to be used directly.) The P(gpuprobe.layers.verify_node#module) action runs it on the
    node in V(audit) mode and when no runtime or compute layer is selected (otherwise it runs
    M(gpuprobe.layers.node_verify)). Its options and results follow that action and may change in any release: use
    P(gpuprobe.layers.verify_node#module) (the gpuprobe.layers.verify role) or a layer's own facts module.
  - Runs the host layer (as M(gpuprobe.layers.host_facts)), the cdi layer (as M(gpuprobe.layers.cdi_facts); with
    O(cdi_source=self-built) it first writes this run's spec as M(gpuprobe.layers.cdi_spec) does) and the k8s layer
    (as M(gpuprobe.layers.k8s_facts)), the ones listed in O(layers), in one module execution on the node, so that
    they cost one round trip instead of one each.
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
    details: >-
      Only reads; a self-built spec is not written, so its cdi layer finds nothing.
seealso:
  - module: gpuprobe.layers.verify_node
  - module: gpuprobe.layers.node_verify
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
  description: >-
    The records of the layers that ran, layer name -> record
    (L(docs/contract.md,https://github.com/gpuprobe/gpuprobe.layers/blob/main/docs/contract.md)).
  returned: always
  type: dict
spec:
  description: With O(cdi_source=self-built), the spec read (C(path), C(kind), C(devices), ...).
  returned: when a self-built spec was used
  type: dict
"""

from ansible_collections.gpuprobe.layers.plugins.module_utils._common.args import NODE_LAYERS_ARGSPEC
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.limits import cap_strings
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.module import run_layer_module
from ansible_collections.gpuprobe.layers.plugins.module_utils._node.inspect import inspect


def node_layers(p, check_mode):
    out = inspect(p, check_mode=check_mode)
    cap_strings({"records": out.get("records"), "probes": out.get("probes")})  # an honest node stays within the controller's cap
    return dict(out, changed=bool(out.get("spec") and not p["cdi_spec"] and not check_mode))


def main():
    run_layer_module(NODE_LAYERS_ARGSPEC, node_layers)


if __name__ == "__main__":
    main()
