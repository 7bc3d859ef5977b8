# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filter gpuprobe.layers.layer_gate. Why the runtime and compute layers cannot run on a node: module_utils/_node/gate.py decides."""

from __future__ import annotations

DOCUMENTATION = r"""
name: layer_gate
author: gpuprobe.layers contributors (!UNKNOWN)
version_added: "1.0.0"
short_description: Why the runtime and compute layers cannot run on a node
description:
  - Returns the empty string when a probe container with an injected CDI device can be started, else the
    reason recorded in their NOT_RUN records.
  - >-
    V(audit mode: no container is started) in audit mode; V(blocked by host FAIL) or V(blocked by cdi FAIL)
    after such a FAIL; a reason when host or cdi did not run or cdi resolved no device.
positional: _input, mode
options:
  _input:
    description: Mapping layer name -> layer record (host and cdi are looked at).
    type: dict
    required: true
  mode:
    description: V(full) or V(audit).
    type: str
    default: full
"""

EXAMPLES = r"""
- name: Decide whether the probe can run
  ansible.builtin.set_fact:
    gate: "{{ verify_result.records | gpuprobe.layers.layer_gate('full') }}"
"""

RETURN = r"""
_value:
  description: The reason, or the empty string.
  type: str
"""

# first: the collection code imported below is compiled once, not on every run (plugin_utils/_code_cache)
from ansible_collections.gpuprobe.layers.plugins.plugin_utils import _code_cache  # noqa: F401  pylint: disable=unused-import
from ansible_collections.gpuprobe.layers.plugins.module_utils._node import gate as _gate
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._filter_args import layer_records


def layer_gate(records, mode="full"):
    """Why the runtime and compute layers cannot run on this node ('' when they can): _node.gate.layer_gate,
    the gate a node applies before its probe and gpuprobe.layers.verify_node when it makes the records of a probe
    that did not run."""
    return _gate.layer_gate(layer_records(records, "layer_gate"), mode)


class FilterModule(object):
    def filters(self):
        return {"layer_gate": layer_gate}
