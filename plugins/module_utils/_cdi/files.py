# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE (gpuprobe.layers cdi layer): spec files, spec dirs and the runtimes' configured spec dirs."""

from __future__ import annotations

import glob
import hashlib
import os
import posixpath
import re
import stat

from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi.catalogue import DEFAULT_MAX_SPEC_SIZE
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi.names import minimum_version
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi.validate import load_spec_data


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
           "uid": None, "gid": None, "size": None, "sha256": None, "spec": None, "warnings": []}

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
                rec["warnings"] = list(model.get("__warnings__") or [])
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
