# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE (gpuprobe.layers cdi layer): host-side and injection-time checks of the merged edits."""

from __future__ import annotations

import os
import posixpath
import re
import stat

from ansible_collections.gpuprobe.layers.plugins.module_utils._common.digest import same_file
from ansible_collections.gpuprobe.layers.plugins.module_utils._host.driver import library_path, library_version
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import FAIL, NOT_RUN, PASS, WARN
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi.bounded import ReadRefused, read_node_file
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi.elf import read_library
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.fs import PATH_ERRORS, path_error, under_root
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi.libraries import library_checks


def host_device_info(path):
    """(type, major, minor) of a host node via lstat (as the library does), or (None, None, None, error)."""
    try:
        st = os.lstat(path)
    except PATH_ERRORS as exc:
        return None, None, None, path_error(exc)
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


# ---------------------------------------------------------------------------------------------------
# Host-side checks

_NVRM = re.compile(r"Kernel Module\s+(?:for\s+\S+\s+)?(\d+\.\d+(?:\.\d+)?)")


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
        data, _st = read_node_file(path, 64 * 1024, pseudo_ok=True)  # a procfs file: read bounded, not refused
        m = _NVRM.search(data.decode("utf-8", "replace"))
    except ReadRefused as exc:
        return None, "no host record with a driver version, and %s: %s" % (path, exc)
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


_LIBRARY_NAME = re.compile(r"^lib[^/]*\.so(\.[0-9]+)*$")


def _not_a_library(full, container_path):
    """Why the existing file ``full`` mounted at a library name (lib*.so[.N]) cannot be loaded: a directory, or
    no ELF header; None when it is an ELF file, not mounted at a library name, or absent."""
    if not _LIBRARY_NAME.match(posixpath.basename(container_path or "")) or not os.path.exists(full):
        return None
    found = read_library(full)
    if found["elf"] or not found["why"].startswith(("not an ELF", "a directory", "not a regular")):
        return None  # an ELF header (whatever follows it: the SONAME check reads on), or unreadable here
    return "a directory, mounted at a library name" if found["why"] == "a directory" else found["why"]


def host_root(host, root):
    """Where the host record's paths are: its own ``root`` (a fixture tree, while the cdi layer reads a self-built spec's
    host paths from /), as ``_cdi.trust`` reads them; ``root`` when it names none."""
    evidence = (host or {}).get("evidence") or {}
    return evidence["root"] if isinstance(evidence.get("root"), str) and evidence["root"] else root


def driver_libcuda(host, root, driver_version, stem="libcuda"):
    """(the driver root's <stem>.so.<running driver version> as a node path, or None; why not): libcuda by default,
    any driver library (libnvidia-ml, libnvidia-ptxjitcompiler) by its ``stem``; looked up under ``host_root``."""
    evidence = (host or {}).get("evidence") or {}
    driver_root = evidence.get("driver_root")
    if isinstance(driver_root, dict):
        driver_root = driver_root.get("path")
    if not driver_root or not driver_version:
        return None, "the host record gives no driver root (%s) or running driver (%s)" % (driver_root, driver_version)
    name = "%s.so.%s" % (stem, driver_version)
    candidate = library_path(host_root(host, root), driver_root, name)
    if candidate is not None:
        return candidate, None
    return None, "no %s in the driver root %s" % (name, driver_root)


def libcuda_identity(builder, host_path, full, host, root, driver_version):  # pylint: disable=too-many-arguments
    """cdi.host.libcuda_identity: the file a spec mounts as libcuda is the driver root's libcuda.so.<running driver>
    (the same file, or the same content), as the compute layer's compute.driver.binding will require; WARN when it
    is another file (a stub, an old driver's, an impostor with the driver's name): the spec alone says so."""
    want, why = driver_libcuda(host, root, driver_version)
    if want is None:
        builder.add("cdi.host.libcuda_identity", NOT_RUN, host_path, observed=why)
        return
    same, how = same_file(full, under_root(host_root(host, root), want))
    if same is None:
        builder.add("cdi.host.libcuda_identity", NOT_RUN, host_path, "the content of %s" % want, how)
    else:
        builder.add("cdi.host.libcuda_identity", PASS if same else WARN, host_path, "the content of %s" % want, how,
                    hint=None if same else "the container's CUDA would not be the host driver's (compute.driver.binding "
                                           "fails); mount %s" % want)


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
        if posixpath.basename(m.get("containerPath") or "").startswith("libcuda.so"):
            libcuda_identity(builder, host_path, full, host, root, driver_version)
        refused = _not_a_library(full, m.get("containerPath"))
        if refused:  # the spec alone says the loader will refuse what it mounts as a library
            builder.add("cdi.host.mount_source", WARN, host_path, "exists; a shared library (ELF)", "exists, but %s" % refused,
                        hint="the loader refuses it in the container (dlopen fails): mount the driver's library file")
        elif os.path.exists(full):
            builder.add("cdi.host.mount_source", PASS, host_path, "exists", "exists" + (" -> %s" % target if target else ""))
        elif os.path.islink(full):
            builder.add("cdi.host.mount_source", FAIL, host_path, "exists", "dangling symlink -> %s" % os.readlink(full))
        else:
            builder.add("cdi.host.mount_source", FAIL, host_path, "exists", "absent")

    def driver_root_file(stem):
        want, why = driver_libcuda(host, root, driver_version, stem)
        return ((want, under_root(host_root(host, root), want)) if want else None), why
    library_checks(builder, edits, root, driver_root_file)
    for hook in edits["hooks"]:
        path = hook["path"] or ""
        full = under_root(root, path)
        try:
            st = os.stat(full)
        except PATH_ERRORS as exc:
            builder.add("cdi.host.hook", FAIL, path, "root-owned executable", path_error(exc))
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


def inject_checks(builder, edits):
    """``cdi.inject.device_node`` for every device node ContainerEdits.Apply visits (cache.go InjectDevices),
    also those a later node with the same path replaces: Apply runs fillMissingInfo on each and stops at
    the first error, failing the container's creation with the library's words (kept in ``observed``)."""
    for node in edits.get("injected_nodes") or []:
        subject = node["path"] if node["hostPath"] == node["path"] else "%s (host %s)" % (node["path"], node["hostPath"])
        if node.get("replaced"):
            subject += " (replaced by a later node with the same path)"
        if node.get("inject_error"):
            builder.add("cdi.inject.device_node", FAIL, subject, "fillMissingInfo succeeds",
                        "failed to inject devices: %s" % node["inject_error"])
        elif node["host"]["type"] is None:
            builder.add("cdi.inject.device_node", PASS, subject, "fillMissingInfo succeeds",
                        "minimally specified (type %s, major %s): the library does not stat it" % (node["type"], node["major"]))
        else:
            h = node["host"]
            builder.add("cdi.inject.device_node", PASS, subject, "fillMissingInfo succeeds",
                        "host %s %s:%s" % (h["type"], h["major"], h["minor"]))
