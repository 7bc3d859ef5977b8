# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filter gpuprobe.layers.report_diff_markdown. The result of report_diff as Markdown: plugin_utils/_report/render.py writes it."""

from __future__ import annotations

DOCUMENTATION = r"""
name: report_diff_markdown
author: gpuprobe.layers contributors (!UNKNOWN)
version_added: "1.0.0"
short_description: Render a fleet report comparison as Markdown
description:
  - Renders the result of P(gpuprobe.layers.report_diff#filter) as Markdown (hosts added and removed,
    verdict transitions, and a table of every changed field per host). When the two runs were not made the same
    way (their mode, CDI source or host pattern differ), its first lines say so.
positional: _input
options:
  _input:
    description: The result of P(gpuprobe.layers.report_diff#filter).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Write the comparison
  ansible.builtin.copy:
    content: "{{ old_report | gpuprobe.layers.report_diff(new_report) | gpuprobe.layers.report_diff_markdown }}"
    dest: /srv/reports/changes.md
    mode: "0644"
"""

RETURN = r"""
_value:
  description: Markdown text.
  type: str
"""

from ansible.errors import AnsibleFilterError

# first: the collection code imported below is compiled once, not on every run (plugin_utils/_code_cache)
from ansible_collections.gpuprobe.layers.plugins.plugin_utils import _code_cache  # noqa: F401  pylint: disable=unused-import
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report.render import render_diff_markdown


def report_diff_markdown(diff):
    """The result of report_diff rendered as Markdown."""
    if not isinstance(diff, dict) or "changed" not in diff:
        raise AnsibleFilterError("report_diff_markdown expects the result of gpuprobe.layers.report_diff")
    return render_diff_markdown(diff)


class FilterModule(object):
    def filters(self):
        return {"report_diff_markdown": report_diff_markdown}
