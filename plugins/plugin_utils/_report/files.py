# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: writing the fleet report's files on the controller; not public API.

``write_report_set`` writes one report set so that a reader sees the previous set or the new one, never a mix,
whatever stops the writer: the set is written into a new directory, and one rename of a symlink switches
``<basename>-latest`` to it (layout in docs/usage.md, "Reading the report"). ``write_atomic`` replaces one file.
Every file and directory is created with the mode the process umask leaves (0644/0755 under 022, 0600/0700 under
077): the reports name hosts, GPU UUIDs and owners.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import uuid

from ansible_collections.gpuprobe.layers.plugins.module_utils._common.fs import names_in
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.signals import interruptible


def _fsync_dir(directory):
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _unlink(path):
    try:
        os.unlink(path)
    except OSError:
        pass


# A test-only hook: called with the name of each step of write_report_set, so that a test can stop the writer
# between two steps and interrupt it there. Only a test sets it (module attribute); no option or variable reaches it.
_STEP_HOOK = None


def _step(name):
    if _STEP_HOOK is not None:
        _STEP_HOOK(name)


def _hidden(directory, name):
    """A new, unique hidden name next to ``name`` owned by this process: .<name>.<pid>.<random>.tmp."""
    return os.path.join(directory, ".%s.%d.%s.tmp" % (name, os.getpid(), uuid.uuid4().hex[:12]))


def _encoded(text, batch=1 << 16):
    """The bytes of ``text``: a str, bytes, or an iterable of str pieces (joined into writes of about ``batch``
    characters, so that a rendering written as it is made is never whole in memory)."""
    if isinstance(text, bytes):
        yield text
        return
    if isinstance(text, str):
        yield text.encode("utf-8")
        return
    pieces, size = [], 0
    for piece in text:
        pieces.append(piece)
        size += len(piece)
        if size >= batch:
            yield "".join(pieces).encode("utf-8")
            pieces, size = [], 0
    if pieces:
        yield "".join(pieces).encode("utf-8")


def _write_new(path, text):
    """Create ``path`` (never an existing file, never through a symlink) with ``text`` (see ``_encoded``), flushed and
    fsync'ed. The mode is 0666 less the process umask, as for any file a user's process creates."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o666)
    try:
        with os.fdopen(fd, "wb") as handle:
            for data in _encoded(text):
                handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException:
        _unlink(path)
        raise


def _replace_with(path, make):
    """``make(tmp)`` creates a hidden temporary entry beside ``path``, then os.replace() puts it there in one step; the
    temporary entry is removed when either fails or is interrupted."""
    tmp = _hidden(os.path.dirname(path), os.path.basename(path))
    try:
        make(tmp)
        os.replace(tmp, path)
    except BaseException:
        _unlink(tmp)
        raise


def write_atomic(path, text):
    """Write ``text`` to ``path`` through a hidden temporary file in the same directory and os.replace()."""
    _replace_with(path, lambda tmp: _write_new(tmp, text))


def _link_atomic(target, path):
    """Make ``path`` a symlink to ``target`` in one step: a new hidden symlink renamed over ``path``."""
    _replace_with(path, lambda tmp: os.symlink(target, tmp))


def _points_at(link, directory):
    try:
        return os.readlink(link) == os.path.basename(directory)
    except OSError:
        return False


def _remove_tree(path):
    shutil.rmtree(path, ignore_errors=True)


def _discard(path):
    """Remove a visible directory without ever showing it half removed: renamed to a hidden temporary first."""
    hidden = _hidden(os.path.dirname(path), os.path.basename(path))
    try:
        os.rename(path, hidden)
    except OSError:
        return
    _remove_tree(hidden)


_TEMP_NAME = re.compile(r"^\.(?P<name>.+)\.(?P<pid>[0-9]+)\.[0-9a-f]{12}\.tmp$")


def _pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def sweep_temporaries(report_dir, basename):
    """Remove what an interrupted writer left in ``report_dir``: hidden .<basename>-….<pid>.<random>.tmp entries
    (a set not yet renamed into place, a symlink not yet swapped) whose process is gone, or is this one (an earlier,
    interrupted call). Returns the removed names."""
    removed = []
    for name in names_in(report_dir):
        match = _TEMP_NAME.match(name)
        pid = int(match.group("pid")) if match else None
        # this process's own are stale too: one process writes one set at a time
        if not match or not match.group("name").startswith(basename + "-") or (pid != os.getpid() and _pid_alive(pid)):
            continue
        path = os.path.join(report_dir, name)
        if os.path.isdir(path) and not os.path.islink(path):
            _remove_tree(path)
        else:
            _unlink(path)
        removed.append(name)
    return removed


def _refuse_unless(path, allowed):
    """Raise OSError unless ``path`` is absent or one of ``allowed`` ("link", "file"): never replace what a user put there."""
    if not os.path.lexists(path):
        return
    if os.path.islink(path):
        if "link" in allowed:
            return
    elif os.path.isfile(path) and "file" in allowed:
        return
    raise OSError(errno.EISDIR if os.path.isdir(path) else errno.EEXIST,
                  "not a %s, refusing to replace it" % " or ".join({"link": "symlink", "file": "regular file"}[a] for a in allowed),
                  path)


def set_paths(report_dir, basename, suffixes, stamp=None):
    """The paths of a report set: run (the run's directory, when ``stamp``), files (suffix -> its file there),
    latest (the symlink to the newest run's directory) and latest_files (suffix -> <basename>-latest<suffix>, a
    symlink through ``latest`` to that suffix's file of the newest run)."""
    paths = {"latest": os.path.join(report_dir, "%s-latest" % basename),
             "latest_files": dict((s, os.path.join(report_dir, "%s-latest%s" % (basename, s))) for s in suffixes)}
    if stamp:
        paths["run"] = os.path.join(report_dir, "%s-%s" % (basename, stamp))
        paths["files"] = dict((s, os.path.join(paths["run"], basename + s)) for s in suffixes)
    return paths


def _migrate_flat_latest(report_dir, basename, paths):
    """Before the first set of this layout: the previous version's regular <basename>-latest<suffix> files become a
    directory of hard links that ``latest`` points at, and each file a symlink through ``latest`` to its link, one
    atomic step at a time, so that the previous set stays the readable one. Returns that directory, or None."""
    flat = dict((s, p) for s, p in paths["latest_files"].items() if os.path.isfile(p) and not os.path.islink(p))
    named = [name for name in os.listdir(report_dir) if name.startswith("%s-latest." % basename)]
    others = [name for name in named if os.path.isfile(os.path.join(report_dir, name)) and not os.path.islink(os.path.join(report_dir, name))]
    for name in others:
        flat.setdefault(name[len("%s-latest" % basename):], os.path.join(report_dir, name))
    if not flat or os.path.lexists(paths["latest"]):
        return None
    tmp = _hidden(report_dir, "%s-previous" % basename)
    os.mkdir(tmp, 0o777)
    for suffix, path in flat.items():
        os.link(path, os.path.join(tmp, basename + suffix))
    previous = os.path.join(report_dir, "%s-previous-%s" % (basename, uuid.uuid4().hex[:8]))
    os.rename(tmp, previous)
    _link_atomic(os.path.basename(previous), paths["latest"])
    for suffix, path in flat.items():
        _link_atomic(os.path.join(os.path.basename(paths["latest"]), basename + suffix), path)
    return previous


def write_report_set(report_dir, basename, stamp, texts):
    """Write one report set so that readers see either the previous set or this one, never a mix, whatever stops
    the writer (an exception, SIGTERM, SIGINT or SIGHUP, SIGKILL).

    ``texts``: suffix (".json", ...) -> text: a str, or an iterable of str pieces, each consumed while its file is
    written (a rendering that fails removes the set like any other error). The files are written and fsync'ed into a new hidden directory, which
    is renamed to <basename>-<stamp>[-N] (the run's set appears whole or not at all); then <basename>-latest, a
    symlink to the newest run's directory, is swapped in one rename: that is the one step that moves readers from
    the previous set to this one. <basename>-latest<suffix> are symlinks through <basename>-latest, which never
    change. An exception, or SIGTERM/SIGINT/SIGHUP in the main thread (they raise ``Interrupted`` while the set is
    written), removes what this run created and leaves ``latest`` as it was; a SIGKILL may leave a hidden temporary
    (removed by the next run, once its process is gone) or this run's complete directory not yet pointed at. Files
    and directories get their mode from the process umask. Returns (run directory, suffix -> file).
    """
    paths = set_paths(report_dir, basename, texts)
    _refuse_unless(paths["latest"], ("link",))
    for path in paths["latest_files"].values():
        _refuse_unless(path, ("link", "file"))
    sweep_temporaries(report_dir, basename)
    tmp = _hidden(report_dir, "%s-%s" % (basename, stamp))
    with interruptible():  # SIGTERM/SIGINT/SIGHUP while the set is written (the renderings stream into it) clean up too
        run_dir, previous, paths = _write_set(report_dir, basename, stamp, texts, tmp, paths)
    _step("latest")
    for name in os.listdir(report_dir):
        # the previous version's set, once nothing points at it (also one an interrupted migration left)
        if re.match(r"^%s-previous-[0-9a-f]{8}$" % re.escape(basename), name) or (previous and name == os.path.basename(previous)):
            _discard(os.path.join(report_dir, name))
    _fsync_dir(report_dir)
    return run_dir, dict(paths["files"])


def _write_set(report_dir, basename, stamp, texts, tmp, paths):  # pylint: disable=too-many-arguments
    """write_report_set's steps from the hidden temporary to ``latest`` (``paths``: set_paths of the set without its
    stamp); (run dir, previous flat set, the paths of this run's set)."""
    run_dir = previous = None
    try:
        os.mkdir(tmp, 0o777)
        _step("temp_dir")
        for suffix, text in texts.items():
            _write_new(os.path.join(tmp, basename + suffix), text)
            _step("file" + suffix)
        _fsync_dir(tmp)
        n = 1
        paths = set_paths(report_dir, basename, texts, stamp)
        while os.path.lexists(paths["run"]):
            n += 1
            paths = set_paths(report_dir, basename, texts, "%s-%d" % (stamp, n))
        os.rename(tmp, paths["run"])
        run_dir = paths["run"]
        _step("run_dir")
        previous = _migrate_flat_latest(report_dir, basename, paths)
        _step("migrated")
        for suffix, path in paths["latest_files"].items():
            target = os.path.join(os.path.basename(paths["latest"]), basename + suffix)
            if not (os.path.islink(path) and os.readlink(path) == target):
                _link_atomic(target, path)
        _step("latest_files")
        _link_atomic(os.path.basename(run_dir), paths["latest"])
    except BaseException:
        # before the switch nothing of this run is kept; an exception raised just after the rename (a KeyboardInterrupt
        # lands after the call returns) finds latest already pointing at this run's directory, which then stays
        _remove_tree(tmp)
        if run_dir and not _points_at(paths["latest"], run_dir):
            _discard(run_dir)
        raise
    return run_dir, previous, paths
