# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE (gpuprobe.layers cdi layer): reading spec bytes as the reference library does (the YAML stage).

The CDI library reads every spec, ``.json`` and ``.yaml`` alike, with ``yaml.UnmarshalStrict`` of
sigs.k8s.io/yaml (container-device-interface v1.1.0, pkg/cdi/spec.go ``ParseSpec``), which first decodes
the bytes with its fork of go-yaml v2 (sigs.k8s.io/yaml v1.4.0, goyaml.v2) into ``interface{}`` and then
converts that to JSON (see schema.py). This module is the go-yaml v2 part, on PyYAML's event parser (libyaml
when available, the same C scanner go-yaml v2 was ported from):

- only the FIRST document is read; later documents are ignored, unparsed (goyaml.v2/yaml.go ``unmarshal``
  calls ``parser.parse()`` once); a ``%YAML`` directive other than 1.1 is an error ("found incompatible YAML
  document");
- plain scalars resolve as goyaml.v2/resolve.go ``resolve``: null ``'' ~ null Null NULL``; booleans
  ``y Y yes Yes YES n N no No NO true True TRUE false False FALSE on On ON off Off OFF``; ``.inf .nan``
  families; a scalar starting with a digit or sign: underscores removed, then Go ``ParseInt(s, 0, 64)``
  (``0x``, ``0o``, ``0b``, leading-``0`` octal), else ``ParseUint``, else a float matching
  ``^[-+]?(\\.[0-9]+|[0-9]+(\\.[0-9]*)?)([eE][-+]?[0-9]+)?$`` (an overflow stays a string), else the
  ``0b``/``-0b`` forms; a scalar starting with ``.``: Go ``ParseFloat``. NO sexagesimal (``1:30`` is the
  string ``1:30``; the source says "Base 60 floats ... are purposefully unsupported here"). Timestamps
  are decoded into ``interface{}`` as the original string (decode.go ``scalar``: "for backward
  compatibility reasons we set it as a string"), so ``2001-12-14`` is the string ``2001-12-14``.
  Quoted and block scalars are strings;
- explicit tags: ``!!str``/``!!binary`` always strings (binary base64-decoded); ``!!int`` etc. must resolve
  to that type (``cannot decode !!str `x` as a !!int``), ``!!int`` under ``!!float`` becomes a float;
  other tags (``!foo``, and the yaml.org tags go-yaml does not resolve a scalar to: ``!!merge``, ``!!seq``,
  ``!!map``...) leave the scalar a string;
- mappings are strict (decode.go ``setMapIndex``): a key already set is an error, keys compared as Go
  values (``1`` and ``0x1`` are the same key, ``1`` and ``"1"`` are not); ``<<`` merges a mapping or a
  sequence of mappings (the later ones first), each merged key going through the same duplicate test;
  a mapping or sequence as a key is ``invalid map key``;
- double-quoted escapes are the scanner's (scannerc.go): ``\\/`` is an unknown escape (an error), ``\\'``
  is accepted, a surrogate code point is an invalid escape.
Deeper nesting than MAX_DEPTH is a parse error (no valid spec nests deeper than 8; the library also
rejects such a file, at its depth limit or at a type mismatch).
"""

from __future__ import annotations

import base64
import binascii
import math
import re

try:
    import yaml
    HAS_YAML = True
    YAML_IMPORT_ERROR = None
    # libyaml's parser when PyYAML was built with it (benchmarks/bench_cpu.py swaps it to compare)
    EVENT_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
except ImportError as _exc:  # pragma: no cover - depends on the target host
    yaml = None
    HAS_YAML = False
    YAML_IMPORT_ERROR = _exc
    EVENT_LOADER = None

# the yaml.org tags go-yaml v2 resolves a scalar to (resolve.go resolvableTag), and !!binary (decode.go)
_RESOLVABLE = ("str", "bool", "int", "float", "null", "timestamp", "binary")
MAX_DEPTH = 64
MAX_ESCAPE_FIXES = 64
_TAG = "tag:yaml.org,2002:"
_RESOLVE_MAP = {}
for _values, _v in ((("y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"), True),
                    (("n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"), False),
                    (("", "~", "null", "Null", "NULL"), None),
                    ((".nan", ".NaN", ".NAN"), math.nan),
                    ((".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"), math.inf),
                    (("-.inf", "-.Inf", "-.INF"), -math.inf)):
    for _s in _values:
        _RESOLVE_MAP[_s] = _v
_INT = re.compile(r"^([+-]?)(0[xX][0-9a-fA-F]+|0[oO][0-7]+|0[bB][01]+|0[0-7]*|[1-9][0-9]*)$")
_YAML_FLOAT = re.compile(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$")
_DOT_FLOAT = re.compile(r"^\.[0-9]+([eE][-+]?[0-9]+)?$")
_BIN = re.compile(r"^[+-]?[01]+$")
INT64 = (-(2 ** 63), 2 ** 63 - 1)
UINT64_MAX = 2 ** 64 - 1


class YAMLError(Exception):
    """A file the library's YAML stage rejects."""


class UInt64(int):
    """A YAML integer above int64 (go-yaml gives uint64: another Go type, and an unsupported map key)."""


class YMap(list):
    """A YAML mapping as go-yaml's map[interface{}]interface{}: [(key, value)], keys unique as Go values."""


def _go_int(s, signed):
    """Go strconv.Parse(U)Int(s, 0, 64), or None."""
    m = _INT.match(s)
    if not m or (m.group(1) and not signed):
        return None
    sign, body = m.groups()
    low = body.lower()
    if low.startswith(("0x", "0o", "0b")):
        v = int(body[2:], {"x": 16, "o": 8, "b": 2}[low[1]])
    elif len(body) > 1 and body[0] == "0":
        v = int(body[1:], 8)
    else:
        v = int(body)
    v = -v if sign == "-" else v
    if signed:
        return v if INT64[0] <= v <= INT64[1] else None
    return v if v <= UINT64_MAX else None


def _go_float(s):
    v = float(s)
    return None if math.isinf(v) else v  # ParseFloat's ErrRange: the scalar stays a string


def resolve_plain(s):
    """(tag, value) of a plain scalar: goyaml.v2/resolve.go ``resolve`` with an empty tag."""
    if s in _RESOLVE_MAP:
        v = _RESOLVE_MAP[s]
        return ("null" if v is None else "bool" if isinstance(v, bool) else "float"), v
    c = s[:1]
    if c == "." and _DOT_FLOAT.match(s):
        return "float", _go_float(s)
    if c and c in "+-0123456789":
        # a timestamp (YYYY-...) is decoded as its own text; none of those parse as a number below
        plain = s.replace("_", "")
        v = _go_int(plain, True)
        if v is not None:
            return "int", v
        v = _go_int(plain, False)
        if v is not None:
            return "int", UInt64(v)
        if _YAML_FLOAT.match(plain):
            v = _go_float(plain)
            if v is not None:
                return "float", v
        for prefix, sign in (("0b", ""), ("-0b", "-")):
            if plain.startswith(prefix) and _BIN.match(sign + plain[len(prefix):]):
                v = int(sign + plain[len(prefix):], 2)
                if INT64[0] <= v <= INT64[1]:
                    return "int", v
                if v <= UINT64_MAX:
                    return "int", UInt64(v)
    return "str", s


# goyaml.v2/resolve.go allowedTimestampFormats, each read by Go's time.Parse (fields in range, the day in its month)
_TS = (re.compile(r"^(\d{4})-(\d{1,2})-(\d{1,2})[Tt](\d{1,2}):(\d{1,2}):(\d{1,2})(?:\.\d+)?(?:Z|[-+](\d{2}):(\d{2}))$"),
       re.compile(r"^(\d{4})-(\d{1,2})-(\d{1,2}) (\d{1,2}):(\d{1,2}):(\d{1,2})(?:\.\d+)?()()$"),
       re.compile(r"^(\d{4})-(\d{1,2})-(\d{1,2})()()()()()$"))
_DAYS = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def _go_timestamp(text):
    """Whether go-yaml v2 reads ``text`` as a timestamp (parseTimestamp: one of its layouts, as time.Parse takes it)."""
    for layout in _TS:
        m = layout.match(text)
        if not m:
            continue
        year, month, day, hour, minute, second, zh, zm = [int(g) if g else 0 for g in m.groups()]
        leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
        if 1 <= month <= 12 and 1 <= day <= (_DAYS[month - 1] - (month == 2 and not leap)) and hour < 24 \
                and minute < 60 and second < 60 and zh <= 24 and zm <= 60:
            return True
    return False


def _scalar(event, where):
    tag = event.tag
    if tag is None and not event.implicit[0]:
        return event.value  # quoted or block scalar: a string
    if tag in (None, "!"):
        return event.value if tag == "!" else resolve_plain(event.value)[1]
    if not tag.startswith(_TAG):
        return event.value  # not a resolvable tag: the scalar's text
    want = tag[len(_TAG):]
    if want == "str" or want not in _RESOLVABLE:
        return event.value  # !!merge, !!seq, !!map ... on a scalar: not a tag go-yaml resolves, the scalar's text
    if want == "binary":
        try:
            return base64.b64decode(event.value.replace("\n", "").replace("\r", "").encode("ascii"), validate=True).decode("utf-8", "replace")
        except (binascii.Error, ValueError, UnicodeEncodeError):
            raise YAMLError("%s!!binary value contains invalid base64 data" % where)
    if want == "timestamp" and _go_timestamp(event.value):
        return event.value
    got, value = resolve_plain(event.value)
    if got == "int" and want == "float":
        return float(value)
    if got != want:
        raise YAMLError("%scannot decode !!%s `%s` as a !!%s" % (where, got, event.value, want))
    return value


def _key(value, where):
    """The Go-value identity of a mapping key (type and value), for the duplicate test."""
    if isinstance(value, (YMap, list)):
        raise YAMLError("%sinvalid map key: %s" % (where, "map" if isinstance(value, YMap) else "slice"))
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, UInt64):
        return ("uint64", int(value))
    if isinstance(value, int):
        return ("int", value)
    if isinstance(value, float):
        # NaN is not equal to itself in Go either: two NaN keys are never the same key
        return ("nan", object()) if math.isnan(value) else ("float", value)
    return ("null", None) if value is None else ("str", value)


class _Mapping(object):
    def __init__(self, anchor):
        self.anchor = anchor
        self.pairs = YMap()
        self.keys = set()
        self.key = None
        self.has_key = False
        self.merge_key = False

    def put(self, key, value, where, merged=False):
        if not merged and key == "<<" and self.merge_key:
            self.merge(value, where)
            return
        ident = _key(key, where)
        if ident in self.keys:
            raise YAMLError("%skey %s already set in map" % (where, _go_repr(key)))
        self.keys.add(ident)
        self.pairs.append((key, value))

    def merge(self, value, where):
        if isinstance(value, YMap):
            for k, v in value:
                self.put(k, v, where, merged=True)
        elif isinstance(value, list) and all(isinstance(v, YMap) for v in value):
            for m in reversed(value):
                self.merge(m, where)
        else:
            raise YAMLError("%smap merge requires map or sequence of maps as the value" % where)


def _go_repr(key):
    return '"%s"' % key if isinstance(key, str) else ("<nil>" if key is None else str(key).lower() if isinstance(key, bool) else str(key))


def _check_escapes(text, event):
    """go-yaml's double-quoted escapes where PyYAML's differ: ``\\/`` unknown, surrogates invalid."""
    raw = text[event.start_mark.index:event.end_mark.index]
    i = raw.find("\\")
    while i >= 0:
        nxt = raw[i + 1:i + 2]
        where = "line %d: " % (event.start_mark.line + 1)
        if nxt == "/":
            raise YAMLError("%swhile parsing a quoted scalar: found unknown escape character" % where)
        if nxt in ("u", "U", "x"):
            code = raw[i + 2:i + 2 + {"u": 4, "U": 8, "x": 2}[nxt]]
            try:
                value = int(code, 16)
            except ValueError:
                value = 0
            if 0xD800 <= value <= 0xDFFF or value > 0x10FFFF:
                raise YAMLError("%swhile parsing a quoted scalar: found invalid Unicode character escape code" % where)
        i = raw.find("\\", i + 2)


def decode_text(data):
    """Bytes to text as libyaml reads them (UTF-8, or UTF-16 with a BOM); raises YAMLError."""
    try:
        if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
            return data.decode("utf-16")
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise YAMLError("invalid leading UTF-8 octet at byte %d" % exc.start)


def load_first_document(data):
    """The first YAML document of ``data`` as go-yaml v2 decodes it into interface{}: None, str, bool,
    int (UInt64 above int64), float, list or YMap. Raises YAMLError with the reason."""
    if not HAS_YAML:
        raise YAMLError("PyYAML is not installed: %s" % YAML_IMPORT_ERROR)
    text = decode_text(data) if isinstance(data, bytes) else data
    for _attempt in range(MAX_ESCAPE_FIXES):
        try:
            return _build(text)
        except yaml.YAMLError as exc:
            # go-yaml accepts \' in a double-quoted scalar (scannerc.go), PyYAML does not: read it as \x27
            mark = getattr(exc, "problem_mark", None)
            if mark is None or "escape character" not in str(getattr(exc, "problem", "")):
                raise YAMLError(_yaml_message(exc))
            at = text.rfind("\\'", 0, mark.index + 2)
            if at < 0 or at < mark.index - 1:
                raise YAMLError(_yaml_message(exc))
            text = text[:at] + "\\x27" + text[at + 2:]
        except RecursionError:
            raise YAMLError("exceeded max depth")
    raise YAMLError("too many escapes to read")


def _yaml_message(exc):
    mark = getattr(exc, "problem_mark", None)
    where = "line %d: " % (mark.line + 1) if mark is not None else ""
    problem = getattr(exc, "problem", None) or str(exc).replace("\n", " ")
    context = getattr(exc, "context", None)
    return "%s%s%s" % (where, context + ": " if context else "", problem)


def _build(text):
    loader = EVENT_LOADER(text)
    try:
        anchors = {}
        stack = []
        result = None
        done = False
        while not done and loader.check_event():
            event = loader.get_event()
            where = "line %d: " % (event.start_mark.line + 1)
            if isinstance(event, yaml.DocumentStartEvent) and getattr(event, "version", None) not in (None, (1, 1)):
                # go-yaml v2 takes a %YAML directive of 1.1 only (parserc.go yaml_parser_process_directives)
                raise YAMLError("%sfound incompatible YAML document" % where)
            if isinstance(event, (yaml.StreamStartEvent, yaml.DocumentStartEvent)):
                continue
            if isinstance(event, (yaml.DocumentEndEvent, yaml.StreamEndEvent)):
                break  # the first document only
            if isinstance(event, yaml.AliasEvent):
                if event.anchor not in anchors:
                    raise YAMLError("%sunknown anchor '%s' referenced" % (where, event.anchor))
                value = anchors[event.anchor]
                if isinstance(value, (_Mapping, _Sequence)):  # a node still being built: the alias is inside it
                    raise YAMLError("%sanchor '%s' value contains itself" % (where, event.anchor))
            elif isinstance(event, yaml.ScalarEvent):
                if event.style == '"':
                    _check_escapes(text, event)
                value = _scalar(event, where)
                if event.anchor:
                    anchors[event.anchor] = value
            elif isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                if len(stack) >= MAX_DEPTH:
                    raise YAMLError("%sexceeded max depth of %d (no valid CDI spec nests deeper than 8)" % (where, MAX_DEPTH))
                if isinstance(event, yaml.MappingStartEvent):
                    frame = _Mapping(event.anchor)
                else:
                    frame = _Sequence(event.anchor)
                if event.anchor:  # an anchor names the node declared last under its name (go-yaml's parser sets it as
                    anchors[event.anchor] = frame  # the node starts): one redefined inside this node keeps the name
                stack.append(frame)
                continue
            else:  # MappingEnd / SequenceEnd
                frame = stack.pop()
                value = frame.pairs if isinstance(frame, _Mapping) else frame.items
                if isinstance(frame, _Mapping) and frame.has_key:
                    raise YAMLError("%smapping key without a value" % where)
                if frame.anchor and anchors.get(frame.anchor) is frame:
                    anchors[frame.anchor] = value
            if not stack:
                result, done = value, True
                continue
            top = stack[-1]
            if isinstance(top, _Sequence):
                top.items.append(value)
            elif not top.has_key:
                top.key, top.has_key = value, True
                top.merge_key = isinstance(event, yaml.ScalarEvent) and event.value == "<<" and (
                    (event.tag is None and event.implicit[0]) or event.tag == _TAG + "merge")
                if top.merge_key:
                    top.key = "<<"
            else:
                top.has_key = False
                top.put(top.key, value, where)
        return result
    finally:
        loader.dispose()


class _Sequence(object):
    def __init__(self, anchor):
        self.anchor = anchor
        self.items = []


def parse_bytes(data, ext=".yaml"):  # pylint: disable=unused-argument
    """(tree, error): the first document of spec bytes, or the library's reason to reject them. ``.json``
    and ``.yaml`` are read alike: the library reads both with its YAML reader (so a JSON ``\\/`` escape
    is an error there and here)."""
    try:
        return load_first_document(data), None
    except YAMLError as exc:
        return None, "failed to unmarshal CDI Spec: error converting YAML to JSON: yaml: %s" % str(exc)[:300]
