# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE (controller): a node's records kept in a file of the run instead of in Ansible's memory.

A registered result stays in the controller's memory until the run ends, once in the main process and again in every
process forked from it (the report's): with every check of 8 GPUs, about 0.35 MB of Python objects per node, so
1,000 nodes held 0.4 GB before the report started (docs/performance.md). With ``spool``, verify_node writes the
records and the per-runtime entries to one JSON file per node and call in the run's own local temp dir (Ansible's
DEFAULT_LOCAL_TMP: private to this ansible-playbook process, shared by its forks, removed by Ansible when the run
ends, also after an interrupt) and its result keeps only where they are (``records_file``) with each layer's status
(``layer_status``); fleet_report reads the files back, one node at a time.

Each file has a name of its own (never derived from the host name alone: two inventory names may sanitise alike)
and says whose records it holds: reading it back checks the host, the run id and every layer's status against the
result, so a file that is not this result's is an error for that node, never its records.

``EntrySpool`` does the same for fleet_report's own use: the full host entries, in one anonymous temporary file, while
the report's files are written one host at a time.
"""

from __future__ import annotations

import json
import os
import re
import tempfile

SUBDIR = "gpuprobe-records"
KEYS = ("records", "runtimes")
# an unreachable node's result (``brief``) keeps none of these either: Ansible's default callback prints the whole
# result of an unreachable node, so it holds only the message, the file and what the progress line needs
BRIEF_KEYS = ("verdict", "run_id", "run_started_at", "layers", "calls")


def spool_dir():
    """This run's spool directory (in Ansible's local temp dir of this ansible-playbook process, shared by its forks)."""
    from ansible import constants as C  # pylint: disable=import-outside-toplevel
    return os.path.join(C.DEFAULT_LOCAL_TMP, SUBDIR)


def records_path(result):
    """The file a spooled result names: its ``records_file`` is the file's name in this run's spool directory (an
    absolute path is taken as it is)."""
    return os.path.join(spool_dir(), str(result["records_file"]))


def _statuses(records):
    return dict((layer, (record or {}).get("status") if isinstance(record, dict) else None)
                for layer, record in (records or {}).items())


def spool(result, host, run_id, brief=False):
    """Move ``result``'s records and runtimes into a file of this run; the result gets ``records_file`` (the file's name
    in the run's spool directory, ``records_path``) and ``layer_status``. ``brief`` (an unreachable node, whose every
    layer says so): the keys of ``BRIEF_KEYS`` go to the file too and the result keeps no ``layer_status``, so that
    Ansible's default callback, which prints an unreachable node's whole result, prints its message and little else
    (docs/usage.md, "Progress and summary"); ``unspool`` gives them back. A file that cannot be written leaves the result as it was
    (nothing is lost): returns the error text then, else None."""
    where = spool_dir()
    data = dict((k, result.get(k)) for k in KEYS + (BRIEF_KEYS if brief else ()))
    data.update(host=str(host), run_id=str(run_id), brief=bool(brief))
    tmp = None
    try:
        os.makedirs(where, mode=0o700, exist_ok=True)
        # a unique name (mkstemp), readable by a person: the host's name as far as it is safe in a file name
        fd, tmp = tempfile.mkstemp(dir=where, prefix="%s-" % re.sub(r"[^A-Za-z0-9_.-]", "_", str(host))[:60], suffix=".part")
        with os.fdopen(fd, "w") as f:
            # json.dumps, not json.dump: dump encodes in pure Python (no C encoder for a file), several times slower
            f.write(json.dumps(data, separators=(",", ":"), default=str, allow_nan=False))
        path = tmp[:-len(".part")] + ".json"
        os.replace(tmp, path)
    except (OSError, TypeError, ValueError) as exc:
        if tmp and os.path.exists(tmp):
            os.unlink(tmp)
        return "the records stay in the result: %s" % exc
    if not brief:
        result["layer_status"] = _statuses(result.get("records"))
    for key in KEYS + (BRIEF_KEYS if brief else ()):
        result.pop(key, None)
    result["records_file"] = os.path.basename(path)
    return None


def unspool(result, host=None):
    """``result`` with its records and runtimes (and, for a brief result, the keys of ``BRIEF_KEYS``) read back from
    ``records_file`` (a copy; the result itself when it has none). OSError/ValueError: the file cannot be read, or it is
    not this result's (another host or run id, layer statuses other than the result's ``layer_status``, a brief file
    for a result that is not unreachable): the caller says so for that node."""
    if not isinstance(result, dict) or not result.get("records_file"):
        return result
    with open(records_path(result)) as f:
        data = json.load(f)
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    if host is not None and data.get("host") != str(host):
        raise ValueError("it holds the records of %s" % data.get("host"))
    if result.get("run_id") is not None and data.get("run_id") != str(result.get("run_id")):
        raise ValueError("it holds the records of run %s, not %s" % (data.get("run_id"), result.get("run_id")))
    brief = data.get("brief") is True
    if brief and not result.get("unreachable"):
        raise ValueError("it holds the records of an unreachable node, and this result is not one")
    if not brief and _statuses(data.get("records")) != (result.get("layer_status") or {}):
        raise ValueError("its layer statuses %s are not the result's %s" % (_statuses(data.get("records")), result.get("layer_status")))
    out = dict(result)
    for key in KEYS + (BRIEF_KEYS if brief else ()):
        out[key] = data.get(key)
    return out


class EntrySpool(object):
    """The fleet report's full host entries kept in an anonymous temporary file while the report is written: one
    compact JSON line per host (``put``), read back one host at a time (``get``), so that the report's process holds
    one host's records at a time whatever the fleet's size; with it, when given, the host's line of the JSON report
    as it was encoded then (``line``: a few KB, read back instead of the whole entry). The file is unlinked as it is
    created (nothing of it outlives the process, even killed) and private to the user (mkstemp's 0600); ``close``
    frees its space."""

    def __init__(self, directory=None):
        self._file = tempfile.TemporaryFile(dir=directory, prefix="gpuprobe-report-")
        self._where = {}

    @staticmethod
    def _text(value):
        return json.dumps(value, separators=(",", ":"), default=str, allow_nan=False).encode("utf-8")

    def put(self, name, entry, line=None):
        data = self._text(entry)
        extra = self._text(line) if line is not None else b""
        self._file.seek(0, os.SEEK_END)
        self._where[name] = (self._file.tell(), len(data), len(extra))
        self._file.write(data + b"\n" + extra + b"\n")

    def _read(self, name, offset, size):
        self._file.seek(offset)
        data = self._file.read(size)
        if len(data) != size:
            raise OSError("the report's temporary file of host entries is shorter than written (%s)" % name)
        return json.loads(data.decode("utf-8"))

    def get(self, name):
        offset, size, _extra = self._where[name]
        return self._read(name, offset, size)

    def line(self, name):
        """The line ``put`` was given with the host's entry, or None."""
        offset, size, extra = self._where[name]
        return self._read(name, offset + size + 1, extra) if extra else None

    def close(self):
        self._file.close()
