# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Benchmark helper (not part of the collection): each task's wall time, from its start to the next task's start, and
the playbook's, appended as one JSON line to the file named by GPUPROBE_BENCH_TIMES. benchmarks/bench_node.py --timings
enables it (ANSIBLE_CALLBACK_PLUGINS=benchmarks/callback, ANSIBLE_CALLBACKS_ENABLED=bench_task_times)."""
from __future__ import annotations

import json
import os
import time

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
name: bench_task_times
type: aggregate
short_description: task wall times for benchmarks/bench_node.py
description: Appends each task's wall time (start to the next task's start) as JSON to $GPUPROBE_BENCH_TIMES.
"""


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "bench_task_times"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super(CallbackModule, self).__init__()
        self.started = time.monotonic()
        self.current = None
        self.tasks = []

    def _mark(self, name):
        now = time.monotonic()
        if self.current:
            self.tasks.append([self.current[0], round((now - self.current[1]) * 1000.0, 1)])
        self.current = (name, now)

    def v2_playbook_on_task_start(self, task, is_conditional):
        self._mark(task.get_name())

    def v2_playbook_on_stats(self, stats):
        self._mark(None)
        path = os.environ.get("GPUPROBE_BENCH_TIMES")
        if path:
            with open(path, "a") as f:
                f.write(json.dumps({"total_ms": round((time.monotonic() - self.started) * 1000.0, 1), "tasks": self.tasks}) + "\n")
