# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE (runtime layer): what the runtime applied, compared edit by edit with what the CDI layer expected
(device nodes, mounts, env), and which libcuda the container's loader finds."""

from __future__ import annotations

import os
import posixpath
import re
import stat

from ansible_collections.gpuprobe.layers.plugins.module_utils._probe import script as _probe
from ansible_collections.gpuprobe.layers.plugins.module_utils._probe import contract as _probe_contract
from ansible_collections.gpuprobe.layers.plugins.module_utils._verdict.attribution import edits_compared
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import FAIL, NOT_RUN, PASS, WARN
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime.catalogue import NODE_TYPES, ENV_KEEP, SIGNATURES, open_signature


def _parse_mode(value):
    """fileMode as written in a spec (int, '0666', '438') -> int, or None."""
    if value is None or value == "":
        return None
    if isinstance(value, int):
        return value & 0o7777
    text = str(value).strip()
    try:
        return int(text, 8) if text.startswith("0") else int(text)
    except ValueError:
        return None


def _host_device(path):
    try:
        st = os.stat(path)
    except OSError:
        return None
    if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
        return {"type": "c" if stat.S_ISCHR(st.st_mode) else "b", "major": os.major(st.st_rdev),
                "minor": os.minor(st.st_rdev)}
    return None


def expected_node(entry):
    """Expected type/major/minor of a CDI deviceNode: from the edit, else from the host node it names."""
    out = {"path": entry.get("path"), "type": entry.get("type"), "major": entry.get("major"),
           "minor": entry.get("minor"), "fileMode": _parse_mode(entry.get("fileMode")),
           "permissions": entry.get("permissions")}
    if out["major"] is None or out["minor"] is None or not out["type"]:
        host = _host_device(entry.get("hostPath") or entry.get("path") or "")
        if host:
            for key in ("type", "major", "minor"):
                if out[key] is None or out[key] == "":
                    out[key] = host[key]
    return out


def _describe_node(node):
    if not node or not node.get("present"):
        return "absent"
    text = node.get("type") or "?"
    if "major" in node:
        text += " %s:%s" % (node["major"], node["minor"])
    return text


def clean_path(path):
    """A container path as runc cleans it before use (Go's filepath.Clean of an absolute path): '.', '..', repeated
    and trailing '/' removed; '/opt/y/' is '/opt/y' and '/opt/a/../x' is '/opt/x'."""
    if not isinstance(path, str) or not path:
        return path
    return "/" + posixpath.normpath("/" + path).lstrip("/")


def container_path(path, resolved=None):
    """Where the runtime put what a spec names at ``path`` (a deviceNode path, a mount's containerPath, a directory
    of its LD_LIBRARY_PATH): the probe's realpath of it inside the container (``resolved``: the inventory's
    resolved_paths), since runc resolves the container's own symlinks (a spec's /lib64/x on a merged-/usr image is
    mounted at /usr/lib64/x); without it, the path as runc cleans it. Every path comparison of the runtime layer
    goes through here."""
    real = (resolved or {}).get(path) if isinstance(path, str) else None
    if isinstance(real, str) and real.startswith("/"):
        return real
    return clean_path(path)


def resolve_request(expected_edits):
    """The spec paths whose place in the container the probe resolves (its config key resolve_paths)."""
    edits = expected_edits or {}
    paths = [n.get("path") for n in edits.get("deviceNodes") or []]
    paths += [m.get("containerPath") for m in edits.get("mounts") or []]
    paths += _ld_library_dirs(edits)
    return sorted(set(p for p in paths if isinstance(p, str) and p.startswith("/")))


def _ld_library_dirs(expected_edits):
    dirs = []
    for item in (expected_edits or {}).get("env") or []:
        key, _sep, value = str(item).partition("=")
        if key == "LD_LIBRARY_PATH":
            dirs += [d for d in value.split(":") if d]
    return dirs


def compare_nodes(builder, expected_nodes, observed_nodes, resolved=None):
    for entry in expected_nodes:
        exp = expected_node(entry)
        path = exp["path"]
        seen = (observed_nodes.get(p) for p in (container_path(path, resolved), clean_path(path), path))
        node = next((n for n in seen if n), {"present": False})
        want_type = NODE_TYPES.get(exp["type"] or "c", exp["type"])
        want = "%s %s:%s" % (want_type, exp["major"], exp["minor"]) if exp["major"] is not None else want_type
        if not node.get("present"):
            builder.add("runtime.device_node.present", FAIL, subject=path, expected=want, observed="absent")
            continue
        builder.add("runtime.device_node.present", PASS, subject=path, expected=want, observed=_describe_node(node))
        if want_type == "fifo" and node.get("type") == "file":
            builder.add("runtime.device_node.type", NOT_RUN, subject=path, expected=want, observed=_describe_node(node),
                        hint="the probe reports a FIFO and a regular file alike ('file'); not compared")
        else:
            type_ok = node.get("type") == want_type
            if want_type in ("c", "b") and exp["major"] is not None and exp["minor"] is not None:
                type_ok = type_ok and node.get("major") == int(exp["major"]) and node.get("minor") == int(exp["minor"])
            builder.add("runtime.device_node.type", PASS if type_ok else FAIL, subject=path, expected=want,
                        observed=_describe_node(node))
        if exp["fileMode"] is not None:
            applied = node.get("mode") == "%04o" % exp["fileMode"]
            builder.add("runtime.device_node.mode", PASS if applied else WARN, subject=path,
                        expected="%04o (fileMode)" % exp["fileMode"], observed=node.get("mode"),
                        hint=None if applied else "the runtime did not apply fileMode; access is decided by the "
                                                  "device cgroup and the mode it did set")
        opened = node.get("open")
        if opened == "OK":
            builder.add("runtime.device_node.open", PASS, subject=path, expected="open(O_RDWR) OK", observed="OK")
            continue
        observed = "%s (%s) as uid %s, mode %s, cgroup permissions %s" % (
            opened, node.get("open_error"), node.get("as_uid"), node.get("mode"), exp["permissions"] or "rwm (default)")
        if opened == "EACCES" and exp["fileMode"] is not None and node.get("mode") == "%04o" % exp["fileMode"]:
            # the runtime applied the spec's fileMode and the container user is denied by it, as the spec asks:
            # not a runtime failure. Seen on the H200 (fileMode 0000, uid 1000): open() EACCES, yet CUDA worked.
            builder.add("runtime.device_node.open", WARN, subject=path, expected="open(O_RDWR) OK", observed=observed,
                        hint="denied by the spec's own fileMode %04o, applied as asked; whether CUDA still works is "
                             "the compute layer's answer" % exp["fileMode"])
            continue
        sig = open_signature(opened)
        builder.add("runtime.device_node.open", FAIL, subject=path, expected="open(O_RDWR) OK", observed=observed,
                    hint=SIGNATURES[sig]["next"])


def _mounts_by_point(mounts):
    by_point = {}
    for m in mounts or []:
        by_point[m.get("mount_point")] = m  # later mounts shadow earlier ones at the same point
    return by_point


def compare_mounts(builder, expected_mounts, observed_mounts, resolved=None):
    by_point = _mounts_by_point(observed_mounts)
    for entry in expected_mounts:
        point = entry.get("containerPath")
        host_path = entry.get("hostPath")
        where = container_path(point, resolved)
        m = by_point.get(where)
        if m is None:
            builder.add("runtime.mount.present", FAIL, subject=point, expected="mounted from %s" % host_path,
                        observed="not a mount point in the container%s" % (" (looked at %s)" % where if where != point else ""))
            continue
        builder.add("runtime.mount.present", PASS, subject=point, expected="mounted from %s" % host_path,
                    observed="%s %s (%s)" % (m.get("fstype"), m.get("root"), ",".join(m.get("options") or [])))
        options = entry.get("options") or []
        is_bind = entry.get("type") in (None, "", "bind", "none") or "bind" in options or "rbind" in options
        if not is_bind or not host_path:
            continue
        want_name = os.path.basename(os.path.realpath(host_path).rstrip("/")) or "/"
        got_name = os.path.basename((m.get("root") or "").rstrip("/")) or "/"
        problems = []
        if want_name != got_name:
            problems.append("source %s, expected a file named %s" % (m.get("root"), want_name))
        if "ro" in options and "ro" not in (m.get("options") or []):
            problems.append("mounted read-write, spec asks ro")
        if ("noexec" in options) != ("noexec" in (m.get("options") or [])):  # noexec decides whether a library loads
            problems.append("mounted %s, spec asks %s" % (("noexec", "exec") if "noexec" not in options else ("exec", "noexec")))
        builder.add("runtime.mount.source", WARN if problems else PASS, subject=point,
                    expected="%s%s" % (want_name, " (ro)" if "ro" in options else ""),
                    observed="; ".join(problems) if problems else "%s%s" % (got_name, " (ro)" if "ro" in (m.get("options") or []) else ""))


def compare_env(builder, expected_env, observed_env):
    for item in expected_env:
        key, _sep, value = str(item).partition("=")
        if key not in observed_env:
            builder.add("runtime.env.value", FAIL, subject=key, expected=value, observed="absent")
        else:
            builder.add("runtime.env.value", PASS if observed_env[key] == value else FAIL, subject=key, expected=value,
                        observed=observed_env[key])


def compare_edits(builder, expected_edits, inventory, start):
    expected_edits = expected_edits or {}
    nodes = inventory.get("nodes") or {}
    resolved = inventory.get("resolved_paths") or {}
    for node in nodes.values():
        node["as_uid"] = (start or {}).get("uid")
    compare_nodes(builder, expected_edits.get("deviceNodes") or [], nodes, resolved)
    compare_mounts(builder, expected_edits.get("mounts") or [], inventory.get("mounts") or [], resolved)
    compare_env(builder, expected_edits.get("env") or [], inventory.get("env") or {})
    groups = inventory.get("groups") or []
    for gid in expected_edits.get("additionalGids") or []:
        builder.add("runtime.group.additional", PASS if int(gid) in groups else FAIL, subject=str(gid),
                    expected="in the process's groups", observed=", ".join(str(g) for g in groups) or "none")
    for hook in expected_edits.get("hooks") or []:
        builder.add("runtime.hook.effect", NOT_RUN, subject="%s %s" % (hook.get("hookName"), hook.get("path")),
                    observed="a hook's effect is not observable from inside the container")


_STUB_LIBCUDA = re.compile(r"/stubs?/libcuda\.so")


def _mount_holding(path, expected_edits, resolved=None):
    """The spec mount that is the file ``path`` (a real path in the container) or a directory holding it, or None."""
    for m in (expected_edits or {}).get("mounts") or []:
        point = container_path(m.get("containerPath"), resolved)
        if point and (point == path or (path or "").startswith(point.rstrip("/") + "/")):
            return m
    return None


def _spec_put_first(path, expected_edits, resolved=None):
    """Whether the spec itself put ``path`` (a file the loader mapped: a real path in the container) where the
    loader finds it: its env's LD_LIBRARY_PATH names the file's directory, or one of its mounts is that file or a
    directory holding it."""
    if _mount_holding(path, expected_edits, resolved) is not None:
        return True
    directory = posixpath.dirname(path or "")
    return any(container_path(d, resolved) == directory for d in _ld_library_dirs(expected_edits))


def loader_check(builder, expected_edits, inventory):
    """runtime.loader.libcuda: which libcuda.so.1 the loader really resolves in the container, against the
    CDI-mounted driver library. Returns where a FAIL points (cdi when the spec put the file first)."""
    libraries = inventory.get("libraries")
    lib = libraries.get(_probe.LIBCUDA) if isinstance(libraries, dict) else None
    subject = _probe.LIBCUDA
    if not isinstance(lib, dict):
        builder.add("runtime.loader.libcuda", NOT_RUN, subject, observed="the probe reported no loader result")
        return None
    in_container = inventory.get("resolved_paths") or {}
    mounted = [m for m in (expected_edits or {}).get("mounts") or []
               if posixpath.basename(clean_path(m.get("containerPath") or "")).startswith("libcuda.so")]
    points = [m.get("containerPath") for m in mounted]
    where = [container_path(p, in_container) for p in points]
    sources = _mounts_by_point(inventory.get("mounts"))
    cache = (((inventory.get("ldconfig") or {}).get("found") or {}).get(_probe.LIBCUDA)) or []
    context = "LD_LIBRARY_PATH %s; ld.so cache %s" % (
        inventory.get("ld_library_path") or "unset", ", ".join(cache) or "lists none")
    want = "the CDI-mounted driver library %s" % ", ".join(points) if points else "the driver's libcuda (no CDI mount)"
    if not lib.get("ok"):
        error = lib.get("error") or "dlopen failed"
        hit = next((p for p, w in zip(points, where) if p in error or w in error), None)
        if hit:  # the loader found the mounted file; whether it loads is the compute layer's answer
            builder.add("runtime.loader.libcuda", PASS, subject, want, "resolved to %s (dlopen refused it: %s); %s"
                        % (hit, error, context))
        elif points and _probe_contract.dlopen_class(error) != "libcuda":
            # the loader found a libcuda.so.1 and stopped at what it needs (a dependency, the image's glibc): which
            # file it found is not known; the compute layer's dlopen signature names the cause
            builder.add("runtime.loader.libcuda", NOT_RUN, subject, want, "cannot tell which file: the loader found a "
                        "libcuda.so.1 but not what it needs; the loader said: %s; %s" % (error, context))
            return None
        elif points:
            builder.add("runtime.loader.libcuda", FAIL, subject, want, "not resolved to the mounted file; the loader said: "
                        "%s; %s" % (error, context))
        else:
            builder.add("runtime.loader.libcuda", NOT_RUN, subject, want,
                        "no libcuda mounted by the spec and none found: %s" % error)
        return "runtime"
    path, real = lib.get("path"), lib.get("realpath")
    if not path:
        builder.add("runtime.loader.libcuda", NOT_RUN, subject, want,
                    "dlopen succeeded but the mapped file was not found in /proc/self/maps; %s" % context)
        return None
    source = ((sources.get(path) or sources.get(real) or {}).get("root")) or ""
    resolved = "%s%s%s" % (path, " -> %s" % real if real and real != path else "",
                           " (mounted from %s)" % source if source else "")
    stub = any(p and _STUB_LIBCUDA.search(p) for p in (path, real))
    mine = any(w in (path, real) for w in where)
    if stub or (points and not mine):
        why = "the CUDA toolkit stub" if stub else "another file than the mounted driver library"
        builder.add("runtime.loader.libcuda", FAIL, subject, want, "%s resolved first: %s; %s" % (why, resolved, context))
        # the spec's env/mounts put it first: the spec's; else a file the runtime did not mount came first on the
        # image's loader path (its ENV, its own libraries): the image's
        return "cdi" if _spec_put_first(path, expected_edits, in_container) else "image"
    if mine and _STUB_LIBCUDA.search(source):
        # the runtime applied the mount as asked and the loader found it: the spec mounted the stub (cdi's
        # cdi.nvidia.libcuda says so; CUDA answers CUDA_ERROR_STUB_LIBRARY in the compute layer)
        builder.add("runtime.loader.libcuda", WARN, subject, want, "resolved to the mounted file, whose host source is "
                    "the CUDA toolkit stub: %s; %s" % (resolved, context))
        return None
    held = None
    if not points:
        held = _mount_holding(path, expected_edits, in_container) or _mount_holding(real, expected_edits, in_container)
    if held is not None:  # a directory the spec mounts gives libcuda: the spec's file, not the image's
        builder.add("runtime.loader.libcuda", PASS, subject, "a libcuda of the directory the spec mounts at %s"
                    % held.get("containerPath"), "resolved to %s; %s" % (resolved, context))
        return None
    if not points:
        builder.add("runtime.loader.libcuda", NOT_RUN, subject, want,
                    "the spec mounts no libcuda; the loader resolved the image's %s; %s" % (resolved, context))
        return None
    builder.add("runtime.loader.libcuda", PASS, subject, want, "resolved to %s; %s" % (resolved, context))
    return None


def edits_compared_check(builder):
    """runtime.edits.compared: a runtime PASS needs at least one CDI edit compared with the container."""
    compared = edits_compared({"checks": builder.checks})
    if compared:
        builder.add("runtime.edits.compared", PASS, "CDI edits", ">= 1 compared", "%d compared" % len(compared))
    else:
        builder.add("runtime.edits.compared", WARN, "CDI edits", ">= 1 compared",
                    "none: no expected edit was given; only the container start is proven")


def _relevant_env(env, expected_env):
    keys = set(str(e).partition("=")[0] for e in expected_env or [])
    return dict((k, v) for k, v in (env or {}).items() if k in keys or ENV_KEEP.match(k))


def _relevant_mounts(mounts, expected_mounts, resolved=None):
    points = set(container_path(m.get("containerPath"), resolved) for m in expected_mounts or [])
    return [m for m in mounts or [] if m.get("mount_point") in points or any(w in (m.get("mount_point") or "") for w in ("nvidia", "cuda"))]


def observed_checks(builder, expected_edits, inventory, start):
    """Every check computed from the probe's inventory: each CDI edit compared, the loader's libcuda, the
    count of edits compared; the observations go to evidence.observed (the verdict reads the container's env
    there). Returns where a runtime.loader.libcuda FAIL points."""
    expected_edits = expected_edits or {}
    builder.evidence["observed"] = {
        "nodes": inventory.get("nodes"),
        "mounts": _relevant_mounts(inventory.get("mounts"), expected_edits.get("mounts"), inventory.get("resolved_paths")),
        "resolved_paths": inventory.get("resolved_paths"),
        "env": _relevant_env(inventory.get("env"), expected_edits.get("env")),
        "groups": inventory.get("groups"),
        "libraries": inventory.get("libraries"),
        "ldconfig": inventory.get("ldconfig"),
        "uid": (start or {}).get("uid"),
    }
    compare_edits(builder, expected_edits, inventory, start)
    loader_points_to = loader_check(builder, expected_edits, inventory)
    edits_compared_check(builder)
    return loader_points_to


def build_observed(builder, inventory, loader_points_to=None):
    """The runtime record once the container ran: the first FAIL's signature and where it points."""
    first_fail = next((c for c in builder.checks if c["status"] == FAIL), None)
    if first_fail is not None and first_fail["id"] == "runtime.device_node.open":
        signature = open_signature(((inventory.get("nodes") or {}).get(first_fail["subject"]) or {}).get("open"))
        return builder.build(signature=signature, points_to=SIGNATURES[signature]["points_to"])
    if first_fail is not None and first_fail["id"] == "runtime.loader.libcuda":
        return builder.build(points_to=loader_points_to)
    if first_fail is not None and first_fail["id"] == "runtime.probe.unchanged":
        return builder.build(points_to=SIGNATURES["runtime.probe.unchanged"]["points_to"])
    return builder.build()
