# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters of gpuprobe.layers: thin wrappers around module_utils, so playbooks and roles never decide a
verdict, build a record or compare reports in YAML. Documentation: the .yml file next to this one for
each filter."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

# first: the collection code imported below is compiled once, not on every run (plugin_utils/_code_cache)
from ansible_collections.gpuprobe.layers.plugins.plugin_utils import _code_cache  # noqa: F401  pylint: disable=unused-import
from ansible_collections.gpuprobe.layers.plugins.module_utils._node import gate as _gate
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report.diff import diff_reports
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report.model import drill_row
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report.render import render_diff_markdown
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import LAYERS, not_run
from ansible_collections.gpuprobe.layers.plugins.module_utils._verdict.verdict import node_verdict


def _records(value, name):
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise AnsibleFilterError("%s expects a mapping layer -> record, got %s" % (name, type(value).__name__))
    return dict((k, v) for k, v in value.items() if v)


def node_verdict_filter(records):
    """The node verdict (verdict, layer, signature, points_to, reason, because, gpus) of a mapping layer -> record."""
    return node_verdict(_records(records, "node_verdict"))


def not_run_record(layer, reason):
    """A NOT_RUN layer record with its reason, built by the result contract."""
    if layer not in LAYERS:
        raise AnsibleFilterError("not_run_record: unknown layer %r (one of %s)" % (layer, ", ".join(LAYERS)))
    if not reason:
        raise AnsibleFilterError("not_run_record: a NOT_RUN record needs a reason")
    return not_run(str(layer), str(reason))


def layer_gate(records, mode="full"):
    """Why the runtime and compute layers cannot run on this node ('' when they can): _node.gate.layer_gate,
    the gate a node applies before its probe and gpuprobe.layers.verify_node when it makes the records of a probe
    that did not run."""
    return _gate.layer_gate(_records(records, "layer_gate"), mode)


def report_diff(old, new):
    """What changed between two fleet reports (JSON documents), per node."""
    if not isinstance(old, dict) or not isinstance(new, dict):
        raise AnsibleFilterError("report_diff expects two fleet reports (mappings)")
    return diff_reports(old, new)


def report_diff_markdown(diff):
    """The result of report_diff rendered as Markdown."""
    if not isinstance(diff, dict) or "changed" not in diff:
        raise AnsibleFilterError("report_diff_markdown expects the result of gpuprobe.layers.report_diff")
    return render_diff_markdown(diff)


def drill_result(records, variant, prediction, host=None):
    """One fault-drill row: the prediction recorded before the run vs the verdict observed after it."""
    return drill_row(variant, prediction or {}, _records(records, "drill_result"), host=host)


class FilterModule(object):
    def filters(self):
        return {
            "node_verdict": node_verdict_filter,
            "not_run_record": not_run_record,
            "layer_gate": layer_gate,
            "report_diff": report_diff,
            "report_diff_markdown": report_diff_markdown,
            "drill_result": drill_result,
        }
