# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: gpuprobe_summary
type: aggregate
short_description: Progress (hosts done / total) and the hosts by cause for gpuprobe.layers fleet runs
version_added: "1.0.0"
author:
  - gpuprobe.layers contributors (!UNKNOWN)
description:
  - >-
    Works next to any stdout callback. While the playbook C(gpuprobe.layers.verify_gpu) runs, prints one line each
    time a node finishes (C(gpuprobe [3/40] node07: FAILED_AT_CDI cdi.spec.version),
    C(gpuprobe [4/40] node08: UNREACHABLE name does not resolve (DNS))), and at the end of the run the hosts
    grouped by state and cause, and the report files, as returned by the P(gpuprobe.layers.fleet_report#module) task.
  - Nodes that became unreachable count as done; the total is the play's number of hosts.
  - The stdout callback C(gpuprobe.layers.fleet) prints the same lines and, for the verify tasks, nothing else (no
    C(UNREACHABLE!) result per node); when it is the stdout callback this one stays silent.
  - Enable it with C(callbacks_enabled = gpuprobe.layers.gpuprobe_summary) in the C([defaults]) section of
    ansible.cfg, or C(ANSIBLE_CALLBACKS_ENABLED=gpuprobe.layers.gpuprobe_summary).
requirements:
  - enable in configuration
"""

from ansible import constants as C
from ansible.plugins.callback import CallbackBase

# first: the collection code imported below is compiled once, not on every run (plugin_utils/_code_cache)
from ansible_collections.gpuprobe.layers.plugins.plugin_utils import _code_cache  # noqa: F401  pylint: disable=unused-import
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._selection import PROGRESS_KEY
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report.states import (
    RUN_FAILED, RUN_FAILED_CAUSES, UNREACHABLE, UNREACHABLE_CAUSES, classify,
)
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report.escape import display_text

STDOUT_TWIN = "gpuprobe.layers.fleet"


def progress_line(done, total, host, verdict):
    """One line, whatever the node sent: its control characters are written visibly (_escape.display_text)."""
    return display_text("gpuprobe [%d/%s] %s: %s" % (done, total if total else "?", host, verdict))


def summary_table(verdicts, signatures=None):
    """Fixed-width lines host / verdict / signature, sorted by host."""
    signatures = signatures or {}
    rows = [("HOST", "VERDICT", "SIGNATURE")]
    for host in sorted(verdicts):
        rows.append((display_text(host), display_text(verdicts[host]), display_text(signatures.get(host) or "-")))
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


def _task(result):
    return getattr(result, "task", None) or getattr(result, "_task", None)


def progress_info(data):
    """The PROGRESS_KEY mapping a verify_node result carries (the fault drills set it as a fact), or None."""
    info = data.get(PROGRESS_KEY) or (data.get("ansible_facts") or {}).get(PROGRESS_KEY)
    return info if isinstance(info, dict) else None


def node_outcome(data, unreachable=False, failed=False):
    """What the progress line says of a node: its verdict and signature, or UNREACHABLE / RUN_FAILED with the cause
    (classified as the report groups it), never the whole result."""
    info = progress_info(data) or {}
    if unreachable or data.get("unreachable"):
        return "%s %s" % (UNREACHABLE, classify(data.get("msg"), UNREACHABLE_CAUSES))
    verdict = (data.get("verdict") or {}) if isinstance(data.get("verdict"), dict) else {}
    # (from ansible-core 2.19 on, a failed result reaches the callback without its "failed" key: v2_runner_on_failed says it)
    if (failed or data.get("failed")) and info.get("verdict", verdict.get("verdict")) in (None, "INCONCLUSIVE"):
        return "%s %s" % (RUN_FAILED, classify(data.get("msg"), RUN_FAILED_CAUSES))
    text = str(info.get("verdict") or verdict.get("verdict") or "?")
    if verdict.get("signature"):
        text += " %s" % verdict["signature"]
    return text


class Progress(object):
    """The progress and the end-of-run summary of a fleet run, printed through ``display``: shared by this aggregate
    callback and the stdout callback gpuprobe.layers.fleet."""

    def __init__(self, owner):
        self.owner = owner      # the callback: its _display is looked up when printing (tests replace it)
        self.done = {}
        self.total = None
        self.report = None

    def mark_done(self, host, outcome, total=None):
        if total:
            try:
                self.total = int(total)
            except (TypeError, ValueError):
                pass
        first = host not in self.done
        self.done[host] = outcome
        if first:
            self.owner._display.display(progress_line(len(self.done), self.total, host, outcome))

    def seen(self, result, unreachable=False, failed=False):
        """Count a verify result (one carrying PROGRESS_KEY) once per host; remember the fleet_report result.
        Returns True when the result was a node's verify result."""
        data = _data(result)
        if "summary_lines" in data and "verdicts" in data:
            self.report = data
        info = progress_info(data)
        if info is None:
            return False
        self.mark_done(_host(result), node_outcome(data, unreachable, failed), info.get("total"))
        return True

    def play_start(self, play):
        """The play's number of hosts, before any node finishes (progress never says [N/?] in a verify play)."""
        try:
            hosts = play.get_variable_manager()._inventory.get_hosts(play.hosts)  # pylint: disable=protected-access
        except Exception:  # pylint: disable=broad-except  # a best effort: the verify results carry the total too
            return
        if hosts:
            self.total = len(hosts)

    def summary(self):
        if self.report is None and not self.done:
            return
        self.owner._display.banner("GPUPROBE SUMMARY")
        if self.report is not None:
            for line in self.report.get("summary_lines") or []:
                self.owner._display.display(display_text(line))
            for fmt, path in sorted((self.report.get("files") or {}).items()):
                self.owner._display.display(display_text("%s report: %s" % (fmt, path)))
        else:
            for line in summary_table(self.done):
                self.owner._display.display(line)
            self.owner._display.display("(no fleet report was written in this run)")


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "gpuprobe.layers.gpuprobe_summary"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super(CallbackModule, self).__init__(*args, **kwargs)
        self.progress = Progress(self)
        # the stdout twin prints the same lines: then this one stays silent
        self.silent = C.DEFAULT_STDOUT_CALLBACK in (STDOUT_TWIN, STDOUT_TWIN.rsplit(".", 1)[-1])

    @property
    def done(self):
        return self.progress.done

    def v2_playbook_on_play_start(self, play):
        self.progress.play_start(play)

    def v2_runner_on_ok(self, result):
        if not self.silent:
            self.progress.seen(result)

    def v2_runner_on_failed(self, result, ignore_errors=False):
        if not self.silent:
            self.progress.seen(result, failed=True)

    def v2_runner_on_unreachable(self, result):
        if not self.silent and not self.progress.seen(result, unreachable=True) and _host(result) not in self.done:
            self.progress.mark_done(_host(result), UNREACHABLE)

    def v2_playbook_on_stats(self, stats):
        if not self.silent:
            self.progress.summary()
