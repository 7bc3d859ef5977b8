# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: where the hosts are, and where the hosts of one cause are concentrated. Not public API.

A host's places are the inventory groups it is in (Ansible's ``group_names``) and the values of the host variables
the run names (fleet_report's ``group_by``, e.g. rack and zone). The fleet is counted per place and state
(``WhereTally``); a cause whose hosts are mostly in one place that holds few of the fleet's hosts is said so
("cdi.host.library_version: 59 hosts, 40 of them in rack_r03": ``concentration``, ``concentration_line``).
"""

from __future__ import annotations

import json
import math

from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report.sentences import plural

GROUP = "group"             # the dimension of inventory groups; any other dimension is a group_by variable
VALUE_LIMIT = 100           # characters of a variable's value kept
TOP = 3                     # places listed per cause
ALPHA = 0.01                # how rare by chance a concentration must be (divided by the places looked at)


def _value(value):
    if isinstance(value, (dict, list)):
        value = json.dumps(value, sort_keys=True, default=str)
    text = " ".join(str(value).split())
    return text[:VALUE_LIMIT - 3] + "..." if len(text) > VALUE_LIMIT else text


def host_where(groups=None, variables=None):
    """{"groups": [the inventory groups, sorted, without "all"], "vars": {name: value as text}} of a host (a variable
    that is not set, or null, is left out)."""
    names = sorted(set(str(g) for g in groups or [] if str(g) and str(g) != "all"))
    values = dict((str(k), _value(v)) for k, v in sorted((variables or {}).items()) if v is not None and _value(v) != "")
    return {"groups": names, "vars": values}


def places(where):
    """(dimension, value) of every place of a host's ``where``: each group, then each variable."""
    where = where or {}
    out = [(GROUP, g) for g in where.get("groups") or []]
    out.extend(sorted((where.get("vars") or {}).items()))
    return out


def place_label(dim, value):
    """'rack_r03' (a group), 'rack=r03' (a variable)."""
    return value if dim == GROUP else "%s=%s" % (dim, value)


class WhereTally(object):
    """The fleet counted per place and state, one host entry at a time (``add``); ``summary`` is the report's
    ``where``: {"by": [dimensions], "places": {dimension: {value: {"hosts": n, "states": {state: n}}}}}."""

    def __init__(self, group_by=None):
        self.dims = [GROUP] + [str(d) for d in group_by or [] if str(d) != GROUP]
        self.counts = dict((dim, {}) for dim in self.dims)
        self.total = 0

    def add(self, entry):
        self.total += 1
        for dim, value in places(entry.get("where")):
            row = self.counts.setdefault(dim, {}).setdefault(value, {"hosts": 0, "states": {}})
            row["hosts"] += 1
            row["states"][entry["state"]] = row["states"].get(entry["state"], 0) + 1

    def summary(self, verified_state):
        def order(kv):
            not_verified = kv[1]["hosts"] - kv[1]["states"].get(verified_state, 0)
            return (-not_verified, -kv[1]["hosts"], kv[0])
        return {"by": list(self.dims),
                "places": dict((dim, dict(sorted(rows.items(), key=order))) for dim, rows in self.counts.items())}


def _tail(n, k, p):
    """log P(X >= k) for X binomial (n, p): how likely so many of n hosts fall in a place holding a share p of the
    fleet, by chance."""
    if k <= 0:
        return 0.0
    if p <= 0.0:
        return float("-inf")
    if p >= 1.0:
        return 0.0
    logs = []
    for i in range(k, n + 1):
        logs.append(math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * math.log(p) + (n - i) * math.log1p(-p))
        if len(logs) > 50 and logs[-1] < logs[0] - 50:
            break
    top = max(logs)
    return top + math.log(sum(math.exp(x - top) for x in logs))


def concentration(members, where_places, total, alpha=ALPHA):
    """Where the hosts of one cause are (``members``: their ``where``), against the fleet (``where_places``: the
    report's ``where.places``, ``total`` hosts). Returns {"places": the places holding the most of them among those
    holding at most half the fleet (a place that is another one again, the same hosts, left out), up to TOP, each
    {dim, value, hosts}; "concentrated": the place where they are
    concentrated, or None}. They are concentrated in a place when more than half of them, at least two, are there and
    that many would be there by chance (a binomial draw with the place's share of the fleet) less often than ``alpha``
    divided by the number of places looked at; of several such places, the narrowest (the fewest of the fleet's
    hosts: a rack before its zone, even where all of them are in the zone and only most in the rack), then the least
    likely by chance."""
    n = len(members)
    counts, who = {}, {}
    for i, where in enumerate(members):
        for place in places(where):
            counts[place] = counts.get(place, 0) + 1
            who.setdefault(place, []).append(i)
    fleet = dict(((dim, value), row["hosts"]) for dim, rows in (where_places or {}).items() for value, row in rows.items())
    looked_at = [place for place, size in fleet.items() if 2 * size <= total]
    candidates = sorted(((place, count) for place, count in counts.items() if 2 * fleet.get(place, total) <= total),
                        key=lambda pc: (-pc[1], fleet.get(pc[0], total), pc[0][0] != GROUP, pc[0]))
    top, seen = [], set()
    for (dim, value), count in candidates:
        # a place that holds the same hosts of the cause and as many of the fleet as one listed is that place again
        # (the group rack_r03 and the variable rack=r03)
        same = (tuple(who[(dim, value)]), fleet.get((dim, value), total))
        if same not in seen and len(top) < TOP:
            seen.add(same)
            top.append({"dim": dim, "value": value, "hosts": count})
    limit = math.log(alpha / max(len(looked_at), 1))
    said = []
    for (dim, value), count in candidates:
        if count >= 2 and 2 * count > n:
            chance = _tail(n, count, float(fleet.get((dim, value), total)) / (total or 1))
            if chance < limit:
                said.append((chance, dim != GROUP, fleet.get((dim, value), total), dim, value, count))
    concentrated = None
    if said:
        _chance, _var, _size, dim, value, count = min(said, key=lambda s: (s[2], s[0], s[1], s[3], s[4]))
        concentrated = {"dim": dim, "value": value, "hosts": count}
    return {"places": top, "concentrated": concentrated}


def concentration_words(count, place):
    """'40 of them in rack_r03', 'all of them with rack=r03' (``place``: {dim, value, hosts})."""
    how = "all" if place["hosts"] == count else "{0:,}".format(place["hosts"])
    where = ("in %s" if place["dim"] == GROUP else "with %s") % place_label(place["dim"], place["value"])
    return "%s of them %s" % (how, where)


def concentration_line(group, cause=True):
    """'cdi.host.library_version: 59 hosts, 40 of them in rack_r03' of a report group whose hosts are concentrated
    (``cause=False``: '40 of them in rack_r03'); None when they are not."""
    place = (group.get("where") or {}).get("concentrated")
    if not place:
        return None
    words = concentration_words(group["count"], place)
    return "%s: %s, %s" % (group["cause"], plural(group["count"], "host"), words) if cause else words
