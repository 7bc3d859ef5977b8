# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filter gpuprobe.layers.report_expand. A JSON fleet report with every host's full entry: plugin_utils/_report/compact.py restores it."""

from __future__ import annotations

DOCUMENTATION = r"""
name: report_expand
author: gpuprobe.layers contributors (!UNKNOWN)
version_added: "1.0.0"
short_description: Every host's full entry of a gpuprobe fleet report
description:
  - The JSON report written by P(gpuprobe.layers.fleet_report#module) (schema 4; schema 3 did so for a verified host
    only) writes a host against the shape of its kind and failure (C(shapes)) with only what is its own (its name and
    GPU UUIDs as C(tokens), and a C(patch) of what else differs); its verdict, state, cause, group and where are on its own line. This filter gives back the
    report with every host's full entry (every layer record, as schema 2 wrote it) and without C(shapes).
  - A report of schema 2, or a host written whole, is returned as it is.
    L(docs/usage.md,https://github.com/gpuprobe/gpuprobe.layers/blob/main/docs/usage.md) ("JSON schema") describes the
    encoding, for readers in other languages.
positional: _input
options:
  _input:
    description: The fleet report (parsed JSON).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Read every layer record of the newest report
  ansible.builtin.set_fact:
    report: "{{ lookup('ansible.builtin.file', 'reports/gpuprobe-report-latest.json') | from_json | gpuprobe.layers.report_expand }}"

- name: The compute record of a verified node
  ansible.builtin.debug:
    msg: "{{ report.hosts['gpu-017'].layers.compute.evidence.gpus }}"
"""

RETURN = r"""
_value:
  description: The report, every host's entry whole (otherwise unchanged; C(shapes) left out).
  type: dict
"""

from ansible.errors import AnsibleFilterError

# first: the collection code imported below is compiled once, not on every run (plugin_utils/_code_cache)
from ansible_collections.gpuprobe.layers.plugins.plugin_utils import _code_cache  # noqa: F401  pylint: disable=unused-import
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report.compact import expand


def report_expand(report):
    """A JSON fleet report with every host's full entry (a host written against its shape restored)."""
    if not isinstance(report, dict) or not isinstance(report.get("hosts"), dict):
        raise AnsibleFilterError("report_expand expects a fleet report (a mapping with hosts)")
    try:
        return expand(report)
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise AnsibleFilterError("report_expand: a host cannot be restored from its shape: %s" % exc)


class FilterModule(object):
    def filters(self):
        return {"report_expand": report_expand}
