# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: the per-node cap on the records a node returns; not public API.

Both sides use it (docs/safety.md, "What the controller accepts from a node"):

- the node-side modules (node_layers, node_verify) ``cap_strings`` what an honest node sends: a string longer than
  ``max_string`` is cut, with ``TRUNCATED`` saying how much was kept, anywhere in the records but a ``status`` (a
  check's or a layer's status is never changed);
- the controller (verify_node, where a node's result arrives, and fleet_report, where the records are read back)
  measures what it got (``measure``: one walk over what Ansible already parsed, no copy) and a node above any limit
  (``over_limits``) is RUN_FAILED with the sizes named: its records are dropped before anything else reads, spools or
  renders them.

The limits (``DEFAULT_LIMITS``, option ``record_limits`` of verify_node and fleet_report, playbook variable
``gpuprobe_record_limits``) are generous for an honest node: an 8-GPU node's records are about 70 KB of JSON with
fewer than 300 checks and strings of a few hundred characters (docs/performance.md).
"""

from __future__ import annotations

MIB = 1 << 20
# max_clock_skew: the seconds a node's clock may differ from the controller's (the records' started_at are bound to
# the run: plugin_utils/_report/intake.run_errors)
DEFAULT_LIMITS = {"max_bytes": 32 * MIB, "max_checks": 10000, "max_string": 64 * 1024, "max_clock_skew": 300}
LIMIT_WORDS = {"max_bytes": "bytes of JSON in all", "max_checks": "checks in one record", "max_string": "characters in one string"}
TRUNCATED = u" \u2026[gpuprobe.layers: %d of %d characters kept]"

# the option record_limits' argument spec is _common.args.RECORD_LIMITS_SPEC


def limits_of(option=None):
    """The limits in force: ``DEFAULT_LIMITS`` with what ``option`` (record_limits) sets. ValueError: a limit that is
    not a positive integer, or an unknown key."""
    limits = dict(DEFAULT_LIMITS)
    for key, value in (option or {}).items():
        if key not in DEFAULT_LIMITS:
            raise ValueError("record_limits: unknown key %r (known: %s)" % (key, ", ".join(sorted(DEFAULT_LIMITS))))
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError("record_limits: %s must be a positive integer, not %r" % (key, value))
        limits[key] = value
    return limits


def measure(value):
    """{bytes, checks, string} of ``value`` (a node's records as Ansible parsed them): about the size of its compact
    JSON (characters), the most checks one record holds, the longest string. One walk, nothing copied, any depth.
    The exact built-in types are told apart by ``type()`` (the common case, about twice as fast as ``isinstance``
    chains over an 8-GPU node's records); their subclasses (Ansible's tagged strings and containers) by ``_other``."""
    size = checks = longest = 0
    stack = [value]
    pop, push, extend = stack.pop, stack.append, stack.extend
    while stack:
        item = pop()
        kind = type(item)
        if kind is str:
            size += len(item) + 2
            if len(item) > longest:
                longest = len(item)
        elif kind is dict:
            size += 2 + 2 * len(item)
            found = item.get("checks")
            if type(found) is list and "layer" in item and len(found) > checks:  # pylint: disable=unidiomatic-typecheck
                checks = len(found)
            for key, sub in item.items():
                push(key if type(key) is str else str(key))  # pylint: disable=unidiomatic-typecheck
                push(sub)
        elif kind is list or kind is tuple:
            size += 2 + len(item)
            extend(item)
        elif item is None or kind is bool:
            size += 5
        elif kind is int or kind is float:
            size += _number_size(item)
        else:
            size, checks, longest = _other(item, size, checks, longest, push, extend)
    return {"bytes": size, "checks": checks, "string": longest}


def _other(item, size, checks, longest, push, extend):
    """``measure``'s step for an item of another type than the exact built-ins: a subclass of one, or anything else."""
    if isinstance(item, str):
        return size + len(item) + 2, checks, max(longest, len(item))
    if isinstance(item, dict):
        if isinstance(item.get("checks"), list) and "layer" in item:
            checks = max(checks, len(item["checks"]))
        for key, sub in item.items():
            push(key if isinstance(key, str) else str(key))
            push(sub)
        return size + 2 + 2 * len(item), checks, longest
    if isinstance(item, (list, tuple)):
        extend(item)
        return size + 2 + len(item), checks, longest
    if isinstance(item, bool):
        return size + 5, checks, longest
    return size + (_number_size(item) if isinstance(item, (int, float)) else 8), checks, longest


def _number_size(item):
    """About the characters of ``item`` in JSON, never converting a huge int to text (Python refuses one of more than
    4,300 digits, and converting costs quadratic time)."""
    if isinstance(item, int) and item.bit_length() > 64:
        return item.bit_length() * 30103 // 100000 + 2
    return len(str(item))


def over_limits(value, limits=None):
    """Every limit ``value`` is above, in words that name the sizes (empty when it is within every limit)."""
    limits = limits or DEFAULT_LIMITS
    got = measure(value)
    out = []
    for key, what in (("max_bytes", "bytes"), ("max_checks", "checks"), ("max_string", "string")):
        if got[what] > limits[key]:
            out.append("{0:,} {1} (record_limits.{2}: {3:,})".format(got[what], LIMIT_WORDS[key], key, limits[key]))
    return out


def cut(text, limit):
    """``text`` cut to at most ``limit`` characters, the marker (TRUNCATED) included, when it is longer."""
    if len(text) <= limit:
        return text
    keep = max(limit - len(TRUNCATED % (limit, len(text))), 0)
    return (text[:keep] + TRUNCATED % (keep, len(text)))[:limit]


def cap_strings(value, limits=None):
    """Cut (``cut``) in place every string of ``value`` longer than ``max_string``, but a ``status``; returns how many
    were cut. The node-side modules call it on their records before they return them."""
    limit = (limits or DEFAULT_LIMITS)["max_string"]
    done = 0
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for key, sub in item.items():
                if isinstance(sub, str):
                    if len(sub) > limit and key != "status":
                        item[key] = cut(sub, limit)
                        done += 1
                elif isinstance(sub, (dict, list)):
                    stack.append(sub)
        elif isinstance(item, list):
            for i, sub in enumerate(item):
                if isinstance(sub, str):
                    if len(sub) > limit:
                        item[i] = cut(sub, limit)
                        done += 1
                elif isinstance(sub, (dict, list)):
                    stack.append(sub)
    return done
