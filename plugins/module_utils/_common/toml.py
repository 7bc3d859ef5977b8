# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: read TOML (container engines' configuration). Not public API.

``loads`` uses the standard library's ``tomllib`` (Python 3.11+), else the ``tomli`` library it came from (the
same parser, for Python 3.8-3.10: Debian/Ubuntu ``python3-tomli``, RHEL ``python3-tomli``, or pip). A node that has
neither gets ``TomlError`` saying so, and the caller reports the configuration as not read (NOT_RUN): the
collection does not carry a TOML parser of its own.
"""

from __future__ import annotations

try:
    import tomllib as _reader  # Python 3.11+
    READER = "tomllib"
except ImportError:  # pragma: no cover - depends on the node's Python
    try:
        import tomli as _reader  # the tomllib of Python < 3.11
        READER = "tomli"
    except ImportError:
        _reader = None
        READER = None

MISSING = "no TOML reader on this node: Python < 3.11 has no tomllib and the tomli library is not installed " \
          "(python3-tomli, or pip install tomli)"


class TomlError(ValueError):
    """The text is not TOML, or this node has no TOML reader."""


def loads(text, reader=None):
    """The TOML document ``text`` as a dict. ``reader``: the module to parse with (default: tomllib or tomli, as
    found). Raises TomlError."""
    reader = reader if reader is not None else _reader
    if reader is None:
        raise TomlError(MISSING)
    try:
        return reader.loads(text)
    except reader.TOMLDecodeError as exc:
        raise TomlError(str(exc))


def reader_name():
    return READER or "none (%s)" % MISSING
