# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: content identity of a host file (the driver's libcuda); not public API.

One helper for the two layers that compare a libcuda with the driver root's: the cdi layer before any container
starts (cdi.host.libcuda_identity) and the compute layer after the probe (compute.driver.binding).
"""

from __future__ import annotations

import hashlib
import os
import time

_DIGESTS = {}


def file_digest(path):
    """sha256 of the file at ``path`` (streamed), with size, st_dev, st_ino and the ms it took; cached within the
    process by (dev, ino, size, mtime). OSError when it cannot be read."""
    st = os.stat(path)
    key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    if key in _DIGESTS:
        return dict(_DIGESTS[key], cached=True)
    t0 = time.monotonic()
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    info = {"path": path, "size": st.st_size, "dev": st.st_dev, "ino": st.st_ino, "sha256": digest.hexdigest(),
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
