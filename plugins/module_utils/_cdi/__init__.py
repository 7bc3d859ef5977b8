# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: the cdi layer of gpuprobe.layers (a package; not public API, may change without notice).

The one entry is ``cdi_layer`` (below): it returns the layer's record (``_result`` contract). The package is
split by concern: ``loader`` (bytes -> tree, the reference library's YAML/JSON rules), ``schema`` (tree -> spec
model, encoding/json's rules), ``names`` and ``validate`` (spec rules), ``files`` (spec files and dirs),
``resolve`` (registry, selection, merged edits), ``host`` (host-side and injection-time checks), ``vendor``
(NVIDIA consequences), ``audit`` (security) and ``catalogue`` (CHECKS). docs/cdi-loader.md says how a
spec is read and where each rule comes from.

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

This file only documents the package: callers import the module that defines a name (the layer's entry is
``layer.py``; its checks are in ``catalogue.py``).
"""
