# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE (gpuprobe.layers cdi layer): spec files, spec dirs and the runtimes' configured spec dirs."""

from __future__ import annotations

import glob
import hashlib
import os
import re
import stat

from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi.bounded import DEFAULT_READ_TIMEOUT, ReadRefused, read_node_file
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi.catalogue import DEFAULT_MAX_SPEC_SIZE
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi.names import minimum_version
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi.readings import DEFAULT
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi.validate import load_spec_data
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.fs import under_root


# ---------------------------------------------------------------------------------------------------
# Files and directories


def _mode_info(st):
    return {"mode": "%04o" % stat.S_IMODE(st.st_mode), "uid": st.st_uid, "gid": st.st_gid}


def load_spec_file(path, max_size=DEFAULT_MAX_SPEC_SIZE, timeout=DEFAULT_READ_TIMEOUT, reading=None):
    """Load one spec file. Returns its record: path, ok, errors[], error, rule_errors{rule: [..]}, kind,
    cdiVersion, min_version, devices, symlink, mode/uid/gid, size, sha256, spec (when ok), reading (the name of the
    library version's rules it was read with, readings.py; ``reading`` None: the project's own), _data (the bytes
    read, for ``reread``; never reported).

    The read is bounded (bounded.read_node_file): non-blocking, the opened file judged (a regular file, not on a
    kernel pseudo-filesystem), at most ``max_size`` bytes within ``timeout`` seconds."""
    rec = {"path": path, "ok": False, "errors": [], "error": None, "rule_errors": {}, "kind": None,
           "cdiVersion": None, "min_version": None, "devices": [], "symlink": None, "mode": None,
           "uid": None, "gid": None, "size": None, "sha256": None, "spec": None, "warnings": [],
           "reading": (reading or DEFAULT)["name"], "_data": None}

    def fail(rule, message):
        rec["rule_errors"].setdefault(rule, []).append(message)
        rec["errors"].append(message)

    try:
        lst = os.lstat(path)
        if stat.S_ISLNK(lst.st_mode):
            rec["symlink"] = os.readlink(path)
    except OSError as exc:
        fail("parse", "cannot stat: %s" % (exc.strerror or exc))
        rec["error"] = rec["errors"][0]
        return rec
    try:
        data, st = read_node_file(path, max_size, timeout, follow=bool(rec["symlink"]))
    except ReadRefused as exc:
        fail("parse", "failed to read CDI Spec: %s" % exc)
        data, st = None, None
        try:
            st = os.stat(path)
        except OSError:
            pass
    if st is not None:
        rec.update(_mode_info(st))
        rec["size"] = st.st_size
    if data is not None:
        rec["sha256"] = hashlib.sha256(data).hexdigest()
        rec["_data"] = data
        _read_data(rec, data, reading, fail)
    rec["ok"] = not rec["errors"]
    rec["error"] = rec["errors"][0] if rec["errors"] else None
    return rec


def reread(rec, reading):
    """The file record ``rec`` read again from its bytes with the library version's rules ``reading``: a new record
    (the same file facts; ok, errors, kind, devices, spec as that library reads it)."""
    out = dict(rec, errors=[], rule_errors={}, spec=None, warnings=[], reading=reading["name"])
    out.pop("_device_index", None)
    if rec.get("_data") is None:  # not read at all: the same read error for every library
        out["errors"], out["rule_errors"] = list(rec["errors"]), dict(rec["rule_errors"])
        return out

    def fail(rule, message):
        out["rule_errors"].setdefault(rule, []).append(message)
        out["errors"].append(message)

    _read_data(out, rec["_data"], reading, fail)
    out["ok"] = not out["errors"]
    out["error"] = out["errors"][0] if out["errors"] else None
    return out


def _read_data(rec, data, reading, fail):
    spec, errors, partial = load_spec_data(data, os.path.splitext(rec["path"])[1], reading)
    for rule, message in errors:
        fail(rule, message)
    model = spec or partial or {}
    rec["kind"] = model.get("kind") if isinstance(model.get("kind"), str) else None
    rec["cdiVersion"] = model.get("cdiVersion")
    rec["min_version"] = minimum_version(model)[0] if model else None
    rec["devices"] = [d.get("name") for d in (model.get("devices") or []) if isinstance(d, dict)]
    rec["spec"] = spec
    rec["warnings"] = list(model.get("__warnings__") or [])


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
                data, _st = read_node_file(path, DEFAULT_MAX_SPEC_SIZE)
                dirs = parse_cdi_spec_dirs(data.decode("utf-8", "replace"))
            except ReadRefused as exc:
                info["errors"].append("%s: %s" % (path, exc))
                continue
            if dirs is not None:
                info["spec_dirs"] = dirs
        if info["files"]:
            out[runtime] = info
    return out
