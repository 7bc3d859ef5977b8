# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE (gpuprobe.layers cdi layer): every edit of a requested device accounted for (``cdi.trust.accounted``).
Not public API.

A spec can change anything in the probe's container: files the interpreter reads at start, the loader's and
OpenSSL's configuration, libraries, hooks that run on the host. No list of dangers covers an interpreter, so trust is
an allowlist: each edit of a requested device's merged edits must be one a GPU spec legitimately makes
(``_cdi.legitimate``: what NVIDIA's generators write, cited there) or one the site declared trusted
(``trusted_edits``). Anything else is unaccounted: a FAIL per edit, and the probe never runs for the device (the
gate blocks on a cdi FAIL), so nothing the spec added runs in or for the probe's container.

A mount is accounted for when its host side is a file of the installed driver: its real path (links followed, under
``root``) is a regular file (a socket or the MPS directory for IPC) in the driver root's place for its kind, named as
the driver names that kind, owned by root with no write bit for group or others, and so is every entry the kernel
visits to reach it from the spec's hostPath (directories, links; a sticky directory such as /tmp excepted); its
container path is where the generators put it; its options are read-only bind. A device node: a driver node path, a
char device on the host with the spec's major:minor its own, its host side the same path (under the driver root). A
hook: the NVIDIA hook program (root-owned, as above), ``createContainer``, a known subcommand whose every flag and
value has the generators' shape, no env. An env entry: the generators' values, or this collection's own.
"""

from __future__ import annotations

import fnmatch
import os
import posixpath
import stat

from ansible_collections.gpuprobe.layers.plugins.module_utils._common.fs import PATH_ERRORS, path_error, under_root
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import FAIL, PASS, make_check
from ansible_collections.gpuprobe.layers.plugins.module_utils._host.driver import detect_driver_root
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import legitimate as _legit

CHECK_ID = "cdi.trust.accounted"
CHECKS = {
    CHECK_ID: {
        "title": "every edit of a requested device is accounted for: a device node, mount, hook or env entry as NVIDIA's CDI "
                 "generators write it for the installed driver (root-owned driver files where the generators put them, "
                 "read-only; the NVIDIA hook's own subcommands; NVIDIA_VISIBLE_DEVICES=void), or declared trusted by "
                 "the site (trusted_edits)",
        "fail": "an edit the collection cannot account for can change what runs in the probe's container (a file the "
                "interpreter reads, a library, the loader's or OpenSSL's configuration, a hook on the host): the probe "
                "cannot vouch, so the device is a cdi FAIL and no probe container is started for it",
        "next": "remove the edit from the spec, or, if the site added it on purpose, declare it in trusted_edits "
                "(verify_trusted_edits); find out who wrote the spec",
    },
}
DECLARED_KEYS = ("hostPath", "containerPath", "env", "hook", "deviceNode")
EDIT_KEYS = ("env", "deviceNodes", "mounts", "hooks", "additionalGids")


def check_declared(trusted_edits):
    """The site's declared trusted edits as given (a list of mappings, each with at least one of DECLARED_KEYS, every
    value a non-empty shell-style pattern, and an optional ``why``); ValueError naming the first fault."""
    out = []
    for i, item in enumerate(trusted_edits or []):
        if not isinstance(item, dict):
            raise ValueError("trusted_edits[%d] must be a mapping with one or more of %s" % (i, ", ".join(DECLARED_KEYS)))
        unknown = sorted(k for k in item if k not in DECLARED_KEYS + ("why",))
        if unknown:
            raise ValueError("trusted_edits[%d]: unknown key(s) %s (known: %s, why)" % (i, ", ".join(unknown), ", ".join(DECLARED_KEYS)))
        if not any(k in item for k in DECLARED_KEYS):
            raise ValueError("trusted_edits[%d] names no edit: give one or more of %s" % (i, ", ".join(DECLARED_KEYS)))
        for k in DECLARED_KEYS:
            if k in item and (not isinstance(item[k], str) or not item[k]):
                raise ValueError("trusted_edits[%d].%s must be a non-empty string (a shell-style pattern)" % (i, k))
        out.append(dict(item))
    return out


def _declared(kind, edit, declared):
    """The index of the first declared entry that matches ``edit`` (every key it gives matches), else None."""
    if kind == "env":
        fields = {"env": str(edit).partition("=")[0]}
    elif kind in ("mounts", "deviceNodes", "hooks") and isinstance(edit, dict):
        fields = {"mounts": {"hostPath": edit.get("hostPath"), "containerPath": edit.get("containerPath")},
                  "deviceNodes": {"deviceNode": edit.get("path"), "hostPath": edit.get("hostPath")},
                  "hooks": {"hook": edit.get("path")}}[kind]
    else:
        fields = {}
    for i, item in enumerate(declared or []):
        given = [k for k in DECLARED_KEYS if k in item]
        if given and all(k in fields and fields[k] is not None and fnmatch.fnmatchcase(str(fields[k]), item[k]) for k in given):
            return i
    return None


class Host(object):
    """What the allowlist asks of the node: its filesystem under ``root`` and the driver root."""

    def __init__(self, root, host_record, driver_version=None):
        self.root = posixpath.normpath(root or "/")
        self.driver_version = driver_version
        evidence = (host_record or {}).get("evidence") or {}
        # a self-built spec names the node's files under the host layer's root (a fixture tree in tests), read from /
        self.host_root = posixpath.normpath(evidence.get("root") or self.root) if isinstance(evidence.get("root"), str) else self.root
        driver_root = evidence.get("driver_root")
        if isinstance(driver_root, dict):
            driver_root = driver_root.get("path")
        if not driver_root:
            try:
                driver_root = detect_driver_root(self.root)
            except PATH_ERRORS:
                driver_root = None
        self.driver_root = _legit.clean(driver_root) if driver_root else None
        self._chain = {}

    def node_path(self, real):
        """A real path of this process as a node path (under the host layer's root, else under ``root``), or None
        when it is outside both."""
        for base in (self.host_root, self.root):
            if base == "/":
                return real
            if real == base:
                return "/"
            if real.startswith(base + "/"):
                return real[len(base):]
        return None

    def node_forms(self, path):
        """The spellings a spec may use for the node path ``path``: itself, and under the host layer's root."""
        forms = [path]
        if self.host_root != "/":
            forms.append(self.host_root + path)
        return forms

    def relative(self, node_path):
        """``node_path`` relative to the driver root (``/``-rooted), or None when it is not under it."""
        if not self.driver_root:
            return None
        if self.driver_root == "/":
            return node_path
        if node_path.startswith(self.driver_root + "/"):
            return node_path[len(self.driver_root):]
        return None

    def root_owned(self, path):
        """None when every entry the kernel visits to resolve ``path`` (a path of this process, links not yet followed)
        belongs to root with no write bit for group or others (a sticky directory excepted; a link by its owner): each
        directory, each link and what it names, and the file itself; else why not. Only root can then change what the
        path leads to between this check and the runtime's mount or exec. The resolved path alone is not enough: a
        link (or a directory) of another user on the way, say /tmp/x/lib -> the driver's libcuda, is retargeted after
        the check and the container gets that user's file."""
        pending, cur, hops = [p for p in str(path).split("/") if p], "/", 0
        why = self._entry("/")[0]
        while not why and pending:
            part = pending.pop(0)
            if part == ".":
                continue
            if part == "..":
                cur = posixpath.dirname(cur)
                continue
            entry = posixpath.join(cur, part)
            why, link = self._entry(entry)
            if why or link is None:
                cur = entry
                continue
            hops += 1
            if hops > 40:
                return "%s: too many levels of symbolic links" % path
            cur = "/" if link.startswith("/") else cur
            pending = [p for p in link.split("/") if p] + pending
        return why

    def _entry(self, path):
        """(why ``path`` is not root's alone, else None; its link target when it is a link) from one lstat."""
        if path not in self._chain:
            why, link = None, None
            try:
                st = os.lstat(path)
                if stat.S_ISLNK(st.st_mode):
                    link = os.readlink(path)
                if st.st_uid != 0:
                    why = "%s belongs to uid %d, not root" % (path, st.st_uid)
                elif st.st_mode & 0o022 and link is None and not _sticky_dir(st.st_mode):
                    who = "group" if st.st_mode & 0o020 else "others"
                    why = "%s is writable by %s (mode %04o)" % (path, who, stat.S_IMODE(st.st_mode))
            except PATH_ERRORS as exc:
                why = "%s: %s" % (path, path_error(exc))
            self._chain[path] = (why, link)
        return self._chain[path]


def _sticky_dir(mode):
    """A directory anyone may write in but only an entry's owner may replace it in (/tmp)."""
    return stat.S_ISDIR(mode) and bool(mode & stat.S_ISVTX)


def _describe(kind, edit):
    if kind == "mounts":
        return "mount %s -> %s" % (edit.get("hostPath"), edit.get("containerPath"))
    if kind == "deviceNodes":
        return "deviceNode %s%s" % (edit.get("path"), " (hostPath %s)" % edit["hostPath"]
                                    if edit.get("hostPath") not in (None, edit.get("path")) else "")
    if kind == "hooks":
        return "hook %s %s %s" % (edit.get("hookName"), edit.get("path"), " ".join(str(a) for a in (edit.get("args") or [])[1:]))
    if kind == "additionalGids":
        return "additionalGids %s" % edit
    if kind == "env":
        return "env %s" % edit
    return "containerEdits.%s" % edit


def _file_kind(st_mode):
    if stat.S_ISREG(st_mode):
        return "file"
    if stat.S_ISDIR(st_mode):
        return "dir"
    if stat.S_ISSOCK(st_mode):
        return "socket"
    return "other"


def account_mount(host, mount):
    """(why it is accounted for, None, the kind of driver file) or (None, why not, None) for one mount; a driver file
    that is not root's alone is (None, why not, its kind): the device FAILs on it, and the hooks naming it are not
    refused a second time."""
    host_path = mount.get("hostPath")
    if not host_path or not str(host_path).startswith("/"):
        return None, "its hostPath is not an absolute path", None
    try:
        real = os.path.realpath(under_root(host.root, host_path))
        st = os.stat(real)
    except PATH_ERRORS as exc:
        return None, "its hostPath cannot be read (%s): no driver file" % path_error(exc), None
    node = host.node_path(real)
    if node is None:
        return None, "its hostPath leads outside the node's filesystem (%s)" % real, None
    rel = host.relative(node)
    name = posixpath.basename(node)
    found = _file_kind(st.st_mode)
    kind = _legit.driver_file(rel, name, found, host.driver_version) if rel else None
    if kind is None and _legit.driver_file(node, name, found, host.driver_version) in ("ipc", "firmware", "config"):
        rel, kind = node, _legit.driver_file(node, name, found, host.driver_version)  # kept in the node's own place
    if kind is None:
        where = "driver root %s, driver %s" % (host.driver_root or "unknown", host.driver_version or "version unknown")
        return None, "%s is not a file of the installed NVIDIA driver (%s): not a driver library, program, firmware, " \
                     "ICD/config file or IPC socket where the driver keeps one" % (node, where), None
    owner = host.root_owned(under_root(host.root, host_path))
    if owner:
        return None, "%s is the driver's %s by name and place, but %s" % (node, kind, owner), kind  # (a FAIL of its own)
    given = host.node_path(_legit.clean(host_path)) or _legit.clean(host_path)
    where = _legit.placed(kind, host.relative(given) or given, given, mount.get("containerPath"), name)
    if where is None:
        return None, "the driver's %s %s mounted at %s, not where the generators place it" % (kind, node, mount.get("containerPath")), None
    options = _legit.options_ok(mount.get("options"), kind)
    if options is None or mount.get("type") not in (None, ""):
        return None, "the driver's %s mounted with type %r options %s, not the generators' (ro, nosuid, nodev, bind or " \
                     "rbind, rprivate, noexec)" % (kind, mount.get("type") or "", ",".join(str(o) for o in mount.get("options") or []) or "none"), None
    return "the driver's %s %s, %s, %s" % (kind, node, where, options), None, kind


def account_node(host, node):
    """(why it is accounted for, None) or (None, why not) for one merged device node (``_cdi.resolve._fill_node``)."""
    path = _legit.clean(node.get("path"))
    if not _legit.DEVICE_NODE.match(path) or path != node.get("path"):
        return None, "%s is not a device node of the NVIDIA driver" % node.get("path")
    host_path = node.get("hostPath")
    allowed = host.node_forms(path)
    if host.driver_root and host.driver_root != "/":
        allowed += host.node_forms(host.driver_root + path)
    if host_path not in (None, "") and _legit.clean(host_path) not in allowed:
        return None, "its hostPath %s is not %s" % (host_path, " or ".join(allowed))
    declared = (node.get("declared") or {}).get("type") if isinstance(node.get("declared"), dict) else node.get("type")
    if declared not in (None, "", "c"):
        return None, "type %r: the driver's nodes are char devices" % declared
    filled = node.get("host") if isinstance(node.get("host"), dict) else None
    found = (filled or {}).get("type")
    if found not in (None, "c") or (filled is not None and found is None):
        if found:
            return None, "its host node is a %s device, not a char device" % {"b": "block", "p": "fifo"}.get(found, found)
        return None, "its host node cannot be read (%s): the runtime would make the node from the spec's numbers alone" % (
            filled.get("error") or "absent")
    # the runtime makes the container's node from the spec's major:minor when it gives them (fillMissingInfo reads the
    # host only for what is missing): the generators' are the host node's own (v1.19 reads them there), never others
    if filled is not None and (node.get("major"), node.get("minor")) != (filled.get("major"), filled.get("minor")):
        return None, "major:minor %s:%s, not its host node's %s:%s" % (node.get("major"), node.get("minor"),
                                                                       filled.get("major"), filled.get("minor"))
    if node.get("uid") is not None:
        return None, "uid %s: the generators never set a node's owner" % node.get("uid")
    mode = node.get("fileMode")
    if mode is not None and (not isinstance(mode, int) or isinstance(mode, bool) or not 0 <= mode <= 0o777):
        return None, "fileMode %r: the generators write permission bits only" % (mode,)
    return "the driver's device node %s" % path, None


def account_hook(host, hook, lib_dirs):
    """(why it is accounted for, None) or (None, why not) for one hook; ``lib_dirs``: the container directories where
    the spec mounts the driver's libraries (what update-ldcache and create-symlinks may name)."""
    args = [str(a) for a in hook.get("args") or []]
    if hook.get("hookName") not in _legit.HOOK_NAMES:
        return None, "hookName %r: the generators' hooks are %s" % (hook.get("hookName"), ", ".join(_legit.HOOK_NAMES))
    sub, rest = _legit.hook_subcommand(hook.get("path"), args)
    if sub is None:
        return None, "not a subcommand of the NVIDIA hook (%s)" % ", ".join(sorted(_legit.HOOK_FLAGS))
    if any(not _legit.HOOK_ENV.match(str(e)) for e in hook.get("env") or []) or hook.get("timeout") is not None:
        return None, "the NVIDIA hook with env %s timeout %s: the generators give NVIDIA_CTK_DEBUG at most, no timeout" % (
            ", ".join(str(e) for e in hook.get("env") or []) or "none", hook.get("timeout"))
    flags = _legit.HOOK_FLAGS[sub]
    prefixes = ["/"] + ([host.driver_root] if host.driver_root else [])
    for flag, value in _legit.flag_pairs(rest):
        if flag not in flags:
            return None, "%s with %s: not one of its generators' flags (%s)" % (sub, flag, ", ".join(sorted(flags)) or "none")
        if not _legit.flag_value_ok(flags[flag], value, lib_dirs, prefixes, host.driver_version):
            return None, "%s %s %s: not the shape the generators write (%s)" % (
                sub, flag, value, "a directory where the spec mounts the driver's libraries" if flags[flag] in ("folder", "link")
                else "the running driver's version %s" % (host.driver_version or "(unknown)") if flags[flag] == "version"
                else flags[flag])
    try:
        real = os.path.realpath(under_root(host.root, hook.get("path")))
        st = os.stat(real)
    except PATH_ERRORS as exc:
        return None, "the hook program %s cannot be read (%s)" % (hook.get("path"), path_error(exc))
    if _legit.clean(posixpath.dirname(str(hook.get("path")))) not in _legit.HOOK_DIRS:
        return None, "the hook program %s is not where the toolkit installs it (%s)" % (hook.get("path"), ", ".join(_legit.HOOK_DIRS))
    if not stat.S_ISREG(st.st_mode) or posixpath.basename(real) not in _legit.HOOK_PROGRAMS:
        return None, "the hook program %s is %s, not the NVIDIA hook" % (hook.get("path"), real)
    owner = host.root_owned(under_root(host.root, hook.get("path")))
    if owner:
        return None, "the hook program is the NVIDIA hook by name, but %s" % owner
    return "the NVIDIA hook's %s" % sub, None


def device_accounting(edits, host, declared=None, other=None):
    """One row per edit of one device's merged edits: {edit, kind, by: 'generators'|'declared'|None, why, declared}.
    ``other``: container edit fields the merge does not carry (intelRdt, netDevices), by name."""
    rows = []
    mounted_lib_dirs = {}  # container directory -> the stems of the driver libraries mounted there
    for mount in edits.get("mounts") or []:
        why, not_why, kind = account_mount(host, mount)
        rows.append(("mounts", mount, why, not_why))
        if kind == "library":
            target = _legit.clean(mount.get("containerPath"))
            mounted_lib_dirs.setdefault(posixpath.dirname(target), set()).add(_legit.stem(posixpath.basename(target)))
    for node in edits.get("deviceNodes") or []:
        rows.append(("deviceNodes", node) + account_node(host, node))
    for hook in edits.get("hooks") or []:
        rows.append(("hooks", hook) + account_hook(host, hook, mounted_lib_dirs))
    for entry in edits.get("env") or []:
        key, _sep, value = str(entry).partition("=")
        why = _legit.env_ok(key, value, mounted_lib_dirs)
        rows.append(("env", entry, why, None if why else "an env entry the generators do not write"))
    node_gids = set(n.get("gid") for n in edits.get("deviceNodes") or [] if n.get("gid"))
    for gid in edits.get("additionalGids") or []:
        rows.append(("additionalGids", gid) + (("the gid of one of its device nodes (v1.19+)", None) if gid in node_gids
                                               else (None, "not the gid of one of its device nodes")))
    for field in other or []:
        rows.append((field, field, None, "a container edit the generators do not write"))
    out = []
    for kind, edit, why, not_why in rows:
        row = {"edit": _describe(kind, edit), "kind": kind, "by": "generators" if why else None, "why": why or not_why}
        if not why:
            index = _declared(kind, edit, declared)
            if index is not None:
                row.update(by="declared", declared=index, why="declared trusted by the site (trusted_edits[%d]%s); %s" % (
                    index, ": %s" % declared[index]["why"] if declared[index].get("why") else "", not_why))
        out.append(row)
    return out


def trust_checks(per_device, root="/", host_record=None, trusted_edits=None, driver_version=None):
    """``cdi.trust.accounted`` per requested device: ``per_device`` is a list of (qualified name, its merged edits,
    other edit fields). A FAIL per unaccounted edit, else one PASS saying how many edits rest on the generators'
    rules and which on the site's declaration. Returns (checks, evidence: {device: rows})."""
    host = Host(root, host_record, driver_version)
    declared = check_declared(trusted_edits)
    checks, evidence = [], {}
    for name, edits, other in per_device:
        rows = device_accounting(edits, host, declared, other)
        evidence[name] = rows
        expected = "every edit accounted for (NVIDIA's generators' shapes for driver root %s, or trusted_edits)" % (
            host.driver_root or "unknown")
        bad = [r for r in rows if r["by"] is None]
        for r in bad:
            checks.append(make_check(CHECK_ID, FAIL, name, expected, "%s: not accounted for: %s" % (r["edit"], r["why"]),
                                     hint=CHECKS[CHECK_ID]["next"]))
        if not bad:
            on_declared = [r["edit"] for r in rows if r["by"] == "declared"]
            checks.append(make_check(CHECK_ID, PASS, name, expected, "all %d edits accounted for: %d as NVIDIA's generators "
                                     "write them%s" % (len(rows), len(rows) - len(on_declared), "; %d declared trusted by the "
                                                       "site: %s" % (len(on_declared), "; ".join(on_declared)) if on_declared else "")))
    return checks, evidence
