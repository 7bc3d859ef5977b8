# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filter gpuprobe.layers.drill_result. One fault-drill row, prediction against observed verdict: plugin_utils/_report/model.py builds it."""

from __future__ import annotations

DOCUMENTATION = r"""
name: drill_result
author: gpuprobe.layers contributors (!UNKNOWN)
version_added: "1.0.0"
short_description: One fault-drill row, predicted vs observed
description:
  - Decides the observed verdict of a drill with the collection's verdict function and compares it with
    the prediction that the P(gpuprobe.layers.cdi_spec#module) module returned before the run.
  - The row matches when the observed failing layer equals the predicted one (a predicted layer of null
    means the probe should pass, i.e. COMPUTE_VERIFIED) and, when a signature was predicted, the signatures are equal.
positional: _input, variant, prediction, host
options:
  _input:
    description: Mapping layer name -> layer record observed in the drill.
    type: dict
    required: true
  variant:
    description: The spec variant of the drill.
    type: str
    required: true
  prediction:
    description:
      - The prediction returned by cdi_spec (C(layer), C(signature); also accepted as C(predicted_layer), C(predicted_signature)).
      - Empty when the drill could not write its spec, which never matches.
    type: dict
    required: true
  host:
    description: The node the drill ran on.
    type: str
"""

EXAMPLES = r"""
- name: Record the drill row
  ansible.builtin.set_fact:
    row: "{{ records | gpuprobe.layers.drill_result('no_ptxjit_mount', spec.prediction, inventory_hostname) }}"
"""

RETURN = r"""
_value:
  description: >-
    The row: host, variant, predicted (whether a prediction was recorded), predicted_layer, predicted_signature, observed_verdict, observed_layer,
    observed_signature, observed_points_to, observed_reason, match.
  type: dict
"""

# first: the collection code imported below is compiled once, not on every run (plugin_utils/_code_cache)
from ansible_collections.gpuprobe.layers.plugins.plugin_utils import _code_cache  # noqa: F401  pylint: disable=unused-import
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._filter_args import layer_records
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report.model import drill_row


def drill_result(records, variant, prediction, host=None):
    """One fault-drill row: the prediction recorded before the run vs the verdict observed after it."""
    return drill_row(variant, prediction or {}, layer_records(records, "drill_result"), host=host)


class FilterModule(object):
    def filters(self):
        return {"drill_result": drill_result}
