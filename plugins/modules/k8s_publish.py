#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: k8s_publish
short_description: Publish each node's verdict as a Node condition (and optionally a label) where the cluster reads it
version_added: 1.0.0
description:
  - Opt-in. Writes one Node condition per host through the Node's C(status) subresource
    (C(kubectl patch node N --subresource=status --type=strategic)), so readiness gates, remediation controllers and
    C(kubectl describe node) see the verdict. Node conditions merge by C(type), so the kubelet's own conditions and
    other writers' stay as they are.
  - "The condition has C(type) O(condition_type), C(status) V(True) for C(COMPUTE_VERIFIED), V(False) for
    C(FAILED_AT_<LAYER>); C(reason) the verdict; C(message) the verdict, its signature, where it points and the run id;
    C(lastTransitionTime) kept while the status does not change; C(lastHeartbeatTime) now."
  - "Only what the run decided is written. A host whose verdict is C(INCONCLUSIVE) (unreachable, run failed, a layer
    not run, the GPU busy) is not written at all in any O(mode): its Node keeps its condition and label, and the host
    is in RV(kept). In an C(audit) (no container runs) only C(FAILED_AT_HOST) and C(FAILED_AT_CDI) are written
    (V(False)); never V(True), and a verified Node keeps its condition. V(Unknown) is never written."
  - With O(label), also one Node label O(label)=<verdict> (a merge patch of C(metadata.labels)).
  - Never touches Pods, taints or the Node's spec (the collection's command allowlist refuses any other write).
  - A host is written only on the Node it is exactly, the Node named like the inventory host (case-insensitive) or
    the one Node whose C(kubernetes.io/hostname) label is the inventory name, or the one O(node_names) names. A short
    name never matches. An ambiguous match (a Node named so and another labelled so, two labelled so, a label match
    beside a Node with the same short name) is refused, as are hosts that resolve to one Node (which verdict is the
    Node's cannot be told). A host with a verdict to write and no such Node is returned in RV(unmatched) with why,
    with a warning, and fails the task after the other Nodes are written, since a verdict that was asked to be
    published and was not is an error. A read or a write that fails is
    returned in RV(errors) and fails the task; nothing is hidden.
  - The RBAC this needs is in L(docs/k8s.md,https://github.com/gpuprobe/gpuprobe.layers/blob/main/docs/k8s.md) (get/list nodes,
    patch nodes/status, and patch nodes for O(label)).
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpuprobe.layers._k8s
  - gpuprobe.layers._attributes
attributes:
  check_mode:
    details: Reads the Nodes and returns the condition and label that would be written, and the kubectl commands;
      writes nothing.
  diff_mode:
    support: full
    details:
      - "The task's C(diff) (shown with C(--diff)) holds one entry per Node whose condition or label this task changed,
        or would change in check mode: before and after each C({condition: ..., label: {<label>: value}}), the Node's
        condition of O(condition_type) and, with O(label), its label (null where the Node had none)."
      - A Node whose status, reason, message and label stay the same is not in it, although its C(lastHeartbeatTime)
        is written again.
options:
  verdicts:
    description:
      - Mapping inventory host -> its verdict, a string (C(COMPUTE_VERIFIED), C(FAILED_AT_CDI), ...) or the node
        verdict dict of M(gpuprobe.layers.verify_node) (C(verdict), C(signature), C(points_to), C(reason)).
      - The fleet report's C(verdicts) result (M(gpuprobe.layers.fleet_report)) fits as it is.
    type: dict
    required: true
  signatures:
    description: Mapping host -> failure signature, used when O(verdicts) gives strings (the fleet report's C(signatures)).
    type: dict
    default: {}
  node_names:
    description:
      - Mapping inventory host -> Node name, the explicit map, for hosts whose inventory name is neither their Node's
        name nor its C(kubernetes.io/hostname) label (an FQDN inventory beside short Node names, for example).
      - A host in it is written only on that Node, exactly.
    type: dict
    default: {}
  mode:
    description:
      - The mode of the run the verdicts come from (the fleet playbook's C(gpuprobe_mode)). V(full) and V(postcheck)
        write C(COMPUTE_VERIFIED) and C(FAILED_AT_<LAYER>); V(audit) writes only C(FAILED_AT_HOST) and
        C(FAILED_AT_CDI). C(INCONCLUSIVE) is never written. Every host not written is in RV(kept).
    type: str
    choices: [full, postcheck, audit]
    default: full
  condition_type:
    description: The Node condition type to write.
    type: str
    default: GPUComputeVerified
  label:
    description: When set, also write this Node label with the verdict as its value (for example C(gpuprobe.layers/verdict)).
    type: str
  run_id:
    description: The run id to name in the condition message.
    type: str
  deadline:
    description:
      - Seconds the whole publish may take, from the start (reading the Nodes included). At the deadline the kubectl
        calls in flight are killed and no further write starts; every Node not written is in RV(not_written) and the
        task fails. The fleet playbook's task has its own C(timeout) above it.
    type: int
    default: 600
  max_consecutive_timeouts:
    description:
      - After this many kubectl timeouts in a row (an API server that does not answer), no further write starts and
        the calls in flight are killed; every Node not written is in RV(not_written) and the task fails.
    type: int
    default: 5
  workers:
    description: How many Nodes are written at a time (a small thread pool; each Node's condition, then its label).
    type: int
    default: 8
requirements:
  - kubectl 1.24 or newer (C(--subresource)), and credentials allowed to patch C(nodes/status)
    (L(docs/k8s.md,https://github.com/gpuprobe/gpuprobe.layers/blob/main/docs/k8s.md)).
seealso:
  - module: gpuprobe.layers.k8s_facts
  - module: gpuprobe.layers.fleet_report
  - name: Publishing the verdict to the cluster
    description: The condition and label written, how hosts are matched to Nodes, the RBAC, and the action group.
    link: https://github.com/gpuprobe/gpuprobe.layers/blob/main/docs/k8s.md#publishing-the-verdict-to-the-cluster-opt-in
"""

EXAMPLES = r"""
- name: Publish the verdicts of this run as Node conditions
  gpuprobe.layers.k8s_publish:
    verdicts: "{{ gpuprobe_fleet.verdicts }}"
    signatures: "{{ gpuprobe_fleet.signatures }}"
    label: gpuprobe.layers/verdict
  delegate_to: localhost
  run_once: true
"""

RETURN = r"""
published:
  description: One entry per host matched to a Node.
  returned: always
  type: list
  elements: dict
  contains:
    host:
      description: The inventory host.
      type: str
    node:
      description: The Node.
      type: str
    condition:
      description: The condition written (or that would be written in check mode).
      type: dict
    label:
      description: The label written (or that would be written), null without O(label).
      type: dict
    changed:
      description: Whether the status, the reason, the message or the label differ from what the Node had.
      type: bool
    written:
      description: Whether every write for this Node succeeded (false in check mode).
      type: bool
    commands:
      description: The kubectl argv of each write.
      type: list
      elements: list
unmatched:
  description:
    - Hosts whose verdict was to be written and was not, each with the reason; the task warns about each and fails
      when it is not empty (after writing the others).
    - A host with no Node of its exact name or C(kubernetes.io/hostname) label, an ambiguous match, and every host
      of two or more that resolve to one Node (refused; set O(node_names)).
  returned: always
  type: list
  elements: dict
kept:
  description:
    - Hosts whose Node was left as it is (host, node or null, verdict, reason), because the verdict was not decided in
      this run (C(INCONCLUSIVE)) or is not one an audit proves. Not an error.
  returned: always
  type: list
  elements: dict
not_written:
  description:
    - The Nodes whose writes were not made because the publish stopped (host, node, reason), when O(deadline) passed
      or O(max_consecutive_timeouts) timeouts came in a row. They are counted in RV(errors) too.
  returned: always
  type: list
  elements: dict
errors:
  description: Every read or write that failed (host, node, error); the task fails when it is not empty.
  returned: always
  type: list
  elements: dict
"""

from ansible_collections.gpuprobe.layers.plugins.module_utils._common.module import run_layer_module
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.options import check_timeout
from ansible_collections.gpuprobe.layers.plugins.module_utils._k8s import publish as _k8s_publish
from ansible_collections.gpuprobe.layers.plugins.module_utils._k8s.catalogue import DEFAULT_TIMEOUT


def k8s_publish(p, check_mode, diff=False):
    check_timeout(p["timeout"])
    check_timeout(p["deadline"], "deadline")
    for name in ("max_consecutive_timeouts", "workers"):
        if not 1 <= p[name] <= 64:
            raise ValueError("%s must be from 1 to 64 (got %d)" % (name, p[name]))
    problem = _k8s_publish.condition_type_error(p["condition_type"]) or (
        _k8s_publish.label_key_error(p["label"]) if p["label"] is not None else None)
    if problem:
        raise ValueError(problem)
    out = _k8s_publish.publish(p["verdicts"], kubectl=p["kubectl"], kubeconfig=p["kubeconfig"], context=p["context"],
                               timeout=p["timeout"], signatures=p["signatures"], node_names=p["node_names"],
                               condition_type=p["condition_type"], label_key=p["label"], run_id=p["run_id"],
                               check_mode=check_mode, deadline=p["deadline"],
                               max_consecutive_timeouts=p["max_consecutive_timeouts"], workers=p["workers"],
                               diff=diff, mode=p["mode"])
    warnings = ["verdict of %s not published: %s" % (u["host"], u["reason"]) for u in out["unmatched"]]
    problems = ["%s%s" % ("%s: " % e["node"] if e["node"] else "", e["error"]) for e in out["errors"]]
    problems += ["%s: not published: %s" % (u["host"], u["reason"]) for u in out["unmatched"]]
    if problems:
        return dict(out, warnings=warnings, failed=True, msg="publishing the verdicts failed: %s" % "; ".join(problems))
    return dict(out, warnings=warnings)


def main():
    run_layer_module(dict(
        verdicts=dict(type="dict", required=True),
        signatures=dict(type="dict", default={}),
        node_names=dict(type="dict", default={}),
        mode=dict(type="str", default="full", choices=list(_k8s_publish.MODES)),
        condition_type=dict(type="str", default=_k8s_publish.CONDITION_TYPE),
        label=dict(type="str"),
        run_id=dict(type="str"),
        kubectl=dict(type="str", default="kubectl"),
        kubeconfig=dict(type="path"),
        context=dict(type="str"),
        timeout=dict(type="int", default=DEFAULT_TIMEOUT),
        deadline=dict(type="int", default=_k8s_publish.DEFAULT_DEADLINE),
        max_consecutive_timeouts=dict(type="int", default=_k8s_publish.DEFAULT_MAX_CONSECUTIVE_TIMEOUTS),
        workers=dict(type="int", default=_k8s_publish.DEFAULT_WORKERS),
    ), k8s_publish, diff=True)


if __name__ == "__main__":
    main()
