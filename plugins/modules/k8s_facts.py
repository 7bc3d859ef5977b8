#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: k8s_facts
short_description: The optional k8s layer - does the scheduler see the GPUs, and why is a GPU Pod Pending?
version_added: 0.1.0
description:
  - Asks C(kubectl) for the nodes, the Pods and the FailedScheduling events and returns the k8s layer record
    (docs/contract.md) as the fact C(gpuprobe_k8s).
  - Per node, capacity and allocatable of each GPU resource and the GPU feature labels (C(nvidia.com/gpu.present),
    C(nvidia.com/gpu.product), ...). A node with GPU labels but nothing allocatable is a FAIL
    (C(device plugin advertises nothing)); a Pending Pod requesting a GPU resource is a FAIL carrying the
    scheduler's message (for example C(Insufficient nvidia.com/gpu)).
  - No kubectl, no kubeconfig or an unreachable API server make the record C(NOT_RUN) with that exact reason.
  - This layer says nothing about the driver or libraries inside a Pod. Check ids are listed in docs/checks.md.
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.facts
  - gpuprobe.layers._attributes
  - gpuprobe.layers._attributes.facts
attributes:
  check_mode:
    support: full
    details: Only reads from the API server; the same facts are returned in check mode.
options:
  kubectl:
    description: The kubectl program, a name looked up on PATH or a path.
    type: str
    default: kubectl
  kubeconfig:
    description:
      - Path of the kubeconfig file. When omitted, kubectl's own defaults (C(KUBECONFIG), C(~/.kube/config),
        in-cluster service account) apply; when none of those exist the record is C(NOT_RUN).
    type: path
  context:
    description: The kubeconfig context to use.
    type: str
  resources:
    description: The extended resource names that are GPUs.
    type: list
    elements: str
    default: [nvidia.com/gpu]
  nodes:
    description: Only look at these nodes (and the Pods bound to them). All nodes when omitted.
    type: list
    elements: str
  namespaces:
    description: Only look at the Pods of these namespaces. All namespaces when omitted.
    type: list
    elements: str
  timeout:
    description: Seconds each kubectl call may take (C(--request-timeout)); the call is killed shortly after.
    type: int
    default: 30
requirements:
  - kubectl on the host running the module, and credentials that can list nodes, Pods and events.
seealso:
  - module: gpuprobe.layers.host_facts
"""

EXAMPLES = r"""
- name: Read the k8s layer from the controller
  gpuprobe.layers.k8s_facts:
    kubeconfig: ~/.kube/config
  delegate_to: localhost
  run_once: true

- name: Why are the training Pods Pending?
  gpuprobe.layers.k8s_facts:
    namespaces: [ml]
    resources: [nvidia.com/gpu, nvidia.com/mig-1g.18gb]
  delegate_to: localhost
  run_once: true
"""

RETURN = r"""
ansible_facts:
  description: Facts added by this module.
  returned: always
  type: dict
  contains:
    gpuprobe_k8s:
      description:
        - The k8s layer record (docs/contract.md).
        - C(evidence) holds C(kubectl), C(resources), C(nodes) (name, capacity, allocatable, gpu_labels, ready,
          unschedulable), C(gpu_pods) (namespace, name, phase, node, requests, reason, message, events) and C(pods_error).
      returned: always
      type: dict
      sample:
        layer: k8s
        status: NOT_RUN
        reason: "no kubeconfig: option kubeconfig not given, KUBECONFIG unset, /root/.kube/config absent, not running in a Pod"
        checks: []
        evidence: {kubectl: {path: /usr/bin/kubectl}}
        not_proven: ["everything: this layer did not run"]
        versions: {}
        started_at: "2026-12-02T18:30:00.000000Z"
        duration_ms: 0.0
        signature: null
        points_to: null
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpuprobe.layers.plugins.module_utils._k8s import DEFAULT_RESOURCES, DEFAULT_TIMEOUT, collect_k8s
from ansible_collections.gpuprobe.layers.plugins.module_utils._options import check_timeout


def main():
    module = AnsibleModule(
        argument_spec=dict(
            kubectl=dict(type="str", default="kubectl"),
            kubeconfig=dict(type="path"),
            context=dict(type="str"),
            resources=dict(type="list", elements="str", default=list(DEFAULT_RESOURCES)),
            nodes=dict(type="list", elements="str"),
            namespaces=dict(type="list", elements="str"),
            timeout=dict(type="int", default=DEFAULT_TIMEOUT),
        ),
        supports_check_mode=True,
    )
    p = module.params
    try:
        check_timeout(p["timeout"])
    except ValueError as exc:
        module.fail_json(msg=str(exc))
    record = collect_k8s(kubectl=p["kubectl"], kubeconfig=p["kubeconfig"], context=p["context"], resources=p["resources"],
                         node_names=p["nodes"], namespaces=p["namespaces"], timeout=p["timeout"])
    module.exit_json(changed=False, ansible_facts={"gpuprobe_k8s": record})


if __name__ == "__main__":
    main()
