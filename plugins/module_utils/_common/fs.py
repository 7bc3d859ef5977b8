# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: paths of the node's filesystem as the layers see them; not public API.

A layer reads the node under ``root`` (``/`` on a node; a fixture tree in tests): ``under_root`` is the one join of
a node path under it. ``names_in`` lists a directory that may not be there.
"""

from __future__ import annotations

import errno
import os
import posixpath


# what a filesystem call raises for a path: OSError, and ValueError for a name with a NUL byte, which no file has (a spec
# can give one: Go's calls answer EINVAL for it, "invalid argument")
PATH_ERRORS = (OSError, ValueError)


def path_error(exc):
    """The error text of ``exc`` (one of PATH_ERRORS) as the system says it."""
    return (exc.strerror if isinstance(exc, OSError) else None) or (os.strerror(errno.EINVAL) if isinstance(exc, ValueError) else str(exc))


def under_root(root, path):
    """``path`` (a path of the node) as this process reaches it under ``root`` (/ or empty: the node itself); no
    link is followed."""
    return posixpath.join(root or "/", str(path).lstrip("/"))


def names_in(path):
    """The entry names of the directory ``path``, in the order the OS gives them; [] when it cannot be listed (absent,
    not a directory, not readable)."""
    try:
        return os.listdir(path)
    except OSError:
        return []
