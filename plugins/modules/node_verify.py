#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: node_verify
short_description: Internal - every layer of one node in one process (called by verify_node in full mode)
version_added: 1.0.0
description:
  - >-
    B(Internal module, not meant to be used directly.) The P(gpuprobe.layers.verify_node#module) action runs it on the
    node in full mode whenever the runtime or compute layer is selected: it is that action's one node-side call. Its
    options and results follow that action and may change in any release: use P(gpuprobe.layers.verify_node#module)
    (the gpuprobe.layers.verify role).
  - Runs what M(gpuprobe.layers.node_layers) runs (host, cdi - writing this run's spec first with
    O(cdi_source=self-built) - and k8s), then, through each runtime the cdi layer selected, what
    M(gpuprobe.layers.node_probe) runs (the probe container with the resolved devices, the compute layer and the host
    control), in one module execution. P(gpuprobe.layers.verify_node#module) calls it in full mode, so that a node costs
    one Python start and one payload on the node instead of two.
  - Whether a runtime's probe may run is decided here by the same rule the controller applies (no container in
    V(audit) mode, after a host or cdi C(FAIL), when host or cdi did not run, or when no device was resolved); the
    runtime and compute records of a probe that did not run are C(NOT_RUN) with that reason.
  - The probe container is removed before the module returns, also on SIGINT, SIGTERM or SIGHUP (the module then
    fails, returning the records of the layers that finished), and this run's self-built spec is removed at the end.
  - Each layer is the same code as its own module; the verdict is the controller's.
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpuprobe.layers._attributes
  - gpuprobe.layers._node
  - gpuprobe.layers._node.probe
attributes:
  check_mode:
    details: Only reads; no spec is written and no container started (runtime and compute C(NOT_RUN) "check mode").
seealso:
  - module: gpuprobe.layers.verify_node
  - module: gpuprobe.layers.node_layers
  - module: gpuprobe.layers.node_probe
"""

EXAMPLES = r"""
- name: Every layer of this node through its runtime, with a spec built for this run
  gpuprobe.layers.node_verify:
    layers: [host, cdi]
    run_id: manual-1
    cdi_source: self-built
  register: verified

- name: The node's verdict from those records (the first runtime's)
  ansible.builtin.debug:
    msg: "{{ verified.records | ansible.builtin.combine(verified.probes[0].records) | gpuprobe.layers.node_verdict }}"
"""

RETURN = r"""
records:
  description: The records of the inspect stage's layers (host, cdi, k8s), layer name -> record
    (L(docs/contract.md,https://github.com/gpuprobe/gpuprobe.layers/blob/main/docs/contract.md)).
  returned: always
  type: dict
probes:
  description:
    - One entry per runtime the cdi layer selected (its C(evidence.engines), in that order; the O(runtime) option's name
      when it selected none) - C(runtime) (its name), C(ran) (whether its probe ran) and C(records) (its C(runtime) and
      C(compute) records; null when the probe was interrupted).
  returned: always
  type: list
  elements: dict
spec:
  description: With O(cdi_source=self-built), the spec read (C(path), C(kind), C(devices), ...).
  returned: always
  type: dict
spec_removed:
  description: When this call wrote the spec, its path once removed (empty when it was already gone).
  returned: when this call wrote a spec and removed it
  type: str
spec_error:
  description: When this call wrote the spec, why it could not be removed.
  returned: when the spec could not be removed
  type: str
"""

from ansible_collections.gpuprobe.layers.plugins.module_utils._common.args import NODE_VERIFY_ARGSPEC
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.limits import cap_strings
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.module import run_layer_module
from ansible_collections.gpuprobe.layers.plugins.module_utils._node.verify import verify


def node_verify(p, check_mode):
    out = verify(p, check_mode=check_mode)
    cap_strings({"records": out.get("records"), "probes": out.get("probes")})  # an honest node stays within the controller's cap
    out["changed"] = bool(out.get("spec") and not p["cdi_spec"] and not check_mode)
    if out.get("interrupted"):
        out.update(failed=True, msg=out.pop("interrupted"))
    return out


def main():
    run_layer_module(NODE_VERIFY_ARGSPEC, node_verify)


if __name__ == "__main__":
    main()
