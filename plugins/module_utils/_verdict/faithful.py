# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: the one rule that puts a failure on the spec; not public API.

When the runtime applied an edit faithfully (the runtime layer observed the object exactly as the edit asked) and the
failure is located at what that edit made, the spec is the cause: ``points_to: cdi``, naming the edit and quoting the
runtime's or the loader's words. One rule over three things, read from the records, not from a table of messages:

- **where the failure sits** (``failure_sites``): the paths a runtime's start error names (a mount's source or
  target, also under the container's root directory, a device node, a hook the engine does not also add; a hook by
  number where that number can only be a spec hook beside the engine's own, ``_hooks_by_number``); the device node
  whose open() the runtime layer saw refused; the file the loader's words name, or the library name it could not find
  (the runtime's loader check, the probe's dlopen); the library that failed a step (the libcuda that answered a
  libcuda failure, the PTX JIT compiler CUDA loads at PTX load); the driver libraries the binding found not to be the
  driver root's (``foreign_libraries``);
- **the edit that made it** (``edits_at``): the edits the start error names, the deviceNode of that path, the mount
  of that file (or of a directory holding it), the mount that gives that library name;
- **applied as asked** (``as_asked``): a container that did not start over an edit its runtime names, the runtime
  not refused itself (RUNTIME_REFUSED), did what the edit asked; otherwise the runtime layer's checks of that edit
  PASSed (present, type, source: a mount the runtime made noexec or read-write against the spec is a WARN there, so
  not as asked), and for a device node, whose cgroup permissions the container cannot show, the outcome is the one
  the edit asks for: permissions without 'r' or 'w' deny the driver's open(O_RDWR) (EPERM/EACCES); declared numbers
  other than the host node's give another device (ENXIO/ENODEV). A denial the permissions do not ask for is the
  runtime's.

"Edits not applied -> runtime" stays for edits not applied or applied differently, and a runtime's own refusal
(``runtime.start.permission_denied``, RUNTIME_REFUSED) stays the runtime's.
"""

from __future__ import annotations

import posixpath
import re

from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import FAIL, PASS
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.vocab import HOOK_STAGES

_PATH = re.compile(r"/[^\s:\"'`,;()\[\]{}<>]+")
_NOT_FOUND = "cannot open shared object file"
# the libraries CUDA and the probe load by name, and the failures that sit at each
PTXJIT = "libnvidia-ptxjitcompiler.so.1"
LIBCUDA = "libcuda.so.1"
LIBCUDA_CAUSED = ("compute.dlopen.libcuda", "compute.cuda.CUDA_ERROR_STUB_LIBRARY", "compute.cuda.CUDA_ERROR_INSUFFICIENT_DRIVER",
                  "compute.cuda.SYMBOL_NOT_FOUND", "compute.cuda.CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
                  "compute.driver.binding")
BINDING = "compute.driver.binding"
LIBRARY_AT_STEP = {"compute.cuda.CUDA_ERROR_JIT_COMPILER_NOT_FOUND": PTXJIT}
# runc: "error running hook #N" (v1.1, the number in its stage), "error running <stage> hook #N" (from v1.2)
_HOOK_NUMBER = re.compile(r"error running (?:(%s) )?hook #(\d+)" % "|".join(HOOK_STAGES))
_HOOK_OUTPUT = ", stdout: "  # runc: what follows is the failing hook's own output, not the runtime's words
# Start signatures (the runtime's own classification of its message, _runtime.START_PATTERNS) that say the
# runtime was refused or lacked something itself: naming an edit's path there is not the edit's doing (mknod of a
# spec's node refused to a rootless runtime, a mount source an LSM denies).
RUNTIME_REFUSED = ("runtime.start.permission_denied", "runtime.start.image_missing")
_DENIED = ("EPERM", "EACCES")
_OTHER_DEVICE = ("ENXIO", "ENODEV")
# the runtime layer's checks of one edit, by the kind of edit (their subject is the edit's container path)
_EDIT_CHECKS = {"deviceNodes": ("runtime.device_node.present", "runtime.device_node.type"),
                "mounts": ("runtime.mount.present", "runtime.mount.source")}


def norm_path(path):
    """A path as the comparisons of attribution see it: normalised, and /usr/lib and /lib alike (merged /usr)."""
    path = posixpath.normpath(path or "")
    return path[4:] if path.startswith("/usr/") else path


def same_path(a, b):
    return bool(a and b) and norm_path(a) == norm_path(b)


def under_path(path, directory):
    return bool(path and directory) and norm_path(path).startswith(norm_path(directory).rstrip("/") + "/")


def _stem(name):
    base = posixpath.basename(name or "")
    return base.split(".so", 1)[0] if ".so" in base else None


def _site(kind, at, words, how=None):
    return {"kind": kind, "at": at, "words": words, "how": how}


def paths_in(text):
    """The absolute paths a message names."""
    return [p.rstrip(".") for p in _PATH.findall(text or "")]


def _edit_paths(edits):
    """(kind, edit, path, container side?) for every path an edit names."""
    for m in edits.get("mounts") or []:
        yield "mounts", m, m.get("hostPath"), False
        yield "mounts", m, m.get("containerPath"), True
    for n in edits.get("deviceNodes") or []:
        yield "deviceNodes", n, n.get("hostPath") or n.get("path"), False
        yield "deviceNodes", n, n.get("path"), True
    for h in edits.get("hooks") or []:
        yield "hooks", h, h.get("path"), False


def _in_rootfs(word, path):
    """``word`` is the container path ``path`` under a container's root directory (…/rootfs/P, …/merged/P)."""
    word = posixpath.normpath(word)
    for form in set((posixpath.normpath(path), norm_path(path), "/usr" + norm_path(path))):
        if word.endswith(form) and word[:-len(form)].endswith(("/rootfs", "/merged")):
            return True
    return False


def edits_named_in(text, edits):
    """(kind, edit) of the edits whose paths the runtime's words name: a host path word for word, a container path
    also under the container's root directory (runc names "<rootfs>/usr/lib/..." or the path inside)."""
    found = []
    for word in paths_in(text):
        for kind, edit, path, inside in _edit_paths(edits):
            if not path or path == "/":
                continue
            hit = same_path(word, path) or (inside and _in_rootfs(word, path))
            if hit and (kind, edit) not in found:
                found.append((kind, edit))
    return found


def _hooks_by_number(words, runtime, edits):
    """(kind, edit) of the spec hook a runtime's "error running [stage ]hook #N" can only be. The runtime's own hooks
    (``evidence.engine_hooks``, _runtime/own_hooks.py: counted from the engine's configuration, after the spec's in
    each stage) share the numbering: where one of them may hold that number in a stage it may have failed in, or they
    are not known, the number names no spec hook (the runtime's)."""
    match = _HOOK_NUMBER.search(words)
    evidence = runtime.get("evidence") or {}
    spec_hooks = (evidence.get("expected_edits") or {}).get("hooks") or edits.get("hooks") or []
    own = evidence.get("engine_hooks") or {}
    if not match or not spec_hooks or not own.get("known"):
        return []
    number = int(match.group(2))
    found = []
    for stage in [match.group(1)] if match.group(1) else HOOK_STAGES:
        ours = [h for h in spec_hooks if h.get("hookName") == stage]
        if number < len(ours):
            found.append(("hooks", ours[number]))
        elif number < len(ours) + len((own.get("stages") or {}).get(stage) or []):
            return []  # the engine's own hook of that stage
    return found


def _start_site(runtime, edits):
    """Where a container that did not start failed: the edits its runtime's words name (not the failing hook's own
    output; a hook path the engine's own hooks share does not say whose hook failed), or the spec hook its hook number
    can only be (``_hooks_by_number``); none when the runtime's own classification says it was refused
    (RUNTIME_REFUSED: it could not do what was asked, which is the runtime's)."""
    check = next((c for c in runtime.get("checks") or [] if (c.get("id"), c.get("status")) == ("runtime.container.started", FAIL)),
                 None)
    if check is None or runtime.get("signature") in RUNTIME_REFUSED:
        return []
    words = check.get("observed") or ""
    own_paths = set(p for paths in (((runtime.get("evidence") or {}).get("engine_hooks") or {}).get("stages") or {}).values()
                    for p in paths)
    named = [(kind, edit) for kind, edit in edits_named_in(words.split(_HOOK_OUTPUT, 1)[0], edits)
             if kind != "hooks" or edit.get("path") not in own_paths]
    if not named:
        named = _hooks_by_number(words, runtime, edits)
    return [dict(_site("start", None, words), edits=named)] if named else []


def _loader_sites(error, library):
    """Where a failed load of ``library`` sits: the files the loader's words name, else the name it did not find."""
    paths = paths_in(error)
    if paths:
        return [_site("path", p, error) for p in paths]
    return [_site("library", library, error, "not found" if _NOT_FOUND in (error or "") else None)]


def _runtime_sites(runtime, edits):
    out = _start_site(runtime, edits)
    for check in (runtime or {}).get("checks") or []:
        if check.get("status") != FAIL:
            continue
        words = check.get("observed") or ""
        if check.get("id") == "runtime.device_node.open":
            out.append(_site("node", check.get("subject"), "open(O_RDWR) %s" % words, words.split(" ", 1)[0]))
        elif check.get("id") == "runtime.loader.libcuda":
            lib = ((((runtime.get("evidence") or {}).get("observed") or {}).get("libraries")) or {}).get(LIBCUDA) or {}
            if not lib.get("ok") and lib.get("error"):
                out += _loader_sites(lib["error"], LIBCUDA)
    return out


def _compute_sites(compute, failure):
    """Where a compute failure (``_attribution.container_failure``) sits."""
    signature = failure.get("signature")
    steps = (((compute or {}).get("evidence") or {}).get("container") or {}).get("steps") or []
    dlopen = next((s for s in steps if s.get("step") == "dlopen"), None)
    foreign = foreign_libraries(compute) if signature == BINDING else []
    if foreign:  # another driver library than libcuda (NVML, the JIT compiler) is not the driver root's
        return [_site("path", path, "the library %s loaded into the probe is this mount" % path) for path in foreign]
    if signature in LIBCUDA_CAUSED and dlopen is not None:
        if dlopen.get("ok"):
            loaded = dlopen.get("realpath") or dlopen.get("path")
            return [_site("path", loaded, "the container's libcuda %s is this mount" % loaded)] if loaded else []
        return _loader_sites(dlopen.get("error"), LIBCUDA)
    if signature in LIBRARY_AT_STEP:
        library = LIBRARY_AT_STEP[signature]
        return [_site("library", library, "%s at %s: CUDA loads %s by that name" % (signature, failure.get("step"), library))]
    return []


def foreign_libraries(compute):
    """The container paths of the driver libraries the binding found not to be the driver root's (its runs' library
    rows that FAILed), libcuda's included."""
    out = []
    for run in (((compute or {}).get("evidence") or {}).get("driver_binding") or {}).get("runs") or []:
        for row in (run or {}).get("libraries") or [] if isinstance(run, dict) else []:
            if isinstance(row, dict) and row.get("status") == FAIL and row.get("path") and row["path"] not in out:
                out.append(row["path"])
    return out


def failure_sites(records, failure=None, edits=None):
    """Where the failure sits: the runtime record's failures (``failure`` None), or the compute failure ``failure``."""
    if failure is None:
        return _runtime_sites(records.get("runtime") or {}, edits if edits is not None else spec_edits(records))
    return _compute_sites(records.get("compute"), failure)


def edits_at(site, edits):
    """(kind, edit) of the spec edits that made what sits at ``site``."""
    if site["kind"] == "start":
        return site["edits"]
    if site["kind"] == "node":
        return [("deviceNodes", n) for n in edits.get("deviceNodes") or [] if same_path(n.get("path"), site["at"])]
    if site["kind"] == "path":
        return [("mounts", m) for m in edits.get("mounts") or []
                if same_path(m.get("containerPath"), site["at"]) or under_path(site["at"], m.get("containerPath"))]
    stem = _stem(site["at"])
    return [("mounts", m) for m in edits.get("mounts") or [] if stem and _stem(m.get("containerPath")) == stem]


def _checks_of(runtime, kind, edit):
    path = edit.get("path") if kind == "deviceNodes" else edit.get("containerPath")
    return [c for c in (runtime or {}).get("checks") or []
            if c.get("id") in _EDIT_CHECKS[kind] and same_path(c.get("subject"), path)]


def _node_asks(edit, site, host_nodes):
    """What a device node's edit asks that gives the outcome at ``site`` (a sentence), or None."""
    permissions = edit.get("permissions")
    if site["how"] in _DENIED and permissions is not None and not ("r" in permissions and "w" in permissions):
        return "cgroup permissions %s: open(O_RDWR) needs r and w" % (permissions or "none")
    host = (host_nodes or {}).get(edit.get("path")) or {}
    declared = (edit.get("type"), edit.get("major"), edit.get("minor"))
    if site["how"] in _OTHER_DEVICE and host.get("major") is not None and declared[1] is not None \
            and (str(declared[1]), str(declared[2])) != (str(host.get("major")), str(host.get("minor"))):
        return "numbers %s:%s, the host node's are %s:%s" % (declared[1], declared[2], host["major"], host["minor"])
    return None


def as_asked(records, kind, edit, site):
    """Whether the runtime applied ``edit`` as asked, the outcome at ``site`` included; returns what it asked (a
    sentence, '' when nothing beyond the edit itself) or None. A container that did not start over an edit its runtime
    names (not refused, ``_start_site``) did what the edit asked: nothing of it can be observed beyond the words."""
    if site["kind"] == "start":
        return ""
    checks = _checks_of(records.get("runtime"), kind, edit)
    if not checks or any(c.get("status") != PASS for c in checks):
        return None  # not observed, or not as asked: the runtime's (edits not applied)
    if kind == "deviceNodes":
        host_nodes = (((records.get("cdi") or {}).get("evidence") or {}).get("device_nodes_host")) or {}
        return _node_asks(edit, site, host_nodes)
    options = [o for o in edit.get("options") or [] if o in ("noexec", "ro")]
    return "options %s" % ",".join(options) if "noexec" in options else ""


def spec_edits(records):
    """The spec's merged edits as the runtime was given them and as the cdi layer resolved them (both, when they
    differ in form: a runtime in a test sees translated paths)."""
    out = {"env": [], "deviceNodes": [], "mounts": [], "hooks": []}
    for layer in ("runtime", "cdi"):
        edits = (((records.get(layer) or {}).get("evidence") or {}).get("expected_edits")) or {}
        for key in out:
            out[key] += [e for e in edits.get(key) or [] if e not in out[key]]
    return out


def describe_edit(kind, edit):
    """One spec edit as the verdict names it."""
    if kind == "mounts":
        return "mount %s -> %s" % (edit.get("hostPath"), edit.get("containerPath"))
    if kind == "deviceNodes":
        extra = " permissions %s" % edit["permissions"] if edit.get("permissions") else ""
        return "deviceNode %s%s" % (edit.get("path"), extra)
    if kind == "hooks":
        return "hook %s %s" % (edit.get("hookName"), edit.get("path"))
    return "env %s" % edit


def edit_caused(records, edits, failure=None):
    """[{edit, words, asked}] for every spec edit the runtime applied as asked at which the failure sits (the runtime
    record's failures with ``failure`` None, else the compute failure ``failure``)."""
    out = []
    for site in failure_sites(records, failure, edits):
        for kind, edit in edits_at(site, edits):
            asked = as_asked(records, kind, edit, site)
            if asked is None:
                continue
            item = {"edit": describe_edit(kind, edit), "words": site["words"], "asked": asked}
            if item not in out:
                out.append(item)
    return out


def faithful_edits(records):
    """A runtime FAIL that is the faithful execution of a spec edit (``edit_caused`` on the runtime record): [{edit,
    words}] (empty when none)."""
    return [{"edit": c["edit"], "words": c["words"]} for c in edit_caused(records, spec_edits(records))]
