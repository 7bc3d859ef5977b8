# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: the node as the runtime discovery reads it, from a root. Not public API.

Every path the discovery reads is a path of the node (``/proc/1234/cmdline``, ``/etc/rancher/k3s/config.yaml``),
taken under ``root``: ``/`` on a node, a fixture tree in the tests. A symbolic link is followed as the node follows
it, inside the root (``/var/run -> /run`` under a fixture root is ``<root>/run``, not this machine's /run).

- ``resolve``: the real path of a node path (its links followed inside the root), as the node names it and as this
  process reaches it;
- ``same_socket``: whether two endpoints name the same socket: the same (st_dev, st_ino) where both exist, else the
  same real path (kubeadm's ``unix:///var/run/containerd/containerd.sock`` and containerd's
  ``/run/containerd/containerd.sock`` are one socket where /var/run links to /run);
- ``processes`` and the ``proc_*`` readers: the running processes from ``<root>/proc`` (argv, parent, environment,
  systemd unit from the cgroup, the unix sockets a process listens on); ``flag_value``: a flag of an argv.

A door of the ``_runtime`` room: the cdi layer's engine configuration finds the daemon serving an endpoint with
``same_socket``.
"""

from __future__ import annotations

import os
import posixpath
import re
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.fs import names_in, under_root

MAX_LINKS = 40          # as the kernel's path walk (ELOOP)
READ_LIMIT = 256 * 1024
UNIT_RE = re.compile(r"/([^/]+\.service)(?:/|$)")


def resolve(root, path):
    """(node_path, host_path): the real path of the node path ``path``, every symbolic link followed as the node
    follows it (an absolute target is taken from the node's /, that is under ``root``), and the same path as this
    process reaches it. Components that do not exist are kept as written; more than MAX_LINKS links stop the walk
    (the path is returned as far as it was resolved)."""
    if not root or root == "/":
        real = os.path.realpath(path)
        return real, real
    pending = [p for p in str(path).split("/") if p]
    done = []
    hops = 0
    while pending:
        name = pending.pop(0)
        if name == ".":
            continue
        if name == "..":
            if done:
                done.pop()
            continue
        host = under_root(root, "/" + "/".join(done + [name]))
        if os.path.islink(host) and hops < MAX_LINKS:
            hops += 1
            target = os.readlink(host)
            if target.startswith("/"):
                done = []
            pending = [p for p in target.split("/") if p] + pending
            continue
        done.append(name)
    node = "/" + "/".join(done)
    return node, under_root(root, node)


def socket_path(endpoint):
    """The socket path of a ``unix://`` endpoint or a bare absolute path (the kubelet's two spellings), else None."""
    text = str(endpoint or "").strip()
    if text.startswith("unix://"):
        text = text[len("unix://"):]
    return text if text.startswith("/") else None


def identity(root, endpoint):
    """(real node path, (st_dev, st_ino) or None) of an endpoint's socket; (None, None) when it is not a unix path."""
    path = socket_path(endpoint)
    if path is None:
        return None, None
    node, host = resolve(root, path)
    try:
        st = os.stat(host)
    except OSError:
        return node, None
    return node, (st.st_dev, st.st_ino)


def same_socket(first, second, root="/"):
    """(bool, how): whether two endpoints (``unix:///path`` or ``/path``) name the same socket: by (st_dev, st_ino)
    when both exist, else by their real paths (links followed inside the root). ``how`` says which was compared."""
    node_a, id_a = identity(root, first)
    node_b, id_b = identity(root, second)
    if node_a is None or node_b is None:
        return False, "not both unix socket paths (%s, %s)" % (first, second)
    if id_a is not None and id_b is not None:
        return id_a == id_b, "the same socket (st_dev, st_ino %s)" % (id_a,) if id_a == id_b else \
            "different sockets (%s is %s, %s is %s)" % (node_a, id_a, node_b, id_b)
    if node_a == node_b:
        return True, "the same real path %s" % node_a
    return False, "different real paths (%s, %s)" % (node_a, node_b)


def flag_value(argv, *names):
    """The value of the last ``--name value`` / ``--name=value`` / ``-n value`` among argv, or None."""
    found = None
    for i, arg in enumerate(argv):
        for name in names:
            if arg == name and i + 1 < len(argv):
                found = argv[i + 1]
            elif arg.startswith(name + "="):
                found = arg[len(name) + 1:]
    return found


def read_text(root, path, limit=READ_LIMIT):
    """The text of the node file ``path`` (links followed inside the root), or None when it cannot be read."""
    try:
        with open(resolve(root, path)[1], "r") as fh:
            return fh.read(limit)
    except (OSError, UnicodeDecodeError):
        return None


def is_file(root, path):
    return os.path.isfile(resolve(root, path)[1])


def is_dir(root, path):
    return os.path.isdir(resolve(root, path)[1])


def list_dir(root, path):
    """The sorted entry names of a node directory ([] when it is not one)."""
    return sorted(names_in(resolve(root, path)[1]))


def _proc(root, pid, name):
    return under_root(root, "/proc/%s/%s" % (pid, name))


def proc_argv(root, pid):
    """The argv of a process from /proc/<pid>/cmdline ([] when unreadable). A process that rewrote its argv area as
    one title (k3s and RKE2 do: ``gspt.SetProcTitle(os.Args[0] + " server")``, the rest NUL) is split at its blanks."""
    try:
        with open(_proc(root, pid, "cmdline"), "rb") as fh:
            data = fh.read(READ_LIMIT)
    except OSError:
        return []
    argv = [a.decode("utf-8", "replace") for a in data.split(b"\0") if a]
    if len(argv) == 1 and " " in argv[0]:
        argv = argv[0].split()
    return argv


def proc_environ(root, pid):
    """The environment a process started with (/proc/<pid>/environ), {} when unreadable."""
    try:
        with open(_proc(root, pid, "environ"), "rb") as fh:
            data = fh.read(READ_LIMIT)
    except OSError:
        return {}
    out = {}
    for item in data.split(b"\0"):
        key, sep, value = item.decode("utf-8", "replace").partition("=")
        if sep and key:
            out[key] = value
    return out


def proc_ppid(root, pid):
    """The parent pid of a process (/proc/<pid>/status PPid), or None."""
    text = read_text(root, "/proc/%s/status" % pid, 64 * 1024)
    for line in (text or "").splitlines():
        if line.startswith("PPid:"):
            value = line.split(":", 1)[1].strip()
            return int(value) if value.isdigit() else None
    return None


def proc_unit(root, pid):
    """The systemd unit a process runs in, from its cgroup (cgroup v2 ``0::/system.slice/k3s.service``, v1
    ``1:name=systemd:/system.slice/kubelet.service``), or None."""
    text = read_text(root, "/proc/%s/cgroup" % pid, 64 * 1024)
    for line in (text or "").splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3 and (parts[0] == "0" or parts[1] == "name=systemd"):
            found = UNIT_RE.findall(parts[2])
            if found:
                return found[-1]
    return None


def proc_exe(root, pid):
    try:
        return os.readlink(_proc(root, pid, "exe"))
    except OSError:
        return None


def unix_listeners(root="/"):
    """{inode: path} of the bound unix sockets (/proc/net/unix, this network namespace), {} when unreadable."""
    text = read_text(root, "/proc/net/unix", 8 * 1024 * 1024)
    out = {}
    for line in (text or "").splitlines()[1:]:
        fields = line.split()
        if len(fields) >= 8 and fields[6].isdigit() and fields[7].startswith("/"):
            out[int(fields[6])] = fields[7]
    return out


def proc_sockets(root, pid, listeners):
    """The paths of the unix sockets process ``pid`` holds open (its /proc/<pid>/fd links ``socket:[inode]`` whose
    inode /proc/net/unix names with a path): where the daemon really listens, whatever its configuration says."""
    fd_dir = _proc(root, pid, "fd")
    out = []
    for name in names_in(fd_dir):
        try:
            target = os.readlink(posixpath.join(fd_dir, name))
        except OSError:
            continue
        m = re.match(r"^socket:\[(\d+)\]$", target)
        if m and int(m.group(1)) in listeners and listeners[int(m.group(1))] not in out:
            out.append(listeners[int(m.group(1))])
    return sorted(out)


def processes(root="/"):
    """[{pid, argv, name}] of the processes under <root>/proc (name: argv[0]'s basename), by pid."""
    out = []
    for entry in list_dir(root, "/proc"):
        if not entry.isdigit():
            continue
        argv = proc_argv(root, entry)
        if argv:
            out.append({"pid": int(entry), "argv": argv, "name": posixpath.basename(argv[0])})
    return sorted(out, key=lambda p: p["pid"])
