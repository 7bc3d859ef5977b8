# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: content identity of a host file; not public API.

The one sha256 of a file (``file_sha256``: bounded, never blocking), and on it ``file_digest``/``same_file`` for the
two layers that compare a libcuda with the driver root's: the cdi layer before any container starts
(cdi.host.libcuda_identity) and the compute layer after the probe (compute.driver.binding). The probe stage hashes
the spec files the cdi layer read with it (_node.probe.spec_changes). The probe script, which runs alone in the
container, has its own (_probe.script.file_identity).
"""

from __future__ import annotations

import hashlib
import os
import stat
import time

_DIGESTS = {}
CHUNK = 1 << 20


class NotRegularFile(OSError):
    """The path is not (or no longer) a regular file: it is not read."""


def file_sha256(path, limit=None):
    """The sha256 (hex) of the regular file at ``path``: opened without blocking (O_NONBLOCK: a FIFO or a device is
    refused, never waited on), the file opened judged (fstat), read in chunks, at most ``limit`` bytes (None: all).
    NotRegularFile when it is not a regular file, OSError when it cannot be opened or read."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotRegularFile("%s is not a regular file" % path)
        digest = hashlib.sha256()
        size = 0
        while limit is None or size < limit:
            data = os.read(fd, CHUNK if limit is None else min(CHUNK, limit - size))
            if not data:
                break
            digest.update(data)
            size += len(data)
        return digest.hexdigest()
    finally:
        os.close(fd)


def file_digest(path):
    """sha256 of the file at ``path`` (``file_sha256``), with size, st_dev, st_ino and the ms it took; cached within the
    process by (dev, ino, size, mtime). OSError when it cannot be read."""
    st = os.stat(path)
    key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    if key in _DIGESTS:
        return dict(_DIGESTS[key], cached=True)
    t0 = time.monotonic()
    sha256 = file_sha256(path)
    info = {"path": path, "size": st.st_size, "dev": st.st_dev, "ino": st.st_ino, "sha256": sha256,
            "sha256_ms": round((time.monotonic() - t0) * 1000.0, 3)}
    _DIGESTS[key] = info
    return dict(info, cached=False)


def same_file(a, b):
    """Whether paths ``a`` and ``b`` (symlinks followed) are one file, or have the same content: (True, how),
    (False, how) or (None, why not known). The content is hashed only when they are not the same inode."""
    try:
        sa, sb = os.stat(a), os.stat(b)
    except OSError as exc:
        return None, "cannot stat: %s" % (exc.strerror or exc)
    if (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino):
        return True, "the same file"
    if sa.st_size != sb.st_size:
        return False, "%d bytes, not %d" % (sa.st_size, sb.st_size)
    try:
        da, db = file_digest(a), file_digest(b)
    except OSError as exc:
        return None, "cannot read: %s" % (exc.strerror or exc)
    if da["sha256"] == db["sha256"]:
        return True, "the same content (sha256 %s)" % da["sha256"][:16]
    return False, "sha256 %s, not %s" % (da["sha256"][:16], db["sha256"][:16])
