# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE doc fragment: the kubectl options of the k8s modules (k8s_facts, k8s_publish) and their action group
gpuprobe.layers.k8s (meta/runtime.yml), through which a play sets them once with module_defaults (not public API).
The attribute's description is ansible.builtin.action_common_attributes.actiongroups' own, written here in full:
of two fragments that document one attribute the first one's keys win (ansible-core's merge), so extending both
would need an order to be kept in every module.
"""


class ModuleDocFragment(object):  # pylint: disable=too-few-public-methods

    DOCUMENTATION = r"""
options:
  kubectl:
    description: The kubectl program, a name looked up on PATH or a path.
    type: str
    default: kubectl
  kubeconfig:
    description:
      - Path of the kubeconfig file. When omitted, kubectl's own defaults (C(KUBECONFIG), C(~/.kube/config),
        in-cluster service account) apply.
    type: path
  context:
    description: The kubeconfig context to use.
    type: str
  timeout:
    description: Seconds each kubectl call may take (C(--request-timeout)); the call is killed shortly after.
    type: int
    default: 30
attributes:
  action_group:
    description: Action is part of action_group(s), for convenient setting of module_defaults.
    support: full
    membership: [gpuprobe.layers.k8s]
    details: Its kubectl options (O(kubectl), O(kubeconfig), O(context), O(timeout)) can be set for a play with
      C(module_defaults) C(group/gpuprobe.layers.k8s).
"""
