# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: the CRI daemons running on the node (containerd, CRI-O) and where each serves. Not public API.

A daemon's socket is, in this order: where it listens (its /proc/<pid>/fd sockets that /proc/net/unix names: what
the kernel says, on a live node), else what it was started with and its configuration say:

- containerd (cmd/containerd): ``--address``/``-a``, else the configuration's gRPC address, else
  ``/run/containerd/containerd.sock``. The configuration is ``--config``/``-c`` (default
  ``/etc/containerd/config.toml``) with its ``imports`` (containerd cmd/containerd/server/config/config.go
  ``LoadConfigWithPlugins``: each import resolved against the importing file's directory, globs expanded in sorted
  order, loaded breadth first; a non-empty value of an import overrides, a ``plugins`` section replaces that
  section). The address is ``[grpc] address`` (versions 1-3; k3s, RKE2, EKS, AKS write it there) or
  ``[plugins."io.containerd.server.v1.grpc"] address`` (version 4, where server settings are plugins);
- CRI-O (cri-o internal/criocli/criocli.go, pkg/config): ``--listen`` (or ``CONTAINER_LISTEN``), else ``listen`` of
  ``[crio.api]`` in ``--config``/``-c`` (``CONTAINER_CONFIG``, default ``/etc/crio/crio.conf``) overridden by
  every file under ``--config-dir``/``-d`` (default ``/etc/crio/crio.conf.d``, walked in lexical order), else
  ``/var/run/crio/crio.sock``.

Who started a daemon is said too: its parent process (k3s, rke2, dockerd) or its systemd unit.
"""

from __future__ import annotations

import fnmatch
import posixpath
import re

from ansible_collections.gpuprobe.layers.plugins.module_utils._common import toml as _toml
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import nodefs
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime.nodefs import flag_value

CONTAINERD_CONFIG = "/etc/containerd/config.toml"
CONTAINERD_ADDRESS = "/run/containerd/containerd.sock"
CRIO_CONFIG = "/etc/crio/crio.conf"
CRIO_CONFIG_DIR = "/etc/crio/crio.conf.d"
CRIO_LISTEN = "/var/run/crio/crio.sock"
GRPC_PLUGIN = "io.containerd.server.v1.grpc"
MAX_IMPORTS = 64
OWNERS = ("k3s", "rke2", "dockerd", "kubelite", "snapd")
# the templates k3s and RKE2 generate their containerd config.toml from (config-v3 for containerd 2.x)
TEMPLATES = ("config-v3.toml.tmpl", "config.toml.tmpl")


def _glob(root, pattern):
    """The node paths matching a glob (one level of wildcards in the last component, as config imports use), sorted."""
    d, base = posixpath.split(pattern)
    if any(c in d for c in "*?["):
        return []
    return ["%s/%s" % (d, n) for n in nodefs.list_dir(root, d) if fnmatch.fnmatchcase(n, base) and nodefs.is_file(root, "%s/%s" % (d, n))]


def merge_containerd(to, frm):
    """Merge one containerd configuration document into another as containerd does (non-empty values override,
    tables of fields merge field by field, a plugin's section is replaced whole, lists are appended)."""
    for key, value in frm.items():
        if key == "plugins" and isinstance(value, dict):
            plugins = to.setdefault("plugins", {})
            for name, section in value.items():
                plugins[name] = section
        elif isinstance(value, dict) and isinstance(to.get(key), dict):
            merge_containerd(to[key], value)
        elif isinstance(value, list) and isinstance(to.get(key), list):
            to[key] = to[key] + [v for v in value if v not in to[key]]
        elif value not in ("", 0, None, [], {}) or key not in to:
            to[key] = value
    return to


def containerd_config(root, path):
    """dict doc (the merged configuration), files (read, in order), errors, of the containerd config file ``path``
    with its imports."""
    out = {"doc": {}, "files": [], "errors": []}
    pending, loaded = [path], set()
    while pending and len(loaded) < MAX_IMPORTS:
        current = pending.pop(0)
        if current in loaded:
            continue
        loaded.add(current)
        text = nodefs.read_text(root, current, 4 * 1024 * 1024)
        if text is None:
            if current == path and current == CONTAINERD_CONFIG and not nodefs.is_file(root, current):
                out["errors"].append("no %s: containerd runs with its defaults" % current)
            else:
                out["errors"].append("%s not readable" % current)
            continue
        try:
            doc = _toml.loads(text)
        except _toml.TomlError as exc:
            out["errors"].append("%s not read: %s" % (current, exc))
            continue
        out["files"].append(current)
        merge_containerd(out["doc"], {k: v for k, v in doc.items() if k != "imports"})
        for item in doc.get("imports") or []:
            item = posixpath.normpath(str(item))
            if not item.startswith("/"):
                item = posixpath.join(posixpath.dirname(current), item)
            pending.extend(_glob(root, item) if any(c in item for c in "*?[") else [item])
    return out


def containerd_address(doc):
    """The gRPC socket a containerd configuration names: version 4's server plugin, else ``[grpc] address``, or None."""
    plugin = ((doc or {}).get("plugins") or {}).get(GRPC_PLUGIN) or {}
    return plugin.get("address") or ((doc or {}).get("grpc") or {}).get("address") or None


def crio_config(root, config, config_dir):
    """dict listen (or None), files, errors of CRI-O's configuration file and drop-in directory."""
    out = {"listen": None, "files": [], "errors": []}
    paths = [config] if nodefs.is_file(root, config) else []
    walk = [config_dir]
    while walk:
        d = walk.pop(0)
        for name in nodefs.list_dir(root, d):
            p = "%s/%s" % (d.rstrip("/"), name)
            if nodefs.is_dir(root, p):
                walk.insert(0, p)
            elif nodefs.is_file(root, p):
                paths.append(p)
    for p in paths:
        text = nodefs.read_text(root, p)
        try:
            doc = _toml.loads(text or "")
        except _toml.TomlError as exc:
            out["errors"].append("%s not read: %s" % (p, exc))
            continue
        out["files"].append(p)
        listen = ((doc.get("crio") or {}).get("api") or {}).get("listen")
        if listen:
            out["listen"] = (listen, p)
    return out


def _generated_from(root, config, files):
    """'k3s, from <config>.tmpl' where k3s/RKE2 generated the file (its header says so) from a template beside it,
    'k3s, from its built-in template' where none is there; None for a file nobody generated."""
    text = nodefs.read_text(root, config, 4096) if config in files else None
    m = re.match(r"#\s*File generated by (\S+)\.", text or "")
    if not m:
        return None
    d = posixpath.dirname(config)
    for name in TEMPLATES:
        if nodefs.is_file(root, "%s/%s" % (d, name)):
            return "%s, from %s/%s" % (m.group(1), d, name)
    return "%s, from its built-in template" % m.group(1)


def _owner(root, pid, by_pid):
    parent = by_pid.get(nodefs.proc_ppid(root, pid))
    if parent and parent["name"] in OWNERS:
        return "%s (pid %d)" % (parent["name"], parent["pid"])
    unit = nodefs.proc_unit(root, pid)
    return unit


def running(root="/", procs=None):
    """[dict engine ('containerd' or 'crio'), pid, argv, socket (node path), socket_from (how it was found), config,
    config_files (read, in order), generated (who generated the config file, from what), owner, listening, errors]
    of the CRI daemons running under ``root``, by pid; plus dockerd processes as engine 'dockerd' (socket: its
    -H/--host unix socket where given)."""
    procs = nodefs.processes(root) if procs is None else procs
    by_pid = {p["pid"]: p for p in procs}
    listeners = None
    out = []
    for p in procs:
        name, argv, pid = p["name"], p["argv"], p["pid"]
        if name not in ("containerd", "crio", "dockerd"):
            continue
        d = {"engine": name, "pid": pid, "argv": argv, "socket": None, "socket_from": None, "config": None,
             "config_files": [], "generated": None, "owner": _owner(root, pid, by_pid), "errors": [], "listening": []}
        if listeners is None:
            listeners = nodefs.unix_listeners(root)
        d["listening"] = nodefs.proc_sockets(root, pid, listeners) if listeners else []
        if name == "containerd":
            config = flag_value(argv[1:], "--config", "-c") or CONTAINERD_CONFIG
            address = flag_value(argv[1:], "--address", "-a")
            loaded = containerd_config(root, config)
            d.update(config=config, config_files=loaded["files"], errors=loaded["errors"])
            d["generated"] = _generated_from(root, config, loaded["files"])
            if address:
                d.update(socket=address, socket_from="its --address")
            elif containerd_address(loaded["doc"]):
                d.update(socket=containerd_address(loaded["doc"]), socket_from="the gRPC address in %s" % ", ".join(loaded["files"]))
            else:
                d.update(socket=CONTAINERD_ADDRESS, socket_from="containerd's default (no --address, no gRPC address in %s)" % (
                    ", ".join(loaded["files"]) if loaded["files"] else "a configuration that could be read: %s" % "; ".join(loaded["errors"])))
        elif name == "crio":
            env = nodefs.proc_environ(root, pid)
            config = flag_value(argv[1:], "--config", "-c") or env.get("CONTAINER_CONFIG") or CRIO_CONFIG
            config_dir = flag_value(argv[1:], "--config-dir", "-d") or env.get("CONTAINER_CONFIG_DIR") or CRIO_CONFIG_DIR
            listen = flag_value(argv[1:], "--listen") or env.get("CONTAINER_LISTEN")
            loaded = crio_config(root, config, config_dir)
            d.update(config=config, config_files=loaded["files"], errors=loaded["errors"])
            if listen:
                d.update(socket=listen, socket_from="its --listen")
            elif loaded["listen"]:
                d.update(socket=loaded["listen"][0], socket_from="listen in %s" % loaded["listen"][1])
            else:
                d.update(socket=CRIO_LISTEN, socket_from="CRI-O's default (no --listen, no listen in its configuration)")
        else:
            host = flag_value(argv[1:], "-H", "--host")
            if host and nodefs.socket_path(host):
                d.update(socket=nodefs.socket_path(host), socket_from="its -H")
        unix = [s for s in d["listening"] if s.endswith(".sock")]
        if d["socket"] and unix and d["socket"] not in unix and name != "dockerd":
            # the kernel says where it listens: that wins over what its files say
            listening = [s for s in unix if nodefs.same_socket(s, d["socket"], root)[0]]
            if not listening:
                d["errors"].append("its configuration says %s but it listens on %s" % (d["socket"], ", ".join(unix)))
                d.update(socket=unix[0], socket_from="the socket it listens on (/proc/%d/fd, /proc/net/unix)" % pid)
        out.append(d)
    return out


def label(d):
    """'containerd (pid 900, started by k3s (pid 812)) at /run/k3s/containerd/containerd.sock'."""
    who = ", started by %s" % d["owner"] if d.get("owner") and "(pid" in str(d["owner"]) else (
        ", %s" % d["owner"] if d.get("owner") else "")
    return "%s (pid %d%s)%s" % (d["engine"], d["pid"], who, " at %s" % d["socket"] if d.get("socket") else "")
