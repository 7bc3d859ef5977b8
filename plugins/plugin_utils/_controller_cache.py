# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE (controller): what the controller rebuilds on every run, kept from one run to the next: the node-side
modules' AnsiballZ payloads (``Slot``) and the report templates' compiled code (``template_cache``).

Ansible builds a module's payload once per run, in the run's own local temp dir (``ansiballz_cache`` there), and
building it means parsing every module_utils file the module imports: for node_layers that is about half a second of
controller CPU on every run, more than the node spends on its layers (docs/performance.md). verify_node asks this
cache before each node-side call: when a payload built from exactly the same sources was kept, it is put where
Ansible looks for it in this run, and Ansible loads it instead of building it; after the call, a payload Ansible
built is kept for the next run.

"Exactly the same sources": the key is a sha256 of every file of the collection's plugins/modules and
plugins/module_utils, its meta/runtime.yml and this file (path and content), ansible-core (version, location, and its
module_utils and payload builder by size and mtime), the module_utils directories Ansible searches, and the
controller's Python. Any change to any of them is another key, and older payloads of the module are removed when a
new one is kept. A kept payload that does not load is removed, never used. A payload built with a debugger or
coverage extension is never kept or used.

A payload is kept with its bytecode: next to each source file of the payload's zip, a ``.pyc`` of it compiled by
the controller's Python (``with_bytecode``). The node imports a module from that zip (zipimport), which never writes
bytecode, so without it every call compiles every module it imports (about 0.35 s of a node_verify call on the
development machine, docs/performance.md). Each ``.pyc`` is an unchecked hash-based one (PEP 552), stamped with the
hash of the source beside it: zipimport uses it when the node's Python has the same bytecode magic as the
controller's, without reading the source (the two are written together into one zip and never apart); otherwise it
compiles the source, as it always did. Nothing is written on the node. The payload that Ansible built in this run is
replaced by the one with bytecode too, so the later nodes of a first run use it. Three differences where the
bytecode is used: a module's ``__file__`` ends in ``.pyc`` and its code's file name is ``ansiballz-payload/<path in
the zip>`` (tracebacks say so; ansible-core's deprecation messages raised on the node can no longer name ansible-core
as their source); the code has no docstrings (``__doc__`` is None: nothing on the node reads them, and they were a
sixth of the bytecode); and it is compiled at optimisation level 0, which zipimport uses also under ``python -O``
(the asserts of ansible-core's module_utils then run; this collection has none).
``GPUPROBE_PAYLOAD_BYTECODE=off`` keeps payloads without it (nodes whose Python is another version than the
controller's gain nothing from it and would receive a payload about 2.7 times larger).

With or without bytecode, a kept payload carries this collection's sources lean (``lean_source``): without their
comments (but the copyright and licence lines at the top) and docstrings, every other line where it was, so that a
traceback names the repository's line. They are what a node whose Python refuses the bytecode compiles, and about
a quarter of the bytes the node would otherwise receive; ansible-core's own files are left as they are. Which
payloads are kept: the modules verify_node calls, and the facts modules called directly (their action plugin,
plugin_utils/_kept_module).

The report templates (plugin_utils/_report/templates) are compiled by Jinja2 on every run otherwise; Jinja2's own
bytecode cache keeps the compiled code, checked against each template's source.

Where: ``GPUPROBE_CACHE`` (a directory; ``off`` turns it off), else ``<ANSIBLE_HOME>/gpuprobe/cache``, with
``payloads/``, ``templates/`` and ``code/`` (plugin_utils/_code_cache: the controller's own imports) in it, created
mode 0700 and used only when owned by this user and not writable by others (Ansible loads a payload with pickle, like
its own per-run cache, and Jinja2 loads compiled code: the directory has the same trust as ANSIBLE_HOME itself, where
collections are code too).
Anything that does not fit (another ansible-core lays out its cache otherwise, a read-only home) only means no
reuse: the call goes on and Ansible builds the payload as it always does.
"""

from __future__ import annotations

import ast
import base64
import dataclasses
import fcntl
import glob
import hashlib
import importlib.util
import io
import marshal
import os
import pickle
import sys
import tokenize
import zipfile

# the collection's own compiled code first (imported before any other collection module), and the cache's place
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._code_cache import ENV, cache_dir
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._code_cache import copy_atomic as _copy

COLLECTION_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FQN_PREFIX = "ansible_collections.gpuprobe.layers.plugins.modules."
# "off" (or 0/false/no): payloads are kept without bytecode, for fleets whose nodes run another Python version than the
# controller (their zipimport refuses the bytecode: it would only make each payload about 2.7 times larger)
BYTECODE_ENV = "GPUPROBE_PAYLOAD_BYTECODE"
# the file name compiled into each module's code (tracebacks): its place in the payload, under a name that says so (the
# node's temp path of the payload is not known here)
BYTECODE_PREFIX = "ansiballz-payload/"

_KEYS = {}


class _SafeBytecodeCache(object):
    """Jinja2's FileSystemBytecodeCache whose failures only mean no reuse: a full disk or a read-only home while
    loading or keeping compiled code never stops a report from being written."""

    def __init__(self, directory):
        from jinja2 import FileSystemBytecodeCache  # pylint: disable=import-outside-toplevel

        class Cache(FileSystemBytecodeCache):
            def load_bytecode(self, bucket):
                try:
                    FileSystemBytecodeCache.load_bytecode(self, bucket)
                except Exception:  # pylint: disable=broad-except
                    bucket.reset()

            def dump_bytecode(self, bucket):
                try:
                    FileSystemBytecodeCache.dump_bytecode(self, bucket)
                except Exception:  # pylint: disable=broad-except
                    pass

        self.cache = Cache(directory)


def template_cache():
    """Jinja2's bytecode cache for the report templates, or None (cache off, directory not usable). Jinja2 checks each
    template's source; the directory is per version of the renderer (its environments' settings are compiled into the
    code) and of Jinja2."""
    where = cache_dir("templates")
    if where is None:
        return None
    try:
        import jinja2  # pylint: disable=import-outside-toplevel
        digest = hashlib.sha256(jinja2.__version__.encode("ascii", "replace") + b"\0")
        with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "_report", "render.py"), "rb") as f:
            digest.update(f.read())
        where = os.path.join(where, digest.hexdigest()[:16])
        os.makedirs(where, mode=0o700, exist_ok=True)
        return _SafeBytecodeCache(where).cache
    except Exception:  # pylint: disable=broad-except
        return None


def _tree_manifest(top, pattern):
    """(relative path, size, mtime) of the files under ``top`` matching ``pattern``: what identifies an installed tree
    without reading it (ansible-core's module_utils, which an editable or patched install changes under one version)."""
    rows = []
    for path in sorted(glob.glob(os.path.join(top, "**", pattern), recursive=True)):
        try:
            st = os.stat(path)
        except OSError:
            continue
        rows.append("%s:%d:%d" % (os.path.relpath(path, top), st.st_size, st.st_mtime_ns))
    return "\n".join(rows)


def _module_utils_paths():
    """The module_utils directories Ansible searches besides its own (configured, beside playbooks and roles): one of
    them may shadow what a payload ships."""
    try:
        from ansible.plugins.loader import module_utils_loader  # pylint: disable=import-outside-toplevel
        return "\n".join(str(p) for p in module_utils_loader._get_paths())  # pylint: disable=protected-access
    except Exception:  # pylint: disable=broad-except
        return "unknown"


def sources_key(root=COLLECTION_ROOT):
    """sha256 of what goes into a node-side payload: the collection's module and module_utils sources, its
    meta/runtime.yml and this file (it makes the payload's bytecode) by content, ansible-core (version, place, and its
    module_utils and payload builder by size and mtime), the module_utils directories Ansible searches, and the
    controller's Python."""
    if root in _KEYS:
        return _KEYS[root]
    import ansible  # pylint: disable=import-outside-toplevel
    from ansible.release import __version__ as ansible_version  # pylint: disable=import-outside-toplevel
    core = os.path.dirname(ansible.__file__)
    digest = hashlib.sha256()
    for part in (ansible_version, core, sys.version, _tree_manifest(os.path.join(core, "module_utils"), "*.py"),
                 _tree_manifest(os.path.join(core, "executor"), "module_common.py"), _module_utils_paths()):
        digest.update(part.encode("utf-8", "surrogateescape") + b"\0")
    files = [os.path.join(root, "meta", "runtime.yml"), os.path.abspath(__file__)]  # this file: how the bytecode is made
    for sub in ("modules", "module_utils"):
        files += glob.glob(os.path.join(root, "plugins", sub, "**", "*.py"), recursive=True)
    for path in sorted(files):
        digest.update(os.path.relpath(path, root).encode("utf-8", "surrogateescape") + b"\0")
        try:
            with open(path, "rb") as f:
                digest.update(hashlib.sha256(f.read()).digest())
        except OSError as exc:
            digest.update(str(exc.errno).encode("ascii"))
    _KEYS[root] = digest.hexdigest()
    return _KEYS[root]


def bytecode_wanted(environ=None):
    """Whether kept payloads carry bytecode (``GPUPROBE_PAYLOAD_BYTECODE``, default on)."""
    value = (os.environ if environ is None else environ).get(BYTECODE_ENV, "")
    return value.strip().lower() not in ("off", "0", "false", "no")


def _extensions(task_vars):
    """The AnsiballZ extensions (debugger, coverage) this run builds payloads with; None when that cannot be known."""
    try:
        from ansible._internal._ansiballz import _builder  # pylint: disable=import-outside-toplevel
        return list(_builder.ExtensionManager.create(task_vars=task_vars).extension_names)
    except Exception:  # pylint: disable=broad-except
        return None


class Slot(object):
    """One node-side module of one run: where Ansible looks for its payload and where this cache keeps it."""

    def __init__(self, module, task_vars, directory=None, root=COLLECTION_ROOT):
        self.kept = self.run_file = None
        self.primed = False
        self.bytecode = bytecode_wanted()
        if not module.startswith("gpuprobe.layers."):
            return
        directory = directory or cache_dir("payloads")
        if directory is None or _extensions(task_vars) != []:
            return
        try:
            from ansible import constants as C  # pylint: disable=import-outside-toplevel
            compression = C.config.get_config_value("DEFAULT_MODULE_COMPRESSION", variables=task_vars)
            fqn = FQN_PREFIX + module.rsplit(".", 1)[-1]
            # the name ansible-core gives its per-run cache file (executor/module_common.py): fqn, compression, extensions
            self.run_file = os.path.join(C.DEFAULT_LOCAL_TMP, "ansiballz_cache", "-".join((fqn, compression, "none")))
            kind = "pyc" if self.bytecode else "src"
            self.kept = os.path.join(directory, "%s-%s-%s-%s" % (fqn, compression, sources_key(root), kind))
        except Exception:  # pylint: disable=broad-except
            self.kept = self.run_file = None

    def prime(self):
        """Before the call: the kept payload where Ansible looks for it in this run (when kept and not there yet). A
        kept file that does not load as ansible-core's cache entry (cut short by a crash, another format) is removed
        and Ansible builds the payload."""
        if not self.kept or os.path.exists(self.run_file) or not os.path.isfile(self.kept):
            return False
        try:
            from ansible.executor.module_common import _CachedModule  # pylint: disable=import-outside-toplevel
            if not isinstance(_CachedModule.load(self.kept), _CachedModule):
                raise ValueError("not ansible-core's cache entry")
        except Exception:  # pylint: disable=broad-except
            try:
                os.unlink(self.kept)
            except OSError:
                pass
            return False
        self.primed = _copy(self.kept, self.run_file)
        return self.primed

    def keep(self):
        """After the call: the payload Ansible built in this run kept for the next run; older ones of the module removed.
        One worker of a run does it (a lock beside the kept file): the others would compile the same payload again."""
        if not self.kept or self.primed or os.path.exists(self.kept) or not os.path.isfile(self.run_file):
            return False
        lock = _try_lock(_lock_path(self.kept))
        if lock is None:
            return False
        try:
            return self._keep()
        finally:
            os.close(lock)

    def _keep(self):
        if os.path.exists(self.kept):  # kept by another worker meanwhile
            return False
        compiled = _compiled_copy(self.run_file, self.bytecode)
        if compiled is not None:
            kept = _write(compiled, self.kept)
            if kept:
                _write(compiled, self.run_file)  # the later nodes of this run use it too
        else:  # not ansible-core's cache entry as this code knows it: kept as it is
            kept = _copy(self.run_file, self.kept)
        if not kept:
            return False
        stem = self.kept.rsplit("-", 2)[0]  # <fqn>-<compression>: this module's payloads of other sources or kind
        for old in glob.glob(glob.escape(stem) + "-*") + glob.glob(glob.escape(_lock_path(stem)) + "-*"):
            if old not in (self.kept, _lock_path(self.kept)):
                try:
                    os.unlink(old)
                except OSError:
                    pass
        return True


def _lock_path(path):
    """The lock file of a kept payload: beside it, hidden (a payload glob never matches it)."""
    return os.path.join(os.path.dirname(path), ".lock-" + os.path.basename(path))


def _try_lock(path):
    """An exclusive lock on ``path`` (flock, released when the fd is closed or the process dies), or None when another
    process holds it or it cannot be made."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


_DOCUMENTED = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


def _docstring(node):
    """The docstring statement of ``node`` (a module, class or function), or None."""
    body = node.body if isinstance(node, _DOCUMENTED) else None
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
        return body[0]
    return None


def _code(source, name):
    """The marshalled code of ``source`` (bytes) for this Python, without its docstrings (the node never reads them,
    and they are about a sixth of the bytecode), or None when this Python cannot compile it (the node's may: it
    compiles the source then, as without bytecode)."""
    try:
        tree = ast.parse(source, BYTECODE_PREFIX + name)
        for node in ast.walk(tree):
            doc = _docstring(node)
            if doc is not None:
                node.body = node.body[1:] or [ast.copy_location(ast.Pass(), doc)]
        return marshal.dumps(compile(tree, BYTECODE_PREFIX + name, "exec", dont_inherit=True, optimize=0))
    except (SyntaxError, ValueError):
        return None


def _pyc(source, code):
    """An unchecked hash-based .pyc (PEP 552) of ``code`` (marshalled), stamped with the hash of ``source`` (bytes):
    zipimport loads it without reading the source when the node's Python has this bytecode magic, else compiles the
    source beside it. Unchecked because the two are built together into one payload zip and never apart (checking
    meant reading and hashing every imported source on every call, about 18 ms of a node_layers call)."""
    flags = 0b01  # hash-based, not checked against the source
    return importlib.util.MAGIC_NUMBER + flags.to_bytes(4, "little") + importlib.util.source_hash(source) + code


def _header_end(tokens):
    """The number of the first line that is not part of the file's opening comments (coding, copyright, licence)."""
    for tok in tokens:
        if tok.type not in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.ENCODING):
            return tok.start[0]
    return 0


def lean_source(source):
    """``source`` (bytes, one of this collection's files) as the node gets it: its comments after the opening ones
    (coding, copyright, licence) and its docstrings blanked out, every statement on its line, so that a traceback's
    line numbers and lines are the same as in the repository. The code is the bytecode's (``_code``): no ``__doc__``
    (nothing on the node reads it), a body that was only a docstring is ``pass`` on the docstring's last line.
    ``source`` as it is when this Python cannot read it (the node compiles it then), or when the lean text would not
    be the same code on the same lines (``_code_shape``)."""
    try:
        # lines as Python counts them (bytes split only at \n, \r\n and \r, not at \f, \x85 or U+2028)
        lines = [line.decode("utf-8") for line in source.splitlines(True)]
        text = "".join(lines)
        tokens = list(tokenize.generate_tokens(iter(lines).__next__))
        header = _header_end(tokens)
        for tok in tokens:  # a comment runs to the end of its line
            row, col = tok.start
            if tok.type == tokenize.COMMENT and row >= header:
                line = lines[row - 1]
                lines[row - 1] = line[:col].rstrip() + line[len(line.rstrip("\r\n")):]
        blob = [line.encode("utf-8") for line in lines]
        for node in ast.walk(ast.parse("".join(lines))):
            doc = _docstring(node)  # its offsets are in bytes
            if doc is not None:
                first, last = blob[doc.lineno - 1], blob[doc.end_lineno - 1]
                end = last[len(last.rstrip(b"\r\n")):]
                for row in range(doc.lineno - 1, doc.end_lineno - 1):
                    blob[row] = end
                tail = last[doc.end_col_offset:].rstrip().lstrip(b" \t")
                tail = tail[1:].lstrip(b" \t") if tail.startswith(b";") else tail  # """doc"""; code
                rest = (first[:doc.col_offset] + (tail or (b"" if node.body[1:] else b"pass"))).rstrip()
                blob[doc.end_lineno - 1] = (rest if rest.strip() else b"") + end
        lean = b"".join(blob)
        if _code_shape(ast.parse(lean)) != _code_shape(ast.parse(text)):
            return source  # not the same code on the same lines: shipped as it is
        return lean
    except (SyntaxError, ValueError, UnicodeDecodeError, tokenize.TokenError, StopIteration):
        return source


def _code_shape(tree):
    """The code of ``tree`` without its docstrings, and the line of every statement and expression in it: what
    ``lean_source`` must keep."""
    lines = []
    for node in ast.walk(tree):
        if _docstring(node) is not None:
            node.body = node.body[1:] or [ast.Pass()]
    for node in ast.walk(tree):
        if not isinstance(node, ast.Pass):
            lines.append(getattr(node, "lineno", None))
    return ast.dump(tree), lines


def _ours(name):
    """Whether the payload entry ``name`` is one of this collection's Python files."""
    return name.endswith(".py") and name.startswith("ansible_collections/gpuprobe/layers/")


def with_bytecode(zip_bytes, bytecode=True):
    """The payload zip ``zip_bytes`` with this collection's sources lean (``lean_source``) and, with ``bytecode``, a
    .pyc beside each .py (``_code``, ``_pyc``), every entry otherwise as it was (name, date, compression, content).
    A zip that already has bytecode is returned as it is."""
    src = zipfile.ZipFile(io.BytesIO(zip_bytes))
    names = set(src.namelist())
    if any(name.endswith(".pyc") for name in names):
        return zip_bytes
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            body = src.read(info)
            if _ours(info.filename):
                body = lean_source(body)
            dst.writestr(info, body)
            if not bytecode or not info.filename.endswith(".py") or info.filename + "c" in names:
                continue
            code = _code(body, info.filename)
            if code is not None:
                entry = zipfile.ZipInfo(info.filename + "c", info.date_time)
                entry.compress_type = info.compress_type
                entry.external_attr = info.external_attr
                dst.writestr(entry, _pyc(body, code))
    return out.getvalue()


def _compiled_copy(path, bytecode=True):
    """Ansible's cache entry at ``path`` with its payload as kept (``with_bytecode``), or None when it is not an
    entry this code knows (another ansible-core, a damaged file): that payload is then kept as it is."""
    try:
        from ansible.executor.module_common import _CachedModule  # pylint: disable=import-outside-toplevel
        entry = _CachedModule.load(path)
        if not isinstance(entry, _CachedModule) or not isinstance(entry.zip_data, bytes):
            return None
        zip_data = base64.b64encode(with_bytecode(base64.b64decode(entry.zip_data, validate=True), bytecode))
        return dataclasses.replace(entry, zip_data=zip_data)
    except Exception:  # pylint: disable=broad-except
        return None


def _write(entry, target):
    """Pickle ``entry`` (ansible-core's cache entry) to ``target`` atomically, as ``_copy`` does: True when done."""
    buf = io.BytesIO()
    pickle.dump(entry, buf)
    buf.seek(0)
    return _copy(buf, target)


# Computed once where this is first imported: ansible-playbook's main process loads the verify_node action (to read its
# class) before it forks a worker per node, so the workers inherit the key instead of each hashing the sources again.
# Not with the cache off (GPUPROBE_CACHE=off): nothing is kept then.
try:
    if (os.environ.get(ENV) or "").strip().lower() not in ("off", "0", "false", "no"):
        sources_key()
except Exception:  # pylint: disable=broad-except
    _KEYS.clear()
