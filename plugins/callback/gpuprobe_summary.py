# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: gpuprobe_summary
type: aggregate
short_description: Progress (hosts done / total) and a verdict table for gpuprobe.layers fleet runs
version_added: "0.1.0"
author:
  - gpuprobe.layers contributors (!UNKNOWN)
description:
  - >-
    Works next to any stdout callback. While the playbook C(gpuprobe.layers.verify_gpu) runs, prints one line each
    time a node finishes (C(gpuprobe [3/40] node07: FAILED_AT_CDI)), and at the end of the run a short table
    of the verdict per host, the nodes that could not be verified, and the report files, as returned by the
    P(gpuprobe.layers.fleet_report#module) task.
  - Nodes that became unreachable count as done.
  - Enable it with C(callbacks_enabled = gpuprobe.layers.gpuprobe_summary) in the C([defaults]) section of
    ansible.cfg, or C(ANSIBLE_CALLBACKS_ENABLED=gpuprobe.layers.gpuprobe_summary).
requirements:
  - enable in configuration
"""

from ansible.plugins.callback import CallbackBase

from ansible_collections.gpuprobe.layers.plugins.module_utils._node import PROGRESS_KEY


def progress_line(done, total, host, verdict):
    return "gpuprobe [%d/%s] %s: %s" % (done, total if total else "?", host, verdict)


def summary_table(verdicts, signatures=None):
    """Fixed-width lines host / verdict / signature, sorted by host."""
    signatures = signatures or {}
    rows = [("HOST", "VERDICT", "SIGNATURE")]
    for host in sorted(verdicts):
        rows.append((host, str(verdicts[host]), str(signatures.get(host) or "-")))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    return ["  ".join(c.ljust(widths[i]) for i, c in enumerate(row)).rstrip() for row in rows]


def _data(result):
    """The result mapping (``result`` from ansible-core 2.19 on, ``_result`` before)."""
    data = getattr(result, "result", None)
    if data is None:
        data = getattr(result, "_result", None)
    return data or {}


def _host(result):
    host = getattr(result, "host", None) or getattr(result, "_host")
    return host.get_name()


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "gpuprobe.layers.gpuprobe_summary"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super(CallbackModule, self).__init__(*args, **kwargs)
        self.done = {}
        self.total = None
        self.report = None

    # progress --------------------------------------------------------------------------------------
    def _mark_done(self, host, verdict, total=None):
        if host in self.done:
            self.done[host] = verdict
            return
        self.done[host] = verdict
        if total:
            try:
                self.total = int(total)
            except (TypeError, ValueError):
                pass
        self._display.display(progress_line(len(self.done), self.total, host, verdict))

    def _progress(self, result):
        """A verify_node result carries the node's verdict and the play's host count under PROGRESS_KEY (the
        fault drills set it as a fact)."""
        data = _data(result)
        info = data.get(PROGRESS_KEY) or (data.get("ansible_facts") or {}).get(PROGRESS_KEY)
        if isinstance(info, dict):
            self._mark_done(_host(result), info.get("verdict", "?"), info.get("total"))

    def v2_runner_on_ok(self, result):
        data = _data(result)
        self._progress(result)
        if "summary_lines" in data and "verdicts" in data:
            self.report = data

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._progress(result)

    def v2_runner_on_unreachable(self, result):
        host = _host(result)
        if host not in self.done:
            self._mark_done(host, "UNREACHABLE")

    # summary ---------------------------------------------------------------------------------------
    def v2_playbook_on_stats(self, stats):
        if self.report is None and not self.done:
            return
        self._display.banner("GPUPROBE SUMMARY")
        if self.report is not None:
            for line in summary_table(self.report.get("verdicts") or {}, self.report.get("signatures")):
                self._display.display(line)
            for host, why in sorted((self.report.get("unverifiable") or {}).items()):
                self._display.display("%s could not be verified: %s" % (host, why))
            for fmt, path in sorted((self.report.get("files") or {}).items()):
                self._display.display("%s report: %s" % (fmt, path))
        else:
            for line in summary_table(self.done):
                self._display.display(line)
            self._display.display("(no fleet report was written in this run)")
