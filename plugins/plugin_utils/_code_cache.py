# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE (controller): this collection's own Python compiled once, not on every run, and where the controller's
cache lives (``cache_dir``).

ansible-core imports a collection's module_utils and plugin_utils through its collection loader, which compiles the
source on every import and keeps no bytecode (Python's own __pycache__ is not used there). So every ansible-playbook
process that imports the options check, the verdict or the report code compiled it again: about 0.18 s of every run
on the development machine, spread over the main process and the workers of the option check, the node task and the
report (docs/performance.md). Importing this module (each controller plugin of the collection does it before its
other collection imports) makes that loader keep the compiled code of this collection's own files: one file per
source in ``<cache>/code/<Python's cache tag>/``, named by the sha256 of the file's path and content, so an edited
source is another entry and never the old code. An entry that does not load is compiled again and replaced; files
of other collections are left to ansible-core; anything that does not fit (another ansible-core, a read-only home)
only means ansible-core compiles as it always did.

Where: ``GPUPROBE_CACHE`` (a directory; ``off`` turns the cache off), else ``<ANSIBLE_HOME>/gpuprobe/cache``; every
kind in its own subdirectory, created mode 0700 and used only when owned by this user and not writable by others
(Ansible loads its payloads with pickle and this loads code: the directory has the same trust as ANSIBLE_HOME
itself, where collections are code too).
"""

from __future__ import annotations

import hashlib
import io
import importlib.util
import marshal
import os
import shutil
import stat
import sys
import tempfile
import types

ENV = "GPUPROBE_CACHE"
COLLECTION_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MAX_ENTRIES = 2000   # more than that (many edits of the sources): the directory is emptied and filled again
HEADER = b"gpuprobe-code\0" + importlib.util.MAGIC_NUMBER

_STATE = {"installed": False, "dir": None}


def cache_dir(kind, environ=None):
    """The directory of ``kind`` (payloads, templates, code), or None when the cache is off or the directory is not
    safe."""
    environ = os.environ if environ is None else environ
    where = environ.get(ENV)
    if where and where.strip().lower() in ("off", "0", "false", "no"):
        return None
    if not where:
        try:
            from ansible import constants as C  # pylint: disable=import-outside-toplevel
            where = os.path.join(C.config.get_config_value("ANSIBLE_HOME"), "gpuprobe", "cache")
        except Exception:  # pylint: disable=broad-except
            return None
    where = os.path.abspath(os.path.expanduser(where))
    for path in (where, os.path.join(where, kind)):
        try:
            os.makedirs(path, mode=0o700, exist_ok=True)
            st = os.lstat(path)
        except OSError:
            return None
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            return None
    return os.path.join(where, kind)


def entry_path(directory, path, source):
    """Where the compiled code of ``source`` (bytes) from ``path`` is kept."""
    # the optimisation level too: compile() follows the interpreter's (-O, PYTHONOPTIMIZE)
    digest = hashlib.sha256(b"%d\0" % sys.flags.optimize + path.encode("utf-8", "surrogateescape") + b"\0" + source).hexdigest()
    return os.path.join(directory, digest[:40] + ".code")


def compiled(directory, path, source):
    """The code object of ``source`` (bytes or text) read from ``path``, compiled exactly as ansible-core's collection
    loader does: from ``directory`` when it was kept there, else compiled and kept. SyntaxError as compile raises it."""
    data = source if isinstance(source, bytes) else source.encode("utf-8")
    entry = entry_path(directory, path, data)
    try:
        with open(entry, "rb") as f:
            blob = f.read()
        if blob.startswith(HEADER):
            code = marshal.loads(blob[len(HEADER):])
            if isinstance(code, types.CodeType) and code.co_filename == path:
                return code
    except (OSError, ValueError, EOFError, TypeError):
        pass
    code = compile(source=source, filename=path, mode="exec", flags=0, dont_inherit=True)
    copy_atomic(io.BytesIO(HEADER + marshal.dumps(code)), entry)
    return code


def copy_atomic(source, target):
    """Copy ``source`` (a path, or a readable binary file) to ``target`` atomically (a temp file in the target's
    directory, renamed): True when done."""
    try:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(target), prefix=".gpuprobe-")
    except OSError:
        return False
    try:
        with os.fdopen(fd, "wb") as out, (open(source, "rb") if isinstance(source, str) else source) as src:
            shutil.copyfileobj(src, out)
            out.flush()
            os.fsync(out.fileno())  # whole on disk before it has its name: a crash never leaves half a payload named
        os.replace(tmp, target)
        return True
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        return False


def _directory():
    where = cache_dir("code")
    if where is None:
        return None
    where = os.path.join(where, sys.implementation.cache_tag or "python")
    try:
        os.makedirs(where, mode=0o700, exist_ok=True)
        names = os.listdir(where)
    except OSError:
        return None
    if len(names) > MAX_ENTRIES:
        for name in names:
            try:
                os.unlink(os.path.join(where, name))
            except OSError:
                pass  # not a file of ours (a directory someone put there): left alone
    return where


def install():
    """Once per process: ansible-core's collection loader takes this collection's compiled code from the cache."""
    if _STATE["installed"]:
        return _STATE["dir"]
    _STATE["installed"] = True
    directory = _directory()
    if directory is None:
        return None
    try:
        from ansible.utils.collection_loader import _collection_finder  # pylint: disable=import-outside-toplevel
        loader = _collection_finder._AnsibleCollectionPkgLoaderBase  # pylint: disable=protected-access
        original = loader.get_code
    except (ImportError, AttributeError):
        return None
    if getattr(original, "gpuprobe_code_cache", None):  # installed by another copy of this module
        _STATE["dir"] = original.gpuprobe_code_cache
        return _STATE["dir"]
    root = COLLECTION_ROOT + os.sep

    def get_code(self, fullname):
        if not getattr(self, "_compiled_code", None):
            try:
                path = self.get_filename(fullname)
                if path and path.startswith(root) and path.endswith(".py"):
                    source = self.get_source(fullname)
                    if source is not None:
                        self._compiled_code = compiled(directory, path, source)  # pylint: disable=protected-access
            except Exception:  # pylint: disable=broad-except
                pass  # ansible-core compiles it (and raises what compiling raises)
        return original(self, fullname)

    get_code.gpuprobe_code_cache = directory
    loader.get_code = get_code
    _STATE["dir"] = directory
    return directory


install()
