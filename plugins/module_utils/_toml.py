# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: read TOML (container engines' configuration). Not public API.

``loads`` uses the standard library's ``tomllib`` where the node has it (Python 3.11+). The collection supports
nodes from Python 3.9, which have no TOML reader, so there ``loads`` falls back to a reader of the TOML that the
engines themselves write: ``containerd config dump`` (go-toml), ``crio status config`` (BurntSushi/toml) and
hand-written containers.conf / drop-ins: tables and arrays of tables with bare, quoted and dotted keys, basic and
literal strings (single and multi-line), integers, floats, booleans, arrays (multi-line, nested, trailing
commas), inline tables and comments. Anything else (dates and times, duplicate keys, a malformed line) raises
``TomlError``: the caller reports the configuration as unreadable (NOT_RUN), never guesses.
"""

from __future__ import annotations

import re

try:
    import tomllib as _tomllib  # Python 3.11+
except ImportError:  # pragma: no cover - depends on the node's Python
    _tomllib = None

HAS_TOMLLIB = _tomllib is not None


class TomlError(ValueError):
    """The text is not TOML this reader understands."""


def loads(text, fallback=False):
    """The TOML document ``text`` as a dict. ``fallback``: use the fallback reader even where tomllib exists
    (tests). Raises TomlError."""
    if _tomllib is not None and not fallback:
        try:
            return _tomllib.loads(text)
        except _tomllib.TOMLDecodeError as exc:
            raise TomlError(str(exc))
    return _Reader(text).document()


def reader_name(fallback=False):
    return "tomllib" if HAS_TOMLLIB and not fallback else "the collection's TOML reader (no tomllib before Python 3.11)"


_BARE = re.compile(r"[A-Za-z0-9_-]+")
_NUMBER = re.compile(r"[+-]?(0x[0-9A-Fa-f_]+|0o[0-7_]+|0b[01_]+|[0-9_]+(\.[0-9_]+)?([eE][+-]?[0-9_]+)?|inf|nan)")
_ESCAPES = {"b": "\b", "t": "\t", "n": "\n", "f": "\f", "r": "\r", '"': '"', "\\": "\\"}


class _Reader(object):
    def __init__(self, text):
        self.s = text.replace("\r\n", "\n")
        self.i = 0
        self.line = 1

    def fail(self, what):
        raise TomlError("line %d: %s" % (self.s.count("\n", 0, self.i) + 1, what))

    def peek(self, n=1):
        return self.s[self.i:self.i + n]

    def skip_ws(self, newlines=False):
        while self.i < len(self.s):
            c = self.s[self.i]
            if c in " \t" or (newlines and c == "\n"):
                self.i += 1
            elif c == "#":
                end = self.s.find("\n", self.i)
                self.i = len(self.s) if end < 0 else end
            else:
                break

    def end_of_line(self):
        self.skip_ws()
        if self.i < len(self.s) and self.s[self.i] != "\n":
            self.fail("unexpected %r after a value" % self.s[self.i:self.i + 20])

    def document(self):
        root = {}
        table = root
        defined = set()
        while True:
            self.skip_ws(newlines=True)
            if self.i >= len(self.s):
                return root
            if self.peek(2) == "[[":
                self.i += 2
                path = self.key()
                self.skip_ws()
                if self.peek(2) != "]]":
                    self.fail("']]' expected")
                self.i += 2
                parent = self.walk(root, path[:-1])
                items = parent.setdefault(path[-1], [])
                if not isinstance(items, list):
                    self.fail("%s is not an array of tables" % ".".join(path))
                table = {}
                items.append(table)
            elif self.peek() == "[":
                self.i += 1
                path = self.key()
                self.skip_ws()
                if self.peek() != "]":
                    self.fail("']' expected")
                self.i += 1
                if tuple(path) in defined:
                    self.fail("table %s defined twice" % ".".join(path))
                defined.add(tuple(path))
                table = self.walk(root, path)
            else:
                path = self.key()
                self.skip_ws()
                if self.peek() != "=":
                    self.fail("'=' expected after key %s" % ".".join(path))
                self.i += 1
                self.skip_ws()
                self.assign(table, path, self.value())
            self.end_of_line()

    def walk(self, table, path):
        for part in path:
            nxt = table.setdefault(part, {})
            if isinstance(nxt, list) and nxt and isinstance(nxt[-1], dict):
                nxt = nxt[-1]
            if not isinstance(nxt, dict):
                self.fail("%s is not a table" % part)
            table = nxt
        return table

    def assign(self, table, path, value):
        table = self.walk(table, path[:-1])
        if path[-1] in table:
            self.fail("key %s defined twice" % ".".join(path))
        table[path[-1]] = value

    def key(self):
        parts = []
        while True:
            self.skip_ws()
            c = self.peek()
            if c == '"':
                parts.append(self.basic_string())
            elif c == "'":
                parts.append(self.literal_string())
            else:
                m = _BARE.match(self.s, self.i)
                if not m:
                    self.fail("a key expected")
                parts.append(m.group(0))
                self.i = m.end()
            self.skip_ws()
            if self.peek() != ".":
                return parts
            self.i += 1

    def value(self):  # pylint: disable=too-many-return-statements
        c = self.peek()
        if self.peek(3) in ('"""', "'''"):
            return self.multiline_string()
        if c == '"':
            return self.basic_string()
        if c == "'":
            return self.literal_string()
        if c == "[":
            return self.array()
        if c == "{":
            return self.inline_table()
        for word, val in (("true", True), ("false", False)):
            if self.s.startswith(word, self.i):
                self.i += len(word)
                return val
        m = _NUMBER.match(self.s, self.i)
        if m and m.group(0) not in ("+", "-"):
            text = m.group(0).replace("_", "")
            nxt = self.s[m.end():m.end() + 1]
            if nxt and nxt not in " \t\n#,]}":
                self.fail("a value this reader does not understand (a date or time?): %r" % self.s[self.i:self.i + 30])
            self.i = m.end()
            try:
                if text.lstrip("+-")[:2] in ("0x", "0o", "0b"):
                    return int(text, 0)
                if re.match(r"^[+-]?[0-9]+$", text):
                    return int(text)
                return float(text)
            except ValueError:
                self.fail("not a number: %r" % text)
        self.fail("a value expected, got %r" % self.s[self.i:self.i + 20])
        return None  # not reached

    def basic_string(self):
        self.i += 1
        out = []
        while True:
            if self.i >= len(self.s) or self.s[self.i] == "\n":
                self.fail("unterminated string")
            c = self.s[self.i]
            if c == '"':
                self.i += 1
                return "".join(out)
            if c == "\\":
                out.append(self.escape())
                continue
            out.append(c)
            self.i += 1

    def escape(self):
        code = self.s[self.i + 1:self.i + 2]
        if code in _ESCAPES:
            self.i += 2
            return _ESCAPES[code]
        if code in ("u", "U"):
            n = 4 if code == "u" else 8
            digits = self.s[self.i + 2:self.i + 2 + n]
            if not re.match(r"^[0-9A-Fa-f]{%d}$" % n, digits):
                self.fail("bad unicode escape")
            self.i += 2 + n
            return chr(int(digits, 16))
        self.fail("bad escape \\%s" % code)
        return ""  # not reached

    def literal_string(self):
        end = self.s.find("'", self.i + 1)
        nl = self.s.find("\n", self.i + 1)
        if end < 0 or (0 <= nl < end):
            self.fail("unterminated literal string")
        out = self.s[self.i + 1:end]
        self.i = end + 1
        return out

    def multiline_string(self):
        quote = self.peek(3)
        self.i += 3
        if self.peek() == "\n":
            self.i += 1
        out = []
        while True:
            if self.i >= len(self.s):
                self.fail("unterminated multi-line string")
            if self.s.startswith(quote, self.i):
                self.i += 3
                return "".join(out)
            c = self.s[self.i]
            if quote == '"""' and c == "\\":
                if self.s[self.i + 1:self.i + 2] in (" ", "\t", "\n"):
                    self.i += 1
                    while self.i < len(self.s) and self.s[self.i] in " \t\n":
                        self.i += 1
                    continue
                out.append(self.escape())
                continue
            out.append(c)
            self.i += 1

    def array(self):
        self.i += 1
        out = []
        while True:
            self.skip_ws(newlines=True)
            if self.peek() == "]":
                self.i += 1
                return out
            out.append(self.value())
            self.skip_ws(newlines=True)
            if self.peek() == ",":
                self.i += 1
            elif self.peek() != "]":
                self.fail("',' or ']' expected in an array")

    def inline_table(self):
        self.i += 1
        out = {}
        self.skip_ws()
        if self.peek() == "}":
            self.i += 1
            return out
        while True:
            path = self.key()
            self.skip_ws()
            if self.peek() != "=":
                self.fail("'=' expected in an inline table")
            self.i += 1
            self.skip_ws()
            self.assign(out, path, self.value())
            self.skip_ws()
            if self.peek() == "}":
                self.i += 1
                return out
            if self.peek() != ",":
                self.fail("',' or '}' expected in an inline table")
            self.i += 1
