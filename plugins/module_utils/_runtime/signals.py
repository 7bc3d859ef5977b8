# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE (runtime layer): interrupts (SIGINT, SIGTERM, SIGHUP) during a probe, and the watch on the run's
controller, so that what a run started is removed whatever ends it."""

from __future__ import annotations

import os
import signal
import threading

from ansible_collections.gpuprobe.layers.plugins.module_utils._common import owner as _owner
# the interrupt handling itself is shared with the controller's report writer (module_utils/_common/signals.py)
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.signals import (  # noqa: F401  # pylint: disable=unused-import
    INTERRUPT_SIGNALS, Interrupted, deferred_signals, interruptible,
)


class ControllerWatch(object):
    """While the block runs, watch the run's controller (``owner``: the ansible-playbook process among this module's
    ancestors) and interrupt this process as a SIGHUP would (Interrupted, then the cleanup of ``finally``) when it
    is gone. Ansible's worker puts the module in a session of its own, so a SIGHUP to the controller's group (a
    closed terminal) or a SIGKILL of the controller never reaches the module, which would otherwise run to its
    timeout with its container. A no-op when the owner is this process or cannot be checked from here."""

    POLL_S = 0.5

    def __init__(self, owner):
        self.owner = owner
        self.stop = threading.Event()
        self.thread = None

    def __enter__(self):
        owner = self.owner or {}
        if owner.get("pid") not in (None, os.getpid()) and _owner.alive(owner) is True:
            self.thread = threading.Thread(target=self._watch, name="gpuprobe-controller-watch")
            self.thread.daemon = True
            self.thread.start()
        return self

    def _watch(self):
        while not self.stop.wait(self.POLL_S):
            if _owner.alive(self.owner) is False:
                os.kill(os.getpid(), signal.SIGHUP)
                return

    def __exit__(self, *exc):
        self.stop.set()
        if self.thread is not None:
            self.thread.join(2 * self.POLL_S)
        return False
