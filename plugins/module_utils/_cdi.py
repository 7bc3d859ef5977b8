# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: the cdi layer of gpuprobe.layers. This file is not public API; it may change without notice.

Model, strict loading, validation, discovery, resolution, host-side checks and security audit of
Container Device Interface (CDI) specs, following the CDI specification (cncf-tags/container-device-
interface SPEC.md, spec versions 0.3.0 to 1.1.0) and the behaviour of its Go library (pkg/cdi):

- loading: every ``*.json``/``*.yaml`` file directly in each spec dir (sub-directories skipped), strict
  unmarshalling (unknown fields and duplicate keys rejected; field names matched case-insensitively
  as Go's encoding/json does), one error list per file, a bad file never hiding the good ones;
- validation: ``specs-go/version.go`` (known versions, minimum version for the fields used),
  ``pkg/parser`` (vendor, class and device name rules), the default validator (unique device names,
  at least one device, non-empty device edits, env ``KEY=VALUE``, device node type and cgroup
  permissions, hook names, mounts, intelRdt, netDevices) and Kubernetes annotation rules;
- resolution: ``pkg/cdi/cache.go`` (later dir = higher priority overrides; a device defined twice at
  the same priority is dropped and the conflict is reported against both files);
- merged edits: ``InjectDevices`` + ``ContainerEdits.Apply`` (spec-level edits once per spec before the
  first device of that spec, then the device's; env by key; device nodes by path, with type and
  major:minor filled from the host node when the spec omits them; mounts by container path, stably
  sorted by depth; additional GIDs without 0 and without duplicates).
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import posixpath
import re
import stat

try:
    import yaml
    HAS_YAML = True
    YAML_IMPORT_ERROR = None
except ImportError as _exc:  # pragma: no cover - depends on the target host
    yaml = None
    HAS_YAML = False
    YAML_IMPORT_ERROR = _exc

from ansible_collections.gpuprobe.layers.plugins.module_utils._result import (
    FAIL, NOT_RUN, PASS, WARN, LayerBuilder,
)

DEFAULT_SPEC_DIRS = ("/etc/cdi", "/var/run/cdi")
DEFAULT_KINDS = ("nvidia.com/gpu",)
DEFAULT_MAX_SPEC_SIZE = 1024 * 1024
MAX_ERRORS_PER_FILE = 50
MAX_NODES_PER_FILE = 200000

# specs-go/version.go: the released spec versions, oldest first. vEarliest (the floor of the minimum
# required version) is 0.3.0; 0.1.0 and 0.2.0 are still accepted as known versions.
KNOWN_VERSIONS = ("0.1.0", "0.2.0", "0.3.0", "0.4.0", "0.5.0", "0.6.0", "0.7.0", "0.8.0", "1.0.0", "1.1.0")
EARLIEST_VERSION = "0.3.0"
VALID_HOOK_NAMES = ("prestart", "createRuntime", "createContainer", "startContainer", "poststart", "poststop")
VALID_NODE_TYPES = ("", "b", "c", "u", "p")
NO_PERMISSIONS = "none"
ANNOTATIONS_MAX_BYTES = 256 * 1024  # Kubernetes TotalAnnotationSizeLimitB

CHECKS = {
    "cdi.discovery.spec_dirs": {
        "title": "at least one CDI spec directory exists (defaults /etc/cdi, /var/run/cdi, plus runtime-configured dirs)",
        "fail": "no CDI spec directory exists, so no runtime can resolve any CDI device",
        "next": "generate a spec (nvidia-ctk cdi generate --output=/var/run/cdi/nvidia.yaml) or fix spec_dirs",
    },
    "cdi.discovery.runtime_config": {
        "title": "the CDI spec dirs configured for containerd, CRI-O or podman could be read",
        "fail": "a runtime configuration file exists but could not be read; its cdi_spec_dirs are unknown",
        "next": "check the file's permissions and syntax",
    },
    "cdi.spec.parse": {
        "title": "the spec file can be read (size cap, not a dangling link) and parses as YAML/JSON into a mapping",
        "fail": "the runtime cannot load this file; devices it defines do not exist for the runtime",
        "next": "fix the file's syntax or regenerate it",
    },
    "cdi.spec.schema": {
        "title": "strict unmarshalling: no unknown fields, no duplicate keys, every field of the right type",
        "fail": "the reference library (yaml.UnmarshalStrict) rejects the whole file",
        "next": "remove the unknown field or fix its type; check the field against the spec version",
    },
    "cdi.spec.version": {
        "title": "cdiVersion is a known version and not lower than the minimum the fields used require",
        "fail": "the runtime rejects the file (invalid version, or 'the spec version must be at least vX')",
        "next": "raise cdiVersion to the minimum required version shown, or regenerate the spec",
    },
    "cdi.spec.kind": {
        "title": "kind is vendor/class with valid vendor and class names",
        "fail": "the runtime rejects the file: its devices cannot be named",
        "next": "fix kind to the form vendor.example/class",
    },
    "cdi.spec.devices": {
        "title": "at least one device; device names valid and unique; every device has non-empty container edits",
        "fail": "the runtime rejects the whole file",
        "next": "fix the device list",
    },
    "cdi.spec.edits": {
        "title": "container edits are valid: env KEY=VALUE, device node path/type/permissions, hook names and absolute paths, mounts, intelRdt, netDevices",
        "fail": "the runtime rejects the whole file",
        "next": "fix the edit named in the error",
    },
    "cdi.spec.annotations": {
        "title": "spec and device annotations follow the Kubernetes annotation rules",
        "fail": "the runtime rejects the whole file",
        "next": "fix the annotation key or value",
    },
    "cdi.spec.symlink": {
        "title": "the spec file is a regular file, not a symbolic link",
        "fail": "the spec's content is controlled by the link target, outside the spec directory",
        "next": "replace the link with the file, or audit who can write the target",
    },
    "cdi.resolve.kind": {
        "title": "a valid spec provides each requested kind (vendor/class)",
        "fail": "no CDI spec provides the kind: a container asking for it cannot start",
        "next": "generate the vendor's spec (nvidia-ctk cdi generate) into a spec dir the runtime reads",
    },
    "cdi.resolve.device": {
        "title": "each requested qualified device name resolves to exactly one device",
        "fail": "the runtime reports 'unresolvable CDI devices' and the container does not start",
        "next": "list the devices with nvidia-ctk cdi list; request one of them",
    },
    "cdi.resolve.all_expanded": {
        "title": "vendor/class=all names a device defined as 'all' (else it was expanded here to every device of the kind)",
        "fail": "no device named 'all' exists: a runtime given vendor/class=all refuses it",
        "next": "request explicit device names, or regenerate the spec with an 'all' device",
    },
    "cdi.resolve.conflict": {
        "title": "no device is defined by two spec files of the same priority",
        "fail": "the device is dropped (from both files) and cannot be injected",
        "next": "remove one of the two files; keep one generator per kind",
    },
    "cdi.host.device_node": {
        "title": "each device node of the merged edits exists on the host and is a char/block device",
        "fail": "the runtime cannot inject the node (stat failed): e.g. a spec on a node without the GPU or driver",
        "next": "check the host layer (driver loaded? /dev/nvidia* created?), then regenerate the spec",
    },
    "cdi.host.device_number": {
        "title": "a declared type/major:minor equals the host node's",
        "fail": "the container gets a node and cgroup rule for a different device than the host path",
        "next": "regenerate the spec: device numbers changed (driver reinstall, other GPU)",
    },
    "cdi.host.host_layer_match": {
        "title": "the node's major:minor equals what the host layer saw",
        "fail": "the device changed between the host and cdi checks, or the host layer saw another device",
        "next": "re-run both layers; compare the host layer's device_nodes evidence",
    },
    "cdi.host.mount_source": {
        "title": "each bind mount's hostPath exists on the host",
        "fail": "the runtime cannot bind-mount a missing source: the container fails to start",
        "next": "regenerate the spec against the installed driver",
    },
    "cdi.host.library_version": {
        "title": "a driver library whose file name carries a version carries the running driver's version",
        "fail": "stale spec: it points at a library of another driver (typically the one before an upgrade)",
        "next": "regenerate the spec after every driver upgrade (nvidia-ctk cdi generate)",
    },
    "cdi.host.hook": {
        "title": "each hook exists, is executable and owned by root",
        "fail": "the runtime cannot run the hook (container creation fails), or a non-root user owns code run as root",
        "next": "install the hook (e.g. nvidia-ctk) at the path the spec names",
    },
    "cdi.nvidia.nvidiactl": {
        "title": "NVIDIA: the merged edits include /dev/nvidiactl",
        "fail": "without /dev/nvidiactl the driver cannot be opened inside the container (cuInit fails)",
        "next": "add /dev/nvidiactl to the spec (nvidia-ctk cdi generate adds it)",
    },
    "cdi.nvidia.uvm": {
        "title": "NVIDIA: the merged edits include /dev/nvidia-uvm",
        "fail": "observed: cuInit returns CUDA_ERROR_UNKNOWN (999) while NVML-only tools still work",
        "next": "add /dev/nvidia-uvm (and nvidia-uvm-tools) to the spec; load nvidia-uvm on the host",
    },
    "cdi.nvidia.ptxjit": {
        "title": "NVIDIA: a libnvidia-ptxjitcompiler mount is present",
        "fail": "observed: cuInit and context work, PTX load fails with CUDA_ERROR_JIT_COMPILER_NOT_FOUND (221)",
        "next": "mount libnvidia-ptxjitcompiler.so.1 from the driver root",
    },
    "cdi.nvidia.cgroup_write": {
        "title": "NVIDIA: the device nodes' cgroup permissions include 'w'",
        "fail": "observed: nodes visible but open(O_RDWR) is denied; cuInit returns CUDA_ERROR_NO_DEVICE (100)",
        "next": "drop the permissions field (default rwm) from the NVIDIA device nodes",
    },
    "cdi.nvidia.libcuda": {
        "title": "NVIDIA: libcuda is mounted from the driver, not the CUDA toolkit's stub",
        "fail": "the stub libcuda makes cuInit return CUDA_ERROR_STUB_LIBRARY (34); without libcuda the image must bring its own",
        "next": "mount libcuda.so.<driver version> from the driver root",
    },
    "cdi.security.spec_file_writable": {
        "title": "spec files are owned by root and not writable by group/other",
        "fail": "anyone who can write the spec can inject host mounts and devices into GPU containers",
        "next": "chown root:root and chmod 0644 the spec file",
    },
    "cdi.security.spec_dir_writable": {
        "title": "spec directories are owned by root and not writable by group/other",
        "fail": "anyone who can write the directory can add a spec that injects host mounts into containers",
        "next": "chown root:root and chmod 0755 the spec directory",
    },
    "cdi.security.sensitive_mount": {
        "title": "no mount of a sensitive host path (/, /etc, /root, /boot, /dev, runtime sockets, /proc or /sys read-write)",
        "fail": "the spec gives containers control of the host",
        "next": "remove the mount from the spec; find out who wrote it",
    },
    "cdi.security.hook_writable": {
        "title": "hooks and their directories are not writable by anyone but root",
        "fail": "a non-root user can replace code that the runtime runs as root",
        "next": "chown root:root and chmod 0755 the hook and its directory",
    },
}

# Consequences observed on a real H200 (DESIGN.md), used in WARN details.
CONSEQUENCES = {
    "uvm": "cuInit -> CUDA_ERROR_UNKNOWN (999)",
    "ptxjit": "PTX load -> CUDA_ERROR_JIT_COMPILER_NOT_FOUND (221)",
    "cgroup": "cuInit -> CUDA_ERROR_NO_DEVICE (100); open(O_RDWR) -> EPERM",
    "nvidiactl": "cuInit fails: the driver control node is absent",
    "stub": "cuInit -> CUDA_ERROR_STUB_LIBRARY (34)",
}

# ---------------------------------------------------------------------------------------------------
# Names (pkg/parser)


def _is_letter(c):
    return ("A" <= c <= "Z") or ("a" <= c <= "z")


def _is_alnum(c):
    return _is_letter(c) or ("0" <= c <= "9")


def validate_vendor_or_class(name, what):
    """None when valid, else the error text (pkg/parser validateVendorOrClassName)."""
    if not name:
        return "invalid %s. empty name" % what
    if not _is_letter(name[0]):
        return "invalid %s. %r, should start with letter" % (what, name)
    for c in name[1:-1]:
        if not (_is_alnum(c) or c in "_-."):
            return "invalid %s. invalid character %r in name %r" % (what, c, name)
    if not _is_alnum(name[-1]):
        return "invalid %s. %r, should end with a letter or digit" % (what, name)
    return None


def validate_device_name(name):
    """None when valid, else the error text (pkg/parser ValidateDeviceName)."""
    if not name:
        return "invalid (empty) device name"
    if not _is_alnum(name[0]):
        return "invalid device name %r, should start with a letter or digit" % name
    for c in name[1:-1]:
        if not (_is_alnum(c) or c in "_-.:"):
            return "invalid character %r in device name %r" % (c, name)
    if not _is_alnum(name[-1]):
        return "invalid device name %r, should end with a letter or digit" % name
    return None


def parse_qualifier(kind):
    """(vendor, class); vendor is '' when kind is not vendor/class (pkg/parser ParseQualifier)."""
    parts = (kind or "").split("/", 1)
    if len(parts) != 2 or not parts[0] or not parts[1]:
        return "", kind or ""
    return parts[0], parts[1]


def parse_qualified_name(device):
    """Split vendor/class=name; raises ValueError with the reason when it is not a valid qualified name."""
    if not device or device.startswith("/") or "=" not in device:
        raise ValueError("unqualified device %r, expected vendor/class=name" % (device,))
    kind, name = device.split("=", 1)
    vendor, klass = parse_qualifier(kind)
    if not vendor:
        raise ValueError("unqualified device %r, missing vendor" % device)
    if not name:
        raise ValueError("unqualified device %r, missing device name" % device)
    for err in (validate_vendor_or_class(vendor, "vendor"), validate_vendor_or_class(klass, "class"),
                validate_device_name(name)):
        if err:
            raise ValueError("invalid device %r: %s" % (device, err))
    return vendor, klass, name


# ---------------------------------------------------------------------------------------------------
# Versions (specs-go/version.go)


def _vkey(version):
    return tuple(int(p) for p in version.split("."))


def normalize_version(value):
    """The version without an optional leading 'v' (the library accepts both), or None when unknown."""
    if not isinstance(value, str):
        return None
    v = value[1:] if value.startswith("v") else value
    return v if v in KNOWN_VERSIONS else None


def _edits_list(spec):
    edits = [(d.get("containerEdits") or {}) for d in (spec.get("devices") or []) if isinstance(d, dict)]
    edits.append(spec.get("containerEdits") or {})
    return edits


def minimum_version(spec):
    """(minimum required version, [reasons]) for a coerced spec, as specs-go MinimumRequiredVersion."""
    reasons = []
    devices = [d for d in (spec.get("devices") or []) if isinstance(d, dict)]
    edits = _edits_list(spec)
    # 1.1.0: netDevices, intelRdt.schemata / enableMonitoring
    for e in edits:
        if e.get("netDevices"):
            reasons.append(("1.1.0", "netDevices"))
        rdt = e.get("intelRdt")
        if isinstance(rdt, dict) and (rdt.get("schemata") is not None or rdt.get("enableMonitoring")):
            reasons.append(("1.1.0", "intelRdt.schemata/enableMonitoring"))
    # 0.7.0: intelRdt, additionalGids
    for e in edits:
        if e.get("intelRdt") is not None:
            reasons.append(("0.7.0", "intelRdt"))
        if e.get("additionalGids"):
            reasons.append(("0.7.0", "additionalGids"))
    # 0.6.0: annotations (spec or device), a dot in the class
    if spec.get("annotations") or any(d.get("annotations") for d in devices):
        reasons.append(("0.6.0", "annotations"))
    kind = spec.get("kind") or ""
    if "/" in kind and "." in kind.split("/", 1)[1]:
        reasons.append(("0.6.0", "'.' in the class of kind"))
    # 0.5.0: device name starting with a digit, deviceNodes[].hostPath
    for d in devices:
        name = d.get("name") or ""
        if name and "0" <= name[0] <= "9":
            reasons.append(("0.5.0", "device name starting with a digit (%s)" % name))
    for e in edits:
        if any(isinstance(n, dict) and n.get("hostPath") for n in (e.get("deviceNodes") or [])):
            reasons.append(("0.5.0", "deviceNodes[].hostPath"))
    # 0.4.0: mounts[].type
    for e in edits:
        if any(isinstance(m, dict) and m.get("type") for m in (e.get("mounts") or [])):
            reasons.append(("0.4.0", "mounts[].type"))
    minimum = EARLIEST_VERSION
    for v, _why in reasons:
        if _vkey(v) > _vkey(minimum):
            minimum = v
    seen = []
    for v, why in reasons:
        text = "%s needs %s" % (why, v)
        if text not in seen:
            seen.append(text)
    return minimum, seen


# ---------------------------------------------------------------------------------------------------
# Strict loading: schema coercion (specs-go/config.go, unmarshalled with sigs.k8s.io/yaml UnmarshalStrict)

_OBJ = "obj"
_LIST = "list"
_MAP = "map"
SCHEMA = {
    "spec": (("cdiVersion", "str"), ("kind", "str"), ("annotations", (_MAP, "str")),
             ("devices", (_LIST, (_OBJ, "device"))), ("containerEdits", (_OBJ, "edits"))),
    "device": (("name", "str"), ("annotations", (_MAP, "str")), ("containerEdits", (_OBJ, "edits"))),
    "edits": (("env", (_LIST, "str")), ("deviceNodes", (_LIST, (_OBJ, "deviceNode"))),
              ("netDevices", (_LIST, (_OBJ, "netDevice"))), ("hooks", (_LIST, (_OBJ, "hook"))),
              ("mounts", (_LIST, (_OBJ, "mount"))), ("intelRdt", (_OBJ, "intelRdt")),
              ("additionalGids", (_LIST, "uint32"))),
    "deviceNode": (("path", "str"), ("hostPath", "str"), ("type", "str"), ("major", "int64"), ("minor", "int64"),
                   ("fileMode", "uint32"), ("permissions", "str"), ("uid", "uint32"), ("gid", "uint32")),
    "mount": (("hostPath", "str"), ("containerPath", "str"), ("options", (_LIST, "str")), ("type", "str")),
    "hook": (("hookName", "str"), ("path", "str"), ("args", (_LIST, "str")), ("env", (_LIST, "str")),
             ("timeout", "int")),
    # enableCMT/enableMBM exist up to 1.0.0; schemata/enableMonitoring from 1.1.0 (checked by version).
    "intelRdt": (("closID", "str"), ("l3CacheSchema", "str"), ("memBwSchema", "str"), ("schemata", (_LIST, "str")),
                 ("enableMonitoring", "bool"), ("enableCMT", "bool"), ("enableMBM", "bool")),
    "netDevice": (("hostInterfaceName", "str"), ("name", "str")),
}
_INT_RANGES = {"int64": (-(2 ** 63), 2 ** 63 - 1), "uint32": (0, 2 ** 32 - 1), "int": (-(2 ** 63), 2 ** 63 - 1)}


class _Coercer(object):
    """Turns a parsed YAML/JSON tree into the spec model, collecting (rule, message) errors."""

    def __init__(self):
        self.errors = []
        self.nodes = 0

    def error(self, rule, message):
        if len(self.errors) < MAX_ERRORS_PER_FILE:
            self.errors.append((rule, message))

    def coerce(self, value, typ, where):
        self.nodes += 1
        if self.nodes > MAX_NODES_PER_FILE:
            raise _TooComplex()
        if value is None:
            return None
        if typ == "str":
            return self._scalar_str(value, where)
        if typ in _INT_RANGES:
            if isinstance(value, bool) or not isinstance(value, int):
                self.error("schema", "%s: expected an integer, got %s" % (where, _type_name(value)))
                return None
            lo, hi = _INT_RANGES[typ]
            if not lo <= value <= hi:
                self.error("schema", "%s: %d out of range for %s" % (where, value, typ))
                return None
            return value
        if typ == "bool":
            if not isinstance(value, bool):
                self.error("schema", "%s: expected a boolean, got %s" % (where, _type_name(value)))
                return None
            return value
        kind, sub = typ
        if kind == _LIST:
            if not isinstance(value, list):
                self.error("schema", "%s: expected a list, got %s" % (where, _type_name(value)))
                return None
            out = []
            for i, item in enumerate(value):
                if item is None and isinstance(sub, tuple):
                    self.error("schema", "%s[%d]: null entry" % (where, i))
                    continue
                coerced = self.coerce(item, sub, "%s[%d]" % (where, i))
                if coerced is not None:
                    out.append(coerced)
            return out
        if kind == _MAP:
            if not isinstance(value, dict):
                self.error("schema", "%s: expected a mapping, got %s" % (where, _type_name(value)))
                return None
            out = {}
            for k, v in value.items():
                key = self._scalar_str(k, where)
                if key is None:
                    continue
                val = self.coerce(v, sub, "%s.%s" % (where, key))
                out[key] = "" if val is None else val
            return out
        return self._object(value, sub, where)

    def _scalar_str(self, value, where):
        # sigs.k8s.io/yaml converts a YAML scalar to the string a string-typed field expects.
        if isinstance(value, str):
            return value
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, int):
            return str(value)
        if isinstance(value, float):
            return repr(value)
        self.error("schema", "%s: expected a string, got %s" % (where, _type_name(value)))
        return None

    def _object(self, value, name, where):
        if not isinstance(value, dict):
            self.error("schema", "%s: expected a mapping, got %s" % (where, _type_name(value)))
            return None
        fields = SCHEMA[name]
        by_lower = dict((f.lower(), (f, t)) for f, t in fields)
        out = {}
        seen = {}
        for raw_key, raw_value in value.items():
            key = raw_key if isinstance(raw_key, str) else str(raw_key)
            match = by_lower.get(key.lower())
            if match is None:
                self.error("schema", "%s: unknown field %r" % (where, key))
                continue
            field, typ = match
            if field in seen:
                self.error("schema", "%s: field %r given twice (as %r and %r)" % (where, field, seen[field], key))
                continue
            seen[field] = key
            coerced = self.coerce(raw_value, typ, "%s.%s" % (where, field) if where else field)
            if coerced is not None:
                out[field] = coerced
            elif raw_value is None:
                out.setdefault("__null__", []).append(field)
        return out


class _TooComplex(Exception):
    pass


def _type_name(value):
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, dict):
        return "mapping"
    if isinstance(value, list):
        return "list"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    return type(value).__name__


if HAS_YAML:
    # libyaml's parser when PyYAML was built with it (benchmarks/bench_cpu.py: parsing dominates the layer)
    _SafeLoaderBase = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class _StrictLoader(_SafeLoaderBase):  # pylint: disable=too-many-ancestors
        """Safe loader that refuses duplicate mapping keys (UnmarshalStrict does)."""

    def _construct_mapping(loader, node, deep=False):
        loader.flatten_mapping(node)
        out = {}
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=deep)
            try:
                hash(key)
            except TypeError:
                raise yaml.constructor.ConstructorError(None, None, "unhashable mapping key", key_node.start_mark)
            if key in out:
                raise yaml.constructor.ConstructorError(None, None, "duplicate key %r" % (key,), key_node.start_mark)
            out[key] = loader.construct_object(value_node, deep=deep)
        return out

    _StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _json_no_duplicates(pairs):
    out = {}
    for k, v in pairs:
        if k in out:
            raise ValueError("duplicate key %r" % k)
        out[k] = v
    return out


def parse_bytes(data, ext=".yaml"):
    """Parse spec bytes into a Python tree. Returns (tree, error): error is a string or None.

    ``.json`` files are tried as JSON first; the reference library reads both with a YAML parser, so a
    ``.json`` file that is YAML is still accepted.
    """
    if not HAS_YAML:
        return None, "PyYAML is not installed: %s" % YAML_IMPORT_ERROR
    if ext == ".json":
        try:
            return json.loads(data.decode("utf-8"), object_pairs_hook=_json_no_duplicates), None
        except (ValueError, UnicodeDecodeError, RecursionError):
            pass
    try:
        return yaml.load(data, Loader=_StrictLoader), None  # nosec B506 - a SafeLoader subclass
    except Exception as exc:  # pylint: disable=broad-except  # PyYAML raises many kinds on hostile bytes
        text = str(exc).replace("\n", " ").strip()
        return None, "failed to unmarshal CDI Spec: %s%s" % (type(exc).__name__, ": " + text[:300] if text else "")


# ---------------------------------------------------------------------------------------------------
# Validation (default validator, container-edits.go, annotations)

_DNS1123_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN = re.compile(r"^%s(\.%s)*$" % (_DNS1123_LABEL, _DNS1123_LABEL))
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")


def annotation_key_error(key):
    """Kubernetes IsQualifiedName on the lower-cased key (ValidateAnnotations)."""
    k = key.lower()
    parts = k.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            return "prefix part must be non-empty"
        if len(prefix) > 253 or not _DNS1123_SUBDOMAIN.match(prefix):
            return "prefix part must be a lowercase RFC 1123 subdomain"
    else:
        return "a qualified name must consist of alphanumeric characters, '-', '_' or '.', with an optional DNS subdomain prefix and '/'"
    if not name:
        return "name part must be non-empty"
    if len(name) > 63:
        return "name part must be no more than 63 characters"
    if not _QUALIFIED_NAME.match(name):
        return "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
    return None


def validate_annotations(annotations, owner):
    errors = []
    total = 0
    for key in sorted(annotations or {}):
        value = annotations[key]
        err = annotation_key_error(key)
        if err:
            errors.append("%s.annotations: invalid key %r: %s" % (owner, key, err))
        total += len(key) + len(value)
    if total > ANNOTATIONS_MAX_BYTES:
        errors.append("%s.annotations: may not be more than %d bytes" % (owner, ANNOTATIONS_MAX_BYTES))
    return errors


def validate_env(env, where):
    return [("edits", "%s: invalid environment variable %r (expected KEY=VALUE)" % (where, v)) for v in (env or []) if v.find("=") <= 0]


def validate_edits(edits, where, version):
    """(rule, message) errors of one containerEdits block (may be empty); ``version`` is the spec's
    normalized cdiVersion (fields that exist only in some versions are 'version' errors)."""
    errors = validate_env(edits.get("env"), where + ".env")
    for i, node in enumerate(edits.get("deviceNodes") or []):
        w = "%s.deviceNodes[%d]" % (where, i)
        path = node.get("path") or ""
        if not path:
            errors.append(("edits", "%s: invalid (empty) device path" % w))
        if node.get("type", "") not in VALID_NODE_TYPES:
            errors.append(("edits", "%s: device %r: invalid type %r (b, c, u or p)" % (w, path, node.get("type"))))
        if (node.get("major") or 0) < 0 or (node.get("minor") or 0) < 0:
            errors.append(("edits", "%s: device %r: invalid (negative) device number %s:%s" % (w, path, node.get("major"), node.get("minor"))))
        perms = node.get("permissions", "")
        if perms not in ("", NO_PERMISSIONS) and perms.strip("rwm") != "":
            errors.append(("edits", "%s: device %r: invalid permissions %r (any of r, w, m)" % (w, path, perms)))
    for i, hook in enumerate(edits.get("hooks") or []):
        w = "%s.hooks[%d]" % (where, i)
        name = hook.get("hookName", "")
        if name not in VALID_HOOK_NAMES:
            errors.append(("edits", "%s: invalid hook name %r (one of %s)" % (w, name, ", ".join(VALID_HOOK_NAMES))))
        path = hook.get("path") or ""
        if not path:
            errors.append(("edits", "%s: invalid hook %r with empty path" % (w, name)))
        elif not path.startswith("/"):
            errors.append(("edits", "%s: hook %r path %r is not absolute (OCI hooks need absolute paths)" % (w, name, path)))
        errors.extend(validate_env(hook.get("env"), w + ".env"))
    for i, mount in enumerate(edits.get("mounts") or []):
        w = "%s.mounts[%d]" % (where, i)
        if not mount.get("hostPath"):
            errors.append(("edits", "%s: invalid mount, empty host path" % w))
        if not mount.get("containerPath"):
            errors.append(("edits", "%s: invalid mount, empty container path" % w))
    rdt = edits.get("intelRdt")
    if rdt is not None:
        closid = rdt.get("closID", "")
        if closid != "/" and (len(closid) >= 4096 or closid in (".", "..") or "/" in closid or "\n" in closid):
            errors.append(("edits", "%s.intelRdt: invalid ClosID %r" % (where, closid)))
        if version and _vkey(version) >= _vkey("1.1.0"):
            for field in ("enableCMT", "enableMBM"):
                if field in rdt:
                    errors.append(("version", "%s.intelRdt.%s is not valid for CDI spec version %s" % (where, field, version)))
        elif version:
            for field in ("schemata", "enableMonitoring"):
                if field in rdt:
                    errors.append(("version", "%s.intelRdt.%s requires CDI spec version at least 1.1.0" % (where, field)))
    if version and _vkey(version) < _vkey("1.1.0") and ("netDevices" in edits or "netDevices" in edits.get("__null__", [])):
        errors.append(("version", "%s.netDevices requires CDI spec version at least 1.1.0" % where))
    host_seen, name_seen = {}, {}
    for i, dev in enumerate(edits.get("netDevices") or []):
        w = "%s.netDevices[%d]" % (where, i)
        host, name = dev.get("hostInterfaceName", ""), dev.get("name", "")
        if not host:
            errors.append(("edits", "%s: invalid linux net device, empty hostInterfaceName" % w))
        if not name:
            errors.append(("edits", "%s: invalid linux net device, empty name" % w))
        if host and host in host_seen:
            errors.append(("edits", "%s: duplicate hostInterfaceName %r" % (w, host)))
        if name and name in name_seen:
            errors.append(("edits", "%s: duplicate name %r" % (w, name)))
        host_seen[host] = name
        name_seen[name] = host
    return errors


def _edits_empty(edits):
    return not any(edits.get(k) for k in ("env", "deviceNodes", "hooks", "mounts", "additionalGids", "netDevices")) \
        and edits.get("intelRdt") is None


def validate_spec(spec):
    """All rule violations of a coerced spec, as a list of (rule, message); rules: version, kind, devices,
    edits, annotations."""
    errors = []
    raw_version = spec.get("cdiVersion")
    version = normalize_version(raw_version)
    minimum, reasons = minimum_version(spec)
    if raw_version is None:
        errors.append(("version", "cdiVersion is missing"))
    elif version is None:
        errors.append(("version", "invalid version %r (known: %s)" % (raw_version, ", ".join(KNOWN_VERSIONS))))
    elif _vkey(minimum) > _vkey(version):
        errors.append(("version", "the spec version must be at least v%s (%s)" % (minimum, "; ".join(reasons))))
    kind = spec.get("kind") or ""
    vendor, klass = parse_qualifier(kind)
    for err in (validate_vendor_or_class(vendor, "vendor"), validate_vendor_or_class(klass, "class")):
        if err:
            errors.append(("kind", "kind %r: %s" % (kind, err)))
    errors.extend(("annotations", e) for e in validate_annotations(spec.get("annotations"), kind or "spec"))
    errors.extend(validate_edits(spec.get("containerEdits") or {}, "containerEdits", version))
    devices = spec.get("devices") or []
    if not devices:
        errors.append(("devices", "invalid spec, no devices"))
    seen = set()
    for i, dev in enumerate(devices):
        name = dev.get("name", "")
        where = "devices[%d]" % i
        err = validate_device_name(name)
        if err:
            errors.append(("devices", "%s: %s" % (where, err)))
        if name in seen:
            errors.append(("devices", "invalid spec, multiple device %r" % name))
        seen.add(name)
        errors.extend(("annotations", e) for e in validate_annotations(dev.get("annotations"), "%s=%s" % (kind, name)))
        edits = dev.get("containerEdits") or {}
        if _edits_empty(edits):
            errors.append(("devices", "%s (%r): empty container edits" % (where, name)))
        errors.extend(validate_edits(edits, where + ".containerEdits", version))
    return errors


RULES = ("parse", "schema", "version", "kind", "devices", "edits", "annotations")
_RULE_CHECK = {"parse": "cdi.spec.parse", "schema": "cdi.spec.schema", "version": "cdi.spec.version",
               "kind": "cdi.spec.kind", "devices": "cdi.spec.devices", "edits": "cdi.spec.edits",
               "annotations": "cdi.spec.annotations"}


def load_spec_data(data, ext=".yaml"):
    """Parse + coerce + validate spec bytes. Returns (spec or None, [(rule, message)], model or None).

    The spec is returned only when there is no error at all (the reference library drops the whole file
    on any error); ``model`` is what could be coerced, for reporting kind/version/devices of a bad file."""
    tree, err = parse_bytes(data, ext)
    if err:
        return None, [("parse", err)], None
    if tree is None:
        return None, [("parse", "failed to parse CDI Spec, no Spec data")], None
    if not isinstance(tree, dict):
        return None, [("parse", "failed to unmarshal CDI Spec: top level is a %s, not a mapping" % _type_name(tree))], None
    coercer = _Coercer()
    try:
        model = coercer.coerce(tree, (_OBJ, "spec"), "")
    except _TooComplex:
        return None, [("parse", "spec too complex (more than %d nodes)" % MAX_NODES_PER_FILE)], None
    errors = list(coercer.errors)
    errors.extend(validate_spec(model))
    return (None if errors else model), errors[:MAX_ERRORS_PER_FILE], model


# ---------------------------------------------------------------------------------------------------
# Files and directories


def under_root(root, path):
    """``path`` as seen from ``root`` (the host filesystem view)."""
    if not root or root == "/":
        return path
    return posixpath.join(root, path.lstrip("/"))


def _mode_info(st):
    return {"mode": "%04o" % stat.S_IMODE(st.st_mode), "uid": st.st_uid, "gid": st.st_gid}


def load_spec_file(path, max_size=DEFAULT_MAX_SPEC_SIZE):
    """Load one spec file. Returns its record: path, ok, errors[], error, rule_errors{rule: [..]}, kind,
    cdiVersion, min_version, devices, symlink, mode/uid/gid, size, sha256, spec (when ok)."""
    rec = {"path": path, "ok": False, "errors": [], "error": None, "rule_errors": {}, "kind": None,
           "cdiVersion": None, "min_version": None, "devices": [], "symlink": None, "mode": None,
           "uid": None, "gid": None, "size": None, "sha256": None, "spec": None}

    def fail(rule, message):
        rec["rule_errors"].setdefault(rule, []).append(message)
        rec["errors"].append(message)

    try:
        lst = os.lstat(path)
        if stat.S_ISLNK(lst.st_mode):
            rec["symlink"] = os.readlink(path)
        st = os.stat(path)
    except OSError as exc:
        fail("parse", "cannot stat: %s" % (exc.strerror or exc))
        rec["error"] = rec["errors"][0]
        return rec
    rec.update(_mode_info(st))
    rec["size"] = st.st_size
    if not stat.S_ISREG(st.st_mode):
        fail("parse", "not a regular file")
    elif st.st_size > max_size:
        fail("parse", "file is %d bytes, larger than the %d-byte cap" % (st.st_size, max_size))
    else:
        try:
            with open(path, "rb") as f:
                data = f.read(max_size + 1)
        except OSError as exc:
            fail("parse", "failed to read CDI Spec: %s" % (exc.strerror or exc))
            data = None
        if data is not None:
            if len(data) > max_size:
                fail("parse", "file is larger than the %d-byte cap" % max_size)
            else:
                rec["sha256"] = hashlib.sha256(data).hexdigest()
                spec, errors, partial = load_spec_data(data, os.path.splitext(path)[1])
                for rule, message in errors:
                    fail(rule, message)
                model = spec or partial or {}
                if isinstance(model.get("kind"), str):
                    rec["kind"] = model.get("kind")
                rec["cdiVersion"] = model.get("cdiVersion")
                if model:
                    rec["min_version"] = minimum_version(model)[0]
                rec["devices"] = [d.get("name") for d in (model.get("devices") or []) if isinstance(d, dict)]
                rec["spec"] = spec
    rec["ok"] = not rec["errors"]
    rec["error"] = rec["errors"][0] if rec["errors"] else None
    return rec


def list_spec_files(directory):
    """Spec files directly in ``directory`` (sorted, like filepath.Walk), sub-directories skipped."""
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return []
    out = []
    for name in names:
        if os.path.splitext(name)[1] not in (".json", ".yaml"):
            continue
        full = os.path.join(directory, name)
        if os.path.isdir(full) and not os.path.islink(full):
            continue
        out.append(full)
    return out


_TOML_DIRS = re.compile(r"^\s*cdi_spec_dirs\s*=\s*\[(.*?)\]", re.S | re.M)
_TOML_STR = re.compile(r"\"((?:[^\"\\]|\\.)*)\"|'([^']*)'")


def parse_cdi_spec_dirs(text):
    """The last ``cdi_spec_dirs = [...]`` list of a TOML file (containerd, CRI-O, containers.conf), or None."""
    found = None
    for match in _TOML_DIRS.finditer(text):
        body = re.sub(r"#[^\n]*", "", match.group(1))
        found = [a if a else b for a, b in _TOML_STR.findall(body)]
    return found


RUNTIME_CONFIGS = {
    "containerd": ("/etc/containerd/config.toml",),
    "crio": ("/etc/crio/crio.conf", "/etc/crio/crio.conf.d/*.conf"),
    "podman": ("/usr/share/containers/containers.conf", "/etc/containers/containers.conf",
               "/etc/containers/containers.conf.d/*.conf"),
}


def discover_runtime_dirs(root="/", environ=None):
    """{runtime: {files: [...], spec_dirs: [...] or None, errors: [...]}} from the runtimes' config files
    that exist (later files override earlier ones, as drop-ins do). CONTAINERS_CONF is honoured for podman."""
    environ = os.environ if environ is None else environ
    out = {}
    for runtime, patterns in RUNTIME_CONFIGS.items():
        files = []
        for pattern in patterns:
            files.extend(sorted(glob.glob(under_root(root, pattern))))
        if runtime == "podman" and environ.get("CONTAINERS_CONF"):
            files.append(environ["CONTAINERS_CONF"])
        info = {"files": [], "spec_dirs": None, "errors": []}
        for path in files:
            if not os.path.isfile(path):
                continue
            info["files"].append(path)
            try:
                with open(path, "r", encoding="utf-8", errors="replace") as f:
                    dirs = parse_cdi_spec_dirs(f.read(DEFAULT_MAX_SPEC_SIZE))
            except OSError as exc:
                info["errors"].append("%s: %s" % (path, exc.strerror or exc))
                continue
            if dirs is not None:
                info["spec_dirs"] = dirs
        if info["files"]:
            out[runtime] = info
    return out


# ---------------------------------------------------------------------------------------------------
# Resolution (cache.go)


def build_registry(files):
    """Devices from loaded files (each with 'priority'), scanned in priority order like Cache.refresh.

    Returns (devices {qualified: file record}, conflicts [{device, files}], overrides [{device, winner, overridden}]).
    """
    devices = {}
    conflicts = {}
    overrides = []
    for rec in sorted((r for r in files if r["ok"]), key=lambda r: r["priority"]):
        spec = rec["spec"]
        for dev in spec["devices"]:
            qualified = "%s=%s" % (spec["kind"], dev["name"])
            other = devices.get(qualified)
            if other is not None:
                if rec["priority"] > other["priority"]:
                    overrides.append({"device": qualified, "winner": rec["path"], "overridden": other["path"]})
                elif rec["priority"] == other["priority"]:
                    message = "conflicting device %r (specs %r, %r)" % (qualified, rec["path"], other["path"])
                    for r in (rec, other):
                        r.setdefault("conflicts", []).append(message)
                    entry = conflicts.setdefault(qualified, {"device": qualified, "files": []})
                    for p in (other["path"], rec["path"]):
                        if p not in entry["files"]:
                            entry["files"].append(p)
                    continue
                else:
                    continue
            devices[qualified] = rec
    for name in conflicts:
        devices.pop(name, None)
    return devices, list(conflicts.values()), overrides


def _device(rec, name):
    for dev in rec["spec"]["devices"]:
        if dev["name"] == name:
            return dev
    return None


def select_devices(registry, requested, kinds):
    """(resolved qualified names, unresolved [{device, reason}], expansions [{request, devices}])."""
    resolved, unresolved, expansions = [], [], []
    if requested:
        for req in requested:
            try:
                vendor, klass, name = parse_qualified_name(req)
            except ValueError as exc:
                unresolved.append({"device": req, "reason": str(exc)})
                continue
            kind = "%s/%s" % (vendor, klass)
            if req in registry:
                resolved.append(req)
            elif name == "all":
                members = sorted(q for q in registry if q.split("=", 1)[0] == kind)
                if members:
                    expansions.append({"request": req, "devices": members})
                    resolved.extend(members)
                else:
                    unresolved.append({"device": req, "reason": "no device of kind %s" % kind})
            else:
                unresolved.append({"device": req, "reason": "unresolvable CDI device"})
    else:
        for kind in kinds:
            resolved.extend(sorted(q for q in registry if q.split("=", 1)[0] == kind))
    out = []
    for q in resolved:
        if q not in out:
            out.append(q)
    return out, unresolved, expansions


def _mount_depth(container_path):
    return posixpath.normpath(container_path or "/").count("/")


def host_device_info(path):
    """(type, major, minor) of a host node via lstat (as the library does), or (None, None, None, error)."""
    try:
        st = os.lstat(path)
    except OSError as exc:
        return None, None, None, exc.strerror or str(exc)
    mode = st.st_mode
    if stat.S_ISCHR(mode):
        return "c", os.major(st.st_rdev), os.minor(st.st_rdev), None
    if stat.S_ISBLK(mode):
        return "b", os.major(st.st_rdev), os.minor(st.st_rdev), None
    if stat.S_ISFIFO(mode):
        return "p", 0, 0, None
    return None, None, None, "not a device (%s)" % _file_type(mode)


def _file_type(mode):
    for test, name in ((stat.S_ISLNK, "symlink"), (stat.S_ISDIR, "directory"), (stat.S_ISREG, "regular file"),
                       (stat.S_ISSOCK, "socket")):
        if test(mode):
            return name
    return "other"


def merge_edits(registry, qualified_names, root="/"):
    """The merged container edits for the requested devices, in the order the reference library applies
    them; device node type/major:minor are filled from the host node (under ``root``) when the spec omits
    them. Returns (edits, sources) where sources maps qualified name -> spec file path."""
    env, env_keys = [], {}
    nodes, mounts, hooks, gids = [], [], [], []
    seen_specs, sources = set(), {}
    blocks = []
    for q in qualified_names:
        rec = registry[q]
        sources[q] = rec["path"]
        if rec["path"] not in seen_specs:
            seen_specs.add(rec["path"])
            blocks.append(rec["spec"].get("containerEdits") or {})
        blocks.append(_device(rec, q.split("=", 1)[1]).get("containerEdits") or {})
    for edits in blocks:
        for entry in edits.get("env") or []:
            key = entry.split("=", 1)[0]
            if key in env_keys:
                env[env_keys[key]] = entry
            else:
                env_keys[key] = len(env)
                env.append(entry)
        for node in edits.get("deviceNodes") or []:
            nodes = [n for n in nodes if n["path"] != node.get("path")]
            nodes.append(_fill_node(node, root))
        for m in edits.get("mounts") or []:
            mounts = [x for x in mounts if x["containerPath"] != m.get("containerPath")]
            mounts.append({"hostPath": m.get("hostPath"), "containerPath": m.get("containerPath"),
                           "type": m.get("type", ""), "options": list(m.get("options") or [])})
        for h in edits.get("hooks") or []:
            hooks.append({"hookName": h.get("hookName"), "path": h.get("path"), "args": list(h.get("args") or []),
                          "env": list(h.get("env") or []), "timeout": h.get("timeout")})
        for gid in edits.get("additionalGids") or []:
            if gid and gid not in gids:
                gids.append(gid)
    mounts.sort(key=lambda m: _mount_depth(m["containerPath"]))  # stable, like sort.Stable(orderedMounts)
    return {"env": env, "deviceNodes": nodes, "mounts": mounts, "hooks": hooks, "additionalGids": gids}, sources


def _fill_node(node, root):
    path = node.get("path")
    host_path = node.get("hostPath") or path
    declared = {"type": node.get("type", ""), "major": node.get("major"), "minor": node.get("minor")}
    out = {"path": path, "hostPath": host_path, "type": declared["type"], "major": node.get("major") or 0,
           "minor": node.get("minor") or 0, "permissions": None, "fileMode": node.get("fileMode"),
           "uid": node.get("uid"), "gid": node.get("gid"), "declared": declared, "host": None}
    htype, hmajor, hminor, err = host_device_info(under_root(root, host_path))
    out["host"] = {"type": htype, "major": hmajor, "minor": hminor, "error": err}
    needs_fill = not (out["type"] and (out["major"] != 0 or out["type"] == "p"))
    if needs_fill and htype is not None:
        if not out["type"]:
            out["type"] = htype
        if out["type"] != "p" and out["major"] == 0:
            out["major"], out["minor"] = hmajor, hminor
    elif needs_fill:
        out["major"] = out["minor"] = None
    perms = node.get("permissions", "")
    out["permissions"] = "rwm" if perms == "" else ("" if perms == NO_PERMISSIONS else perms)
    return out


# ---------------------------------------------------------------------------------------------------
# Host-side checks

_DRIVER_LIB = re.compile(r"^(libcuda|libnvidia-[A-Za-z0-9_-]+|libnvcuvid|libnvoptix|libGLX_nvidia|libEGL_nvidia|"
                         r"libGLESv[12]_CM_nvidia|libGLESv2_nvidia|libcudadebugger)\.so\.(\d{3,}\.\d+(?:\.\d+)?)$")
_FIRMWARE = re.compile(r"/firmware/nvidia/(\d{3,}\.\d+(?:\.\d+)?)(/|$)")
_NVRM = re.compile(r"Kernel Module\s+(?:for\s+\S+\s+)?(\d+\.\d+(?:\.\d+)?)")


def library_version(path):
    """The driver version carried by a driver library's file name (libcuda.so.580.159.04) or a
    firmware path (/lib/firmware/nvidia/580.159.04/...), else None."""
    m = _DRIVER_LIB.match(posixpath.basename(path or ""))
    if m:
        return m.group(2)
    m = _FIRMWARE.search(path or "")
    return m.group(1) if m else None


def running_driver_version(host=None, root="/"):
    """(version, source) of the running NVIDIA driver: the host layer's NVML reading, else the kernel
    module's /proc/driver/nvidia/version under ``root``; (None, why) when neither is available."""
    evidence = (host or {}).get("evidence") or {}
    nvml = evidence.get("nvml") or {}
    if isinstance(nvml, dict) and nvml.get("driver_version"):
        return str(nvml["driver_version"]), "host.evidence.nvml.driver_version"
    if (host or {}).get("versions", {}).get("driver"):
        return str(host["versions"]["driver"]), "host.versions.driver"
    path = under_root(root, "/proc/driver/nvidia/version")
    try:
        with open(path, "r", encoding="utf-8", errors="replace") as f:
            m = _NVRM.search(f.read(4096))
    except OSError as exc:
        return None, "no host record with a driver version, and %s: %s" % (path, exc.strerror or exc)
    if m:
        return m.group(1), path
    return None, "%s does not name a kernel module version" % path


def _is_bind(mount):
    opts = mount.get("options") or []
    return mount.get("type", "") in ("", "bind", "rbind") or "bind" in opts or "rbind" in opts


def _host_node_record(host, path):
    nodes = ((host or {}).get("evidence") or {}).get("device_nodes") or {}
    if isinstance(nodes, dict):
        return nodes.get(path)
    if isinstance(nodes, list):
        for n in nodes:
            if isinstance(n, dict) and n.get("path") == path:
                return n
    return None


def _norm_type(t):
    return {"char": "c", "character": "c", "block": "b", "u": "c"}.get(t, t)


def host_checks(builder, edits, root="/", host=None, driver=None):
    """Append the host-side checks of the merged edits to ``builder``."""
    for node in edits["deviceNodes"]:
        subject = node["path"] if node["hostPath"] == node["path"] else "%s (host %s)" % (node["path"], node["hostPath"])
        h = node["host"]
        if h["type"] in ("c", "b"):
            builder.add("cdi.host.device_node", PASS, subject, "char/block device",
                        "%s %s:%s" % ({"c": "char", "b": "block"}[h["type"]], h["major"], h["minor"]))
        elif h["type"] == "p" and node["type"] == "p":
            builder.add("cdi.host.device_node", PASS, subject, "fifo", "fifo")
        else:
            builder.add("cdi.host.device_node", FAIL, subject, "char/block device on the host", h["error"] or "fifo")
            continue
        d = node["declared"]
        if d["type"] and (d["major"] or d["type"] == "p"):
            want = "%s %s:%s" % (_norm_type(d["type"]), d["major"] or 0, d["minor"] or 0)
            have = "%s %s:%s" % (h["type"], h["major"], h["minor"])
            builder.add("cdi.host.device_number", PASS if want == have else FAIL, subject, want, have)
        if host is None:
            builder.add("cdi.host.host_layer_match", NOT_RUN, subject, observed="no host layer record given")
            continue
        seen = _host_node_record(host, node["path"])
        if not isinstance(seen, dict):
            builder.add("cdi.host.host_layer_match", NOT_RUN, subject, observed="the host layer did not report this node")
        elif seen.get("exists") is False:
            builder.add("cdi.host.host_layer_match", FAIL, subject, "present", "the host layer saw it absent")
        else:
            want = "%s %s:%s" % (_norm_type(seen.get("type")), seen.get("major"), seen.get("minor"))
            have = "%s %s:%s" % (h["type"], h["major"], h["minor"])
            builder.add("cdi.host.host_layer_match", PASS if want == have else FAIL, subject, want, have)
    driver_version, driver_source = driver or (None, "not looked up")
    for m in edits["mounts"]:
        host_path = m["hostPath"] or ""
        if not _is_bind(m):
            continue
        full = under_root(root, host_path)
        target = os.path.realpath(full) if os.path.islink(full) else None
        versions = [v for v in (library_version(host_path), library_version(target)) if v]
        if versions:
            if driver_version is None:
                builder.add("cdi.host.library_version", NOT_RUN, host_path, observed="running driver unknown: %s" % driver_source)
            else:
                stale = [v for v in versions if v != driver_version]
                builder.add("cdi.host.library_version", FAIL if stale else PASS, host_path,
                            "%s (running driver, %s)" % (driver_version, driver_source),
                            ", ".join(sorted(set(versions))),
                            hint=("stale spec: it names driver %s but %s is running; regenerate the spec"
                                  % (stale[0], driver_version)) if stale else None)
        if os.path.exists(full):
            builder.add("cdi.host.mount_source", PASS, host_path, "exists", "exists" + (" -> %s" % target if target else ""))
        elif os.path.islink(full):
            builder.add("cdi.host.mount_source", FAIL, host_path, "exists", "dangling symlink -> %s" % os.readlink(full))
        else:
            builder.add("cdi.host.mount_source", FAIL, host_path, "exists", "absent")
    for hook in edits["hooks"]:
        path = hook["path"] or ""
        full = under_root(root, path)
        try:
            st = os.stat(full)
        except OSError as exc:
            builder.add("cdi.host.hook", FAIL, path, "root-owned executable", exc.strerror or str(exc))
            continue
        problems = []
        if not stat.S_ISREG(st.st_mode):
            problems.append("not a regular file")
        if not st.st_mode & 0o111:
            problems.append("not executable")
        if st.st_uid != 0:
            problems.append("owned by uid %d" % st.st_uid)
        builder.add("cdi.host.hook", FAIL if problems else PASS, path, "root-owned executable",
                    "; ".join(problems) or "mode %04o uid 0" % stat.S_IMODE(st.st_mode))


def is_nvidia(edits):
    return any((n["path"] or "").startswith("/dev/nvidia") for n in edits["deviceNodes"])


_STUB = re.compile(r"/stubs?/libcuda\.so(\.1)?$")


def nvidia_checks(builder, edits):
    """Consequence checks for NVIDIA specs: WARN (the spec is valid; the compute layer shows the failure)."""
    paths = [n["path"] for n in edits["deviceNodes"]]
    for check, node, key in (("cdi.nvidia.nvidiactl", "/dev/nvidiactl", "nvidiactl"), ("cdi.nvidia.uvm", "/dev/nvidia-uvm", "uvm")):
        present = node in paths
        builder.add(check, PASS if present else WARN, node, "in deviceNodes", "present" if present else "absent",
                    hint=None if present else "expected consequence: %s" % CONSEQUENCES[key])
    ptx = [m["hostPath"] for m in edits["mounts"] if "libnvidia-ptxjitcompiler" in (m["containerPath"] or "") + (m["hostPath"] or "")]
    builder.add("cdi.nvidia.ptxjit", PASS if ptx else WARN, "libnvidia-ptxjitcompiler.so.1", "mounted",
                ptx[0] if ptx else "no mount", hint=None if ptx else "expected consequence: %s" % CONSEQUENCES["ptxjit"])
    no_write = [n["path"] for n in edits["deviceNodes"] if n["path"].startswith("/dev/nvidia") and "w" not in (n["permissions"] or "")]
    builder.add("cdi.nvidia.cgroup_write", WARN if no_write else PASS, ", ".join(no_write) or "/dev/nvidia*", "cgroup access includes w",
                "without w: %s" % ", ".join(no_write) if no_write else "rw",
                hint="expected consequence: %s" % CONSEQUENCES["cgroup"] if no_write else None)
    cuda = [m for m in edits["mounts"] if posixpath.basename(m["containerPath"] or "").startswith("libcuda.so")]
    if not cuda:
        builder.add("cdi.nvidia.libcuda", WARN, "libcuda.so.1", "mounted from the driver", "no libcuda mount",
                    hint="the image must bring a libcuda matching the host driver, else cuInit cannot load")
    for m in cuda:
        stub = bool(_STUB.search(m["hostPath"] or ""))
        builder.add("cdi.nvidia.libcuda", WARN if stub else PASS, m["containerPath"], "the driver's libcuda",
                    ("CUDA toolkit stub " if stub else "") + (m["hostPath"] or ""),
                    hint="expected consequence: %s" % CONSEQUENCES["stub"] if stub else None)


# ---------------------------------------------------------------------------------------------------
# Security audit

SENSITIVE_EXACT = ("/", "/etc", "/root", "/boot", "/dev", "/home", "/var/lib/kubelet", "/run", "/var/run",
                   "/var/lib/containerd", "/var/lib/containers", "/var/lib/docker")
SENSITIVE_UNDER = ("/root/", "/etc/shadow", "/etc/sudoers", "/etc/ssh/", "/etc/kubernetes/", "/etc/containerd/",
                   "/etc/crio/", "/etc/cdi/")
RUNTIME_SOCKETS = ("docker.sock", "containerd.sock", "crio.sock", "podman.sock", "cri-dockerd.sock", "dockershim.sock",
                   "kubelet.sock")


def sensitive_mount(mount):
    """Why a mount of this host path gives containers control of the host, or None."""
    host_path = posixpath.normpath(mount.get("hostPath") or "/")
    if host_path.startswith("/var/run/"):
        host_path = "/run/" + host_path[len("/var/run/"):]
    if host_path in SENSITIVE_EXACT:
        return "mounts host %s" % host_path
    for prefix in SENSITIVE_UNDER:
        if host_path == prefix.rstrip("/") or host_path.startswith(prefix):
            return "mounts host %s" % host_path
    if posixpath.basename(host_path) in RUNTIME_SOCKETS or host_path in ("/run/containerd", "/run/crio", "/run/podman", "/run/docker"):
        return "mounts a container runtime socket (%s)" % host_path
    if host_path in ("/proc", "/sys") or host_path.startswith(("/proc/", "/sys/")):
        if "ro" not in (mount.get("options") or []):
            return "mounts %s read-write" % host_path
    return None


def _writable_by_others(st):
    problems = []
    if st.st_uid != 0:
        problems.append("owned by uid %d" % st.st_uid)
    if st.st_mode & stat.S_IWOTH:
        problems.append("world-writable")
    if st.st_mode & stat.S_IWGRP and st.st_gid != 0:
        problems.append("group-writable (gid %d)" % st.st_gid)
    return problems


def audit(builder, files, dirs, edits, root="/"):
    """Security audit of spec dirs, spec files (and link targets), mounts and hooks."""
    for d in dirs:
        try:
            st = os.stat(d)
        except OSError:
            continue
        problems = _writable_by_others(st)
        builder.add("cdi.security.spec_dir_writable", FAIL if problems else PASS, d, "root-owned, not writable by others",
                    "; ".join(problems) or "mode %04o uid 0" % stat.S_IMODE(st.st_mode))
    for rec in files:
        try:
            st = os.stat(rec["path"])
        except OSError:
            continue
        problems = _writable_by_others(st)
        if rec["symlink"]:
            try:
                lst = os.lstat(rec["path"])
                if lst.st_uid != 0:
                    problems.append("link owned by uid %d" % lst.st_uid)
            except OSError:
                pass
        builder.add("cdi.security.spec_file_writable", FAIL if problems else PASS, rec["path"], "root-owned, not writable by others",
                    "; ".join(problems) or "mode %04o uid 0" % stat.S_IMODE(st.st_mode))
    for rec in files:
        for m in ((rec.get("spec") or {}).get("containerEdits") or {}).get("mounts") or []:
            _audit_mount(builder, m, rec["path"])
        for dev in (rec.get("spec") or {}).get("devices") or []:
            for m in (dev.get("containerEdits") or {}).get("mounts") or []:
                _audit_mount(builder, m, rec["path"])
    for hook in edits["hooks"]:
        full = under_root(root, hook["path"] or "")
        if not os.path.exists(full):
            builder.add("cdi.security.hook_writable", NOT_RUN, hook["path"], observed="the hook does not exist (see cdi.host.hook)")
            continue
        problems = []
        for p in (full, os.path.dirname(full)):
            try:
                st = os.stat(p)
            except OSError:
                continue
            problems.extend("%s: %s" % (p, x) for x in _writable_by_others(st))
        builder.add("cdi.security.hook_writable", FAIL if problems else PASS, hook["path"], "only root can write",
                    "; ".join(problems) or "root-owned, not writable by others")


def _audit_mount(builder, mount, path):
    why = sensitive_mount(mount)
    if why:
        builder.add("cdi.security.sensitive_mount", FAIL, "%s in %s" % (mount.get("hostPath"), path), "no sensitive host path", why)


# ---------------------------------------------------------------------------------------------------
# The layer


def _spec_checks(builder, rec, requested_kinds):
    relevant = rec["kind"] in requested_kinds if rec["kind"] else False
    bad = FAIL if relevant else WARN
    blocked = False
    for rule in RULES:
        errors = rec["rule_errors"].get(rule)
        check = _RULE_CHECK[rule]
        if errors:
            why = "" if relevant else " (kind %s is not requested: the runtime ignores this file)" % (rec["kind"] or "unknown")
            builder.add(check, bad, rec["path"], "valid", "; ".join(errors[:5]) + why)
            if rule in ("parse", "schema"):
                blocked = True
        elif blocked:
            builder.add(check, NOT_RUN, rec["path"], observed="not checked: the file did not load")
        else:
            builder.add(check, PASS, rec["path"], "valid", "valid")
    if rec["symlink"]:
        builder.add("cdi.spec.symlink", WARN, rec["path"], "regular file", "symlink -> %s" % rec["symlink"])


def _requested_kinds(devices, kinds):
    out = []
    for d in devices or []:
        kind = str(d).split("=", 1)[0]
        if kind not in out:
            out.append(kind)
    return out or list(kinds)


def spec_digest(files):
    h = hashlib.sha256()
    for rec in sorted(files, key=lambda r: r["path"]):
        h.update(("%s\0%s\n" % (rec["path"], rec["sha256"])).encode("utf-8"))
    return "sha256:" + h.hexdigest()


def _public_file(rec):
    out = dict((k, v) for k, v in rec.items() if k not in ("spec", "rule_errors"))
    out["conflicts"] = rec.get("conflicts", [])
    return out


def cdi_layer(spec_dirs=DEFAULT_SPEC_DIRS, discover_runtime_dirs_=True, devices=None, kinds=DEFAULT_KINDS,
              host=None, root="/", max_spec_size=DEFAULT_MAX_SPEC_SIZE, environ=None):
    """Run the cdi layer and return its record (plugins/module_utils/_result.py contract)."""
    b = LayerBuilder("cdi", CHECKS)
    devices = [str(d) for d in (devices or [])]
    kinds = list(kinds or DEFAULT_KINDS)
    requested_kinds = _requested_kinds(devices, kinds)
    dirs = [posixpath.normpath(d) for d in (spec_dirs or DEFAULT_SPEC_DIRS)]
    runtime_dirs = {}
    if discover_runtime_dirs_:
        runtime_dirs = discover_runtime_dirs(root, environ)
        for runtime, info in sorted(runtime_dirs.items()):
            for err in info["errors"]:
                b.add("cdi.discovery.runtime_config", WARN, runtime, "readable", err)
            if not info["errors"]:
                b.add("cdi.discovery.runtime_config", PASS, runtime, "cdi_spec_dirs",
                      info["spec_dirs"] if info["spec_dirs"] is not None else "not set (runtime default)")
            for d in info["spec_dirs"] or []:
                d = posixpath.normpath(d)
                if d not in dirs:
                    dirs.append(d)
    host_dirs = [under_root(root, d) for d in dirs]
    existing = [d for d in host_dirs if os.path.isdir(d)]
    b.add("cdi.discovery.spec_dirs", PASS if existing else FAIL, ", ".join(host_dirs), "at least one exists",
          ", ".join(existing) if existing else "none exists")
    files = []
    for priority, d in enumerate(host_dirs):
        for path in list_spec_files(d):
            rec = load_spec_file(path, max_spec_size)
            rec["priority"] = priority
            rec["dir"] = d
            files.append(rec)
    for rec in files:
        _spec_checks(b, rec, requested_kinds)
    registry, conflicts, overrides = build_registry(files)
    for kind in requested_kinds:
        providers = sorted(set(r["path"] for r in files if r["ok"] and r["kind"] == kind))
        b.add("cdi.resolve.kind", PASS if providers else FAIL, kind, "a valid spec provides it",
              ", ".join(providers) if providers else "no CDI spec provides %s" % kind)
    resolved, unresolved, expansions = select_devices(registry, devices, requested_kinds)
    for item in unresolved:
        b.add("cdi.resolve.device", FAIL, item["device"], "resolves", item["reason"])
    for q in resolved:
        b.add("cdi.resolve.device", PASS, q, "resolves", registry[q]["path"])
    for e in expansions:
        b.add("cdi.resolve.all_expanded", WARN, e["request"], "a device named 'all'",
              "none; expanded here to %s" % ", ".join(e["devices"]))
    requested_set = set(devices) | set(resolved)
    for c in conflicts:
        wanted = c["device"] in requested_set or (not devices and c["device"].split("=", 1)[0] in requested_kinds)
        b.add("cdi.resolve.conflict", FAIL if wanted else WARN, c["device"], "defined once per priority",
              "defined in %s (dropped)" % ", ".join(c["files"]))
    edits, sources = merge_edits(registry, resolved, root) if resolved else (
        {"env": [], "deviceNodes": [], "mounts": [], "hooks": [], "additionalGids": []}, {})
    driver = running_driver_version(host, root) if edits["mounts"] else (None, "no mounts")
    if resolved:
        host_checks(b, edits, root, host, driver)
        if is_nvidia(edits):
            nvidia_checks(b, edits)
    audit(b, files, list(existing), edits, root)
    providing = [r for r in files if r["path"] in set(sources.values())]
    versions_used = sorted(set(str(r["cdiVersion"]) for r in providing if r["cdiVersion"]))
    b.versions = {"cdi_spec": ", ".join(versions_used) or None}
    if driver[0]:
        b.versions["driver"] = driver[0]
    expected = {"env": edits["env"],
                "deviceNodes": [dict((k, v) for k, v in n.items() if k not in ("declared", "host")) for n in edits["deviceNodes"]],
                "mounts": edits["mounts"], "hooks": edits["hooks"], "additionalGids": edits["additionalGids"]}
    b.evidence = {
        "spec_dirs": host_dirs,
        "spec_dirs_existing": existing,
        "runtime_spec_dirs": runtime_dirs,
        "root": root,
        "requested": devices,
        "kinds": requested_kinds,
        "requested_devices": resolved,
        "unresolved": unresolved,
        "expanded": expansions,
        "device_sources": sources,
        "all_devices": sorted(registry),
        "conflicts": conflicts,
        "overrides": overrides,
        "files": [_public_file(r) for r in files],
        "expected_edits": expected,
        "device_nodes_host": dict((n["path"], n["host"]) for n in edits["deviceNodes"]),
        "driver_version": {"version": driver[0], "source": driver[1]},
        "spec_digest": spec_digest(providing) if providing else None,
    }
    return b.build()
