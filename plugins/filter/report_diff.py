# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filter gpuprobe.layers.report_diff. What changed between two fleet reports: plugin_utils/_report/diff.py decides."""

from __future__ import annotations

DOCUMENTATION = r"""
name: report_diff
author: gpuprobe.layers contributors (!UNKNOWN)
version_added: "1.0.0"
short_description: What changed between two gpuprobe fleet reports
description:
  - Compares two JSON fleet reports written by P(gpuprobe.layers.fleet_report#module) and lists, per
    node, the verdict, signature, layer statuses, versions and CDI spec digest that changed, and whether the two
    runs were made the same way (mode, CDI source, host pattern).
positional: _input, new
options:
  _input:
    description: The older report (parsed JSON).
    type: dict
    required: true
  new:
    description: The newer report (parsed JSON).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Compare two audits
  ansible.builtin.set_fact:
    changes: "{{ lookup('file', 'old.json') | from_json | gpuprobe.layers.report_diff(lookup('file', 'new.json') | from_json) }}"
"""

RETURN = r"""
_value:
  description: The comparison.
  type: dict
  contains:
    added:
      description: Hosts only in the newer report.
      type: list
    removed:
      description: Hosts only in the older report.
      type: list
    changed:
      description: Host -> list of changed fields (field, old, new).
      type: dict
    unchanged:
      description: Number of hosts present in both with no change.
      type: int
    verdicts:
      description: Verdict transitions ("OLD -> NEW") and how many hosts made them.
      type: dict
    runs_differ:
      description:
        - How the two runs differ (each C(field), C(old), C(new)) among the report's C(run.mode), C(run.cdi_source)
          and C(run.hosts_pattern); empty when they were made the same way. When the modes differ (C(audit) and
          C(full)), a change of a layer may come from the runs, not from the node (an audit runs no runtime and
          compute layer); P(gpuprobe.layers.report_diff_markdown#filter) says so at its top.
      type: list
      elements: dict
"""

from ansible.errors import AnsibleFilterError

# first: the collection code imported below is compiled once, not on every run (plugin_utils/_code_cache)
from ansible_collections.gpuprobe.layers.plugins.plugin_utils import _code_cache  # noqa: F401  pylint: disable=unused-import
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report.diff import diff_reports


def report_diff(old, new):
    """What changed between two fleet reports (JSON documents), per node."""
    if not isinstance(old, dict) or not isinstance(new, dict):
        raise AnsibleFilterError("report_diff expects two fleet reports (mappings)")
    return diff_reports(old, new)


class FilterModule(object):
    def filters(self):
        return {"report_diff": report_diff}
