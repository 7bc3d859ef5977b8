# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: what many hosts say alike, written once: a shape, and per host only what is its own.

Not public API. The JSON report writes each host as a reference to a shape (``report["shapes"]``: the entry of the
first host of its kind and failure, ``shape_key``, without the keys every host line keeps, ``INLINE``), its own tokens
(its name and GPU UUIDs, which stand where the shape's own are) and a patch (JSON Pointer, RFC 6901 -> value pairs:
what differs once the tokens are swapped, e.g. its layers' start times and durations). ``restore`` gives the host's
full entry back; ``expand`` a whole report with every host full (docs/usage.md, "JSON schema"). The HTML report's
per-host detail uses the same encoding in its page script. An encoding is written only when restoring it gives the
entry back exactly (compared as JSON text): otherwise the host is written in full.
"""

from __future__ import annotations

import copy
import json
import re

# what every host line of the JSON keeps as it is (what a reader of verdicts needs without the reader), the rest of a
# compact host is its shape's
INLINE = ("name", "verdict", "state", "cause", "group", "signature", "failing_layer", "points_to", "reachable",
          "unverifiable", "where")
SHAPE_LIMIT = 64            # shapes per report: a host of another kind beyond them is written in full
MIN_TOKEN = 6               # a shorter name is not swapped (it may be part of other words)


def _plain(text):
    return isinstance(text, str) and len(text) >= MIN_TOKEN and json.dumps(text)[1:-1] == text


def host_tokens(entry):
    """[name, GPU UUID, ...] of a host entry: what differs from one host of a kind to the next and stands in many
    places (subjects, paths, messages) of its records. The GPUs in the order of its host layer's inventory."""
    gpus = ((((entry.get("layers") or {}).get("host") or {}).get("evidence") or {}).get("gpus")) or []
    return [str(entry.get("name"))] + [g.get("uuid") for g in gpus if isinstance(g, dict) and isinstance(g.get("uuid"), str)]


def _pairs(old, new):
    """{old token: new token} where both lists pair up one to one, each token plain JSON text (``_plain``)."""
    if len(old) != len(new) or len(set(old)) != len(old) or len(set(new)) != len(new):
        return {}
    return dict((o, n) for o, n in zip(old, new) if o != n and _plain(o) and _plain(n))


def _in_escape(text, i):
    """Whether position ``i`` of JSON text is inside an escape sequence (right after its backslash, or one of the four
    hex digits of a \\uXXXX): a token found there is not in the string the text encodes."""
    for start in range(i - 1, max(i - 6, -1), -1):
        if text[start] != "\\":
            continue
        run = 0
        while start - run >= 0 and text[start - run] == "\\":
            run += 1
        if run % 2 and (start == i - 1 or (text[start + 1] == "u" and i - start <= 5)):
            return True
    return False


def _swap(text, old, new):
    """The JSON ``text`` with each token of ``old`` replaced by the token of ``new`` at the same place, in every string
    it encodes (keys and values), scanning left to right, the longest token first at each place: what
    ``swap_strings`` does to the decoded document, done on the text. A token found inside an escape sequence is not
    in the string the text encodes: it is left, and the scan goes on at the next character. The places are found with
    ``str.find`` (a regular expression of the tokens, GPU UUIDs alike up to their sixth character, tries each at every
    character of the text: several times slower on a host's 60 KB)."""
    pairs = _pairs(old, new)
    if not pairs:
        return text
    found = []
    for token in pairs:
        at = text.find(token)
        while at >= 0:
            found.append((at, -len(token), token))
            at = text.find(token, at + 1)
    if not found:
        return text
    found.sort()
    out, pos = [], 0
    for at, _size, token in found:
        if at < pos or ("\\" in text[max(at - 6, 0):at] and _in_escape(text, at)):
            continue
        out.append(text[pos:at])
        out.append(pairs[token])
        pos = at + len(token)
    out.append(text[pos:])
    return "".join(out)


def swap_strings(doc, old, new):
    """``doc`` with each token of ``old`` replaced by the token of ``new`` at the same place in every string (keys and
    values): the reader's way (docs/usage.md), and the page script's."""
    pairs = _pairs(old, new)
    if not pairs:
        return doc
    pattern = re.compile("|".join(re.escape(t) for t in sorted(pairs, key=len, reverse=True)))

    def walk(value):
        if isinstance(value, str):
            return pattern.sub(lambda m: pairs[m.group(0)], value)
        if isinstance(value, list):
            return [walk(v) for v in value]
        if isinstance(value, dict):
            return dict((walk(k), walk(v)) for k, v in value.items())
        return value
    return walk(doc)


def _escape(key):
    return str(key).replace("~", "~0").replace("/", "~1")


def _unescape(part):
    return part.replace("~1", "/").replace("~0", "~")


def diff(base, value, path="", out=None):
    """The patch that makes ``base`` into ``value``: [[pointer, value]] for what is set (added or replaced) and
    [pointer] for what is removed; lists of another length are replaced whole."""
    out = [] if out is None else out
    if isinstance(base, dict) and isinstance(value, dict):
        for key, item in value.items():
            where = "%s/%s" % (path, _escape(key))
            if key not in base:
                out.append([where, item])
            elif base[key] != item or type(base[key]) is not type(item):
                diff(base[key], item, where, out)
        out.extend(["%s/%s" % (path, _escape(key))] for key in base if key not in value)
    elif isinstance(base, list) and isinstance(value, list) and len(base) == len(value):
        for i, (a, b) in enumerate(zip(base, value)):
            if a != b or type(a) is not type(b):
                diff(a, b, "%s/%d" % (path, i), out)
    else:
        out.append([path, value])
    return out


def apply(doc, patch):
    """``doc`` with ``patch`` (see ``diff``) applied in place; returns it (a patch of the root returns its value)."""
    for op in patch:
        parts = [_unescape(p) for p in op[0].split("/")[1:]]
        if not parts:
            doc = op[1] if len(op) > 1 else None
            continue
        parent = doc
        for part in parts[:-1]:
            parent = parent[int(part)] if isinstance(parent, list) else parent[part]
        last = int(parts[-1]) if isinstance(parent, list) else parts[-1]
        if len(op) > 1:
            parent[last] = op[1]
        else:
            del parent[last]
    return doc


def _rest(entry):
    return dict((k, v) for k, v in entry.items() if k not in INLINE)


def _text(value):
    return json.dumps(value, sort_keys=True)


class Shape(object):
    """One shape: the rest of a host entry (all but ``INLINE``) and the tokens that stand in it for its host's own."""

    def __init__(self, sid, tokens, rest):
        self.id = sid
        self.tokens = list(tokens)
        self.text = _text(rest)
        self.rest = json.loads(self.text)

    @classmethod
    def of_entry(cls, sid, entry):
        return cls(sid, host_tokens(entry), _rest(entry))

    def as_json(self):
        return {"tokens": self.tokens, "entry": self.rest}

    def patch_of(self, tokens, doc):
        """(tokens, patch) that restore ``doc`` (whose own tokens are ``tokens``) from this shape, or None when they would
        not give it back exactly: its tokens swapped for the shape's must swap back to the same text (else none are
        swapped), and the patch must make the shape into it."""
        text = _text(doc)
        own = _swap(text, tokens, self.tokens)
        if _swap(own, self.tokens, tokens) != text:
            tokens, own = list(self.tokens), text
        patch = diff(self.rest, json.loads(own))
        if not self._restores(patch, own):
            return None
        return list(tokens), patch

    def _restores(self, patch, text):
        """Whether ``patch`` makes this shape into the JSON ``text``: applied to the shape itself, compared, undone."""
        if any(not op[0] for op in patch):
            return _text(apply(json.loads(self.text), patch)) == text
        undo = []
        try:
            for op in patch:
                parts = [_unescape(p) for p in op[0].split("/")[1:]]
                parent = self.rest
                for part in parts[:-1]:
                    parent = parent[int(part)] if isinstance(parent, list) else parent[part]
                last = int(parts[-1]) if isinstance(parent, list) else parts[-1]
                had = last < len(parent) if isinstance(parent, list) else last in parent
                undo.append((parent, last, had, parent[last] if had else None))
                if len(op) > 1:
                    parent[last] = op[1]
                else:
                    del parent[last]
            return _text(self.rest) == text
        finally:
            for parent, last, had, value in reversed(undo):
                if had:
                    parent[last] = value
                else:
                    del parent[last]

    def encode(self, entry):
        """The compact line of a host ``entry`` against this shape (its ``INLINE`` keys, the shape's id, its tokens and
        the patch), or None when it would not restore exactly."""
        got = self.patch_of(host_tokens(entry), _rest(entry))
        if got is None:
            return None
        line = dict((k, entry[k]) for k in INLINE if k in entry)
        line.update(shape=self.id, tokens=got[0], patch=got[1])
        return line


def restore_with(shape, line):
    """The full entry of a compact host ``line`` from its ``shape`` (``{"tokens", "entry"}``): the patch applied to the
    shape's entry, then the shape's tokens swapped for the host's, then the host's own keys (``INLINE``)."""
    doc = apply(copy.deepcopy(shape["entry"]), copy.deepcopy(line.get("patch") or []))
    entry = json.loads(_swap(_text(doc), shape.get("tokens") or [], line.get("tokens") or []))
    entry.update((k, line[k]) for k in INLINE if k in line)
    return entry


def with_group(line, group):
    """A host's line (``Shapes.encode``) made before its group was known, with its group: where ``grouped`` puts it in a
    full entry (last), where ``Shape.encode`` puts it in a compact line (among ``INLINE``)."""
    if not is_compact(line):
        return dict(line, group=group)
    out = dict((k, group if k == "group" else line[k]) for k in INLINE if k in line or k == "group")
    out.update((k, v) for k, v in line.items() if k not in out)
    return out


def is_compact(entry):
    return isinstance(entry, dict) and "shape" in entry and "patch" in entry


def restore(report, entry):
    """The full entry of one host of a JSON report as it was read (``report["hosts"][name]``): a compact host restored
    from its shape, any other as it is (a copy)."""
    if not is_compact(entry):
        return copy.deepcopy(entry)
    return restore_with((report.get("shapes") or {})[entry["shape"]], entry)


def expand(report):
    """A JSON report (as read) with every host's full entry, and without its shapes."""
    out = dict((k, v) for k, v in report.items() if k != "shapes")
    out["hosts"] = dict((name, restore(report, entry)) for name, entry in (report.get("hosts") or {}).items())
    return out


def kind_key(entry):
    """Hosts of one kind: the same GPU models and count, driver, runtime and layer statuses."""
    layers = entry.get("layers") or {}
    host = layers.get("host") or {}
    gpus = (host.get("evidence") or {}).get("gpus") or []
    return json.dumps([len(host_tokens(entry)), [g.get("name") for g in gpus if isinstance(g, dict)],
                       (host.get("versions") or {}).get("driver"), ((layers.get("runtime") or {}).get("versions") or {}).get("runtime"),
                       dict((layer, (rec or {}).get("status")) for layer, rec in layers.items())], sort_keys=True, default=str)


def shape_key(entry):
    """Hosts that share a shape: of one kind (``kind_key``) and with the same failure signature in each layer (none in a
    verified host's): hosts failed the same way ran the same checks."""
    signatures = dict((layer, rec.get("signature")) for layer, rec in (entry.get("layers") or {}).items()
                      if isinstance(rec, dict) and rec.get("signature") is not None)
    return kind_key(entry) + (json.dumps(signatures, sort_keys=True, default=str) if signatures else "")


class Shapes(object):
    """The shapes of a fleet, made as its hosts are counted (``add``: each host once, in the order they are written):
    the first host of each ``shape_key`` becomes the shape of those hosts, up to ``SHAPE_LIMIT`` shapes; a host whose
    key has none is written against the first shape of its kind (``kind_key``) when there is one."""

    def __init__(self, wanted=None):
        self.by_key = {}
        self.by_kind = {}
        self.wanted = wanted or (lambda entry: True)

    def _keep(self, shape, key, kind):
        self.by_key[key] = shape
        self.by_kind.setdefault(kind, shape)

    def add(self, entry):
        if not self.wanted(entry):
            return
        key = shape_key(entry)
        if key not in self.by_key and len(self.by_key) < SHAPE_LIMIT:
            self._keep(Shape.of_entry("s%d" % (len(self.by_key) + 1), entry), key, kind_key(entry))

    def of(self, entry):
        if not self.wanted(entry):
            return None
        return self.by_key.get(shape_key(entry)) or self.by_kind.get(kind_key(entry))

    def as_json(self):
        return dict((s.id, s.as_json()) for s in self.by_key.values())

    @classmethod
    def from_json(cls, shapes):
        """The shapes of a report (``report["shapes"]``: id -> {tokens, entry}), in the order they were made."""
        out = cls()
        for sid, shape in shapes.items():
            tokens = shape.get("tokens") or [None]
            entry = dict(shape["entry"], name=tokens[0])
            out._keep(Shape(sid, tokens, shape["entry"]), shape_key(entry), kind_key(entry))
        return out

    def encode(self, entry):
        """The line the JSON report writes for ``entry``: compact against its shape, or the entry itself."""
        shape = self.of(entry)
        line = shape.encode(entry) if shape is not None else None
        return line if line is not None else entry
