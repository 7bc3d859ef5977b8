# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE (runtime layer): the OCI hooks an engine adds to the probe container of its own, counted from the
configuration it runs with. Not public API.

A container's hooks are the spec's (its CDI library injects them) and the engine's own; only a hook the spec added
may be blamed on the spec (_verdict/faithful.py). runc 1.1 names a failing hook by its number in its stage alone
("error running hook #0", libcontainer/configs/config.go ``HookList.RunHooks`` @ v1.1.5; from v1.2.0 ``Hooks.Run``
names the stage too): which hook that is, only the engine's own hooks beside the spec's can tell.

- podman: the OCI hooks (oci-hooks(5)) of its ``hooks_dir`` (containers.conf ``engine.hooks_dir``, the last file that
  sets it; default ``/usr/share/containers/oci/hooks.d``: containers/common pkg/config/default.go
  ``DefaultHooksDirs``, vendored by podman v4.3.1 to v5.8): every ``*.json`` file, a later dir's file replacing one of
  the same name of an earlier dir, and its ``stages``. podman injects the CDI devices before it adds these hooks
  (libpod container_internal_common.go: ``InjectDevices``, then ``setupOCIHooks``), and the hooks manager appends them
  to each stage (pkg/hooks/hooks.go ``Manager.Hooks``): the spec's hooks come first in every stage. Each hook counts
  whatever its ``when`` says (an upper bound: a number then names a spec hook only where no own hook can hold it). A
  ``precreate`` hook may rewrite the whole configuration, a hook file not of version 1.0.0 is not read here, an OCI
  runtime other than runc or crun (nvidia-container-runtime in legacy mode adds a prestart hook) may add its own:
  unknown.
- docker (dockerd adds its own libnetwork hook), containerd and CRI-O (NRI plugins, the runtime handler, CRI-O's
  hooks_dir): unknown. Where the engine's own hooks are unknown a hook number names no spec hook.
"""

from __future__ import annotations

import glob
import json
import os

from ansible_collections.gpuprobe.layers.plugins.module_utils._common.fs import under_root
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.vocab import HOOK_STAGES

PODMAN_HOOKS_DIRS = ("/usr/share/containers/oci/hooks.d",)
PLAIN_OCI_RUNTIMES = ("runc", "crun")
MAX_HOOK_FILE = 64 * 1024


def _unknown(source, why):
    return {"known": False, "stages": {}, "source": source, "why": why}


def podman_hooks_dirs(docs):
    """The hooks dirs podman reads (its containers.conf documents in load order)."""
    dirs = None
    for doc in docs:
        value = (doc.get("engine") or {}).get("hooks_dir")
        if value is not None:
            dirs = value
    return list(PODMAN_HOOKS_DIRS) if dirs is None else dirs


def read_hooks_dirs(dirs, root="/"):
    """(stages {stage: [hook path]}, why not known or None) of the OCI hook files in ``dirs`` (oci-hooks(5))."""
    if not isinstance(dirs, list) or not all(isinstance(d, str) for d in dirs):
        return {}, "hooks_dir is %r, not a list of paths" % (dirs,)
    files = {}
    for d in dirs:
        host = under_root(root, d)
        if not os.path.isdir(host):
            if os.path.lexists(host):
                return {}, "%s is not a directory" % d
            continue  # podman skips a dir that does not exist
        if not os.access(host, os.R_OK | os.X_OK):
            return {}, "%s cannot be listed" % d
        for path in sorted(glob.glob(os.path.join(host, "*.json"))):
            files[os.path.basename(path)] = path
    stages = {}
    for name in sorted(files, key=lambda n: n.lower()):  # the manager's order: file names, case folded
        try:
            with open(files[name], "rb") as fh:
                doc = json.loads(fh.read(MAX_HOOK_FILE).decode("utf-8"))
        except (OSError, ValueError) as exc:
            return {}, "%s not read: %s" % (files[name], exc)
        if not isinstance(doc, dict) or doc.get("version") != "1.0.0":
            return {}, "%s: not an OCI hook of version 1.0.0" % files[name]
        hook_stages = doc.get("stages") or []
        if "precreate" in hook_stages:
            return {}, "%s: a precreate hook may rewrite the container's whole configuration" % files[name]
        path = (doc.get("hook") or {}).get("path")
        for stage in hook_stages:
            if stage in HOOK_STAGES:
                stages.setdefault(stage, []).append(path)
    return stages, None


def engine_hooks(info, root="/", environ=None):
    """The hooks the engine ``info`` (the runtime record's engine) adds to a container of its own: dict known (bool),
    stages ({stage: [hook path]}, after the spec's hooks in each stage), source, why (when not known)."""
    name = (info or {}).get("name")
    if name != "podman":
        return _unknown(name, "%s's own hooks (its daemon, NRI plugins, the runtime handler) are not read" % (name or "the engine"))
    oci = ((info.get("oci_runtime") or "").split() or [""])[0]
    if oci not in PLAIN_OCI_RUNTIMES:
        return _unknown("podman", "the OCI runtime %r may add hooks of its own" % (oci or "unknown"))
    # the engine's configuration reader (cdi layer); loaded here, on a failed start only
    from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi.engine import podman_config_docs  # pylint: disable=import-outside-toplevel
    source, docs, error = podman_config_docs(root, environ)
    if error:
        return _unknown(source, error)
    dirs = podman_hooks_dirs(docs)
    stages, why = read_hooks_dirs(dirs, root)
    source = "%s; hooks_dir %s" % (source, ", ".join(dirs) if isinstance(dirs, list) else dirs)
    if why:
        return _unknown(source, why)
    return {"known": True, "stages": stages, "source": source, "why": None}
