# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filter gpuprobe.layers.node_verdict. The node verdict of a mapping layer -> record: module_utils/_verdict/verdict.py decides."""

from __future__ import annotations

DOCUMENTATION = r"""
name: node_verdict
author: gpuprobe.layers contributors (!UNKNOWN)
version_added: "1.0.0"
short_description: The verdict of one node from its layer records
description:
  - Calls the collection's single verdict function on a mapping layer -> layer record.
  - Every record is validated against the result contract first; a malformed record makes the node V(INCONCLUSIVE)
    with the violations as the reason.
  - V(COMPUTE_VERIFIED) only when compute PASSed inside a container that got the GPU through CDI and every expected
    GPU row of the compute record (C(evidence.gpus)) PASSed; V(FAILED_AT_<LAYER>) for the first FAIL in order host,
    cdi, runtime, compute, attributed from the cause
    (L(docs/contract.md,https://github.com/gpuprobe/gpuprobe.layers/blob/main/docs/contract.md)); else V(INCONCLUSIVE).
  - A missing layer counts as NOT_RUN.
positional: _input
options:
  _input:
    description: Mapping layer name -> layer record (see L(docs/contract.md,https://github.com/gpuprobe/gpuprobe.layers/blob/main/docs/contract.md)).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Decide the verdict of this node
  ansible.builtin.set_fact:
    verdict: "{{ {'host': host_record, 'cdi': cdi_record} | gpuprobe.layers.node_verdict }}"
"""

RETURN = r"""
_value:
  description: The verdict.
  type: dict
  contains:
    verdict:
      description: COMPUTE_VERIFIED, INCONCLUSIVE or FAILED_AT_HOST/CDI/RUNTIME/COMPUTE.
      type: str
    layer:
      description: The failing layer, or null.
      type: str
    signature:
      description: The stable failure id of the failing layer, or null.
      type: str
    points_to:
      description: The layer the cause of the failure is in, or null (a runtime or compute failure explained by the
        CDI spec points to V(cdi)).
      type: str
    reason:
      description: One line explaining the verdict.
      type: str
    because:
      description: The cdi checks (V(check), V(status), V(subject), V(observed), V(hint)) that explain a failure
        attributed to the spec; empty otherwise.
      type: list
      elements: dict
    gpus:
      description: The compute record's per-GPU rows (index, uuid, model, expected, seen_in_container, ordinal,
        status, signature, reason).
      type: list
      elements: dict
"""

# first: the collection code imported below is compiled once, not on every run (plugin_utils/_code_cache)
from ansible_collections.gpuprobe.layers.plugins.plugin_utils import _code_cache  # noqa: F401  pylint: disable=unused-import
from ansible_collections.gpuprobe.layers.plugins.module_utils._verdict.verdict import node_verdict
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._filter_args import layer_records


def node_verdict_filter(records):
    """The node verdict (verdict, layer, signature, points_to, reason, because, gpus) of a mapping layer -> record."""
    return node_verdict(layer_records(records, "node_verdict"))


class FilterModule(object):
    def filters(self):
        return {"node_verdict": node_verdict_filter}
