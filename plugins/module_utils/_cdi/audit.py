# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE (gpuprobe.layers cdi layer): security audit of spec dirs, spec files, mounts and hooks."""

from __future__ import annotations

import os
import posixpath
import stat

from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import FAIL, NOT_RUN, PASS, WARN
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi.files import under_root


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


def audit(builder, files, dirs, edits, root="/", used=None, dir_order=None):
    """Security audit of spec dirs, spec files (and link targets), mounts and hooks.

    What the requested devices use FAILs: the spec files that provide them (``used``: their paths; a FAIL
    keeps the probe from running such a spec), the dirs from which a spec could replace or override them
    (the dir of a providing spec and every dir of higher priority; ``dir_order``: the dirs, lowest priority
    first), the mounts and hooks of their merged edits. The rest (files, dirs and mounts nobody requested)
    is a WARN naming it: it is a risk for whoever requests it, not a fault of this request."""
    used = set(used or [])
    order = list(dir_order or dirs)
    used_prio = [order.index(r["dir"]) for r in files if r["path"] in used and r.get("dir") in order]
    floor = min(used_prio) if used_prio else None
    for d in dirs:
        try:
            st = os.stat(d)
        except OSError:
            continue
        problems = _writable_by_others(st)
        reaches = floor is not None and d in order and order.index(d) >= floor
        builder.add("cdi.security.spec_dir_writable", (FAIL if reaches else WARN) if problems else PASS, d,
                    "root-owned, not writable by others",
                    "; ".join(problems) + ("" if reaches else " (no spec of the requested devices can be placed or overridden here)")
                    if problems else "mode %04o uid 0" % stat.S_IMODE(st.st_mode))
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
        mine = rec["path"] in used
        builder.add("cdi.security.spec_file_writable", (FAIL if mine else WARN) if problems else PASS, rec["path"],
                    "root-owned, not writable by others",
                    "; ".join(problems) + ("" if mine else " (provides none of the requested devices)")
                    if problems else "mode %04o uid 0" % stat.S_IMODE(st.st_mode))
    merged = set((m.get("hostPath"), m.get("containerPath")) for m in edits["mounts"])
    for rec in files:
        spec = rec.get("spec") or {}
        blocks = [(rec["path"], spec.get("containerEdits") or {})]
        blocks.extend(("%s device %s" % (rec["path"], dev.get("name")), dev.get("containerEdits") or {}) for dev in spec.get("devices") or [])
        for where, block in blocks:
            for m in block.get("mounts") or []:
                mine = rec["path"] in used and (m.get("hostPath"), m.get("containerPath")) in merged
                _audit_mount(builder, m, where, FAIL if mine else WARN)
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


def _audit_mount(builder, mount, where, status):
    why = sensitive_mount(mount)
    if why:
        builder.add("cdi.security.sensitive_mount", status, "%s in %s" % (mount.get("hostPath"), where), "no sensitive host path",
                    why if status == FAIL else why + " (not in the requested devices' edits)")
