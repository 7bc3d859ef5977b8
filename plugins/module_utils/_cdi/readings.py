# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE (gpuprobe.layers cdi layer): how each CDI library version reads a spec. Not public API.

A runtime reads a spec with the CDI library it links, and older libraries read differently from the newest (more
fields unknown, checks missing or extra): a spec one runtime injects, another drops. The layer reads every spec as
the runtime's own library version does: ``READINGS`` is the small set of rule differences between the library
versions, each row read from cncf-tags/container-device-interface at the tag it names (docs/cdi-loader.md has the
table). ``DEFAULT`` is the project's own reading (the library's main branch after v1.1.0): used where no runtime is
known.

A rule (key of a reading):
- ``absent``: struct fields the version's specs-go does not have: ``UnmarshalStrict`` rejects them as unknown fields
  (specs-go/config.go at the tag);
- ``min_version``: whether ``validate`` checks the minimum version the fields need (MinimumRequiredVersion, from
  v0.5.4; v0.5.2/v0.5.3 only look the version up in validSpecVersions, pkg/cdi/spec.go);
- ``v_prefix``: ``cdiVersion: v0.5.0`` is known (newVersion strips the v; from v0.5.4; before, an exact map lookup);
- ``aliasing``: requiresV050/requiresV040 collect ``&d.ContainerEdits`` of the range variable, so under the pre-Go
  1.22 loop semantics only the last device's edits are seen (upstream builds: the module's go directive is < 1.22);
  a distribution build in GOPATH mode with Go >= 1.22 (Debian 13: Go 1.24) has per-iteration variables: no aliasing;
- ``annotations``: whether annotation keys and size are validated (v0.6.0-v0.8.1 call ValidateSpecAnnotations with
  a map[string]string that its type switch on map[string]interface{} never matches: nothing is validated,
  internal/validation/validate.go; from v1.0.0 the keys are checked);
- ``class_dot``: a '.' is allowed in the class (pkg/parser from v0.6.0; v0.5.x qualified-device.go: '_' and '-' only);
- ``no_devices``: ``devices: []`` is an error ("invalid spec, no devices", pkg/cdi/spec.go from v1.0.0);
- ``permissions_none``: ``permissions: none`` is accepted (only the main branch after v1.1.0, commit 90e09e4; every
  tag's DeviceNode.Validate allows r, w, m only: "invalid permissions");
- ``closid_root``: intelRdt ``closID: "/"`` is accepted (v1.1.0 ValidateIntelRdt; v0.7.0-v1.0.1 reject '/');
- ``mount_order``: how Apply sorts the mounts: ``depth+path`` (sort.Sort by depth, then the destination:
  v0.5.2-v0.8.1 orderedMounts.Less) or ``depth`` (sort.Stable by depth only, from v1.0.0);
- ``fill_mode``: fillMissingInfo fills a node's fileMode from the host node (from v1.1.0, container-edits_unix.go);
- ``name_check``: where a one-character vendor or class panics (``name[1:len(name)-1]``, slice bounds out of range
  [1:0]): ``qualified-device`` (v0.5.2-v0.5.4: pkg/cdi/qualified-device.go ``ValidateVendorName`` and
  ``ValidateClassName``, each its own loop), ``parser`` (v0.6.0-v1.1.0: pkg/parser/parser.go
  ``validateVendorOrClassName``, which both call), ``guarded`` (main after v1.1.0, commit e1a6596: no panic; the
  project still reports the file, as every released library panics on it).
"""

from __future__ import annotations

_ALL_ABSENT = frozenset([("spec", "annotations"), ("device", "annotations"), ("edits", "intelRdt"), ("edits", "additionalGids"),
                         ("edits", "netDevices"), ("intelRdt", "schemata"), ("intelRdt", "enableMonitoring")])
_V06_ABSENT = _ALL_ABSENT - frozenset([("spec", "annotations"), ("device", "annotations")])
_V07_ABSENT = _V06_ABSENT - frozenset([("edits", "intelRdt"), ("edits", "additionalGids")])

DEFAULT = {"name": "main", "max_version": "1.1.0", "absent": frozenset(), "min_version": True, "v_prefix": True, "aliasing": True,
           "annotations": True, "class_dot": True, "no_devices": True, "permissions_none": True, "closid_root": True,
           "mount_order": "depth", "fill_mode": False, "name_check": "guarded",
           "source": "the project's reading: container-device-interface main after v1.1.0 (commit 90e09e4 allows permissions "
                     "none; docs/cdi-loader.md)"}


def _reading(name, max_version, source, **rules):
    out = dict(DEFAULT, name=name, max_version=max_version, source=source)
    out.update(rules)
    return out


_V05 = dict(absent=_ALL_ABSENT, annotations=False, class_dot=False, no_devices=False, permissions_none=False, closid_root=False,
            mount_order="depth+path", name_check="qualified-device")
_V08 = dict(absent=_V07_ABSENT, annotations=False, no_devices=False, permissions_none=False, closid_root=False,
            mount_order="depth+path", name_check="parser")
_V06 = dict(_V08)
_V06["absent"] = _V06_ABSENT

# library (compat.LIBRARIES key) -> its reading. Every rule was read at the tag (files named in the docstring).
READINGS = {
    "v0.5.2": _reading("v0.5.2", "0.5.0", "pkg/cdi/spec.go, device.go, container-edits.go, qualified-device.go, "
                       "specs-go/config.go @ v0.5.2", min_version=False, v_prefix=False, **_V05),
    "v0.5.3": _reading("v0.5.3", "0.5.0", "pkg/cdi/spec.go, container-edits.go, qualified-device.go, specs-go/config.go @ v0.5.3",
                       min_version=False, v_prefix=False, **_V05),
    "v0.5.4": _reading("v0.5.4", "0.5.0", "pkg/cdi/spec.go, version.go, container-edits.go, qualified-device.go, "
                       "specs-go/config.go @ v0.5.4", **_V05),
    "v0.6.1": _reading("v0.6.1", "0.6.0", "pkg/cdi/spec.go, version.go, device.go, internal/validation/validate.go, "
                       "pkg/parser/parser.go, specs-go/config.go @ v0.6.1", **_V06),
    "v0.6.2": _reading("v0.6.2", "0.6.0", "as v0.6.1 @ v0.6.2", **_V06),
    "v0.7.1": _reading("v0.7.1", "0.7.0", "pkg/cdi/spec.go, version.go, container-edits.go (ValidateIntelRdt), "
                       "internal/validation/validate.go, specs-go/config.go @ v0.7.1", **_V08),
    "v0.7.2": _reading("v0.7.2", "0.7.0", "as v0.7.1 @ v0.7.2", **_V08),
    "v0.8.0": _reading("v0.8.0", "0.8.0", "pkg/cdi/spec.go, version.go, container-edits.go, internal/validation/validate.go, "
                       "specs-go/config.go @ v0.8.0", **_V08),
    "v0.8.1": _reading("v0.8.1", "0.8.0", "as v0.8.0 @ v0.8.1", **_V08),
    "specs-go/v1.0.0": _reading("v1.0.x", "1.0.0", "pkg/cdi/spec.go (no devices), container-edits.go (sort.Stable), "
                                "specs-go/version.go, config.go @ v1.0.0/v1.0.1", absent=_V07_ABSENT, permissions_none=False,
                                closid_root=False, name_check="parser"),
    "specs-go/v1.1.0": _reading("v1.1.0", "1.1.0", "pkg/cdi/container-edits.go (DeviceNode.Validate, ValidateIntelRdt), "
                                "container-edits_unix.go (fileMode), specs-go/config.go @ v1.1.0 (no enableCMT/enableMBM)",
                                permissions_none=False, fill_mode=True, name_check="parser",
                                absent=frozenset([("intelRdt", "enableCMT"), ("intelRdt", "enableMBM")])),
}
BY_NAME = dict((r["name"], r) for r in list(READINGS.values()) + [DEFAULT])


def reading_for(library, gopath_go122=False):
    """The reading of ``library`` (a compat.LIBRARIES key), or None when the table has none (not modelled).
    ``gopath_go122``: the build compiled the library in GOPATH mode with Go >= 1.22 (a distribution build): no
    loop-variable aliasing in the minimum-version check."""
    row = READINGS.get(library)
    if row is None:
        return None
    if gopath_go122 and row["aliasing"]:
        row = dict(row, aliasing=False, name=row["name"] + "+go1.22")
        BY_NAME.setdefault(row["name"], row)
    return row


def by_name(name):
    """The reading named ``name`` (a file record's ``reading``), DEFAULT when unknown."""
    return BY_NAME.get(name or "", DEFAULT)


def is_absent(reading, struct, field):
    return (struct, field) in (reading or DEFAULT)["absent"]
