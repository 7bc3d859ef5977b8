# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE (controller): a run split into slices, merged into one fleet; not public API.

A run split into slices (AWX/AAP job slicing, or several ``ansible-playbook --limit`` runs) shares a slice run id. Each
slice's fleet_report writes one slice file, ``<dir>/<run id>/<slice id>.slice.jsonl``, of the hosts it checked and
nothing else: a header (run id, the slice's hosts, the options that decide a verdict and a gate), then each host's full
report entry (``model.entry_of``, its verdict decided in the slice by the one verdict function) in name order, then a
trailer with the count. The slice id is a digest of the slice's hosts, so that a slice run again replaces its own file.

``merged`` reads every slice file of the run and refuses, with the reason, what would make a partial or mixed report:
no slice, a slice of another run or of other options, fewer or more slices than expected, a host of the merge's
selection that no slice checked (a missing slice), a host in two slices or outside the selection, a file cut short.
Otherwise it gives every host's entry in name order (the slices' sorted streams merged), which fleet_report counts and
writes exactly as it does a run's own entries: the merged report, gate, retry and metrics files are those of the same
hosts run unsliced. The layout is documented in docs/fleet.md ("Sliced runs").
"""

from __future__ import annotations

import glob
import hashlib
import heapq
import json
import os
import re

KIND = "gpuprobe.layers/slice"
SCHEMA_VERSION = 1
SUFFIX = ".slice.jsonl"
RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
# what a merged report must share with every slice: what decides a verdict, a gate, or where a host is
SAME = ("mode", "cdi_source", "require_verified", "group_by")


class SliceError(Exception):
    """A merge refused: the message says why (the merged gate's error)."""


def run_id_error(run_id):
    """Why ``run_id`` cannot name a sliced run (it is a directory name), or None."""
    if not isinstance(run_id, str) or not RUN_ID.match(run_id):
        return "the slice run id %r must be 1 to 128 letters, digits, '_', '.' or '-', not starting with '.' or '-'" % (run_id,)
    return None


def _example(names, n=3):
    names = sorted(names)
    return ", ".join(names[:n]) + (", ..." if len(names) > n else "")


def slice_path(directory, run_id, hosts):
    """The slice file of ``hosts`` in run ``run_id``."""
    digest = hashlib.sha256("\n".join(sorted(hosts)).encode("utf-8")).hexdigest()[:16]
    return os.path.join(directory, run_id, digest + SUFFIX)


def header(run_id, hosts, settings, run):
    """The slice file's first line: ``settings`` holds the values of ``SAME``; ``run`` the report's run facts."""
    return dict(kind=KIND, schema_version=SCHEMA_VERSION, run_id=run_id, hosts=sorted(hosts),
                settings=dict((key, settings.get(key)) for key in SAME), run=dict(run or {}))


def slice_text(head, names, entry_of_name):
    """The slice file's text, piece by piece (for ``files.write_atomic``): the header, one entry a line, the trailer."""
    dumps = json.JSONEncoder(separators=(",", ":"), default=str, sort_keys=True).encode
    yield dumps(head) + "\n"
    count = 0
    for name in names:
        yield dumps(entry_of_name(name)) + "\n"
        count += 1
    yield dumps({"end": True, "entries": count}) + "\n"


def _read_header(path):
    with open(path, encoding="utf-8") as f:
        line = f.readline()
    try:
        head = json.loads(line)
    except ValueError:
        head = None
    if not isinstance(head, dict) or head.get("kind") != KIND:
        raise SliceError("%s is not a gpuprobe slice file" % path)
    if head.get("schema_version") != SCHEMA_VERSION:
        raise SliceError("%s is a slice file of schema %s, this merge reads %d" % (path, head.get("schema_version"), SCHEMA_VERSION))
    return head


def _entries(path, expected):
    """The entries of one slice file, in its (name) order; SliceError when it is not whole."""
    count, previous = 0, None
    with open(path, encoding="utf-8") as f:
        f.readline()
        for line in f:
            data = json.loads(line)
            if data.get("end") is True:
                if data.get("entries") != count or count != len(expected):
                    break
                return
            name = data.get("name")
            if name not in expected or (previous is not None and name <= previous):
                raise SliceError("%s holds host %r out of its header's hosts or order" % (path, name))
            previous = name
            count += 1
            yield data
    raise SliceError("%s is cut short: %d of its %d hosts and no trailer" % (path, count, len(expected)))


def headers(directory, run_id, selection, settings, count=None):
    """{path: header} of every slice file of ``run_id`` under ``directory``, checked to make one whole fleet of
    ``selection`` (the merge's hosts) with ``settings``; SliceError says why not."""
    error = run_id_error(run_id)
    if error:
        raise SliceError(error)
    where = os.path.join(directory, run_id)
    paths = sorted(glob.glob(os.path.join(glob.escape(where), "*" + SUFFIX)))
    if not paths:
        raise SliceError("no slice of run %s in %s: nothing to merge" % (run_id, where))
    heads, owner = {}, {}
    for path in paths:
        head = _read_header(path)
        if head.get("run_id") != run_id:
            raise SliceError("%s is a slice of run %s, not of run %s" % (path, head.get("run_id"), run_id))
        theirs = head.get("settings") or {}
        differ = [key for key in SAME if theirs.get(key) != settings.get(key)]
        if differ:
            raise SliceError("%s was run with %s, this merge with %s: slices of one run share them" % (
                path, ", ".join("%s=%s" % (k, json.dumps(theirs.get(k))) for k in differ),
                ", ".join("%s=%s" % (k, json.dumps(settings.get(k))) for k in differ)))
        for name in head.get("hosts") or []:
            if name in owner:
                raise SliceError("host %s is in two slices of run %s (%s and %s): run it in one slice" % (
                    name, run_id, os.path.basename(owner[name]), os.path.basename(path)))
            owner[name] = path
        heads[path] = head
    if count is not None and len(heads) != count:
        raise SliceError("run %s has %d slice%s in %s, %d expected: %s" % (
            run_id, len(heads), "" if len(heads) == 1 else "s", where, count,
            "a slice is missing or has not finished" if len(heads) < count else "slices of several splits of the run"))
    selection = set(selection)
    missing = selection - set(owner)
    if missing:
        raise SliceError("%d host%s of the merge's selection %s in no slice of run %s (%s): a slice is missing or has "
                         "not finished" % (len(missing), "" if len(missing) == 1 else "s",
                                           "is" if len(missing) == 1 else "are", run_id, _example(missing)))
    stray = set(owner) - selection
    if stray:
        plural = len(stray) != 1
        raise SliceError("%d host%s of run %s's slices %s not in the merge's selection (%s): merge with the slices' "
                         "inventory and gpuprobe_hosts" % (len(stray), "s" if plural else "", run_id, "are" if plural else "is",
                                                           _example(stray)))
    return heads


def merged(heads):
    """Every host's entry of the slices ``heads`` (``headers``), in name order, one at a time."""
    streams = [_entries(path, set(head["hosts"])) for path, head in sorted(heads.items())]
    return heapq.merge(*streams, key=lambda entry: entry["name"])


def merged_run(heads, run):
    """The merged report's run facts: the merge's own, with the slices' run id and count."""
    out = dict(run or {})
    first = heads[sorted(heads)[0]]
    for key, value in (first.get("run") or {}).items():
        out.setdefault(key, value)
    out.update(slice_run=first["run_id"], slices=len(heads))
    return out
