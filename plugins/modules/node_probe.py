#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: node_probe
short_description: The runtime and compute layers of one node in one process (the node side of verify_node)
version_added: "0.2.0"
description:
  - Runs the probe container with the devices the cdi record in O(records) resolved (the runtime layer, as
    M(gpuprobe.layers.runtime_facts) with compute) and builds the compute layer from its output plus the host control
    (as M(gpuprobe.layers.compute_facts)), in one module execution on the node. P(gpuprobe.layers.verify_node#module)
    calls it after M(gpuprobe.layers.node_layers) when a device can be injected; it can also be used alone.
  - The probe container is removed before the module returns, also on SIGINT, SIGTERM or SIGHUP, and when the
    C(ansible-playbook) process that runs it on this host is gone (the module then fails saying so). With
    O(remove_spec) this run's self-built spec is removed at the end, also on an interrupt.
  - The spec files that provide the requested devices are read again before the container starts and after it
    ran; when one is not what the cdi layer read (its sha256 in the cdi record), the runtime layer is C(NOT_RUN)
    "spec changed since the cdi layer read it" and no container is started (docs/safety.md).
  - GPUs with compute processes of others are not probed unless O(allow_busy_gpu) (docs/safety.md).
  - A layer whose code raises is recorded C(NOT_RUN) with the error; options that cannot work fail the module.
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpuprobe.layers._attributes
  - gpuprobe.layers._node.probe
attributes:
  check_mode:
    support: full
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
  - module: gpuprobe.layers.node_layers
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
  description: The C(runtime) and C(compute) records (docs/contract.md).
  returned: always
  type: dict
spec_removed:
  description: With O(remove_spec), the path of the spec removed (empty when there was none).
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpuprobe.layers.plugins.module_utils._node.probe import NODE_PROBE_ARGSPEC, probe


def main():
    module = AnsibleModule(argument_spec=NODE_PROBE_ARGSPEC, supports_check_mode=True)
    try:
        out = probe(module.params, check_mode=module.check_mode)
    except ValueError as exc:
        module.fail_json(msg=str(exc))
    if out.get("interrupted"):
        module.fail_json(msg=out["interrupted"])
    module.exit_json(changed=bool(out.get("spec_removed")), **out)


if __name__ == "__main__":
    main()
