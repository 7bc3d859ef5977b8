# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE (gpuprobe.layers cdi layer): which library version reads the specs for each runtime. Not public API.

The specs are read once per distinct reading (readings.py) among the runtimes the verdict speaks for: the engines
selected (each with its version), else the runtime ``runtime`` names or the first found on the node (compat
``pick_runtime``). Where no runtime is known at all, the project's own reading (``readings.DEFAULT``) reads them, as
before. Where the runtime is known but the library its build links is not (a distribution build missing from
``compat.DISTRIBUTION_BUILDS``, an unknown version, a library whose reading is not modelled), the files are read with
every modelled reading: a file the readings disagree on is ``uncertain`` and its rule checks, and the devices only it
would provide, are NOT_RUN with the reason, never a FAIL on a guess.
"""

from __future__ import annotations

from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import compat as _compat
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi.files import reread
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi.readings import DEFAULT, READINGS, by_name


def _of(name, version):
    """(reading or None, why, table row) of runtime ``name`` at ``version``."""
    row = _compat.readable_versions(name, version)
    if row["status"] == "known" and row.get("reading"):
        return by_name(row["reading"]), None, row
    if row["status"] == "known":
        return None, "%s %s links CDI library %s, whose reading is not modelled (readings.py)" % (name, version, row["library"]), row
    return None, row["why"] or "%s %s: %s" % (name, version, row["status"]), row


def reading_groups(engines, host, runtime="auto"):
    """[{reading, why, runtimes: [names], source}] in the order of the runtimes: one entry per distinct reading
    (``reading`` None: unknown, ``why`` says why). Never empty: with no runtime known, the project's reading."""
    pairs = []
    if engines:
        for info in engines:
            if info.get("name"):
                pairs.append((info["name"], info.get("version")))
    else:
        name, info, _why = _compat.pick_runtime(host, runtime or "auto")
        if name:
            pairs.append((name, info.get("version")))
    groups = []
    for name, version in pairs:
        reading, why, row = _of(name, version)
        key = reading["name"] if reading else None
        for g in groups:
            if (g["reading"]["name"] if g["reading"] else None) == key and (key is not None or g["why"] == why):
                g["runtimes"].append(name)
                break
        else:
            groups.append({"reading": reading, "why": why, "runtimes": [name],
                           "source": (reading or {}).get("source"), "build": row.get("build"), "library": row.get("library")})
    if not groups:
        groups.append({"reading": DEFAULT, "why": None, "runtimes": [], "source": DEFAULT["source"], "build": None, "library": None})
    return groups


def read_as(files, group):
    """The file records as ``group``'s reading reads them; with an unknown reading, the project's reading, each file
    the modelled readings disagree on marked ``uncertain`` (why)."""
    reading = group["reading"]
    out = [r if r.get("reading") == (reading or DEFAULT)["name"] else reread(r, reading or DEFAULT) for r in files]
    if reading is None:
        for rec in out:
            _mark_uncertain(rec, group["why"])
    return out


def _distinct():
    """One reading per distinct set of rules (v0.5.2 and v0.5.3 read alike, as do v0.8.0 and v0.8.1): 7 of 11."""
    out, seen = [], set()
    for reading in READINGS.values():
        key = tuple(sorted((k, v) for k, v in reading.items() if k not in ("name", "source")))
        if key not in seen:
            seen.add(key)
            out.append(reading)
    return out


_DISTINCT = _distinct()


def _mark_uncertain(rec, why):
    if rec.get("_data") is None:
        return
    verdicts = {}
    for reading in _DISTINCT:
        other = reread(rec, reading)
        verdicts.setdefault(bool(other["ok"]), []).append("%s%s" % (reading["name"], "" if other["ok"] else " (%s)" % other["error"]))
    if len(verdicts) > 1:
        rec["uncertain"] = "whether the runtime reads this file depends on its CDI library version, which is unknown (%s): " \
                           "read by %s; rejected by %s" % (why, ", ".join(verdicts[True]), "; ".join(verdicts[False][:3]))


class Collect(object):
    """Records the checks a judgement adds (``add``'s arguments), for ``merge``."""

    def __init__(self):
        self.calls = []

    def add(self, *args, **kwargs):
        self.calls.append((args, tuple(sorted(kwargs.items()))))
        return {}


def merge(builder, groups, collected):
    """Add each group's checks to ``builder``: a check every group gave alike once, for every runtime; the others once
    per runtime of the group that gave it (its ``runtime`` key)."""
    common = set(collected[0].calls)
    for c in collected[1:]:
        common &= set(c.calls)
    done = set()
    for group, c in zip(groups, collected):
        for call in c.calls:
            args, kwargs = call[0], dict(call[1])
            if call in common:
                if call not in done:
                    done.add(call)
                    builder.add(*args, **kwargs)
                continue
            Tagged(builder, group["runtimes"] or ["none"]).add(*args, **kwargs)


class Tagged(object):
    """A LayerBuilder whose checks speak for the runtimes ``names`` (one check per runtime, its ``runtime`` key set),
    or for every runtime when ``names`` is None."""

    def __init__(self, builder, names):
        self.builder = builder
        self.names = names

    def add(self, *args, **kwargs):
        if not self.names:
            return self.builder.add(*args, **kwargs)
        added = None
        for name in self.names:
            added = self.builder.add(*args, **kwargs)
            added["runtime"] = name
        return added

    def __getattr__(self, name):
        return getattr(self.builder, name)
