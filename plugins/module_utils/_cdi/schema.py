# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE (gpuprobe.layers cdi layer): the JSON stage of the reference library's reader.

After go-yaml (loader.py), sigs.k8s.io/yaml v1.4.0 (yaml.go ``yamlToJSONTarget``) converts the tree to
JSON with the target struct in hand, then decodes it with encoding/json and ``DisallowUnknownFields``
into specs-go's ``Spec`` (container-device-interface v1.1.0, specs-go/config.go). Its rules, here:

- conversion (``convertToJSONableObject``): map keys become strings (int: decimal, float:
  ``FormatFloat(f, 'g', -1, 32)`` with ``.inf``/``-.inf``/``.nan``, bool: ``true``/``false``; a null or
  uint64 key is ``unsupported map key``); where the target field is a string, a YAML int/uint/float/bool
  becomes a string the same way (``name: 1.0`` is ``"1"``, ``name: 1e3`` is ``"1000"``, ``name: yes`` is
  ``"true"``). The struct field for a key is the exact name, else the first case-insensitive match;
- ``json.Marshal``: a NaN or infinite float left a number is an error (``json: unsupported value``);
  object keys come out sorted by their bytes;
- ``encoding/json`` decoding: field names matched exactly, else case-insensitively (ASCII case, plus
  U+017F and U+212A that fold to ``s`` and ``k``); an unknown field is an error; keys that name the same
  field are all applied in that sorted order (the last wins for scalars and lists, objects and maps
  are merged); null leaves a value field as it is and clears a pointer, list or map; a float is an
  integer field's value when its JSON text is an integer (``major: 1.0`` is 1, ``1.5`` is an error).

Stricter than the library, with the reason (reported as ``cdi.spec.library_panic`` or in cdi.spec.schema):
- a null entry in ``deviceNodes``, ``mounts``, ``hooks`` or ``netDevices`` decodes to a nil pointer that
  the library dereferences in ``ContainerEdits.Validate``: it panics; here the file is rejected;
- two YAML keys that become the same JSON key (``1`` and ``"1"``) are kept one at random by the library
  (Go map iteration); here the file is rejected.
"""

from __future__ import annotations

import math
import re
import struct
from decimal import Decimal

from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi.catalogue import MAX_ERRORS_PER_FILE, MAX_NODES_PER_FILE
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi.loader import UInt64, YMap

_OBJ = "obj"
_LIST = "list"
_MAP = "map"
_PTR = "ptr"  # a pointer to a struct (*IntelRdt) or list of pointers ([]*DeviceNode): null is nil
SCHEMA = {
    "spec": (("cdiVersion", "str"), ("kind", "str"), ("annotations", (_MAP, "str")),
             ("devices", (_LIST, (_OBJ, "device"))), ("containerEdits", (_OBJ, "edits"))),
    "device": (("name", "str"), ("annotations", (_MAP, "str")), ("containerEdits", (_OBJ, "edits"))),
    "edits": (("env", (_LIST, "str")), ("deviceNodes", (_LIST, (_PTR, "deviceNode"))),
              ("netDevices", (_LIST, (_PTR, "netDevice"))), ("hooks", (_LIST, (_PTR, "hook"))),
              ("mounts", (_LIST, (_PTR, "mount"))), ("intelRdt", (_PTR, "intelRdt")),
              ("additionalGids", (_LIST, "uint32"))),
    "deviceNode": (("path", "str"), ("hostPath", "str"), ("type", "str"), ("major", "int64"), ("minor", "int64"),
                   ("fileMode", "*uint32"), ("permissions", "str"), ("uid", "*uint32"), ("gid", "*uint32")),
    "mount": (("hostPath", "str"), ("containerPath", "str"), ("options", (_LIST, "str")), ("type", "str")),
    "hook": (("hookName", "str"), ("path", "str"), ("args", (_LIST, "str")), ("env", (_LIST, "str")),
             ("timeout", "*int")),
    # enableCMT/enableMBM exist up to 1.0.0; schemata/enableMonitoring from 1.1.0 (checked by version).
    "intelRdt": (("closID", "str"), ("l3CacheSchema", "str"), ("memBwSchema", "str"), ("schemata", (_LIST, "str")),
                 ("enableMonitoring", "bool"), ("enableCMT", "bool"), ("enableMBM", "bool")),
    "netDevice": (("hostInterfaceName", "str"), ("name", "str")),
}
_INT_RANGES = {"int64": (-(2 ** 63), 2 ** 63 - 1), "uint32": (0, 2 ** 32 - 1), "int": (-(2 ** 63), 2 ** 63 - 1)}
_GO_TYPE = {"str": "string", "int64": "int64", "uint32": "uint32", "int": "int", "bool": "bool"}
_FOLD = {"\u017f": "S", "\u212a": "K"}
_JSON_INT = re.compile(r"^-?[0-9]+$")


class _TooComplex(Exception):
    pass


class _JNum(str):
    """A JSON number, as the text json.Marshal wrote."""


def go_float32_g(value):
    """Go strconv.FormatFloat(value, 'g', -1, 32)."""
    if math.isnan(value):
        return "NaN"
    try:
        f = struct.unpack("f", struct.pack("f", value))[0]
    except OverflowError:
        f = math.copysign(math.inf, value)
    if math.isinf(f):
        return "+Inf" if f > 0 else "-Inf"
    if f == 0:
        return "-0" if math.copysign(1.0, f) < 0 else "0"
    for prec in range(1, 18):
        text = "%.*e" % (prec - 1, f)
        if struct.unpack("f", struct.pack("f", float(text)))[0] == f:
            break
    mantissa, exp = text.split("e")
    digits, exp = mantissa.lstrip("-").replace(".", "").rstrip("0") or "0", int(exp)
    sign = "-" if f < 0 else ""
    if exp < -4 or exp >= 6:  # shortest: %e when the exponent is < -4 or >= 6
        return "%s%s%s%se%s%02d" % (sign, digits[0], "." if len(digits) > 1 else "", digits[1:], "-" if exp < 0 else "+", abs(exp))
    if exp >= 0:
        whole, frac = (digits + "0" * (exp + 1))[:exp + 1], digits[exp + 1:]
        return sign + whole + ("." + frac if frac else "")
    return sign + "0." + "0" * (-exp - 1) + digits


def go_json_float(value):
    """The text encoding/json writes for a float64 ('f' between 1e-6 and 1e21, else 'e')."""
    a = abs(value)
    if a != 0 and (a < 1e-6 or a >= 1e21):
        text = repr(value).replace("e-0", "e-")
        return text if "e" in text else "%e" % value
    return format(Decimal(repr(value)).normalize(), "f")


def fold(name):
    """encoding/json's case folding of a field name, as far as it can match an ASCII field name."""
    return "".join(_FOLD.get(c, c.upper() if c < "\x80" else c) for c in name)


def _json_kind(value):
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, _JNum):
        return "number " + value
    if isinstance(value, str):
        return "string"
    return "object" if isinstance(value, dict) else "array"


class _Coercer(object):
    """YAML tree -> JSON (as sigs.k8s.io/yaml) -> spec model (as encoding/json); collects (rule, message) errors."""

    def __init__(self, absent=frozenset()):
        self.absent = absent  # (struct, field) pairs the reading library's specs-go does not have (readings.py)
        self.errors = []
        self.panics = []
        self.nil_entries = set()  # where each null entry of a pointer list stands ("<block>.<list>[<index>]")
        self.nodes = 0

    def error(self, rule, message):
        if len(self.errors) < MAX_ERRORS_PER_FILE:
            self.errors.append((rule, message))

    def coerce(self, value, typ, where):
        """The model of ``value`` decoded into ``typ`` (the whole spec when typ is (_OBJ, 'spec'))."""
        try:
            json_value = self.to_json(value, typ, where)
        except ValueError as exc:
            self.error("schema", "error converting YAML to JSON: %s" % exc)
            return None
        if json_value is None:
            return None
        return self.decode(json_value, typ, None, where)

    # ---- conversion (sigs.k8s.io/yaml convertToJSONableObject + json.Marshal)

    def to_json(self, value, target, where):
        self.nodes += 1
        if self.nodes > MAX_NODES_PER_FILE:
            raise _TooComplex()
        if isinstance(value, YMap):
            out = {}
            origin = {}
            for key, item in value:
                k = self._key_string(key)
                if k in out:
                    raise ValueError("%s: keys %r and %r both become %r (the library keeps one of them at random)"
                                     % (where or "spec", origin[k], key, k))
                origin[k] = key
                out[k] = self.to_json(item, self._field_target(target, k), "%s.%s" % (where, k) if where else k)
            return out
        if isinstance(value, list):
            sub = target[1] if isinstance(target, tuple) and target[0] == _LIST else None
            return [self.to_json(v, sub, "%s[%d]" % (where, i)) for i, v in enumerate(value)]
        if target == "str" and value is not None and not isinstance(value, str):
            value = ("true" if value else "false") if isinstance(value, bool) else (
                go_float32_g(value) if isinstance(value, float) else str(int(value)))
        if isinstance(value, float):
            if math.isnan(value) or math.isinf(value):
                raise ValueError("json: unsupported value: %s" % go_float32_g(value))
            return _JNum(go_json_float(value))
        if isinstance(value, int) and not isinstance(value, bool):
            return _JNum(str(int(value)))
        return value

    @staticmethod
    def _key_string(key):
        if isinstance(key, str):
            return key
        if isinstance(key, bool):
            return "true" if key else "false"
        if isinstance(key, UInt64) or key is None:
            raise ValueError("unsupported map key of type: %s, key: %r" % ("uint64" if key is not None else "<nil>", key))
        if isinstance(key, float):
            return {"+Inf": ".inf", "-Inf": "-.inf", "NaN": ".nan"}.get(go_float32_g(key), go_float32_g(key))
        return str(key)

    def _field(self, name, key):
        fields = [(f, t) for f, t in SCHEMA[name] if (name, f) not in self.absent]
        for f, t in fields:
            if f == key:
                return f, t
        folded = fold(key)
        for f, t in fields:
            if fold(f) == folded:
                return f, t
        return None, None

    def _field_target(self, target, key):
        if isinstance(target, tuple) and target[0] in (_OBJ, _PTR):
            return self._field(target[1], key)[1]
        if isinstance(target, tuple) and target[0] == _MAP:
            return target[1]
        return None

    # ---- decoding (encoding/json with DisallowUnknownFields)

    def type_error(self, value, typ, where):
        go = _go_type(typ)
        self.error("schema", "json: cannot unmarshal %s into Go struct field %s of type %s" % (_json_kind(value), where, go))

    def decode(self, value, typ, current, where):
        """The new value of a field of type ``typ`` now holding ``current`` after decoding JSON ``value``;
        _UNCHANGED when the field keeps its value, None when it becomes nil."""
        if not isinstance(typ, tuple):
            base = typ.lstrip("*")
            if value is None:
                return None if typ.startswith("*") else _UNCHANGED
            if base == "str":
                return value if isinstance(value, str) and not isinstance(value, _JNum) else self.type_error(value, typ, where)
            if base == "bool":
                return value if isinstance(value, bool) else self.type_error(value, typ, where)
            lo, hi = _INT_RANGES[base]
            if isinstance(value, _JNum) and _JSON_INT.match(value) and lo <= int(value) <= hi and not (lo == 0 and value.startswith("-")):
                return int(value)
            return self.type_error(value, typ, where)
        kind, sub = typ
        if value is None:
            return _UNCHANGED if kind == _OBJ else None
        if kind == _LIST:
            if not isinstance(value, list):
                return self.type_error(value, typ, where)
            out = []
            for i, item in enumerate(value):
                w = "%s[%d]" % (where, i)
                if item is None and isinstance(sub, tuple) and sub[0] == _PTR:
                    self.panics.append("%s: null entry: the reference library dereferences this nil %s in Validate and panics" % (w, sub[1]))
                    self.nil_entries.add(w)
                    continue
                new = self.decode(item, sub, None, w)
                if new is _UNCHANGED or new is None:
                    new = {} if isinstance(sub, tuple) else ("" if sub == "str" else 0)
                out.append(new)
            return out
        if kind == _MAP:
            if not isinstance(value, dict):
                return self.type_error(value, typ, where)
            out = dict(current or {})
            for k in sorted(value, key=_bytes):
                new = self.decode(value[k], sub, out.get(k), "%s.%s" % (where, k))
                out[k] = "" if new is _UNCHANGED or new is None else new
            return out
        if not isinstance(value, dict):
            return self.type_error(value, typ, where)
        return self._object(value, sub, dict(current) if isinstance(current, dict) else {}, where)

    def _object(self, value, name, out, where):
        for key in sorted(value, key=_bytes):
            field, typ = self._field(name, key)
            if field is None:
                self.error("schema", "%s: json: unknown field %r" % (where or "spec", key))
                continue
            w = "%s.%s" % (where, field) if where else field
            new = self.decode(value[key], typ, out.get(field), w)
            if value[key] is None:
                out.setdefault("__null__", []).append(field)
            if new is _UNCHANGED:
                continue
            if new is None:
                out.pop(field, None)
            else:
                out[field] = new
        return out


_UNCHANGED = object()
_GO_STRUCT = {"spec": "Spec", "device": "Device", "edits": "ContainerEdits", "deviceNode": "DeviceNode", "mount": "Mount",
              "hook": "Hook", "intelRdt": "IntelRdt", "netDevice": "LinuxNetDevice"}


def _go_type(typ):
    """The Go type of a schema type, as encoding/json names it in its errors."""
    if not isinstance(typ, tuple):
        return ("*" if typ.startswith("*") else "") + _GO_TYPE[typ.lstrip("*")]
    kind, sub = typ
    if kind == _LIST:
        return "[]" + _go_type(sub)
    if kind == _MAP:
        return "map[string]" + _go_type(sub)
    return ("*" if kind == _PTR else "") + "specs." + _GO_STRUCT[sub]


def _bytes(key):
    return key.encode("utf-8", "surrogatepass")


def _type_name(value):
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (dict, YMap)):
        return "mapping"
    if isinstance(value, list):
        return "list"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    return type(value).__name__
