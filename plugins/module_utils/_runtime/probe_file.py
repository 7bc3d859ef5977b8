# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE (runtime layer): the probe file on the host, looked at again once its container is gone
(``runtime.probe.unchanged``); not public API.

The runtime layer writes the probe into a private host directory and bind-mounts the file into the container. What
runs on the host while the container is created (a createRuntime or createContainer hook, which may find the mount's
source in the bundle's config.json) could rewrite it, and the container would run that file under ``-I -S`` with the
run's token. So the file's sha256 and the directory's entries are taken right after the write and again after the
container is removed: any difference FAILs the check, and the verdict is FAILED_AT_CDI ``cdi.inject.probe_integrity``
(_verdict.verdict._probe_changed)."""

from __future__ import annotations

import os
import stat

from ansible_collections.gpuprobe.layers.plugins.module_utils._common.digest import NotRegularFile, file_sha256
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import FAIL, PASS

CHECK = "runtime.probe.unchanged"
# what the collection itself puts in the probe's directory: the script, and the CRI adapter's log directory
OWN_ENTRIES = ("cri-log",)
MAX_READ = 4 * 1024 * 1024  # the probe is ~40 KB: a longer file is changed, whatever it holds


def state(directory, path):
    """What the probe's directory and file are now: dir (dev, inode), entries, sha256, size; ``error`` when not read."""
    out = {"directory": directory, "path": path}
    try:
        st = os.lstat(directory)
        if not stat.S_ISDIR(st.st_mode):
            raise NotRegularFile("is no longer a directory")
        out["dir"] = [st.st_dev, st.st_ino]
        out["entries"] = sorted(os.listdir(directory))
        st = os.lstat(path)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFile("%s is no longer a regular file" % path)
        out["size"] = st.st_size
        out["sha256"] = file_sha256(path, MAX_READ)
    except OSError as exc:
        out["error"] = "%s: %s" % (getattr(exc, "filename", None) or directory, exc.strerror or exc)
    return out


def changes(written, after):
    """What differs between the state taken right after the write and the one after the run: a sentence each."""
    if after.get("error"):
        return ["cannot be read after the run: %s" % after["error"]]
    out = []
    if after.get("sha256") != written.get("sha256"):
        out.append("%s: sha256 %s (%s bytes), written %s (%s bytes)" % (
            after["path"], str(after.get("sha256"))[:16], after.get("size"), str(written.get("sha256"))[:16],
            written.get("size")))
    if after.get("dir") != written.get("dir"):
        out.append("the directory %s was replaced" % after["directory"])
    own = set(written.get("entries") or []) | set(OWN_ENTRIES)
    added = [e for e in after.get("entries") or [] if e not in own]
    if added:
        out.append("entries the collection did not put in %s: %s" % (after["directory"], ", ".join(added[:10])))
    return out


def check(builder, written, after, subject):
    """``runtime.probe.unchanged`` for one container run (FAIL: any change), with evidence.probe_file."""
    found = changes(written, after) if not written.get("error") else ["the probe file was not read after it was written: %s"
                                                                      % written["error"]]
    builder.evidence.setdefault("probe_file", []).append({"container": subject, "written": written, "after": after,
                                                          "changes": found})
    builder.add(CHECK, FAIL if found else PASS, subject=subject, expected="the probe file and its directory as written "
                "(sha256 %s)" % str(written.get("sha256"))[:16], observed="; ".join(found) or "unchanged after the run")
