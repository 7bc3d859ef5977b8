# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE (controller): a node's records kept in a file of the run instead of in Ansible's memory.

A registered result stays in the controller's memory until the run ends, once in the main process and again in every
process forked from it (the report's): with every check of 8 GPUs, about 0.35 MB of Python objects per node, so
1,000 nodes held 0.4 GB before the report started (docs/performance.md). With ``spool``, verify_node writes the
records and the per-runtime entries to one JSON file per node in the run's own local temp dir (Ansible's
DEFAULT_LOCAL_TMP: private to this ansible-playbook process, shared by its forks, removed by Ansible when the run
ends, also after an interrupt) and its result keeps only where they are (``records_file``) with each layer's status
(``layer_status``); fleet_report reads the files back, one node at a time.
"""

from __future__ import annotations

import json
import os
import re
import tempfile

SUBDIR = "gpuprobe-records"
KEYS = ("records", "runtimes")


def spool(result, host, run_id):
    """Move ``result``'s records and runtimes into a file of this run; the result gets ``records_file`` and
    ``layer_status``. A file that cannot be written leaves the result as it was (nothing is lost): returns the error
    text then, else None."""
    from ansible import constants as C  # pylint: disable=import-outside-toplevel
    where = os.path.join(C.DEFAULT_LOCAL_TMP, SUBDIR)
    name = "%s-%s.json" % (re.sub(r"[^A-Za-z0-9_.-]", "_", str(host))[:100], re.sub(r"[^A-Za-z0-9_.-]", "_", str(run_id))[:80])
    try:
        os.makedirs(where, mode=0o700, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=where, prefix=".part-")
        with os.fdopen(fd, "w") as f:
            json.dump(dict((k, result.get(k)) for k in KEYS), f, separators=(",", ":"), default=str)
        path = os.path.join(where, name)
        os.replace(tmp, path)
    except (OSError, TypeError, ValueError) as exc:
        return "the records stay in the result: %s" % exc
    result["layer_status"] = dict((layer, (record or {}).get("status")) for layer, record in (result.get("records") or {}).items())
    for key in KEYS:
        result.pop(key, None)
    result["records_file"] = path
    return None


def unspool(result):
    """``result`` with its records and runtimes read back from ``records_file`` (a copy; the result itself when it has
    none). OSError/ValueError: the file cannot be read (the caller says so for that node)."""
    if not isinstance(result, dict) or not result.get("records_file"):
        return result
    with open(str(result["records_file"])) as f:
        data = json.load(f)
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    out = dict(result)
    for key in KEYS:
        out[key] = data.get(key)
    return out
