# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE (gpuprobe.layers cdi layer): what the spec alone says about the libraries it mounts, before any container.

- ``cdi.host.library_soname``: the ELF SONAME of every file mounted at a library name (lib*.so*) against that name:
  the loader finds a file by the name the spec gives it and the library it is answers. NVML's library mounted as
  libnvidia-ptxjitcompiler.so.1 is "the JIT compiler" to CUDA, which then finds no JIT entry point
  (CUDA_ERROR_JIT_COMPILER_NOT_FOUND at PTX load). FAIL when the two names are different libraries and one of them
  is the driver's; WARN for other libraries, or the same library of another major version; NOT_RUN without a SONAME.
- ``cdi.host.driver_library``: a driver library (libnvidia-*) the spec mounts is the driver root's
  <name>.so.<running driver version> (the same file or the same content; libcuda has cdi.host.libcuda_identity).
- ``cdi.nvidia.<lib>_noexec`` (libcuda, ptxjit, nvml): the library the probe loads (libcuda.so.1, CUDA's
  libnvidia-ptxjitcompiler.so.1, libnvidia-ml.so.1) is mounted with ``noexec``: the loader cannot map its code
  ("failed to map segment from shared object"). A certain failure: its step is in ``_attribution.PREDICTS``.
- ``cdi.nvidia.<lib>_path``: that library is mounted where an image's loader will not look for it by name: not in a
  directory every distribution's loader searches by default (LIBRARY_DIRS), not in a directory of the spec's
  LD_LIBRARY_PATH, and no spec hook updates the loader's cache or makes links; or under another name than the one
  asked for and nothing makes that name. A WARN, never a FAIL, and no PREDICTS row: the image's own LD_LIBRARY_PATH
  or ld.so.conf may cover the directory (CUDA images set /usr/local/nvidia/lib64), which the cdi layer cannot see.
"""

from __future__ import annotations

import os
import posixpath
import re

from ansible_collections.gpuprobe.layers.plugins.module_utils._common.digest import same_file
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import FAIL, NOT_RUN, PASS, WARN
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi.elf import name_major, name_stem, read_library
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.fs import PATH_ERRORS, under_root

# The libraries the probe's CUDA loads by name: check key -> (the name the loader asks for, the step that fails)
LOADED = {
    "libcuda": ("libcuda.so.1", "dlopen"),
    "ptxjit": ("libnvidia-ptxjitcompiler.so.1", "cuModuleLoadData"),
    "nvml": ("libnvidia-ml.so.1", None),
}
# Directories some distribution's loader searches without being told (glibc's trusted directories on Debian/Ubuntu
# multiarch and on Fedora/RHEL, musl's default path, and /usr/local/lib of Debian's and musl's configuration).
LIBRARY_DIRS = ("/lib", "/usr/lib", "/lib64", "/usr/lib64", "/usr/local/lib", "/lib/x86_64-linux-gnu",
                "/usr/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu",
                "/lib/powerpc64le-linux-gnu", "/usr/lib/powerpc64le-linux-gnu")
_LIBRARY_NAME = re.compile(r"^lib[^/]*\.so(\.[0-9]+)*$")
_DRIVER_STEM = re.compile(r"^(libcuda|libnvidia-[A-Za-z0-9_-]+|libnvcuvid|libnvoptix|lib[A-Za-z0-9]+_nvidia)$")
# GLVND's vendor-neutral names a driver library is mounted under on purpose
_ALIASES = {"libGLX_indirect": ("libGLX_nvidia",)}
MAX_LISTED = 4096
# the driver libraries the probe's CUDA and NVML load besides libcuda: always compared with the driver root's file
PROBE_LIBRARIES = ("libnvidia-ml", "libnvidia-ptxjitcompiler")


def _norm_dir(path):
    path = posixpath.normpath(path or "/")
    return path[4:] if path.startswith("/usr/") else path  # merged /usr: /lib and /usr/lib alike


def _is_bind(mount):
    opts = mount.get("options") or []
    return mount.get("type", "") in ("", "bind", "rbind", None) or "bind" in opts or "rbind" in opts


def files_given(mount, root, stem):
    """The container paths of the files named <stem>.so* that ``mount`` gives: the mount itself, or the entries of a
    mounted directory (at most MAX_LISTED looked at)."""
    point = mount.get("containerPath") or ""
    if name_stem(point) == stem and ".so" in posixpath.basename(point):
        return [point]
    full = under_root(root, mount.get("hostPath") or "")
    if not os.path.isdir(full):
        return []
    try:
        names = sorted(os.listdir(full))[:MAX_LISTED]
    except OSError:
        return []
    return [posixpath.join(point, n) for n in names if name_stem(n) == stem and ".so" in n]


def _loader_help(edits):
    """What the spec does for the loader: (its LD_LIBRARY_PATH directories, the folders a hook of it adds to the
    loader's cache, whether a hook adds folders it does not name or makes links: then anything may be found)."""
    dirs, folders, anything = [], [], False
    for item in edits.get("env") or []:
        key, _sep, value = str(item).partition("=")
        if key == "LD_LIBRARY_PATH":
            dirs += [d for d in value.split(":") if d]
    for hook in edits.get("hooks") or []:
        words = [str(hook.get("path") or "")] + [str(a) for a in hook.get("args") or []]
        text = " ".join(words)
        if "create-symlinks" in text:
            anything = True  # links made where the hook says: a name and a place the cdi layer does not follow
        if "ldcache" in text or "ldconfig" in text:
            named = [words[i + 1] for i, w in enumerate(words[:-1]) if w == "--folder"]
            folders += named
            anything = anything or not named
    return dirs, folders, anything


def _findable(path, wanted, edits):
    """Why the loader will not find ``path`` when it asks for ``wanted`` by name (None when it may)."""
    dirs, folders, anything = _loader_help(edits)
    if anything:
        return None
    directory, name = posixpath.dirname(path), posixpath.basename(path)
    cached = [d for d in folders if _norm_dir(d) == _norm_dir(directory)]
    if name != wanted and not cached:  # ldconfig makes the SONAME link in a folder it caches
        return "mounted as %s; the loader asks for %s and no spec edit makes that name" % (name, wanted)
    if cached or any(_norm_dir(d) == _norm_dir(directory) for d in LIBRARY_DIRS + tuple(dirs)):
        return None
    return "in %s, which no distribution's loader searches by default, no LD_LIBRARY_PATH of the spec names and no " \
           "spec hook adds to the loader's cache" % directory


def loader_checks(builder, edits, root="/"):
    """cdi.nvidia.<lib>_noexec and cdi.nvidia.<lib>_path for every library of LOADED the spec mounts."""
    mounts = [m for m in edits.get("mounts") or [] if _is_bind(m)]
    for key, (wanted, _step) in sorted(LOADED.items()):
        stem = name_stem(wanted)
        given = [(m, p) for m in mounts for p in files_given(m, root, stem)]
        if not given:
            continue  # not mounted: cdi.nvidia.libcuda / cdi.nvidia.ptxjit say so where it matters
        noexec = [p for m, p in given if "noexec" in (m.get("options") or [])]
        if len(noexec) == len(given):
            builder.add("cdi.nvidia.%s_noexec" % key, WARN, ", ".join(noexec), "mounted without noexec",
                        "noexec: the loader cannot map its code (failed to map segment from shared object)")
        else:
            builder.add("cdi.nvidia.%s_noexec" % key, PASS, ", ".join(p for _m, p in given), "mounted without noexec",
                        "exec" + (" (also noexec at %s)" % ", ".join(noexec) if noexec else ""))
        why = [_findable(p, wanted, edits) for _m, p in given]
        if all(why):
            builder.add("cdi.nvidia.%s_path" % key, WARN, wanted, "where the loader looks for %s" % wanted, "; ".join(why))
        else:
            builder.add("cdi.nvidia.%s_path" % key, PASS, wanted, "where the loader looks for %s" % wanted,
                        ", ".join(p for (_m, p), w in zip(given, why) if not w))


def _names_differ(name, soname):
    """(status, why) of a library mounted as ``name`` whose SONAME is ``soname``."""
    stem, other = name_stem(name), name_stem(soname)
    if stem != other and other not in _ALIASES.get(stem, ()):
        driver = bool(_DRIVER_STEM.match(stem) or _DRIVER_STEM.match(other))
        return (FAIL if driver else WARN), "the file is %s, mounted as %s: whoever loads %s gets another library" % (
            soname, name, name)
    major, want = name_major(soname), name_major(name)
    single = want is not None and posixpath.basename(name) == "%s.so.%s" % (stem, want)
    if single and major is not None and major != want:
        return WARN, "the file is %s (major version %s), mounted as %s" % (soname, major, name)
    return PASS, None


def soname_check(builder, mount, full):
    """cdi.host.library_soname of one mount at a library name whose source is an ELF file."""
    point = mount.get("containerPath") or ""
    name = posixpath.basename(point)
    if not _LIBRARY_NAME.match(name):
        return None
    found = read_library(full)
    if not found["elf"]:
        return None  # absent, a directory or no ELF file: cdi.host.mount_source says so
    if not found["soname"]:
        builder.add("cdi.host.library_soname", NOT_RUN, point, "an ELF SONAME naming %s" % name_stem(name),
                    "%s: %s" % (mount.get("hostPath"), found.get("soname_why") or "no SONAME"))
        return found
    status, why = _names_differ(name, found["soname"])
    builder.add("cdi.host.library_soname", status, point, "an ELF SONAME naming %s" % name_stem(name),
                why or "%s (SONAME of %s)" % (found["soname"], mount.get("hostPath")))
    return found


def driver_library_check(builder, mount, full, driver_root_file, soname):
    """cdi.host.driver_library: a driver library other than libcuda (whose own check is cdi.host.libcuda_identity) is
    the driver root's <stem>.so.<running driver version>. ``driver_root_file(stem)``: (host path or None, why)."""
    stem = name_stem(mount.get("containerPath"))
    try:
        real = os.path.realpath(full)
    except PATH_ERRORS:  # a name with a NUL byte (no such file): the name itself
        real = full
    versioned = re.match(r"^%s\.so\.\d{3,}\.\d+" % re.escape(stem), posixpath.basename(real))
    if stem == "libcuda" or not stem.startswith("libnvidia-") or not (stem in PROBE_LIBRARIES or versioned):
        return  # libcuda has its own check; a library the driver does not version (egl-wayland) has no such file
    want, why = driver_root_file(stem)
    point, source = mount.get("containerPath"), mount.get("hostPath")
    if want is None:
        builder.add("cdi.host.driver_library", NOT_RUN, point, observed="%s: %s" % (source, why))
        return
    same, how = same_file(full, want[1])
    if same is None:
        builder.add("cdi.host.driver_library", NOT_RUN, point, "the content of %s" % want[0], "%s: %s" % (source, how))
        return
    builder.add("cdi.host.driver_library", PASS if same else WARN, point, "the content of %s" % want[0],
                "%s: %s%s" % (source, how, "; its SONAME is %s" % soname if soname and not same else ""),
                hint=None if same else "the container would load another %s than the running driver's: mount %s" % (
                    stem, want[0]))


def library_checks(builder, edits, root="/", driver_root_file=None):
    """Every check of this module over the merged edits (``driver_root_file(stem)`` -> ((host path, path under root)
    or None, why)); the loader checks only for an NVIDIA spec (``loader_checks``, called by the vendor checks)."""
    for m in edits.get("mounts") or []:
        if not _is_bind(m) or not m.get("hostPath"):
            continue
        full = under_root(root, m["hostPath"])
        found = soname_check(builder, m, full)
        if found is not None and driver_root_file is not None:
            driver_library_check(builder, m, full, driver_root_file, found.get("soname"))
