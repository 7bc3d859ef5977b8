# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: fleet
type: stdout
short_description: Ansible's default screen output, with one line per node for gpuprobe.layers fleet runs
version_added: "1.0.0"
author:
  - gpuprobe.layers contributors (!UNKNOWN)
description:
  - >-
    The default stdout callback, except for the tasks of a C(gpuprobe.layers.verify_gpu) run: the result of a node's
    verify task (ok, failed, or unreachable) is one progress line
    (C(gpuprobe [4/500] node08: UNREACHABLE name does not resolve (DNS))) instead of C(ok:), C(fatal:) or the
    C(UNREACHABLE!) JSON of the whole result; the final gate (a node that could not be verified, or is not
    C(COMPUTE_VERIFIED) in a post-check) adds no line for a node already reported (neither when it is put in the gate's
    group nor when it is failed), one line at the end instead that
    says how many could not be verified and how many are not C(COMPUTE_VERIFIED) in the post-check (only in one).
    At the end, the hosts grouped by state and cause,
    and the report files.
  - Every other task is printed as the default callback prints it. The records are in the report, not on screen.
  - Use it as the stdout callback (C(stdout_callback = gpuprobe.layers.fleet) in the C([defaults]) section of
    ansible.cfg, or C(ANSIBLE_STDOUT_CALLBACK=gpuprobe.layers.fleet)); the aggregate callback
    P(gpuprobe.layers.gpuprobe_summary#callback) then stays silent.
extends_documentation_fragment:
  - ansible.builtin.default_callback
  - ansible.builtin.result_format_callback
requirements:
  - set as stdout in configuration
"""

from ansible.plugins.callback.default import CallbackModule as DefaultCallback

# first: the collection code imported below is compiled once, not on every run (plugin_utils/_code_cache)
from ansible_collections.gpuprobe.layers.plugins.plugin_utils import _code_cache  # noqa: F401  pylint: disable=unused-import
from ansible_collections.gpuprobe.layers.plugins.callback.gpuprobe_summary import Progress, _host, _task
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report.sentences import gate_line

# the action of the verify play's last task, which fails each node that could not be verified (playbooks/verify-gpu.yml)
GATE_ACTIONS = ("fail", "ansible.builtin.fail", "ansible.legacy.fail")
# the action of the report play's task that puts the hosts the run fails into the gate's group, one loop item each
GROUP_ACTIONS = ("add_host", "ansible.builtin.add_host", "ansible.legacy.add_host")


class CallbackModule(DefaultCallback):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "stdout"
    CALLBACK_NAME = "gpuprobe.layers.fleet"

    def __init__(self, *args, **kwargs):
        super(CallbackModule, self).__init__(*args, **kwargs)
        self.progress = Progress(self)
        self.gated = []

    def v2_playbook_on_play_start(self, play):
        super(CallbackModule, self).v2_playbook_on_play_start(play)
        self.progress.play_start(play)

    def v2_runner_on_ok(self, result):
        if not self.progress.seen(result):
            super(CallbackModule, self).v2_runner_on_ok(result)

    def v2_runner_on_failed(self, result, ignore_errors=False):
        if self.progress.seen(result, failed=True):
            return
        task = _task(result)
        host = _host(result)
        if host in self.progress.done and getattr(task, "action", None) in GATE_ACTIONS:
            # the gate of a node already reported by its progress line: counted, said once at the end (the run still
            # fails, the recap counts the node failed)
            self.gated.append(host)
            return
        super(CallbackModule, self).v2_runner_on_failed(result, ignore_errors)

    def v2_runner_item_on_ok(self, result):
        # the gate's group: no line per host already reported by its progress line (the gate says it once at the end)
        task = _task(result)
        item = (getattr(result, "_result", None) or {}).get("item")
        if getattr(task, "action", None) in GROUP_ACTIONS and isinstance(item, str) and item in self.progress.done:
            return
        super(CallbackModule, self).v2_runner_item_on_ok(result)

    def v2_runner_on_unreachable(self, result):
        if not self.progress.seen(result, unreachable=True):
            super(CallbackModule, self).v2_runner_on_unreachable(result)

    def v2_playbook_on_stats(self, stats):
        super(CallbackModule, self).v2_playbook_on_stats(stats)
        self.progress.summary()
        if self.gated:
            # why, per host, from the fleet_report result: a post-check is only named where the run made one
            self._display.display(gate_line(self.gated, self.progress.report), color="red")
