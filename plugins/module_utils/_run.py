# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: the one place where gpuprobe.layers runs external programs.

Not public API. ``run`` always has a timeout, kills the whole process group when it expires, never
raises for a missing program or a hang, and refuses programs that could change the node's driver state
(DESIGN.md safety rules): module loaders, service managers.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time

DEFAULT_TIMEOUT = 30.0
# Programs the collection must never run, whatever a caller asks (tests/unit/test_safety.py).
FORBIDDEN_PROGRAMS = frozenset((
    "modprobe", "rmmod", "insmod", "depmod", "systemctl", "service", "nvidia-smi-reset",
    "reboot", "shutdown", "init", "telinit",
))
# nvidia-smi options that change GPU state; only read-only queries are allowed.
NVIDIA_SMI_WRITES = frozenset(("-r", "--gpu-reset", "-pm", "--persistence-mode", "-c", "--compute-mode",
                               "-mig", "--multi-instance-gpu", "-e", "--ecc-config"))
MAX_CAPTURE = 4 * 1024 * 1024


class ForbiddenCommand(Exception):
    """Raised when a caller asks to run a program that the safety rules forbid."""


def _program_name(argv):
    return os.path.basename(str(argv[0]))


def check_allowed(argv):
    if not argv:
        raise ValueError("empty command")
    name = _program_name(argv)
    if name in FORBIDDEN_PROGRAMS:
        raise ForbiddenCommand("gpuprobe.layers never runs %s" % name)
    if name == "nvidia-smi" and any(a in NVIDIA_SMI_WRITES for a in argv[1:]):
        raise ForbiddenCommand("gpuprobe.layers runs nvidia-smi for queries only")


def _kill_group(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, OSError):
        try:
            proc.kill()
        except OSError:
            pass


def _decode(data):
    if data is None:
        return ""
    if len(data) > MAX_CAPTURE:
        data = data[:MAX_CAPTURE]
    return data.decode("utf-8", errors="replace")


def run(argv, timeout=DEFAULT_TIMEOUT, env=None, stdin_data=None, cwd=None):
    """Run ``argv`` (a list, never a shell string) and return a dict:

    argv, rc (None when it did not run or was killed), stdout, stderr, duration_ms, timed_out,
    error (None, or why it did not run / was killed).
    """
    argv = [str(a) for a in argv]
    check_allowed(argv)
    result = {"argv": argv, "rc": None, "stdout": "", "stderr": "", "duration_ms": 0.0,
              "timed_out": False, "error": None}
    t0 = time.monotonic()
    try:
        proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE if stdin_data is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=cwd, start_new_session=True,
        )
    except FileNotFoundError:
        result["error"] = "not found: %s" % argv[0]
        return result
    except OSError as exc:
        result["error"] = "cannot execute %s: %s" % (argv[0], exc)
        return result
    data = stdin_data.encode("utf-8") if isinstance(stdin_data, str) else stdin_data
    try:
        out, err = proc.communicate(input=data, timeout=timeout)
        result["rc"] = proc.returncode
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        try:
            out, err = proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            out, err = b"", b""
        result["timed_out"] = True
        result["error"] = "timeout after %gs" % timeout
    result["stdout"] = _decode(out)
    result["stderr"] = _decode(err)
    result["duration_ms"] = round((time.monotonic() - t0) * 1000.0, 1)
    return result


def which(name, extra_dirs=()):
    """Path of ``name`` on PATH or in ``extra_dirs`` (searched first), or None."""
    for d in extra_dirs:
        candidate = os.path.join(d, name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return shutil.which(name)


def first_line(text):
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()
    return ""
