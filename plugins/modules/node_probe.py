#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: node_probe
short_description: Internal - the runtime and compute layers of one node in one process (the probe stage of node_verify)
version_added: 1.0.0
description:
  - >-
    B(Internal module, not meant to be used directly.) It is the probe stage of M(gpuprobe.layers.node_verify) as a
    module of its own; P(gpuprobe.layers.verify_node#module) does not call it (in full mode
    M(gpuprobe.layers.node_verify) runs the same code in one process with the host, cdi and k8s layers). Its options
    and results may change in any release: use P(gpuprobe.layers.verify_node#module) (the gpuprobe.layers.verify role).
  - Runs the probe container with the devices the cdi record in O(records) resolved (the runtime layer, as
    M(gpuprobe.layers.runtime_facts) with compute) and builds the compute layer from its output plus the host control
    (as M(gpuprobe.layers.compute_facts)), in one module execution on the node.
  - The probe container is removed before the module returns, also on SIGINT, SIGTERM or SIGHUP, and when the
    C(ansible-playbook) process that runs it on this host is gone (the module then fails saying so). With
    O(remove_spec) this run's self-built spec is removed at the end, also on an interrupt.
  - The spec files that provide the requested devices are read again before the container starts and after it
    ran; when one is not what the cdi layer read (its sha256 in the cdi record), the runtime layer is C(NOT_RUN)
    "spec changed since the cdi layer read it" and no container is started
    (L(docs/safety.md,https://github.com/gpuprobe/gpuprobe.layers/blob/main/docs/safety.md)).
  - GPUs with compute processes of others are not probed unless O(allow_busy_gpu)
    (L(docs/safety.md,https://github.com/gpuprobe/gpuprobe.layers/blob/main/docs/safety.md)).
  - A layer whose code raises is recorded C(NOT_RUN) with the error; options that cannot work fail the module.
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpuprobe.layers._attributes
  - gpuprobe.layers._node.probe
attributes:
  check_mode:
    details: Starts no container; runtime and compute are C(NOT_RUN) "check mode".
options:
  records:
    description:
      - The C(host) and C(cdi) records of M(gpuprobe.layers.node_layers) (the cdi record's C(evidence.requested_devices),
        C(expected_edits) and C(identity.expected_gpus) drive the probe; the host record tells which GPUs are busy).
    type: dict
    required: true
  run_id:
    description: The run's id (letters, digits, C(_ . -)); it names and labels the probe container and the self-built spec.
    type: str
    required: true
  runtime:
    description:
      - The runtime to run the probe through. V(auto) takes the runtime the cdi layer selected and judged (the first of
        its C(evidence.engines)); a name takes that engine's entry there.
    type: str
    choices: [auto, podman, docker, containerd, crio]
    default: auto
  runtime_endpoint:
    description: The CRI endpoint (C(unix:///path.sock)) of V(containerd) or V(crio); default the selected engine's.
    type: str
  self_built_spec_dir:
    description: Where this run's self-built spec is (for O(remove_spec)).
    type: path
    default: /var/run/cdi
  remove_spec:
    description: Remove this run's self-built spec from O(self_built_spec_dir) at the end.
    type: bool
    default: false
seealso:
  - module: gpuprobe.layers.node_verify
  - module: gpuprobe.layers.verify_node
"""

EXAMPLES = r"""
- name: Host and cdi layers in one call
  gpuprobe.layers.node_layers:
  register: inspected

- name: The probe with the devices the cdi layer resolved
  gpuprobe.layers.node_probe:
    run_id: manual-1
    records: "{{ inspected.records }}"
  when: inspected.records.cdi.status != 'FAIL'
"""

RETURN = r"""
records:
  description: The C(runtime) and C(compute) records (L(docs/contract.md,https://github.com/gpuprobe/gpuprobe.layers/blob/main/docs/contract.md)).
  returned: always
  type: dict
spec_removed:
  description: With O(remove_spec), the path of the spec removed (empty when there was none).
  returned: always
  type: str
"""

from ansible_collections.gpuprobe.layers.plugins.module_utils._common.args import NODE_PROBE_ARGSPEC
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.module import run_layer_module
from ansible_collections.gpuprobe.layers.plugins.module_utils._node.probe import probe


def node_probe(p, check_mode):
    out = probe(p, check_mode=check_mode)
    if out.get("interrupted"):
        return {"failed": True, "msg": out["interrupted"]}
    return dict(out, changed=bool(out.get("spec_removed")))


def main():
    run_layer_module(NODE_PROBE_ARGSPEC, node_probe)


if __name__ == "__main__":
    main()
