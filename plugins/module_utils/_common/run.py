# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: the one place where gpuprobe.layers runs external programs.

Not public API. ``run`` runs only the command shapes listed in ``allowlist.SHAPES`` (the commands the layers
need, nothing else; anything else raises ``allowlist.ForbiddenCommand`` before a process exists). It always has a
timeout, kills the whole process group when it expires and when the caller is interrupted (KeyboardInterrupt,
SystemExit, any exception: the group is killed, then the exception goes on), never raises for a missing
program or a hang, and keeps at most ``MAX_CAPTURE`` bytes of the head and of the tail of each output stream
(the rest is counted, not kept, except the lines a caller asks to keep: ``keep_prefix``).
"""

from __future__ import annotations

import collections
import os
import shutil
import signal
import subprocess
import threading
import time

from ansible_collections.gpuprobe.layers.plugins.module_utils._common.allowlist import check_allowed

DEFAULT_TIMEOUT = 30.0
MAX_CAPTURE = 4 * 1024 * 1024   # bytes kept of the head, and again of the tail, of each stream
CHUNK = 64 * 1024
KEEP_LIMIT = 8 * 1024 * 1024   # bytes of kept lines (``keep_prefix``) from the omitted middle of a stream
KEEP_LINES = 20000             # and lines (the probe prints a few per step and GPU)


class _Capture(object):
    """Keeps the first and the last ``limit`` bytes of a stream and counts the rest. With ``keep_prefix`` (bytes),
    every line that starts with it is also kept whole wherever it is (up to ``keep_limit`` bytes of such lines), so
    that a probe's JSON lines in the middle of a flood of other output are never dropped with that middle."""

    def __init__(self, limit, keep_prefix=None, keep_limit=KEEP_LIMIT):
        self.limit = limit
        self.head = bytearray()
        self.tail = collections.deque()
        self.tail_len = 0
        self.total = 0
        self.prefix = keep_prefix
        self.keep_limit = keep_limit
        self.lines = []          # (start offset, bytes) of the lines that start with keep_prefix
        self.kept_bytes = 0
        self.kept_dropped = 0    # such lines not kept: keep_limit reached
        self.line_start = 0
        self.cur = None          # the current line while it may be (or is) one to keep
        self.keep = None         # None: undecided (shorter than the prefix so far)
        self.at_start = True     # the next byte begins a line

    def feed(self, data):
        if self.prefix and not self.kept_dropped:  # once the keep limit is reached, no more lines are kept
            self._scan(data)
        self.total += len(data)
        room = self.limit - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail.append(data)
            self.tail_len += len(data)
            while self.tail_len - len(self.tail[0]) >= self.limit:
                self.tail_len -= len(self.tail.popleft())

    def _scan(self, data):
        """Find the lines that start with the prefix (C-speed searches between them; Python work per kept line)."""
        prefix, n, pos = self.prefix, len(data), 0
        while pos < n:
            if self.cur is not None:  # inside a line that starts (or may start) with the prefix
                nl = data.find(b"\n", pos)
                end = n if nl < 0 else nl + 1
                self.cur += data[pos:end]
                if self.keep is None and len(self.cur) >= len(prefix):
                    self.keep = self.cur.startswith(prefix)
                if self.keep and (self.kept_bytes + len(self.cur) > self.keep_limit or len(self.lines) >= KEEP_LINES):
                    self.kept_dropped += 1
                    self.cur = None
                    return
                if self.keep is False:
                    self.cur = None
                if nl < 0:
                    return
                if self.cur is not None and self.cur.startswith(prefix):
                    self.lines.append((self.line_start, bytes(self.cur)))
                    self.kept_bytes += len(self.cur)
                self.cur, self.keep, self.at_start, pos = None, None, True, end
            elif self.at_start:
                rest = data[pos:pos + len(prefix)]
                self.at_start = False
                if rest == prefix or (len(rest) == n - pos and prefix.startswith(rest)):
                    self.cur, self.keep, self.line_start = bytearray(), None, self.total + pos
            else:
                idx = data.find(b"\n" + prefix, pos)
                if idx >= 0:
                    pos, self.at_start = idx + 1, True
                    continue
                last = data.rfind(b"\n", pos)
                if last >= 0 and prefix.startswith(data[last + 1:]):  # a line that may start with it at the end
                    pos, self.at_start = last + 1, True
                    continue
                return

    def text(self):
        tail = b"".join(self.tail)
        if len(tail) > self.limit:
            tail = tail[-self.limit:]
        omitted = self.total - len(self.head) - len(tail)
        if omitted > 0:
            tail_start = self.total - len(tail)
            lines = list(self.lines)
            if self.cur and self.cur.startswith(self.prefix or b"\0"):  # a last line without its newline
                lines.append((self.line_start, bytes(self.cur) + b"\n"))
            # whole lines of the middle: neither entirely in the head nor entirely in the tail
            middle = [line for start, line in lines if start < tail_start and start + len(line) > len(self.head)]
            kept = ""
            if self.prefix:
                kept = "; %d line(s) starting with %r kept%s" % (len(middle), self.prefix.decode("utf-8", "replace"),
                                                                 ", later ones not (over %d bytes or %d lines)"
                                                                 % (self.keep_limit, KEEP_LINES)
                                                                 if self.kept_dropped else "")
            return "%s\n[gpuprobe: %d bytes omitted%s]\n%s%s" % (
                bytes(self.head).decode("utf-8", errors="replace"), omitted, kept,
                b"".join(middle).decode("utf-8", errors="replace"), tail.decode("utf-8", errors="replace"))
        return (bytes(self.head) + tail).decode("utf-8", errors="replace")

    @property
    def truncated(self):
        return self.total > 2 * self.limit


def _reader(pipe, capture):
    try:
        while True:
            data = pipe.read1(CHUNK)
            if not data:
                break
            capture.feed(data)
    except (OSError, ValueError):
        pass


def _writer(pipe, data):
    try:
        if data:
            pipe.write(data)
    except (OSError, ValueError):
        pass
    finally:
        try:
            pipe.close()
        except OSError:
            pass


def _kill_group(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, OSError):
        try:
            proc.kill()
        except OSError:
            pass


CANCEL_POLL_S = 0.05  # how often a cancellable wait looks at its event


def _wait(proc, timeout, cancel):
    """proc.wait(timeout), or, with ``cancel`` (a threading.Event another thread may set), until either: its return
    code, or None when cancelled. Raises subprocess.TimeoutExpired as proc.wait does."""
    if cancel is None:
        return proc.wait(timeout=timeout)
    deadline = time.monotonic() + timeout
    while not cancel.is_set():
        try:
            return proc.wait(timeout=max(0.0, min(CANCEL_POLL_S, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            if time.monotonic() >= deadline:
                raise
    return None


def _execute(argv, timeout=DEFAULT_TIMEOUT, env=None, stdin_data=None, cwd=None, limit=MAX_CAPTURE, keep_prefix=None,
             keep_limit=KEEP_LIMIT, cancel=None):
    """Run ``argv`` without the allowlist check (only ``run`` calls this; tests call it for the capture)."""
    result = {"argv": argv, "rc": None, "stdout": "", "stderr": "", "duration_ms": 0.0,
              "timed_out": False, "error": None, "stdout_bytes": 0, "stderr_bytes": 0, "truncated": False}
    if timeout is None or timeout <= 0:
        raise ValueError("timeout must be > 0 seconds (got %r)" % (timeout,))
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
    out, err = _Capture(limit, keep_prefix, keep_limit), _Capture(limit)
    threads = [threading.Thread(target=_reader, args=(proc.stdout, out)),
               threading.Thread(target=_reader, args=(proc.stderr, err))]
    if stdin_data is not None:
        data = stdin_data.encode("utf-8") if isinstance(stdin_data, str) else stdin_data
        threads.append(threading.Thread(target=_writer, args=(proc.stdin, data)))
    for t in threads:
        t.daemon = True
        t.start()
    try:
        try:
            result["rc"] = _wait(proc, timeout, cancel)
            if result["rc"] is None:  # cancelled from another thread: the process group dies as on a timeout
                _kill_group(proc)
                result["error"] = "cancelled"
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            result["timed_out"] = True
            result["error"] = "timeout after %gs" % timeout
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        for t in threads:
            # a grandchild in another session (a runtime's monitor) may hold the pipe open: do not wait forever
            t.join(timeout=5 if not result["timed_out"] else 2)
    except BaseException:
        # KeyboardInterrupt (SIGINT), SystemExit (a SIGTERM handler), anything: the child's group dies with us
        _kill_group(proc)
        raise
    finally:
        for pipe in (proc.stdout, proc.stderr):
            try:
                pipe.close()
            except (OSError, ValueError):
                pass
    result["stdout"], result["stderr"] = out.text(), err.text()
    result["stdout_bytes"], result["stderr_bytes"] = out.total, err.total
    result["truncated"] = out.truncated or err.truncated
    result["duration_ms"] = round((time.monotonic() - t0) * 1000.0, 1)
    return result


def capture_pieces(pieces, keep_prefix=None):
    """What ``run`` returns of a process's output for output read elsewhere (a CRI log file): ``pieces`` yields
    (stream name 'stdout' or 'stderr', bytes); the same bounds as ``run`` (head and tail of MAX_CAPTURE bytes each,
    ``keep_prefix`` lines of stdout kept from the middle). A dict stdout, stderr, stdout_bytes, stderr_bytes,
    truncated."""
    caps = {"stdout": _Capture(MAX_CAPTURE, keep_prefix), "stderr": _Capture(MAX_CAPTURE)}
    for stream, data in pieces:
        caps[stream].feed(data)
    return {"stdout": caps["stdout"].text(), "stderr": caps["stderr"].text(), "stdout_bytes": caps["stdout"].total,
            "stderr_bytes": caps["stderr"].total, "truncated": caps["stdout"].truncated or caps["stderr"].truncated}


def run(argv, timeout=DEFAULT_TIMEOUT, env=None, stdin_data=None, cwd=None, keep_prefix=None, cancel=None):
    """Run ``argv`` (a list, never a shell string; one of the allowed shapes, ``allowlist.SHAPES``) and return a dict:

    argv, rc (None when it did not run or was killed), stdout, stderr (head and tail, at most MAX_CAPTURE
    bytes each), stdout_bytes, stderr_bytes (total sizes), truncated, duration_ms, timed_out, error (None,
    or why it did not run / was killed). ``keep_prefix`` (bytes): stdout lines that start with it are kept
    whole also from the omitted middle (at most KEEP_LIMIT bytes of them): the probe's JSON lines.
    ``cancel``: a threading.Event; once another thread sets it, the process group is killed (error "cancelled"),
    for a process run in a thread, where no signal handler can interrupt it.
    Raises allowlist.ForbiddenCommand for any other command and ValueError for a timeout <= 0.
    """
    argv = [str(a) for a in argv]
    check_allowed(argv)
    return _execute(argv, timeout=timeout, env=env, stdin_data=stdin_data, cwd=cwd, keep_prefix=keep_prefix, cancel=cancel)


class Started(object):
    """``fn(*args)`` started in a thread at once, its answer taken with ``result()`` where it is needed: reads that ask
    nothing of each other (the tools' versions, the kernel log, the runtime selection) run while the caller reads the
    node, instead of one after the other (docs/performance.md). The thread is not a daemon: at exit the interpreter
    waits for it, so every process it started still ends by its own timeout (``run``)."""

    def __init__(self, fn, *args, **kwargs):
        self._out = {}
        self._thread = threading.Thread(target=self._call, args=(fn, args, kwargs), name="gpuprobe-%s" % fn.__name__)
        self._thread.start()

    def _call(self, fn, args, kwargs):
        try:
            self._out["value"] = fn(*args, **kwargs)
        except BaseException as exc:  # pylint: disable=broad-except
            self._out["error"] = exc

    def result(self):
        """``fn``'s return value; raises what ``fn`` raised."""
        self._thread.join()
        if "error" in self._out:
            raise self._out["error"]
        return self._out["value"]


def which(name, extra_dirs=()):
    """Path of ``name`` on PATH or in ``extra_dirs`` (searched first), or None."""
    for d in extra_dirs:
        candidate = os.path.join(d, name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return shutil.which(name)


def first_line(text):
    """The first non-empty line of a command's output, stripped ('' when none)."""
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()
    return ""


def last_line(text):
    """The last non-empty line of a command's output, stripped ('' when none): where a tool says why it failed."""
    for line in reversed((text or "").splitlines()):
        if line.strip():
            return line.strip()
    return ""
