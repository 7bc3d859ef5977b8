# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filter gpuprobe.layers.not_run_record. A NOT_RUN layer record, built by the result contract (module_utils/_common/result.py)."""

from __future__ import annotations

DOCUMENTATION = r"""
name: not_run_record
author: gpuprobe.layers contributors (!UNKNOWN)
version_added: "1.0.0"
short_description: The NOT_RUN record of a layer that was not executed
description:
  - Builds a layer record with status NOT_RUN and the given reason through the result contract
    (never hand-write record dicts in YAML).
positional: _input, reason
options:
  _input:
    description: The layer name (host, cdi, runtime, compute or k8s).
    type: str
    required: true
  reason:
    description: Why the layer did not run (mandatory).
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Record that the runtime layer could not run
  ansible.builtin.set_fact:
    runtime_record: "{{ 'runtime' | gpuprobe.layers.not_run_record('blocked by host FAIL') }}"
"""

RETURN = r"""
_value:
  description: A layer record (L(docs/contract.md,https://github.com/gpuprobe/gpuprobe.layers/blob/main/docs/contract.md)) with status NOT_RUN.
  type: dict
"""

from ansible.errors import AnsibleFilterError

# first: the collection code imported below is compiled once, not on every run (plugin_utils/_code_cache)
from ansible_collections.gpuprobe.layers.plugins.plugin_utils import _code_cache  # noqa: F401  pylint: disable=unused-import
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import LAYERS, not_run


def not_run_record(layer, reason):
    """A NOT_RUN layer record with its reason, built by the result contract."""
    if layer not in LAYERS:
        raise AnsibleFilterError("not_run_record: unknown layer %r (one of %s)" % (layer, ", ".join(LAYERS)))
    if not reason:
        raise AnsibleFilterError("not_run_record: a NOT_RUN record needs a reason")
    return not_run(str(layer), str(reason))


class FilterModule(object):
    def filters(self):
        return {"not_run_record": not_run_record}
