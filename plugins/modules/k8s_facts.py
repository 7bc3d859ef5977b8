#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: k8s_facts
short_description: The optional k8s layer - does the scheduler see the GPUs, and why is a GPU Pod Pending?
version_added: 1.0.0
description:
  - Asks C(kubectl) for the nodes, the Pods and their events and, where the cluster serves C(resource.k8s.io), for
    the Dynamic Resource Allocation objects (ResourceSlices, DeviceClasses, ResourceClaims and their templates), and
    returns the k8s layer record (L(docs/contract.md,https://github.com/gpuprobe/gpuprobe.layers/blob/main/docs/contract.md)) as the fact C(gpuprobe_k8s).
    L(docs/k8s.md,https://github.com/gpuprobe/gpuprobe.layers/blob/main/docs/k8s.md) describes both paths.
  - Per node, the GPU path it is on, device plugin (allocatable C(nvidia.com/gpu), C(nvidia.com/mig-*)), DRA
    (ResourceSlices of driver C(gpu.nvidia.com)), both (a FAIL) or neither (a FAIL); capacity and allocatable, the
    GPU feature labels, and for DRA the pools, the devices with their attributes and taints, and the claims
    allocated to them. A device plugin node with GPU labels but nothing allocatable is a FAIL
    (C(device plugin advertises nothing)); a DRA node whose slices publish no device is a FAIL.
  - A Pending Pod requesting a GPU (resource or DRA claim) is a FAIL carrying the scheduler's message and its cause
    (C(Insufficient nvidia.com/gpu), C(cannot allocate all claims), C(ResourceClaim not created yet), C(device class
    ... does not exist), C(resourceclaim not available on the node)); a kubelet C(FailedPrepareDynamicResources) is a
    FAIL of C(k8s.pod.prepare) with its cause.
  - With O(host_record) (the host layer record of the node this runs on), that node's DRA devices are compared with
    its GPUs and loaded driver (UUID, C(gpu-<minor>), PCI bus id, driver version).
  - No kubectl, no kubeconfig or an unreachable API server make the record C(NOT_RUN) with that exact reason.
  - This layer says nothing about the driver or libraries inside a Pod. Check ids are listed in
    L(docs/checks.md,https://github.com/gpuprobe/gpuprobe.layers/blob/main/docs/checks.md).
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpuprobe.layers._k8s
  - gpuprobe.layers._attributes.facts
attributes:
  check_mode:
    details: Only reads from the API server; the same facts are returned in check mode.
options:
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
  dra:
    description: Read the C(resource.k8s.io) objects (DRA). When false the DRA checks are C(NOT_RUN).
    type: bool
    default: true
  host_record:
    description:
      - The host layer record (C(gpuprobe_host)) of the node to compare its published DRA devices with.
    type: dict
  node:
    description:
      - The name of that node in the cluster; by default the Node named like this machine (its hostname, its
        C(kubernetes.io/hostname) label, or a unique short name).
    type: str
requirements:
  - kubectl on the host running the module, and credentials that can list nodes, Pods and events, and for DRA
    resourceslices, deviceclasses, resourceclaims and resourceclaimtemplates (L(docs/k8s.md,https://github.com/gpuprobe/gpuprobe.layers/blob/main/docs/k8s.md)).
seealso:
  - module: gpuprobe.layers.host_facts
  - module: gpuprobe.layers.k8s_publish
  - name: The k8s layer
    description: The two GPU paths, Pending explained, the RBAC, and the kubectl options set once through the action group.
    link: https://github.com/gpuprobe/gpuprobe.layers/blob/main/docs/k8s.md
"""

EXAMPLES = r"""
- name: The kubectl options once for several tasks (the action group gpuprobe.layers.k8s; a play can set them too)
  module_defaults:
    group/gpuprobe.layers.k8s:
      kubeconfig: /etc/gpuprobe/kubeconfig
      context: gpu-cluster
  delegate_to: localhost
  run_once: true
  block:
    - name: Read the k8s layer
      gpuprobe.layers.k8s_facts:
        node: gpu-node-1

    - name: Publish this run's verdicts (the same kubeconfig and context)
      gpuprobe.layers.k8s_publish:
        verdicts: "{{ gpuprobe_fleet.verdicts }}"

- name: Read the k8s layer from the controller
  gpuprobe.layers.k8s_facts:
    kubeconfig: ~/.kube/config
  delegate_to: localhost
  run_once: true

- name: Compare this node's DRA devices with its host layer
  gpuprobe.layers.k8s_facts:
    host_record: "{{ gpuprobe_host }}"

- name: Why are the training Pods Pending?
  gpuprobe.layers.k8s_facts:
    namespaces: [ml]
    resources: [nvidia.com/gpu, nvidia.com/mig-1g.18gb]
  delegate_to: localhost
  run_once: true
"""

RETURN = r"""
ansible_facts:
  description: The k8s layer's record, as the fact C(gpuprobe_k8s).
  returned: always
  type: dict
  contains:
    gpuprobe_k8s:
      description:
        - The k8s layer record (L(docs/contract.md,https://github.com/gpuprobe/gpuprobe.layers/blob/main/docs/contract.md)).
        - C(evidence) holds C(kubectl), C(resources), C(nodes) (name, path, capacity, allocatable, gpu_labels, ready,
          unschedulable, dra (slices, pools, devices, claims)), C(gpu_pods) (namespace, name, phase, node, requests,
          claims, reason, message, events, dra_events), C(pods_error), C(self_node) and C(dra) (state, errors,
          api_versions, device_classes).
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

from ansible_collections.gpuprobe.layers.plugins.module_utils._common.module import run_layer_module
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.options import check_timeout
from ansible_collections.gpuprobe.layers.plugins.module_utils._k8s.catalogue import DEFAULT_RESOURCES, DEFAULT_TIMEOUT
from ansible_collections.gpuprobe.layers.plugins.module_utils._k8s.layer import record as k8s_record


def k8s_facts(p, check_mode):
    check_timeout(p["timeout"])
    record = k8s_record(kubectl=p["kubectl"], kubeconfig=p["kubeconfig"], context=p["context"], resources=p["resources"],
                        node_names=p["nodes"], namespaces=p["namespaces"], timeout=p["timeout"],
                        host_record=p["host_record"], hostname=p["node"], dra=p["dra"])
    return {"ansible_facts": {"gpuprobe_k8s": record}}


def main():
    run_layer_module(dict(
        kubectl=dict(type="str", default="kubectl"),
        kubeconfig=dict(type="path"),
        context=dict(type="str"),
        resources=dict(type="list", elements="str", default=list(DEFAULT_RESOURCES)),
        nodes=dict(type="list", elements="str"),
        namespaces=dict(type="list", elements="str"),
        timeout=dict(type="int", default=DEFAULT_TIMEOUT),
        dra=dict(type="bool", default=True),
        host_record=dict(type="dict"),
        node=dict(type="str"),
    ), k8s_facts)


if __name__ == "__main__":
    main()
