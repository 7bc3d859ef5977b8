# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE (gpuprobe.layers cdi layer): the probe's integrity in the container, judged from the spec alone.

The probe runs as ``python3 -I -S /gpuprobe-<random>/probe.py <config>`` in the container. What it trusts there:
its own file and directory, the interpreter (python3 looked up on the image's PATH, and the file that name links
to), the standard library, the dynamic loader, libc and the other libraries python3 and its ctypes/hashlib
modules load, and the loader's configuration (/etc/ld.so.preload, .cache, .conf). A spec edit that reaches any of
them can replace the probe with something that prints what a working GPU would print. ``integrity_checks``
FAILs each requested device whose merged edits reach one of them (``cdi.inject.probe_integrity``): the node is
then FAILED_AT_CDI and the probe never runs (the gate blocks on a cdi FAIL).

What reaches: a mount (of any type) or a device node at a trusted path, under a trusted directory, or over a
parent directory of one (``/``, ``/usr``, ``/usr/lib``...); a hook that creates or changes a file there
(nvidia-cdi-hook create-symlinks --link TARGET::LINK, chmod --path P); an env edit that redirects the interpreter
or its loader (LD_PRELOAD, LD_AUDIT, GCONV_PATH; LD_LIBRARY_PATH naming a directory where the spec mounts a trusted library;
PATH naming a directory other than the standard ones, since the runtime looks python3 up on it). PYTHON*
variables are ignored by ``-I`` and are not a FAIL (the PASS row says so).

Library and interpreter names are refused wherever a spec mounts them, not only in the standard directories: the
image's own LD_LIBRARY_PATH (CUDA images set /usr/local/nvidia/lib64) and the target of its python3 link are not
known before the container starts. No GPU spec mounts a file named libc.so.6 or python3.

Hooks: the NVIDIA hook's own subcommands (update-ldcache, create-symlinks, enable-cuda-compat, chmod,
disable-device-node-modification, create-soname-symlinks) write known places and are judged by their arguments;
update-ldcache rewrites /etc/ld.so.cache from the spec's folders, whose trusted library names are judged as
mounts; enable-cuda-compat adds the image's own CUDA compat dir to the loader's configuration (the image's files,
not the spec's); create-soname-symlinks names its links after the SONAMEs in a folder, which is not read here.
Any other hook is code that runs before the probe and can rewrite the container's root filesystem: a WARN naming
it (it is the node's own, root-owned and audited by cdi.security.hook_writable), a FAIL when one of its arguments
is a trusted path.
"""

from __future__ import annotations

import os
import posixpath
import re

from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import FAIL, PASS, WARN, make_check
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.fs import under_root

CHECK_ID = "cdi.inject.probe_integrity"

CHECKS = {
    CHECK_ID: {
        "title": "no edit of a requested device reaches what the probe trusts in the container: its file and directory "
                 "(/gpuprobe, /gpuprobe-<random>), python3 (on the PATH dirs, and any file named python3*), the standard "
                 "library (/usr/lib/python3*, /usr/local/lib/python3*, lib64 forms) and pyvenv.cfg, the dynamic loader "
                 "(ld-linux*, ld-musl*), libc and the libraries python3 loads (libm, libz, libexpat, libffi, libcrypto, "
                 "libpython3...), /etc/ld.so.preload/.cache/.conf(.d); a mount or device node there or over a parent directory (/, /usr, "
                 "/usr/lib), a hook that writes there, LD_PRELOAD, LD_AUDIT, GCONV_PATH, LD_LIBRARY_PATH to a spec-mounted trusted "
                 "library, a PATH beyond the standard dirs",
        "fail": "the spec can replace the probe, its interpreter or the libraries it runs on, so what runs in the container "
                "could print a verified kernel without one: the device is a cdi FAIL and the probe never runs for it (runtime "
                "and compute NOT_RUN, blocked by cdi FAIL). WARN: a hook other than the NVIDIA hook's own subcommands runs "
                "before the probe and may rewrite the container's files; its effect is not known before the container starts",
        "next": "remove the edit from the spec (the object in observed); a library directory, /usr or / mounted whole "
                "hides the image's own files; find out who wrote the spec",
    },
}

# the probe's directory in the container: the old fixed /gpuprobe, and the per-run /gpuprobe-<16 hex> that
# _runtime.catalogue.probe_in_container draws (a test ties the two)
PROBE_DIR = re.compile(r"^/gpuprobe(-[0-9a-f]{16})?(/|$)")
# the image's PATH dirs where the runtime looks python3 up (OCI default PATH; Debian and python images)
PATH_DIRS = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
INTERPRETER = re.compile(r"^python3(\.[0-9]+)*[a-z]*$")
STDLIB = re.compile(r"^(/usr(/local)?)?/lib(64)?/python3[^/]*(/|$)")
# the loader (glibc, musl), libc, and what python3, its ctypes and hashlib modules, and libcuda link
LIBRARY = re.compile(r"^(ld(-linux[^/]*|-musl-[^/]*|64)?\.so(\.[0-9]+)*|libc\.musl-[^/]*|"
                     r"lib(c|m|pthread|dl|rt|util|z|expat|ffi|crypto|ssl|bz2|lzma|crypt|mpdec|gcc_s|uuid|nsl|"
                     r"python3[^/]*)\.so(\.[0-9A-Za-z]+)*)$")
LOADER_CONFIG = ("/etc/ld.so.preload", "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d")
# read by python3 at startup, -I or not: pyvenv.cfg (next to the executable or one dir up: its 'home' moves the
# standard library) and pybuilddir.txt (a build tree's extension modules dir)
STARTUP_FILES = ("pyvenv.cfg", "pybuilddir.txt")
# env that makes the loader or glibc load code into the interpreter (GCONV_PATH: iconv modules, dlopened when a
# charset is converted); PYTHON* is ignored under -I
LOADING_ENV = ("LD_PRELOAD", "LD_AUDIT", "GCONV_PATH")
# library dirs (and their parents) whose whole replacement hides libc and the loader
LIBRARY_DIR = re.compile(r"^(/usr(/local)?)?/lib(32|64|x32)?(/[A-Za-z0-9_]+-linux-[A-Za-z0-9_]+)?$")
# anchors: a mount or node at a proper parent of one of these hides it
ANCHORS = ("/gpuprobe-0/probe.py", "/etc/ld.so.preload", "/usr/lib/python3", "/usr/local/lib/python3", "/usr/lib64/python3",
           "/usr/local/lib64/python3", "/lib/python3", "/lib64/python3",
           "/lib/x86_64-linux-gnu/libc.so.6") + tuple(d + "/python3" for d in PATH_DIRS)
NVIDIA_HOOKS = ("nvidia-cdi-hook", "nvidia-ctk")
NVIDIA_SUBCOMMANDS = ("update-ldcache", "create-symlinks", "enable-cuda-compat", "chmod", "disable-device-node-modification",
                      "create-soname-symlinks")
IGNORED_ENV = re.compile(r"^PYTHON[A-Z0-9_]*$")
MAX_LISTED = 4096  # entries of a mounted host directory looked at for trusted names


def clean(path):
    """A container path as runc cleans it (as _runtime.compare.clean_path; the cdi layer does not import the runtime)."""
    return "/" + posixpath.normpath("/" + str(path or "")).lstrip("/")


# what the probe trusts, asked in this order: (whether the cleaned container path p, whose last name is n, is it; what
# it is, %s the path)
TRUSTED = (
    (lambda p, n: PROBE_DIR.match(p), "the probe's directory (%s)"),
    (lambda p, n: STDLIB.match(p), "the interpreter's standard library (%s)"),
    (lambda p, n: p in PATH_DIRS, "a PATH dir where the runtime looks python3 up (%s)"),
    (lambda p, n: INTERPRETER.match(n), "the interpreter (python3, or the file it links to: %s)"),
    (lambda p, n: LIBRARY.match(n), "the loader or a library python3 loads (%s)"),
    (lambda p, n: n in STARTUP_FILES, "a file python3 reads at startup, -I or not (%s)"),
    (lambda p, n: any(p == c or p.startswith(c + "/") for c in LOADER_CONFIG), "the dynamic loader's configuration (%s)"),
    (lambda p, n: LIBRARY_DIR.match(p), "a library directory of the loader (%s: libc, the loader)"),
)


def reaches(path):
    """What the probe trusts that a file, directory or node at the container path ``path`` replaces or hides, or None."""
    p = clean(path)
    name = posixpath.basename(p)
    for test, what in TRUSTED:
        if test(p, name):
            return what % p
    for anchor in ANCHORS:
        if p == "/" or anchor.startswith(p + "/"):
            return "a parent directory of %s (%s)" % ("the probe's directory" if anchor.startswith("/gpuprobe") else anchor, p)
    return None


def _listed(root, host_path):
    """The names in a mounted host directory (at most MAX_LISTED), [] for a file or what cannot be listed."""
    full = under_root(root, host_path or "")
    if not host_path or not os.path.isdir(full):
        return []
    names = []
    try:
        for entry in os.scandir(full):
            names.append(entry.name)
            if len(names) >= MAX_LISTED:
                break
    except OSError:
        return []
    return names


def _mount_findings(mount, root):
    """(why, trusted library dirs) of one mount: what its containerPath, or a name in the host directory it mounts,
    reaches; the dirs where it puts a trusted library (for LD_LIBRARY_PATH)."""
    target = clean(mount.get("containerPath"))
    found, lib_dirs = [], set()
    why = reaches(target)
    if why:
        found.append("mount %s -> %s reaches %s" % (mount.get("hostPath"), target, why))
        if LIBRARY.match(posixpath.basename(target)):
            lib_dirs.add(posixpath.dirname(target))
    for name in _listed(root, mount.get("hostPath")):
        inner = reaches(posixpath.join(target, name))
        if inner and not why:
            found.append("mount %s -> %s puts %s there: %s" % (mount.get("hostPath"), target, name, inner))
        if LIBRARY.match(name):
            lib_dirs.add(target)
    return found, lib_dirs


def _flag_values(args, flag):
    out = []
    for i, arg in enumerate(args):
        if arg == flag and i + 1 < len(args):
            out.append(args[i + 1])
        elif arg.startswith(flag + "="):
            out.append(arg[len(flag) + 1:])
    return out


def _nvidia_subcommand(hook):
    """The NVIDIA hook's subcommand (nvidia-cdi-hook SUB ..., nvidia-ctk hook SUB ...), '' for another hook."""
    args = [str(a) for a in hook.get("args") or []]
    if posixpath.basename(str(hook.get("path") or "")) not in NVIDIA_HOOKS or not args:
        return ""
    rest = args[1:]
    if posixpath.basename(args[0]) == "nvidia-ctk" or posixpath.basename(str(hook.get("path"))) == "nvidia-ctk":
        rest = rest[1:] if rest[:1] == ["hook"] else []
    sub = next((a for a in rest if not a.startswith("-")), None)
    return sub or "?"


def _hook_findings(hook):
    """(FAIL reasons, WARN reasons) of one hook."""
    args = [str(a) for a in hook.get("args") or []]
    label = "hook %s %s" % (hook.get("hookName") or "", " ".join(args[:4]) or hook.get("path"))
    sub = _nvidia_subcommand(hook)
    if sub in NVIDIA_SUBCOMMANDS:
        fails = []
        for link in _flag_values(args, "--link"):
            where = link.split("::", 1)[1] if "::" in link else link
            why = reaches(where)
            if why:
                fails.append("%s creates the link %s: %s" % (label, clean(where), why))
        for path in _flag_values(args, "--path") if sub == "chmod" else []:
            why = reaches(path)
            if why:
                fails.append("%s changes the mode of %s: %s" % (label, clean(path), why))
        return fails, []
    named = []
    for arg in args[1:]:
        for part in arg.split("="):
            named += ["%s (%s)" % (clean(p), reaches(p)) for p in part.split("::") if p.startswith("/") and reaches(p)]
    if named:
        return ["%s, a hook that can write the container's files, names %s" % (label, "; ".join(named))], []
    what = "the NVIDIA hook's unknown subcommand %r" % sub if sub else "a hook of its own (%s)" % hook.get("path")
    return [], ["%s runs before the probe and may rewrite the container's files; what it writes is not known before "
                "the container starts" % what]


def _env_findings(env, lib_dirs):
    """(FAIL reasons, ignored notes) of the env edits; ``lib_dirs``: where the spec mounts a trusted library."""
    fails, ignored = [], []
    for entry in env or []:
        key, _sep, value = str(entry).partition("=")
        if key in LOADING_ENV and value.strip(" :"):
            fails.append("env %s=%s: the loader or glibc loads code from there into the interpreter" % (key, value))
        elif key == "LD_LIBRARY_PATH":
            hit = [d for d in value.split(":") if d and clean(d) in lib_dirs]
            if hit:
                fails.append("env LD_LIBRARY_PATH=%s: the loader finds the spec's %s first" % (
                    value, ", ".join("%s/<trusted library>" % clean(d) for d in hit)))
        elif key == "PATH":
            other = [d for d in value.split(":") if clean(d) not in PATH_DIRS or not d.startswith("/")]
            if other:
                fails.append("env PATH=%s: the runtime looks python3 up in %s" % (value, ", ".join(other)))
        elif IGNORED_ENV.match(key):
            ignored.append("%s (ignored: python3 -I)" % key)
    return fails, ignored


def device_findings(edits, root="/"):
    """(FAIL reasons, WARN reasons, ignored notes, number of edits looked at) of one device's merged edits."""
    fails, warns, lib_dirs = [], [], set()
    for mount in edits.get("mounts") or []:
        found, dirs = _mount_findings(mount, root)
        fails += found
        lib_dirs |= dirs
    for node in edits.get("deviceNodes") or []:
        why = reaches(node.get("path"))
        if why:
            fails.append("device node %s reaches %s" % (clean(node.get("path")), why))
    for hook in edits.get("hooks") or []:
        hook_fails, hook_warns = _hook_findings(hook)
        fails += hook_fails
        warns += hook_warns
    env_fails, ignored = _env_findings(edits.get("env"), lib_dirs)
    count = sum(len(edits.get(k) or []) for k in ("mounts", "deviceNodes", "hooks", "env"))
    return fails + env_fails, warns, ignored, count


def integrity_checks(per_device, root="/"):
    """``cdi.inject.probe_integrity`` per requested device: ``per_device`` is a list of (qualified name, its merged
    edits). One FAIL per edit that reaches what the probe trusts, a WARN per hook whose writes are unknown, else a
    PASS."""
    out = []
    for name, edits in per_device:
        fails, warns, ignored, count = device_findings(edits, root)
        expected = "no edit reaches the probe, python3, its stdlib, loader, libc or the loader's configuration"
        for why in fails:
            out.append(make_check(CHECK_ID, FAIL, name, expected, why, hint=CHECKS[CHECK_ID]["next"]))
        for why in warns:
            out.append(make_check(CHECK_ID, WARN, name, expected, why,
                                  hint="a hook that is not the NVIDIA hook's: check what it writes in the container"))
        if not fails and not warns:
            out.append(make_check(CHECK_ID, PASS, name, expected, "none of %d edits does%s" % (
                count, "; %s" % ", ".join(ignored) if ignored else "")))
    return out
