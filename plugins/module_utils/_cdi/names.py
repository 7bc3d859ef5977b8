# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE (gpuprobe.layers cdi layer): names (pkg/parser) and versions (specs-go/version.go)."""

from __future__ import annotations

from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi.catalogue import EARLIEST_VERSION, KNOWN_VERSIONS


# ---------------------------------------------------------------------------------------------------
# Names (pkg/parser)


def is_letter(c):
    return ("A" <= c <= "Z") or ("a" <= c <= "z")


def _is_alnum(c):
    return is_letter(c) or ("0" <= c <= "9")


def validate_vendor_or_class(name, what):
    """None when valid, else the error text (pkg/parser validateVendorOrClassName)."""
    if not name:
        return "invalid %s. empty name" % what
    if not is_letter(name[0]):
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


def minimum_version(spec, library=False):
    """(minimum required version, [reasons]) for a coerced spec, as specs-go MinimumRequiredVersion.

    ``library=True``: as the released library computes it. specs-go's go.mod says go 1.19, so in
    requiresV050/requiresV040 (``for _, d := range spec.Devices { edits = append(edits, &d.ContainerEdits) }``)
    every pointer is the one loop variable: only the LAST device's (and the spec's) deviceNodes[].hostPath
    and mounts[].type are seen (specs-go v0.6.0-v1.1.0 version.go)."""
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
    aliased = edits[-2:] if library else edits  # the last device's edits and the spec's
    for e in aliased:
        if any(isinstance(n, dict) and n.get("hostPath") for n in (e.get("deviceNodes") or [])):
            reasons.append(("0.5.0", "deviceNodes[].hostPath"))
    # 0.4.0: mounts[].type
    for e in aliased:
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
