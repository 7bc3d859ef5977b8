# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: the NVIDIA driver's file layout, the one place that knows it. Not public API.

A driver root is where the driver's user-space files are, as the node names them (``DRIVER_ROOT_CANDIDATES``: ``/``,
a driver container's ``/run/nvidia/driver``, ``/usr/local/nvidia``, GKE's ``/home/kubernetes/bin/nvidia``). Its
libraries are in one of ``LIB_DIRS`` (in that order), its programs in one of ``BIN_DIRS``; a library file is named
``<stem>.so.<driver version>`` (``library_version`` reads it back). ``root``: the node's filesystem as seen from here
(``/`` on the node, a fixture tree in tests). Two lookups answer different questions:

- ``versioned_library``: which version of a library the driver root itself holds (regular files only, the one
  ``<stem>.so.1`` points at preferred): the host layer's driver root, libraries and versions.
- ``resolve_soname``: the file a soname (``libcuda.so.1``) resolves to in the driver root, as a path under ``root``:
  what a self-built CDI spec mounts.

``library_path`` finds one file name (the running driver's libcuda, compared by the cdi and compute layers),
``library_dirs_with`` the directories holding a name (the host control's loader path), ``binary_path`` a program.
"""

from __future__ import annotations

import glob
import os
import posixpath
import re
import stat

DRIVER_ROOT_CANDIDATES = ("/", "/usr/local/nvidia", "/run/nvidia/driver", "/home/kubernetes/bin/nvidia")
LIB_DIRS = ("lib64", "lib/x86_64-linux-gnu", "lib/aarch64-linux-gnu", "lib", "usr/lib64", "usr/lib/x86_64-linux-gnu",
            "usr/lib/aarch64-linux-gnu", "usr/lib")
BIN_DIRS = ("bin", "usr/bin")
# the driver libraries the host layer looks for (stems): the CUDA driver API, NVML, the PTX JIT compiler CUDA loads
LIBRARIES = ("libcuda", "libnvidia-ml", "libnvidia-ptxjitcompiler")

# the driver version in a driver library's file name (libcuda.so.580.159.04) or a firmware path
_DRIVER_LIB = re.compile(r"^(libcuda|libnvidia-[A-Za-z0-9_-]+|libnvcuvid|libnvoptix|libGLX_nvidia|libEGL_nvidia|"
                         r"libGLESv[12]_CM_nvidia|libGLESv2_nvidia|libcudadebugger)\.so\.(\d{3,}\.\d+(?:\.\d+)?)$")
_FIRMWARE = re.compile(r"/firmware/nvidia/(\d{3,}\.\d+(?:\.\d+)?)(/|$)")


def under(root, path):
    """``path`` (a node path) as seen from ``root``."""
    return os.path.join(root or "/", path.lstrip("/"))


def library_version(path):
    """The driver version carried by a driver library's file name (libcuda.so.580.159.04) or a
    firmware path (/lib/firmware/nvidia/580.159.04/...), else None."""
    m = _DRIVER_LIB.match(posixpath.basename(path or ""))
    if m:
        return m.group(2)
    m = _FIRMWARE.search(path or "")
    return m.group(1) if m else None


def _version_key(version):
    return [int(p) if p.isdigit() else 0 for p in version.split(".")]


def _is_regular(path):
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def versioned_library(root, driver_root, stem):
    """{path, version, versions_present} of the ``stem``.so.<version> regular files in the first library directory of
    ``driver_root`` holding one (the version ``stem``.so.1 points at, else the highest), or None."""
    pattern = re.compile(r"^%s\.so\.(\d+\.\d+(?:\.\d+)*)$" % re.escape(stem))
    for sub in LIB_DIRS:
        rel_dir = os.path.join(driver_root, sub)
        try:
            names = os.listdir(under(root, rel_dir))
        except OSError:
            continue
        # only real files count: a root whose versioned names are links into another driver root (Ubuntu's
        # /usr/lib/libcuda.so.1 -> /usr/local/nvidia/...) does not hold the driver itself
        versions = sorted((m.group(1) for m in (pattern.match(n) for n in names)
                           if m and _is_regular(under(root, os.path.join(rel_dir, m.group(0))))), key=_version_key)
        if not versions:
            continue
        chosen = versions[-1]
        try:  # prefer the file the .so.1 soname link points at
            target = os.path.basename(os.readlink(under(root, os.path.join(rel_dir, stem + ".so.1"))))
            match = pattern.match(target)
            if match and match.group(1) in versions:
                chosen = match.group(1)
        except OSError:
            pass
        return {"path": os.path.join(rel_dir, "%s.so.%s" % (stem, chosen)), "version": chosen, "versions_present": versions}
    return None


def detect_driver_root(root, given=None):
    """The driver root (as seen from the node): the first candidate holding libcuda.so.<version> as a regular file,
    else the first holding libnvidia-ml.so.<version> (an NVML-only install), else None. ``given``: the only candidate."""
    candidates = [given] if given else DRIVER_ROOT_CANDIDATES
    for stem in ("libcuda", "libnvidia-ml"):
        for candidate in candidates:
            if versioned_library(root, candidate, stem):
                return candidate
    return None


def library_path(root, driver_root, name):
    """The node path of the file ``name`` (e.g. libcuda.so.580.159.04) in the first library directory of
    ``driver_root`` holding it (links followed), or None."""
    for sub in LIB_DIRS:
        candidate = posixpath.join(driver_root, sub, name)
        if os.path.isfile(under(root, candidate)):
            return candidate
    return None


def resolve_soname(root, driver_root, soname):
    """In the first library directory of ``driver_root`` holding either: the real file (links resolved) ``soname``
    names, else the newest file of that library named with a driver version; a path under ``root``, or None."""
    base = soname.split(".so", 1)[0] + ".so"
    for sub in LIB_DIRS:
        d = under(root, posixpath.join(driver_root, sub))
        candidate = posixpath.join(d, soname)
        if os.path.exists(candidate):
            return os.path.realpath(candidate)
        versioned = sorted(p for p in glob.glob(posixpath.join(d, base + ".*")) if library_version(p))
        if versioned:
            return os.path.realpath(versioned[-1])
    return None


def library_dirs_with(driver_root, name):
    """The library directories of ``driver_root`` (on this machine) that hold ``name``, in LIB_DIRS order, one per
    real directory."""
    out = []
    for sub in LIB_DIRS:
        d = os.path.join(driver_root, sub)
        if os.path.exists(os.path.join(d, name)) and os.path.realpath(d) not in [os.path.realpath(x) for x in out]:
            out.append(d)
    return out


def binary_path(root, driver_root, name):
    """The program ``name`` (e.g. nvidia-smi) in the first program directory of ``driver_root``, as a path under
    ``root``, or None."""
    for sub in BIN_DIRS:
        candidate = under(root, posixpath.join(driver_root, sub, name))
        if os.path.isfile(candidate):
            return candidate
    return None
