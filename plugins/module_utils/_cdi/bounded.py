# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE (gpuprobe.layers cdi layer): bounded reads of node files (spec files, runtime configuration, the driver's
version file) and the layer's own time limit.

A spec dir entry is whatever someone put there: a symlink to /proc/kmsg (a regular, empty-looking file whose read
blocks), a FIFO, a file swapped for a FIFO between the listing and the read, a huge file. Every read here:

- opens with ``O_NONBLOCK`` (a FIFO or device opens without waiting for a writer) and ``O_NOCTTY``; with
  ``O_NOFOLLOW`` when the entry was seen as no symlink (``follow=False``), so a swap for a link is refused;
- judges the file it OPENED (``fstat`` after ``open``: a regular file only, so a swap between stat and open is
  caught), and the filesystem it lives on by that file's device (``fstatfs`` magic, else the ``st_dev`` of the
  open file in /proc/self/mountinfo): files on procfs, sysfs, devtmpfs and the other kernel pseudo-filesystems
  (REFUSED_FS) are never read as specs, whatever path or link led there;
- reads at most ``max_size + 1`` bytes, within ``timeout`` seconds (a SIGALRM timer in the main thread interrupts a
  read that sleeps, as on a FUSE or network file); and
- ``Deadline``: the layer's own time limit, checked before every file (what is left unread is reported).
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import stat
import threading
import time

try:
    import ctypes
    _LIBC = ctypes.CDLL(None, use_errno=True)
    _FSTATFS = getattr(_LIBC, "fstatfs", None)
except (ImportError, OSError, AttributeError):  # pragma: no cover - a Python without ctypes or libc
    ctypes = None
    _FSTATFS = None

DEFAULT_READ_TIMEOUT = 5.0
REFUSED_FS = ("proc", "sysfs", "devtmpfs", "debugfs", "tracefs", "securityfs", "cgroup", "cgroup2", "configfs",
              "efivarfs", "pstore", "bpf", "devpts", "mqueue", "fusectl", "binfmt_misc", "autofs", "rpc_pipefs")
# linux/magic.h: the pseudo-filesystems fstatfs tells apart (devtmpfs reports tmpfs's magic: found by mountinfo)
_MAGIC = {0x9fa0: "proc", 0x62656572: "sysfs", 0x64626720: "debugfs", 0x74726163: "tracefs", 0x73636673: "securityfs",
          0x27e0eb: "cgroup", 0x63677270: "cgroup2", 0x62656570: "configfs", 0xde5e81e4: "efivarfs",
          0x6165676c: "pstore", 0xcafe4a11: "bpf", 0x1cd1: "devpts", 0x19800202: "mqueue", 0x65735543: "fusectl",
          0x42494e4d: "binfmt_misc", 0x0187: "autofs", 0x67596969: "rpc_pipefs"}
_MOUNTINFO = "/proc/self/mountinfo"


class ReadRefused(Exception):
    """A node file that was not read (or not fully): the message says why, in the words the checks carry."""


class _Expired(Exception):
    pass


class Deadline(object):
    """The layer's own time limit (seconds, None: none)."""

    def __init__(self, seconds):
        self.seconds = seconds
        self.end = None if seconds is None else time.monotonic() + seconds

    def left(self):
        return None if self.end is None else max(0.0, self.end - time.monotonic())

    def spent(self):
        return self.end is not None and time.monotonic() >= self.end


@contextlib.contextmanager
def _timer(seconds):
    """Raise _Expired in the main thread after ``seconds`` (a blocked read returns EINTR and is abandoned)."""
    if not seconds or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expired(_signum, _frame):
        raise _Expired()

    previous = signal.signal(signal.SIGALRM, expired)
    before = signal.setitimer(signal.ITIMER_REAL, seconds)
    started = time.monotonic()
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if before[0] > 0:  # give back what was left of an outer timer
            signal.setitimer(signal.ITIMER_REAL, max(0.001, before[0] - (time.monotonic() - started)))


def _mountinfo_types():
    """{st_dev: fstype} of the mounts this process sees (the open file's device, not its path, decides)."""
    out = {}
    try:
        data, _st = read_node_file(_MOUNTINFO, 4 * 1024 * 1024, pseudo_ok=True)
    except ReadRefused:
        return out
    for line in data.decode("utf-8", "replace").splitlines():
        left, sep, right = line.partition(" - ")
        fields = left.split()
        if not sep or len(fields) < 3 or ":" not in fields[2]:
            continue
        major, _c, minor = fields[2].partition(":")
        try:
            out.setdefault(os.makedev(int(major), int(minor)), right.split(" ", 1)[0])
        except ValueError:
            continue
    return out


_TMPFS_LIKE = (0x01021994, 0x858458f6)  # tmpfs, ramfs: devtmpfs is one of them, told apart by mountinfo
_FS_BY_DEV = {}  # st_dev -> fstype from mountinfo, read again only for a device not seen yet


def filesystem_type(fd, st):
    """The name of the filesystem the open file ``fd`` lives on ('magic 0x...' for an ordinary one), or None."""
    if _FSTATFS is not None:
        buf = ctypes.create_string_buffer(512)
        if _FSTATFS(fd, buf) == 0:
            magic = ctypes.c_long.from_buffer(buf).value & 0xffffffff
            if magic in _MAGIC:
                return _MAGIC[magic]
            if magic not in _TMPFS_LIKE:
                return "magic 0x%x" % magic
    if st.st_dev not in _FS_BY_DEV:
        _FS_BY_DEV.update(_mountinfo_types())
    return _FS_BY_DEV.get(st.st_dev)


def _kind(mode):
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"), (stat.S_ISLNK, "a symbolic link")):
        if test(mode):
            return name
    return "not a regular file"


def read_node_file(path, max_size, timeout=DEFAULT_READ_TIMEOUT, follow=True, pseudo_ok=False):
    """(bytes, os.stat_result of the file read) of a node file, bounded as the module docstring says; raises
    ReadRefused with the reason. ``follow=False``: the entry must not be a symlink at open time (O_NOFOLLOW);
    ``pseudo_ok``: a procfs/sysfs file is expected (the driver's version file, mountinfo)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    if not follow:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow:
            raise ReadRefused("became a symbolic link after it was listed: not read")
        raise ReadRefused("cannot open: %s" % (exc.strerror or exc))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ReadRefused("not a regular file (%s)" % _kind(st.st_mode))
        if not pseudo_ok:
            fs = filesystem_type(fd, st)
            if fs in REFUSED_FS:
                raise ReadRefused("on %s, a kernel pseudo-filesystem: never read as a spec" % fs)
        if st.st_size > max_size:
            raise ReadRefused("file is %d bytes, larger than the %d-byte cap" % (st.st_size, max_size))
        chunks, size = [], 0
        try:
            with _timer(timeout):
                while size <= max_size:
                    try:
                        chunk = os.read(fd, min(65536, max_size + 1 - size))
                    except BlockingIOError:
                        raise ReadRefused("read would block (the file is not plain data)")
                    if not chunk:
                        break
                    chunks.append(chunk)
                    size += len(chunk)
        except _Expired:
            raise ReadRefused("read did not finish within %g s" % timeout)
        except OSError as exc:
            raise ReadRefused("failed to read: %s" % (exc.strerror or exc))
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > max_size:
        raise ReadRefused("file is larger than the %d-byte cap" % max_size)
    return data, st
