# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: interrupts (SIGINT, SIGTERM, SIGHUP) turned into an exception inside a block, so that ``finally`` clauses
remove what the block made (a probe container, a report's temporary set); not public API. The node side re-exports
them from _runtime.signals beside its watch on the run's controller."""

from __future__ import annotations

import signal


class Interrupted(BaseException):
    """A signal (SIGINT, SIGTERM, SIGHUP) arrived inside an ``interruptible()`` block (a probe, a report being written)."""

    def __init__(self, signum):
        BaseException.__init__(self, "interrupted by signal %d" % signum)
        self.signum = signum


INTERRUPT_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _raise_interrupted(signum, _frame):
    raise Interrupted(signum)


class _Signals(object):
    """Install ``handler`` for INTERRUPT_SIGNALS in the block, restore the previous handlers after it (a no-op
    outside the main thread, where Python allows no signal handlers)."""

    def __init__(self, handler):
        self.handler = handler
        self.saved = {}

    def __enter__(self):
        for sig in INTERRUPT_SIGNALS:
            try:
                self.saved[sig] = signal.signal(sig, self.handler)
            except (ValueError, OSError):
                pass
        return self

    def __exit__(self, *exc):
        for sig, old in self.saved.items():
            signal.signal(sig, old if old is not None else signal.SIG_DFL)
        return False


def interruptible():
    """SIGINT/SIGTERM/SIGHUP raise Interrupted inside the block (so ``finally`` clauses run)."""
    return _Signals(_raise_interrupted)


def deferred_signals():
    """SIGINT/SIGTERM/SIGHUP are ignored inside the block: cleanup is not itself interrupted."""
    return _Signals(signal.SIG_IGN)
