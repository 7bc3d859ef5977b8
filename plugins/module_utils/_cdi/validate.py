# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE (gpuprobe.layers cdi layer): spec validation (default validator, container-edits.go, annotations) and load_spec_data."""

from __future__ import annotations

import re

from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi.catalogue import (
    ANNOTATIONS_MAX_BYTES, KNOWN_VERSIONS, MAX_ERRORS_PER_FILE, MAX_NODES_PER_FILE, NO_PERMISSIONS, VALID_HOOK_NAMES, VALID_NODE_TYPES,
)
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi.loader import YMap, parse_bytes
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi.readings import DEFAULT
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi.names import (
    _vkey, is_letter, minimum_version, normalize_version, parse_qualifier, validate_device_name, validate_vendor_or_class,
)
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi.schema import _OBJ, _Coercer, _TooComplex, _type_name


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


def validate_edits(edits, where, version, reading=None):
    """(rule, message) errors of one containerEdits block (may be empty); ``version`` is the spec's
    normalized cdiVersion (fields that exist only in some versions are 'version' errors); ``reading``: the library
    version's rules (readings.py), the project's own when None."""
    reading = reading or DEFAULT
    strict = reading is DEFAULT  # the project's own checks no released library has (absolute hook path, negative numbers)
    errors = validate_env(edits.get("env"), where + ".env")
    for i, node in enumerate(edits.get("deviceNodes") or []):
        w = "%s.deviceNodes[%d]" % (where, i)
        path = node.get("path") or ""
        if not path:
            errors.append(("edits", "%s: invalid (empty) device path" % w))
        if node.get("type", "") not in VALID_NODE_TYPES:
            errors.append(("edits", "%s: device %r: invalid type %r (b, c, u or p)" % (w, path, node.get("type"))))
        if strict and ((node.get("major") or 0) < 0 or (node.get("minor") or 0) < 0):
            errors.append(("edits", "%s: device %r: invalid (negative) device number %s:%s" % (w, path, node.get("major"), node.get("minor"))))
        perms = node.get("permissions", "")
        if (perms != NO_PERMISSIONS or not reading["permissions_none"]) and perms.strip("rwm") != "":
            errors.append(("edits", "%s: device %r: invalid permissions %r (any of r, w, m)" % (w, path, perms)))
    for i, hook in enumerate(edits.get("hooks") or []):
        w = "%s.hooks[%d]" % (where, i)
        name = hook.get("hookName", "")
        if name not in VALID_HOOK_NAMES:
            errors.append(("edits", "%s: invalid hook name %r (one of %s)" % (w, name, ", ".join(VALID_HOOK_NAMES))))
        path = hook.get("path") or ""
        if not path:
            errors.append(("edits", "%s: invalid hook %r with empty path" % (w, name)))
        elif strict and not path.startswith("/"):
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
        if (closid != "/" or not reading["closid_root"]) and (len(closid) >= 4096 or closid in (".", "..") or "/" in closid or "\n" in closid):
            errors.append(("edits", "%s.intelRdt: invalid ClosID %r" % (where, closid)))
        if not strict:
            pass  # a library reading: fields its specs-go lacks are schema errors, the rest the minimum version's
        elif version and _vkey(version) >= _vkey("1.1.0"):
            for field in ("enableCMT", "enableMBM"):
                if field in rdt:
                    errors.append(("version", "%s.intelRdt.%s is not valid for CDI spec version %s" % (where, field, version)))
        elif version:
            for field in ("schemata", "enableMonitoring"):
                if field in rdt:
                    errors.append(("version", "%s.intelRdt.%s requires CDI spec version at least 1.1.0" % (where, field)))
    if strict and version and _vkey(version) < _vkey("1.1.0") and ("netDevices" in edits or "netDevices" in edits.get("__null__", [])):
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


def _library_version(raw_version, reading):
    """The spec's cdiVersion normalized, or None where the library ``reading`` does not know it (validateVersion)."""
    version = normalize_version(raw_version)
    if version is not None and (_vkey(version) > _vkey(reading["max_version"]) or (raw_version.startswith("v") and not reading["v_prefix"])):
        return None
    return version


# where a one-character vendor or class panics, by the reading's ``name_check`` (readings.py): the function that
# slices name[1:len(name)-1] (slice bounds out of range [1:0]), for the vendor and for the class
_NAME_PANIC = {
    "qualified-device": {"vendor": "ValidateVendorName", "class": "ValidateClassName", "file": "pkg/cdi/qualified-device.go"},
    "parser": {"vendor": "validateVendorOrClassName", "class": "validateVendorOrClassName", "file": "pkg/parser/parser.go"},
}


def _name_panic(kind, what, part, reading):
    """The words of the panic a one-character vendor or class ``part`` gives in the library ``reading``."""
    where = _NAME_PANIC.get(reading["name_check"])
    if where is None:  # guarded (main after v1.1.0): every released library panics
        return ("kind %r: the one-character %s %r makes every released CDI library panic (slice bounds out of range "
                "[1:0]: ValidateVendorName/ValidateClassName of pkg/cdi/qualified-device.go in v0.5.2-v0.5.4, "
                "validateVendorOrClassName of pkg/parser/parser.go in v0.6.0-v1.1.0; guarded only after v1.1.0)" % (kind, what, part))
    return ("kind %r: the one-character %s %r makes the library's %s panic (slice bounds out of range [1:0]; %s, "
            "library %s)" % (kind, what, part, where[what], where["file"], reading["name"]))


def _kind_reached(spec, version, reading):
    """Whether the library's ``Spec.validate`` gets to ValidateVendorName/ValidateClassName: it checks the version
    first (``validateVersion``; from v0.5.4 also the minimum version the fields need) and returns at an error there
    (pkg/cdi/spec.go ``validate`` at every tag; v1.x ``cdi.ValidateVersion``, specs-go/version.go)."""
    if version is None:
        return False
    return not reading["min_version"] or _vkey(minimum_version(spec, library=reading["aliasing"])[0]) <= _vkey(version)


_ONCE_PASSED = {"version": "with a cdiVersion it accepts", "schema": "once the file decodes"}


def _kind_errors(kind, reading, stops=None):
    """(rule, message) of the spec's kind as the library checks it (ValidateVendorName, ValidateClassName). A
    one-character vendor or class panics there (``panic``) only where the library gets that far; ``stops``: the
    rule at which it stops before (``version``, ``schema``; None: it gets there): the panic is then said under that
    rule, as what a file that passes it would bring."""
    errors = []
    vendor, klass = parse_qualifier(kind)
    blocked = False  # the vendor is checked first: an error there returns before the class is looked at
    for part, what in ((vendor, "vendor"), (klass, "class")):
        if len(part) == 1 and is_letter(part):  # a non-letter is "should start with letter" first
            words = _name_panic(kind, what, part, reading)
            if blocked:
                pass
            elif stops is None:
                errors.append(("panic", words))
            else:
                errors.append((stops, "no panic now: the library rejects the file at its %s before it checks the kind; "
                                      "%s, it would panic: %s" % (stops, _ONCE_PASSED[stops], words)))
            blocked = True
            continue
        err = validate_vendor_or_class(part, what)
        if err:
            errors.append(("kind", "kind %r: %s" % (kind, err)))
        elif what == "class" and not reading["class_dot"] and "." in part:
            errors.append(("kind", "kind %r: invalid character '.' in device class %r (library %s)" % (kind, part, reading["name"])))
        blocked = blocked or bool(err)
    return errors


def validate_spec(spec, reading=None, decoded=True):
    """All rule violations of a coerced spec, as a list of (rule, message); rules: version, kind, devices,
    edits, annotations, panic. ``reading``: the library version's rules (readings.py), the project's own when None.
    ``decoded``: the library decoded the file (False: it stopped at UnmarshalStrict, so none of its validation ran
    and nothing in it panics)."""
    reading = reading or DEFAULT
    errors = []
    raw_version = spec.get("cdiVersion")
    version = _library_version(raw_version, reading)
    minimum, reasons = minimum_version(spec)
    known = [v for v in KNOWN_VERSIONS if _vkey(v) <= _vkey(reading["max_version"])]
    if raw_version is None:
        errors.append(("version", "cdiVersion is missing"))
    elif version is None:
        errors.append(("version", "invalid version %r (library %s knows: %s)" % (raw_version, reading["name"], ", ".join(known))))
    elif not reading["min_version"]:
        pass  # v0.5.2/v0.5.3: the version is only looked up in validSpecVersions
    elif _vkey(minimum_version(spec, library=reading["aliasing"])[0]) > _vkey(version):
        errors.append(("version", "the spec version must be at least v%s (%s)" % (minimum, "; ".join(reasons))))
    elif _vkey(minimum) > _vkey(version):
        spec.setdefault("__warnings__", []).append(
            "cdiVersion %s is below the v%s its fields need (%s): the released library accepts it only because its "
            "version check sees the last device's edits alone (specs-go requiresV050/V040, loop-variable aliasing under "
            "go 1.19); a fixed library rejects the file" % (raw_version, minimum, "; ".join(reasons)))
    kind = spec.get("kind") or ""
    stops = "schema" if not decoded else (None if _kind_reached(spec, version, reading) else "version")
    errors.extend(_kind_errors(kind, reading, stops))
    if reading["annotations"]:
        errors.extend(("annotations", e) for e in validate_annotations(spec.get("annotations"), kind or "spec"))
    errors.extend(validate_edits(spec.get("containerEdits") or {}, "containerEdits", version, reading))
    devices = spec.get("devices") or []
    if not devices and reading["no_devices"]:
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
        if reading["annotations"]:
            errors.extend(("annotations", e) for e in validate_annotations(dev.get("annotations"), "%s=%s" % (kind, name)))
        edits = dev.get("containerEdits") or {}
        if _edits_empty(edits):
            errors.append(("devices", "%s (%r): empty container edits" % (where, name)))
        errors.extend(validate_edits(edits, where + ".containerEdits", version, reading))
    return errors


# the pointer lists of a containerEdits block in the order ContainerEdits.Validate walks them (container-edits.go)
_VALIDATED_LISTS = ("deviceNodes", "hooks", "mounts")


def _walk_list(edits, where, name, nil_entries, check):
    """The entries of one pointer list of a block in their written order, the null ones (skipped by the coercer)
    among them: True at the first null entry, False at the first entry ``check`` finds an error in, else None."""
    items = iter(edits.get(name) or [])
    index = 0
    while True:
        w = "%s.%s[%d]" % (where, name, index)
        if w in nil_entries:
            return True
        item = next(items, None)
        if item is None:
            return None
        if check(item):
            return False
        index += 1


def _edits_reached(edits, where, nil_entries, version, reading):
    """ContainerEdits.Validate of one block: True when it dereferences a null entry, False when it stops at an error
    first, None when it passes the block."""
    if validate_env(edits.get("env"), where + ".env"):
        return False
    for name in _VALIDATED_LISTS:
        found = _walk_list(edits, where, name, nil_entries,
                           lambda item, name=name: [e for e in validate_edits({name: [item]}, where, version, reading) if e[0] == "edits"])
        if found is not None:
            return found
    return None


def _min_version_reached(spec, nil_entries):
    """The library's MinimumRequiredVersion (pkg/cdi/version.go, v0.6.0 on) before any other check but the version:
    requiresV050 reads every device node's hostPath (unless a device name starts with a non-letter), requiresV040
    every mount's type, each until the first that has one. True when one of them dereferences a null entry."""
    blocks = [(d.get("containerEdits") or {}, "devices[%d].containerEdits" % i) for i, d in enumerate(spec.get("devices") or [])]
    blocks.append((spec.get("containerEdits") or {}, "containerEdits"))
    names = [d.get("name") or "" for d in spec.get("devices") or []]
    walks = [("mounts", lambda m: bool(m.get("type")))]
    if not any(n and not is_letter(n[0]) for n in names):  # parser.IsLetter: ASCII letters
        walks.append(("deviceNodes", lambda n: bool(n.get("hostPath"))))
    for name, has_feature in walks:
        for edits, where in blocks:
            found = _walk_list(edits, where, name, nil_entries, has_feature)
            if found is not None:
                if found:
                    return True
                break  # this requiresV0x0 returned at the first entry with the feature
    return False


def null_entry_reached(spec, nil_entries, reading=None):
    """Whether the reference library, validating ``spec`` in its own order (spec.go ``validate``: the version, the
    minimum version, vendor and class, the spec's annotations, its edits, then each device: name, annotations,
    edits), dereferences one of the null entries ``nil_entries`` (``schema._Coercer.nil_entries``) and panics: True;
    False when it stops at an error first; None when that cannot be told (the panic is reported, as before)."""
    if not nil_entries:
        return None
    reading = reading or DEFAULT
    version = _library_version(spec.get("cdiVersion"), reading)
    if version is None:
        return False  # validateVersion
    if reading["min_version"]:
        if _min_version_reached(spec, nil_entries):
            return True
        if _vkey(minimum_version(spec, library=reading["aliasing"])[0]) > _vkey(version):
            return False
    kind = spec.get("kind") or ""
    if _kind_errors(kind, reading):
        return False  # ValidateVendorName / ValidateClassName (a one-character name panics there: not a null entry)
    if reading["annotations"] and validate_annotations(spec.get("annotations"), kind or "spec"):
        return False
    found = _edits_reached(spec.get("containerEdits") or {}, "containerEdits", nil_entries, version, reading)
    if found is not None:
        return found
    for i, dev in enumerate(spec.get("devices") or []):
        where = "devices[%d]" % i
        if validate_device_name(dev.get("name", "")):
            return False
        if reading["annotations"] and validate_annotations(dev.get("annotations"), "%s=%s" % (kind, dev.get("name", ""))):
            return False
        edits = dev.get("containerEdits") or {}
        if _edits_empty(edits) and not any(n.startswith(where + ".containerEdits.") for n in nil_entries):
            return False  # "invalid device, empty device edits" (a null entry counts in the list's length)
        found = _edits_reached(edits, where + ".containerEdits", nil_entries, version, reading)
        if found is not None:
            return found
        if any(d.get("name") == dev.get("name") for d in (spec.get("devices") or [])[:i]):
            return False  # "invalid spec, multiple device"
    return None


RULES = ("parse", "schema", "panic", "version", "kind", "devices", "edits", "annotations")
RULE_CHECK = {"parse": "cdi.spec.parse", "schema": "cdi.spec.schema", "panic": "cdi.spec.library_panic", "version": "cdi.spec.version",
              "kind": "cdi.spec.kind", "devices": "cdi.spec.devices", "edits": "cdi.spec.edits",
              "annotations": "cdi.spec.annotations"}


def load_spec_data(data, ext=".yaml", reading=None):
    """Parse + coerce + validate spec bytes. Returns (spec or None, [(rule, message)], model or None).

    The spec is returned only when there is no error at all (the reference library drops the whole file
    on any error); ``model`` is what could be coerced, for reporting kind/version/devices of a bad file.
    ``reading``: the rules of the library version that reads the file (readings.py); None: the project's own."""
    tree, err = parse_bytes(data, ext)
    if err:
        return None, [("parse", err)], None
    if tree is None:
        return None, [("parse", "failed to parse CDI Spec, no Spec data")], None
    if not isinstance(tree, YMap):
        return None, [("parse", "failed to unmarshal CDI Spec: top level is a %s, not a mapping" % _type_name(tree))], None
    coercer = _Coercer((reading or DEFAULT)["absent"])
    try:
        model = coercer.coerce(tree, (_OBJ, "spec"), "")
    except _TooComplex:
        return None, [("parse", "spec too complex (more than %d nodes)" % MAX_NODES_PER_FILE)], None
    if model is None:
        return None, coercer.errors or [("schema", "failed to unmarshal CDI Spec")], None
    errors = list(coercer.errors)
    # a null entry panics the library only where it gets to it: not after a decode error, nor after an error its
    # validation meets first (then the file is rejected for that error, as the library does)
    if not coercer.errors and null_entry_reached(model, coercer.nil_entries, reading) is not False:
        errors.extend(("panic", p) for p in coercer.panics)
    errors.extend(validate_spec(model, reading, decoded=not coercer.errors))
    return (None if errors else model), errors[:MAX_ERRORS_PER_FILE], model
