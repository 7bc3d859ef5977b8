# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: the runtime layer of gpuprobe.layers; not public API.

Starts one probe container with the requested CDI devices through a real runtime (podman; docker when
its CDI support is enabled), looks from inside at what the runtime actually applied (device nodes and
what open(O_RDWR) returns, mounts, env, groups, which libcuda the loader finds) and compares it, edit by
edit, with what the CDI layer expected. The same container can run the compute steps
(``compute: true``), whose raw output is handed to the compute layer.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
import shutil
import signal
import stat
import tempfile
import threading
import time
import uuid as uuidlib

from ansible_collections.gpuprobe.layers.plugins.module_utils import _owner, _probe, _probe_contract
from ansible_collections.gpuprobe.layers.plugins.module_utils._attribution import edits_compared
from ansible_collections.gpuprobe.layers.plugins.module_utils._busy import busy_plan
from ansible_collections.gpuprobe.layers.plugins.module_utils._options import (
    check_absolute, check_device, check_image, check_timeout, check_user,
)
from ansible_collections.gpuprobe.layers.plugins.module_utils._result import (
    FAIL, NOT_RUN, PASS, WARN, LayerBuilder, not_run,
)
from ansible_collections.gpuprobe.layers.plugins.module_utils._run import first_line, run, which

LABEL = "gpuprobe.run"
OWNER_LABEL = "gpuprobe.owner"      # host:pid:started of the run's owner (_owner.format_owner)
CREATED_LABEL = "gpuprobe.created"  # epoch seconds
VERSION_RE = re.compile(r"^v?\d+(\.\d+){0,3}([-+~][0-9A-Za-z.+~-]*)?$")
PROBE_IN_CONTAINER = "/gpuprobe/probe.py"
RUNTIMES = ("auto", "podman", "docker", "containerd", "crio")
UNSUPPORTED = ("containerd", "crio")
RUN_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
# CDI deviceNode types the CDI library accepts ("" = the host node's type) -> the file type the probe reports:
# 'u' is an unbuffered character device, which is a character device ('c') for mknod and stat
NODE_TYPES = {"c": "c", "u": "c", "b": "b", "p": "fifo"}
# env keys of the container worth keeping in the record besides the expected ones
ENV_KEEP = re.compile(r"^(NVIDIA_|CUDA_|LD_LIBRARY_PATH$|LD_PRELOAD$|PATH$)")

CHECKS = {
    "runtime.engine.available": {
        "title": "a supported container runtime with CDI support is installed; its version is recorded",
        "fail": "the runtime is missing, or (docker) its CDI support is not enabled",
        "next": "install podman >= 4.1, or enable CDI in docker (daemon.json features.cdi)",
    },
    "runtime.engine.version": {
        "title": "the runtime's version string is understood (recorded; a string that is not a version is 'unknown')",
        "fail": "NOT_RUN: the runtime answered with something that is not a version; nothing is inferred from it",
        "next": "the runtime's own 'info'/'version' output",
    },
    "runtime.container.started": {
        "title": "the probe container started with the requested CDI devices and the probe ran inside it",
        "fail": "the runtime refused or failed to start the container (the signature classifies its message)",
        "next": "the runtime's own message in observed; the signature's row below",
    },
    "runtime.probe.inventory": {
        "title": "the in-container probe reported what it saw (device nodes, mounts, env)",
        "fail": "the container ran but the probe printed no inventory (image without python3? killed?)",
        "next": "the container's stderr in evidence.container.stderr",
    },
    "runtime.device_node.present": {
        "title": "each expected device node exists inside the container (its path cleaned and the container's symlinks "
                 "resolved, as runc creates it)",
        "fail": "the runtime did not create a device node the CDI edits ask for",
        "next": "the runtime's CDI support and the spec's deviceNodes",
    },
    "runtime.device_node.type": {
        "title": "each expected device node has the expected type and major:minor inside the container (every type the "
                 "CDI library accepts: c and u are character devices, b block; p, a FIFO, is not compared: NOT_RUN)",
        "fail": "the node exists but is not the device the spec names",
        "next": "the spec's type/major/minor vs the host node (cdi layer); stale nodes in the image",
    },
    "runtime.device_node.mode": {
        "title": "the file mode the spec asks for (fileMode) was applied to the node",
        "fail": "WARN: the runtime did not apply fileMode (the mode inside differs from the spec's)",
        "next": "do not rely on fileMode for access control with this runtime",
    },
    "runtime.device_node.open": {
        "title": "open(O_RDWR) succeeds on each expected node inside the container",
        "fail": "EPERM = the device cgroup denies it (permissions); EACCES = the file mode/owner denies it; "
                "ENXIO/ENODEV = no driver behind the major:minor. EACCES caused by the spec's own fileMode, applied "
                "as asked, is a WARN: the runtime did what the spec said, and CUDA may still work (the compute layer decides)",
        "next": "EPERM: the deviceNodes' permissions (need rw); EACCES: fileMode/uid/gid vs the container user",
    },
    "runtime.mount.present": {
        "title": "each expected mount's containerPath is a mount point in the container (/proc/self/mountinfo), at the place "
                 "the runtime puts it: the path cleaned and the container's own symlinks resolved, as runc does (a spec's "
                 "/lib64/x is /usr/lib64/x on a merged-/usr image)",
        "fail": "the runtime did not apply a mount the CDI edits ask for",
        "next": "the spec's mounts; the runtime's CDI support",
    },
    "runtime.mount.source": {
        "title": "the file mounted at containerPath is the hostPath's file (its resolved name), and read-only when asked",
        "fail": "something else is mounted there, or the options differ",
        "next": "compare mountinfo root/options in evidence with the spec",
    },
    "runtime.env.value": {
        "title": "each expected env entry (K=V) is set to that value in the container",
        "fail": "the variable is missing or has another value (image ENV or --env overriding it?)",
        "next": "the image's ENV and the runtime's env handling",
    },
    "runtime.group.additional": {
        "title": "each expected additionalGid is among the container process's groups",
        "fail": "the runtime did not add the group",
        "next": "the runtime's support of CDI additionalGids (CDI spec >= 0.7)",
    },
    "runtime.loader.libcuda": {
        "title": "the file the dynamic loader really resolves for libcuda.so.1 in the container (the probe's mapped file "
                 "after dlopen, with LD_LIBRARY_PATH and the ld.so cache as evidence) is the CDI-mounted driver library",
        "fail": "a CUDA toolkit stub, or a file other than the mounted driver libcuda (another version, the image's own), "
                "is resolved first; or the loader does not find the mounted file at all",
        "next": "the paths in observed: remove the stub/other directory from LD_LIBRARY_PATH (spec env, image ENV) or "
                "mount the driver's libcuda where the loader looks",
    },
    "runtime.edits.compared": {
        "title": "at least one CDI edit (device node, mount, env, group) was compared with the container (a runtime "
                 "PASS needs one)",
        "fail": "WARN: no expected edit was given, so the layer proves only that a container started",
        "next": "pass the cdi layer's evidence.expected_edits to runtime_facts (expected_edits)",
    },
    "runtime.hook.effect": {
        "title": "CDI hooks: recorded, not observable from inside the container (NOT_RUN)",
        "fail": "(never FAILs)",
        "next": "the hook's own logs",
    },
}

SIGNATURES = {
    "runtime.start.cdi_unresolvable": {
        "points_to": "cdi",
        "meaning": "the runtime did not find the requested CDI device (no/invalid spec, wrong kind or name)",
        "next": "the cdi layer record: spec dirs, parse errors, the qualified name",
    },
    "runtime.start.hostpath_missing": {
        "points_to": "cdi",
        "meaning": "the container never started: a hostPath of the spec does not exist (stat failed)",
        "next": "the cdi layer's hostPath checks; the path in the runtime's message",
    },
    "runtime.start.permission_denied": {
        "points_to": "runtime",
        "meaning": "the runtime was refused an operation (permission denied) while creating the container",
        "next": "rootless vs root, SELinux/AppArmor, the path in the message",
    },
    "runtime.start.oci_error": {
        "points_to": "runtime",
        "meaning": "the OCI runtime (runc/crun) failed to create or start the container",
        "next": "the runtime's message; the OCI runtime's version and cgroup setup",
    },
    "runtime.start.image_missing": {
        "points_to": "runtime",
        "meaning": "the probe image is not present (pull: never) or could not be pulled",
        "next": "bring the image to the node (docs/probe-image.md): build it there (scripts/build-probe-image.sh), pull it from "
                "your registry pinned by digest (verify_probe_image: REGISTRY/gpuprobe-probe@sha256:...), or podman load a saved "
                "tar (scripts/probe-image.sh save/load)",
    },
    "runtime.start.timeout": {
        "points_to": "runtime",
        "meaning": "the container did not report within the timeout; it was killed and removed",
        "next": "the runtime's health (podman info), storage locks, a hung hook",
    },
    "runtime.start.failed": {
        "points_to": "runtime",
        "meaning": "the container did not start, for a reason not classified above",
        "next": "the runtime's message in the check's observed",
    },
    "runtime.device_node.open.EPERM": {
        "points_to": "runtime",
        "meaning": "open() refused by the device cgroup: the spec grants less than rw (e.g. permissions: r)",
        "next": "deviceNodes[].permissions in the spec (rw or rwm); CUDA then fails cuInit with NO_DEVICE (100)",
    },
    "runtime.device_node.open.EACCES": {
        "points_to": "runtime",
        "meaning": "open() refused by the node's file mode/owner for the container's user",
        "next": "deviceNodes[].fileMode/uid/gid vs the container user",
    },
    "runtime.device_node.open.ENXIO": {
        "points_to": "host",
        "meaning": "no driver answers for this major:minor (module not loaded, or a wrong minor)",
        "next": "the host layer: kernel module and /dev nodes",
    },
    "runtime.device_node.open.ENODEV": {
        "points_to": "host",
        "meaning": "the device is gone (GPU fallen off the bus, driver unbound)",
        "next": "the host layer and the kernel log (Xid)",
    },
    "runtime.loader.libcuda": {
        "points_to": "cdi when the spec's env/mounts put the file first, else image",
        "meaning": "the loader in the container resolves libcuda.so.1 to a stub or to another file than the CDI-mounted "
                   "driver library (CUDA then fails with CUDA_ERROR_STUB_LIBRARY or a version mismatch)",
        "next": "runtime.loader.libcuda's observed paths; the spec's LD_LIBRARY_PATH env and libcuda mounts",
    },
    "runtime.device_node.open.other": {
        "points_to": "runtime",
        "meaning": "open() failed with another errno (named in the check)",
        "next": "the errno in the check's observed",
    },
}

# Runtime messages -> start signature, first match wins (order matters: runc appends a misleading
# "OCI runtime attempted to invoke a command that was not found" to stat failures).
START_PATTERNS = (
    ("runtime.start.cdi_unresolvable", re.compile(r"unresolvable CDI devices|CDI device.*not found|unknown CDI device|"
                                                  r"could not resolve CDI|CDI.*not resolv", re.I)),
    ("runtime.start.hostpath_missing", re.compile(r"failed to stat CDI host device|stat [^:]+: no such file or directory|"
                                                  r"error mounting .*no such file or directory|"
                                                  r"no such file or directory.*(mount|device)", re.I)),
    ("runtime.start.image_missing", re.compile(r"image not known|image not found|no such image|manifest unknown|"
                                               r"initializing source docker://|pull access denied|"
                                               r"unable to find image", re.I)),
    ("runtime.start.permission_denied", re.compile(r"permission denied|operation not permitted|EACCES|EPERM", re.I)),
    ("runtime.start.oci_error", re.compile(r"OCI runtime|runc create failed|crun:|runc:|container init|"
                                           r"executable file not found", re.I)),
)


def classify_start_error(text, timed_out=False):
    """Signature of a container that did not start, from the runtime's message."""
    if timed_out:
        return "runtime.start.timeout"
    for signature, pattern in START_PATTERNS:
        if pattern.search(text or ""):
            return signature
    return "runtime.start.failed"


def error_line(text):
    """The runtime's own error line (the last 'Error: ...' line, else the last non-empty line)."""
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("Error") or "error" in line.lower()]
    if errors:
        return errors[-1][:1000]
    return lines[-1][:1000] if lines else ""


def open_signature(errno_name):
    sig = "runtime.device_node.open.%s" % errno_name
    return sig if sig in SIGNATURES else "runtime.device_node.open.other"


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
        node = (observed_nodes.get(container_path(path, resolved)) or observed_nodes.get(clean_path(path))
                or observed_nodes.get(path) or {"present": False})
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


def _spec_put_first(path, expected_edits, resolved=None):
    """Whether the spec itself put ``path`` (a file the loader mapped: a real path in the container) where the
    loader finds it: its env's LD_LIBRARY_PATH names the file's directory, or one of its mounts is that file or a
    directory holding it."""
    for m in (expected_edits or {}).get("mounts") or []:
        point = container_path(m.get("containerPath"), resolved)
        if point and (point == path or (path or "").startswith(point.rstrip("/") + "/")):
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


def detect_runtime(requested="auto", timeout=30):
    """Which runtime to use: dict name, path, version, oci_runtime, cgroups, usable (bool), reason."""
    requested = requested or "auto"
    if requested in UNSUPPORTED:
        return {"name": requested, "usable": False, "reason": "%s is not supported yet" % requested,
                "path": which(requested) or which("nerdctl" if requested == "containerd" else "crictl")}
    candidates = ("podman", "docker") if requested == "auto" else (requested,)
    tried = []
    for name in candidates:
        path = which(name)
        if not path:
            tried.append("%s not found" % name)
            continue
        info = _podman_info(path, timeout) if name == "podman" else _docker_info(path, timeout)
        if info["usable"] or requested != "auto":
            return info
        tried.append(info["reason"])
    return {"name": requested if requested != "auto" else None, "usable": False, "path": None,
            "reason": "no usable container runtime: %s" % "; ".join(tried)}


def parse_version(text):
    """A runtime's version string when it looks like one (4.3.1, 24.0.7, v1.1.5, 4.9.3-dev), else "unknown"."""
    text = str(text or "").strip()
    return text if VERSION_RE.match(text) else "unknown"


def _podman_info(path, timeout):
    r = run([path, "info", "--format",
             "{{.Version.Version}}|{{.Host.OCIRuntime.Name}}|{{.Host.OCIRuntime.Version}}|{{.Host.CgroupsVersion}}"],
            timeout=timeout)
    if r["rc"] != 0:
        return {"name": "podman", "path": path, "usable": False,
                "reason": "podman info failed: %s" % (error_line(r["stderr"]) or r["error"])}
    parts = r["stdout"].strip().split("|")
    while len(parts) < 4:
        parts.append("")
    return {"name": "podman", "path": path, "usable": True, "reason": None, "version": parse_version(parts[0]),
            "version_text": parts[0][:200],
            "oci_runtime": "%s %s" % (parts[1], first_line(parts[2]).replace("%s version " % parts[1], "")),
            "cgroups": parts[3], "cdi": "native (--device vendor/class=name)"}


def _docker_info(path, timeout):
    r = run([path, "info", "--format", "{{json .}}"], timeout=timeout)
    if r["rc"] != 0:
        return {"name": "docker", "path": path, "usable": False,
                "reason": "docker info failed: %s" % (error_line(r["stderr"]) or r["error"])}
    try:
        info = json.loads(r["stdout"])
    except ValueError:
        info = {}
    spec_dirs = info.get("CDISpecDirs")
    base = {"name": "docker", "path": path, "version": parse_version(info.get("ServerVersion")),
            "version_text": str(info.get("ServerVersion"))[:200],
            "oci_runtime": info.get("DefaultRuntime"), "cgroups": info.get("CgroupVersion")}
    if not spec_dirs:
        base.update(usable=False, reason="docker %s has CDI disabled (no CDISpecDirs in docker info; enable "
                                         "features.cdi in daemon.json)" % info.get("ServerVersion"))
    else:
        base.update(usable=True, reason=None, cdi="CDISpecDirs %s" % ", ".join(spec_dirs))
    return base


def container_name(run_id):
    return "gpuprobe-%s-%s" % (run_id, uuidlib.uuid4().hex[:8])


def build_argv(engine, name, run_id, image, cdi_devices, probe_path, config, user=None, pull="never", owner=None,
               created=None):
    """The probe container's argv. Raises ValueError for a device that is not a qualified CDI name or an image
    that is not an image reference: they are checked here, where the argv is built, whoever the caller is."""
    devices = [check_device(d) for d in cdi_devices]
    check_image(image)
    argv = [engine["path"], "run", "--rm", "--name", name, "--label", "%s=%s" % (LABEL, run_id),
            "--label", "%s=%s" % (OWNER_LABEL, _owner.format_owner(owner)),
            "--label", "%s=%d" % (CREATED_LABEL, int(time.time() if created is None else created)),
            "--network=none", "--pull=%s" % pull]
    for device in devices:
        argv += ["--device", device]
    argv += ["-v", "%s:%s:ro" % (probe_path, PROBE_IN_CONTAINER)]
    if user:
        argv += ["--user", str(user)]
    # isolated interpreter (-I -S): no PYTHON* variable, site, sitecustomize, .pth file or script-dir module of the
    # image or the spec's env can change what runs
    argv += ["--entrypoint", "python3", image] + list(_probe_contract.ISOLATED_FLAGS) + [PROBE_IN_CONTAINER, json.dumps(config, sort_keys=True)]
    return argv


def remove_container(engine, name, timeout=30):
    # -t 0: kill at once; the probe is PID 1 in the container and ignores SIGTERM, so the default 10 s grace
    # period would only delay the removal of a hung probe
    argv = [engine["path"], "rm", "-f", "-t", "0", "-i", name] if engine["name"] == "podman" else [engine["path"], "rm", "-f", name]
    r = run(argv, timeout=timeout)
    return {"rc": r["rc"], "removed": bool((r["stdout"] or "").strip()), "error": r["error"] or (error_line(r["stderr"]) or None)}


def _probe_config(expected_edits, compute, plan=None, resolve_paths=None):
    """The probe's config; ``plan`` (_busy.busy_plan): busy GPUs to leave alone (skip_uuids), or why compute
    must not run at all (skip_reason: the busy state is unknown); a fresh token and kernel (a, b) per run;
    ``resolve_paths``: container paths whose realpath the inventory reports (resolved_paths), beside the spec's own
    paths (resolve_request)."""
    nodes = []
    for n in (expected_edits or {}).get("deviceNodes") or []:
        for path in (n.get("path"), clean_path(n.get("path"))):  # '/dev/x/' cannot be lstat'ed; runc makes /dev/x
            if isinstance(path, str) and path and path not in nodes:
                nodes.append(path)
    request = list(resolve_request(expected_edits))
    request += [str(p) for p in resolve_paths or [] if str(p) not in request]
    config = dict(_probe_contract.new_run_keys(), nodes=nodes, compute=bool(compute), resolve_paths=request)
    plan = plan or {}
    if plan.get("skip_reason"):
        config["skip_compute_reason"] = plan["skip_reason"]
    if plan.get("skip_uuids"):
        config["skip_uuids"] = list(plan["skip_uuids"])
    return config


def _relevant_env(env, expected_env):
    keys = set(str(e).partition("=")[0] for e in expected_env or [])
    return dict((k, v) for k, v in (env or {}).items() if k in keys or ENV_KEEP.match(k))


def _relevant_mounts(mounts, expected_mounts, resolved=None):
    points = set(container_path(m.get("containerPath"), resolved) for m in expected_mounts or [])
    return [m for m in mounts or [] if m.get("mount_point") in points or "nvidia" in (m.get("mount_point") or "")
            or "cuda" in (m.get("mount_point") or "")]


class Interrupted(BaseException):
    """A signal (SIGINT, SIGTERM, SIGHUP) arrived while the probe ran; raised after the container is removed."""

    def __init__(self, signum):
        BaseException.__init__(self, "interrupted by signal %d" % signum)
        self.signum = signum


INTERRUPT_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _raise_interrupted(signum, _frame):
    raise Interrupted(signum)


class _Signals(object):
    """Install ``handler`` for INTERRUPT_SIGNALS in the block, restore the previous handlers after it (a no-op
    outside the main thread, where Python allows no signal handlers)."""

    def __init__(self, handler):
        self.handler = handler
        self.saved = {}

    def __enter__(self):
        for sig in INTERRUPT_SIGNALS:
            try:
                self.saved[sig] = signal.signal(sig, self.handler)
            except (ValueError, OSError):
                pass
        return self

    def __exit__(self, *exc):
        for sig, old in self.saved.items():
            signal.signal(sig, old if old is not None else signal.SIG_DFL)
        return False


def interruptible():
    """SIGINT/SIGTERM/SIGHUP raise Interrupted inside the block (so ``finally`` clauses run)."""
    return _Signals(_raise_interrupted)


class ControllerWatch(object):
    """While the block runs, watch the run's controller (``owner``: the ansible-playbook process among this module's
    ancestors) and interrupt this process as a SIGHUP would (Interrupted, then the cleanup of ``finally``) when it
    is gone. Ansible's worker puts the module in a session of its own, so a SIGHUP to the controller's group (a
    closed terminal) or a SIGKILL of the controller never reaches the module, which would otherwise run to its
    timeout with its container. A no-op when the owner is this process or cannot be checked from here."""

    POLL_S = 0.5

    def __init__(self, owner):
        self.owner = owner
        self.stop = threading.Event()
        self.thread = None

    def __enter__(self):
        owner = self.owner or {}
        if owner.get("pid") not in (None, os.getpid()) and _owner.alive(owner) is True:
            self.thread = threading.Thread(target=self._watch, name="gpuprobe-controller-watch")
            self.thread.daemon = True
            self.thread.start()
        return self

    def _watch(self):
        while not self.stop.wait(self.POLL_S):
            if _owner.alive(self.owner) is False:
                os.kill(os.getpid(), signal.SIGHUP)
                return

    def __exit__(self, *exc):
        self.stop.set()
        if self.thread is not None:
            self.thread.join(2 * self.POLL_S)
        return False


def deferred_signals():
    """SIGINT/SIGTERM/SIGHUP are ignored inside the block: cleanup is not itself interrupted."""
    return _Signals(signal.SIG_IGN)


PROBE_DIR_PREFIX = "gpuprobe-run-"
PROBE_DIR_RE = re.compile(r"^gpuprobe-run-(\d+)-(\d+|-)-[A-Za-z0-9_]+$")


def probe_parent_dir(tmp_dir=None):
    """A private temp dir for the probe script, named after this process (pid and start time), so that what a
    SIGKILLed module leaves is found by cleanup once that process is gone."""
    pid = os.getpid()
    started = _owner.proc_started(pid)
    return tempfile.mkdtemp(prefix="%s%d-%s-" % (PROBE_DIR_PREFIX, pid, "-" if started is None else started), dir=tmp_dir)


def sweep_probe_dirs(tmp_dir=None, check_mode=False):
    """Remove probe temp dirs (gpuprobe-run-<pid>-<started>-*) whose process is gone; returns their paths."""
    tmp_dir = tmp_dir or tempfile.gettempdir()
    removed = []
    try:
        names = sorted(os.listdir(tmp_dir))
    except OSError:
        return removed
    for name in names:
        m = PROBE_DIR_RE.match(name)
        path = os.path.join(tmp_dir, name)
        if not m or os.path.islink(path) or not os.path.isdir(path):
            continue
        owner = {"host": _owner.this_host(), "pid": int(m.group(1)),
                 "started": None if m.group(2) == "-" else int(m.group(2))}
        if _owner.alive(owner) is False:
            if not check_mode:
                shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def check_params(params):
    """ValueError with one clear message for options that cannot work (before any container exists)."""
    run_id = params.get("run_id")
    if not isinstance(run_id, str) or not RUN_ID_RE.match(run_id):
        raise ValueError("run_id %r: use 1-63 letters, digits, '_', '.', '-'" % (run_id,))
    if params.get("timeout") is not None:
        check_timeout(params["timeout"])
    devices = params.get("cdi_devices") or []
    if not isinstance(devices, list):
        raise ValueError("cdi_devices must be a list of fully qualified CDI names vendor/class=name (got %r)" % (devices,))
    for device in devices:
        check_device(device)
    if "image" in params:
        check_image(params.get("image"))
    expected = params.get("expected_edits")
    if expected is not None and not isinstance(expected, dict):
        raise ValueError("expected_edits must be a dict (got %s)" % type(expected).__name__)
    for key in ("env", "deviceNodes", "mounts", "hooks", "additionalGids"):
        if (expected or {}).get(key) is not None and not isinstance(expected[key], list):
            raise ValueError("expected_edits.%s must be a list (got %s)" % (key, type(expected[key]).__name__))
    for key in ("deviceNodes", "mounts", "hooks"):
        if any(not isinstance(e, dict) for e in (expected or {}).get(key) or []):
            raise ValueError("expected_edits.%s must be a list of dicts" % key)
    check_user(params.get("user"))
    _owner.normalize(params.get("owner"))


def remove_own_spec(params):
    """After an interrupt: this run's self-built spec (``spec_dir``, the dir cdi_spec wrote it to), removed as
    ``cdi_spec state=absent`` would remove it (only gpuprobe-<run_id>.yaml of this run's own kind). The play's
    always-cleanup never runs once ansible-playbook is interrupted, and the interrupt usually arrives during
    the probe, which is this module. Returns a short text for the failure message."""
    from ansible_collections.gpuprobe.layers.plugins.module_utils import _cdi_spec  # pylint: disable=import-outside-toplevel

    spec_dir = params.get("spec_dir")
    if not spec_dir:
        return "no self-built spec named (spec_dir)"
    with deferred_signals():
        try:
            out = _cdi_spec.ensure_spec(params["run_id"], state="absent", spec_dir=spec_dir)
        except (_cdi_spec.SpecError, OSError) as exc:
            return "this run's spec was not removed: %s" % exc
    return "this run's spec %s was removed" % out["path"] if out["changed"] else "this run had no spec in %s" % spec_dir


def runtime_facts(params, check_mode=False):
    """Returns (runtime record, probe dict or None). ``params``: the module's options."""
    check_params(params)
    if params.get("isolation") == "per_device" and params.get("compute") and not check_mode \
            and len(params.get("cdi_devices") or []) > 1:
        return _runtime_facts_per_device(params)
    run_id = params.get("run_id") or ""
    devices = list(params.get("cdi_devices") or [])
    expected = params.get("expected_edits") or {}
    evidence = {"requested_devices": devices, "expected_edits": expected, "run_id": run_id}
    if check_mode:
        return not_run("runtime", "check mode: no container was started", evidence), None
    if not devices:
        return not_run("runtime", "no CDI device requested (cdi_devices is empty)", evidence), None
    engine = detect_runtime(params.get("runtime") or "auto", timeout=30)
    evidence["engine"] = engine
    versions = {"runtime": ("%s %s" % (engine.get("name"), engine.get("version") or "")).strip() if engine.get("name") else None,
                "oci_runtime": engine.get("oci_runtime"), "probe": _probe.PROBE_VERSION}
    if not engine["usable"]:
        return not_run("runtime", engine["reason"], evidence, versions), None

    builder = LayerBuilder("runtime", CHECKS)
    builder.evidence = evidence
    builder.versions = versions
    builder.add("runtime.engine.available", PASS, subject=engine["name"], expected="installed, CDI capable",
                observed="%s (%s; %s)" % (versions["runtime"], engine.get("oci_runtime"), engine.get("cdi")))
    if engine.get("version") == "unknown":
        builder.add("runtime.engine.version", NOT_RUN, subject=engine["name"], expected="a version string",
                    observed="not understood: %r (recorded as unknown, not trusted)" % engine.get("version_text"))
    else:
        builder.add("runtime.engine.version", PASS, subject=engine["name"], expected="a version string",
                    observed=engine.get("version"))

    plan = busy_plan(params.get("host"), params.get("allow_busy_gpu")) if params.get("compute") else None
    timeout = params.get("timeout") or 60
    name = container_name(run_id)
    owner = _owner.resolve(params.get("owner"), fallback_pid=os.getpid())
    evidence["owner"] = owner
    with interruptible(), ControllerWatch(owner):
        probe_dir = probe_parent_dir()
        _unused, probe_path = _probe.write_probe(directory=probe_dir)
        cleanup = None
        config = _probe_config(expected, params.get("compute"), plan, params.get("resolve_paths"))
        try:
            argv = build_argv(engine, name, run_id, params["image"], devices, probe_path, config,
                              user=params.get("user"), pull=params.get("pull") or "never", owner=owner)
            result = run(argv, timeout=timeout, keep_prefix=_probe_contract.LINE_PREFIX)
        finally:
            # also on an interrupt (SIGINT/SIGTERM/SIGHUP raise Interrupted; _run killed the runtime client's
            # group): the container lives on in the runtime's monitor, so remove it by name, then the probe dir
            with deferred_signals():
                cleanup = remove_container(engine, name)
                shutil.rmtree(probe_dir, ignore_errors=True)
    parsed = _probe_contract.parse_output(result["stdout"], token=config["token"], kernel=(config["a"], config["b"]))
    started = parsed["start"] is not None
    evidence["container"] = {
        "name": name, "image": params["image"], "argv": argv, "rc": result["rc"], "wall_ms": result["duration_ms"],
        "timed_out": result["timed_out"], "started": started, "stderr": (result["stderr"] or "")[-4000:],
        "cleanup": cleanup, "user": params.get("user"), "stdout_bytes": result.get("stdout_bytes"),
        "stderr_bytes": result.get("stderr_bytes"), "output_truncated": result.get("truncated"),
        "noise_count": parsed["noise_count"],
    }
    probe = None
    signature = None
    if not started:
        signature = classify_start_error(result["stderr"], result["timed_out"])
        message = error_line(result["stderr"]) or result["error"] or "no output"
        builder.add("runtime.container.started", FAIL, subject=name, expected="the probe runs in the container",
                    observed=message, hint=SIGNATURES[signature]["next"])
        evidence["start_signature"] = signature
        return builder.build(signature=signature, points_to=SIGNATURES[signature]["points_to"],
                             reason="%s: %s" % (signature, message)), None

    builder.add("runtime.container.started", PASS, subject=name, expected="the probe runs in the container",
                observed="started in %s ms (probe %s, python %s, uid %s)" % (
                    result["duration_ms"], parsed["start"].get("probe_version"), parsed["start"].get("python"),
                    parsed["start"].get("uid")))
    probe = dict(parsed)
    probe.update({"executed": True, "runtime": versions["runtime"], "cdi_devices": devices, "container_name": name,
                  "image": params["image"], "timed_out": result["timed_out"], "rc": result["rc"],
                  "wall_ms": result["duration_ms"], "stderr": (result["stderr"] or "")[-4000:]})
    inventory = parsed["inventory"]
    if inventory is None:
        builder.add("runtime.probe.inventory", FAIL, subject=name, expected="the probe's inventory",
                    observed="none (rc %s, %s)" % (result["rc"], error_line(result["stderr"]) or result["error"]))
        signature = "runtime.start.timeout" if result["timed_out"] else "runtime.probe.inventory"
        return builder.build(signature=signature), probe
    builder.add("runtime.probe.inventory", PASS, subject=name, observed="%d nodes, %d mounts seen" % (
        len(inventory.get("nodes") or {}), len(inventory.get("mounts") or [])))
    loader_points_to = observed_checks(builder, expected, inventory, parsed["start"])
    return build_observed(builder, inventory, loader_points_to), probe


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
    return builder.build()


def _runtime_facts_per_device(params):
    """isolation=per_device: the runtime layer from one container with every device (no compute), then one
    compute container per requested CDI device (each sees exactly its GPU). The probe dict is the shared
    container's with ``containers``: one probe per device, in order (a stub with executed false and the runtime's
    reason when that device's container did not run)."""
    record, probe = runtime_facts(dict(params, isolation="shared", compute=False))
    if probe is None:
        return record, None
    containers = []
    for device in params["cdi_devices"]:
        sub_record, sub_probe = runtime_facts(dict(params, isolation="shared", cdi_devices=[device], expected_edits={}))
        if sub_probe is None:
            sub_probe = {"executed": False, "cdi_devices": [], "requested_devices": [device],
                         "reason": "%s %s: %s" % (sub_record["status"], sub_record.get("signature") or "", sub_record["reason"])}
        sub_probe["requested_devices"] = [device]
        containers.append(sub_probe)
    probe = dict(probe, containers=containers, isolation="per_device", compute_requested=True)
    record["evidence"]["isolation"] = {"mode": "per_device", "containers": [
        {"device": c["requested_devices"][0], "name": c.get("container_name"), "executed": c["executed"],
         "reason": c.get("reason")} for c in containers]}
    return record, probe


def _parse_labels(value):
    if isinstance(value, dict):
        return dict((str(k), str(v)) for k, v in value.items())
    out = {}
    for part in str(value or "").split(","):  # docker ps: "k=v,k=v"
        key, sep, val = part.partition("=")
        if sep:
            out[key.strip()] = val
    return out


def _parse_ps(text):
    """podman ps --format json (one array) or docker ps --format '{{json .}}' (one object a line) -> rows."""
    text = (text or "").strip()
    if not text:
        return []
    try:
        doc = json.loads(text)
        rows = doc if isinstance(doc, list) else [doc]
    except ValueError:
        rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    out = []
    for row in rows:
        names = row.get("Names")
        name = names[0] if isinstance(names, list) and names else str(names or "")
        labels = _parse_labels(row.get("Labels"))
        created = labels.get(CREATED_LABEL)
        created = int(created) if str(created or "").isdigit() else (row.get("Created") if isinstance(row.get("Created"), int) else None)
        out.append({"name": name, "run_id": labels.get(LABEL), "owner": _owner.parse_owner(labels.get(OWNER_LABEL)),
                    "created": created, "state": row.get("State")})
    return out


def probe_containers(engine, run_id=None, timeout=30):
    """The containers labelled gpuprobe.run (=run_id when given), running or not: list of dicts name, run_id
    (the label's exact value), owner, created, state."""
    label = "label=%s=%s" % (LABEL, run_id) if run_id else "label=%s" % LABEL
    fmt = "json" if engine["name"] == "podman" else "{{json .}}"
    r = run([engine["path"], "ps", "-a", "--filter", label, "--format", fmt], timeout=timeout)
    if r["rc"] != 0:
        raise RuntimeError("%s ps failed: %s" % (engine["name"], error_line(r["stderr"]) or r["error"]))
    try:
        rows = _parse_ps(r["stdout"])
    except (ValueError, AttributeError) as exc:
        raise RuntimeError("%s ps: output not understood: %s" % (engine["name"], exc))
    # the runtime's filter is by label; ownership is decided on the exact parsed value, never a substring
    return [c for c in rows if c["run_id"] and RUN_ID_RE.match(c["run_id"]) and c["name"].startswith("gpuprobe-")
            and (run_id is None or c["run_id"] == run_id)]


def cleanup(run_id=None, runtime="auto", spec_dir="/var/run/cdi", specs=True, check_mode=False, timeout=30,
            max_age=_owner.DEFAULT_MAX_AGE, tmp_dir=None):
    """Remove what is provably ours and belongs to a run that is over (_owner.is_over): probe containers
    (labelled gpuprobe.run) and self-built specs (gpuprobe-<run_id>.yaml of our kind). With ``run_id``, that
    run's items (the caller's own run: over by definition); without it, every item whose owner is gone or
    that is older than ``max_age``. Items of other runs that are not over are listed in ``live``, never
    removed. Probe temp dirs of processes that are gone are removed too. Returns a dict: changed, containers,
    specs, probe_dirs, live, errors, not_listed (runtimes that could not be listed under runtime=auto; not
    ``skipped``, which Ansible reserves)."""
    from ansible_collections.gpuprobe.layers.plugins.module_utils import _cdi_spec  # pylint: disable=import-outside-toplevel

    if run_id is not None and (not isinstance(run_id, str) or not RUN_ID_RE.match(run_id)):
        raise ValueError("run_id %r: use 1-63 letters, digits, '_', '.', '-'" % (run_id,))
    _owner.check_max_age(max_age)
    check_timeout(timeout)
    check_absolute(spec_dir, "spec_dir")
    out = {"changed": False, "containers": [], "specs": [], "probe_dirs": [], "live": [], "errors": [], "not_listed": []}
    engines = []
    candidates = ("podman", "docker") if runtime in (None, "auto") else (runtime,)
    for name in candidates:
        if name in UNSUPPORTED:
            continue
        path = which(name)
        if path:
            engines.append({"name": name, "path": path})
    now = time.time()
    caller = _owner.resolve(None, fallback_pid=os.getpid()) if run_id else None
    for engine in engines:
        try:
            found = probe_containers(engine, run_id, timeout)
        except RuntimeError as exc:
            # with runtime=auto an installed CLI whose daemon is not running (docker here) holds nothing we
            # could remove: say so instead of failing the cleanup; a runtime named explicitly must answer
            (out["not_listed"] if runtime in (None, "auto") else out["errors"]).append(str(exc))
            continue
        for c in found:
            over, why = _owner.is_over(c["run_id"], c["owner"], c["created"], run_id=run_id, max_age=max_age, now=now,
                                       caller=caller)
            if not over:
                out["live"].append({"container": "%s:%s" % (engine["name"], c["name"]), "run_id": c["run_id"],
                                    "state": c["state"], "why": why})
                continue
            if not check_mode:
                result = remove_container(engine, c["name"], timeout)
                if result["rc"] != 0:
                    out["errors"].append("%s rm %s: %s" % (engine["name"], c["name"], result["error"]))
                    continue
            out["containers"].append("%s:%s" % (engine["name"], c["name"]))
    if specs and os.path.isdir(spec_dir):
        if run_id:
            path = _cdi_spec.spec_path(spec_dir, run_id)
            info = _cdi_spec.spec_owner_info(path) if os.path.lexists(path) else None
            if info and info["ours"] and info["run_id"] == run_id and _owner.other_live_owner(info["owner"], caller):
                out["live"].append({"spec": path, "run_id": run_id, "why": "run id %s is also used by the live run of %s"
                                    % (run_id, _owner.format_owner(info["owner"]))})
            elif info and info["ours"] and info["run_id"] == run_id:
                if not check_mode:
                    _cdi_spec.remove_spec(spec_dir, run_id)
                out["specs"].append(path)
        else:
            swept = _cdi_spec.sweep_specs(spec_dir, max_age=max_age, check_mode=check_mode, now=now)
            out["specs"] = swept["removed"]
            out["live"] += [{"spec": x["path"], "run_id": x["run_id"], "why": x["why"]} for x in swept["live"]]
    out["probe_dirs"] = sweep_probe_dirs(tmp_dir, check_mode=check_mode)
    out["changed"] = bool(out["containers"] or out["specs"] or out["probe_dirs"])
    return out
