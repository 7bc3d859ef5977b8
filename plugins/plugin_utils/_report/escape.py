# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE (controller): the one escaping of text that came from a node before it is shown; not public API.

A node's text (a signature, a reason, a check's subject, the message of a failed task) may hold control characters:
ESC sequences that clear the screen or set the window title, CR and backspace that overwrite what was printed, a
newline that forges a line of its own, BEL, the C1 controls (U+0080-U+009F, CSI included), and the Unicode controls
that reorder or hide text (bidi overrides and isolates, line and paragraph separators). ``controls`` writes each as a
visible escape (``\\x1b``, ``\\r``, ``\\n``, ``\\u202e``) so that what is printed is exactly one line of what the node
sent, and nothing of it acts on the terminal. Every line the callbacks and the playbook print about a node goes through
``display_text``; the report's renderers use ``controls`` before their own escaping: Markdown (``_md``), HTML (the
template's ``finalize`` and ``visible`` for the page script's data), JUnit (every text and attribute), the metrics'
label values and the retry file (docs/safety.md).
"""

from __future__ import annotations

import re

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\a": "\\a", "\f": "\\f", "\v": "\\v"}
# C0, DEL, C1; bidi embeddings/overrides/isolates and marks; line/paragraph separators; zero-width joiners and BOM
_CONTROL = re.compile(u"[\u0000-\u001f\u007f-\u009f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]")


def _escaped(match):
    ch = match.group(0)
    if ch in _NAMED:
        return _NAMED[ch]
    return "\\x%02x" % ord(ch) if ord(ch) < 0x100 else "\\u%04x" % ord(ch)


def controls(text, keep=""):
    """``text`` (any value: ``str()`` of it) with every control character written as a visible escape, but those in
    ``keep`` (for example "\\n" where a newline is the format's own, as in an HTML page)."""
    text = "" if text is None else str(text)
    if keep:
        return _CONTROL.sub(lambda m: m.group(0) if m.group(0) in keep else _escaped(m), text)
    return _CONTROL.sub(_escaped, text)


def visible(value, keep=""):
    """``value`` (JSON-like: mappings, lists, strings, numbers) with ``controls`` applied to every string in it, keys
    included: the data a page's script shows as text (which would reorder or hide it as the raw characters say)."""
    if isinstance(value, str):
        return controls(value, keep)
    if isinstance(value, dict):
        return dict((visible(k, keep), visible(v, keep)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return [visible(v, keep) for v in value]
    return value


def display_text(value):
    """A value as one line on the terminal: ``controls`` of its text (a newline cannot start a line of its own)."""
    return controls(value)


def display_lines(lines):
    """``display_text`` of each line."""
    return [display_text(line) for line in lines or []]
