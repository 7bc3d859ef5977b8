# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: the state of a host and the cause it is grouped by, for the fleet report. Not public API.

The state is the verdict (``_verdict.node_verdict``), except for a node nobody could look at: UNREACHABLE, or RUN_FAILED
when the verify run stopped on it. The cause is what the hosts of one group share (``host_state``); ``group_hosts``
groups them, most pressing state first. docs/usage.md, "State and cause per node".
"""

from __future__ import annotations

import hashlib
import re

from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import ORDERED_LAYERS
from ansible_collections.gpuprobe.layers.plugins.module_utils._verdict.verdict import COMPUTE_VERIFIED, INCONCLUSIVE

UNREACHABLE = "UNREACHABLE"     # a state of its own: the node was never looked at (its verdict is INCONCLUSIVE)
RUN_FAILED = "RUN_FAILED"       # the verify run stopped on the node (no usable Python, a node-side call failed)
# host states in reading order: what needs a person first
STATES = tuple("FAILED_AT_" + layer.upper() for layer in ORDERED_LAYERS) + (
    UNREACHABLE, RUN_FAILED, INCONCLUSIVE, COMPUTE_VERIFIED)
UNREACHABLE_REASON = "host unreachable"
RUN_FAILED_REASON = "verify run failed before this layer"

# why a node could not be reached, from the connection plugin's message (ssh, paramiko, winrm say it alike)
UNREACHABLE_CAUSES = (
    (r"Could not resolve hostname|Name or service not known|Temporary failure in name resolution|"
     r"nodename nor servname|No address associated", "name does not resolve (DNS)"),
    (r"Connection refused", "connection refused (no SSH server listening)"),
    (r"No route", "no route to host"),
    (r"Network is unreachable", "network unreachable"),
    (r"Host key verification failed|REMOTE HOST IDENTIFICATION HAS CHANGED", "SSH host key verification failed"),
    (r"Permission denied|Authentication failed|Too many authentication failures", "SSH authentication refused"),
    (r"timed out|Timeout", "connection timed out"),
    (r"Connection reset|Connection closed|closed by remote host|kex_exchange_identification|Broken pipe",
     "the node closed the connection"),
)
RUN_FAILED_CAUSES = (
    (r"malformed record from the node", "malformed record from the node"),
    (r"record of another run from the node", "record of another run from the node"),
    (r"python[0-9.]*: (?:command )?not found|No such file or directory.*python|[Ii]nterpreter|"
     r"python.*(?:not found|No such file)", "no usable Python on the node"),
    (r"no verify record", "no verify record (the node failed or left during the verify play)"),
    (r"became unreachable or failed during the verify play", "the node left the run during the verify play"),
    (r"timed out|timeout", "the verify task timed out"), (r"MODULE FAILURE", "a node-side module failed (MODULE FAILURE)"),
)
_ADDRESS = re.compile(r"\b(?:\d{1,3}\.){3}\d{1,3}\b|\b(?:[0-9a-fA-F]{1,4}:){2,7}[0-9a-fA-F]{1,4}\b")
_UUID = re.compile(r"\b(?:GPU-|MIG-)?[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b")
_TMP = re.compile(r"/[^\s'\"]*ansible-tmp-[^\s'\"]*")
_PID = re.compile(r"\b(pids?|port) [0-9]+(?:, ?[0-9]+)*")


def normalise_message(text, host=None):
    """A message with what is particular to one node taken out (its name, addresses, UUIDs, pids, temporary
    paths), so that the nodes that failed the same way share it; one line, at most 240 characters."""
    text = " ".join(str(text or "").split())
    if host:
        for name in sorted({str(host), str(host).split(".", 1)[0]}, key=len, reverse=True):
            if len(name) > 1:
                text = text.replace(name, "<host>")
    text = _UUID.sub("<uuid>", text)
    text = _ADDRESS.sub("<address>", text)
    text = _TMP.sub("<tmp>", text)
    text = _PID.sub(lambda m: "%s <n>" % m.group(1), text)
    return text[:237] + "..." if len(text) > 240 else text


def classify(message, causes, host=None):
    """The first cause of ``causes`` ((regex, words) pairs) that ``message`` matches, else the message normalised."""
    for pattern, words in causes:
        if re.search(pattern, str(message or "")):
            return words
    return normalise_message(message, host) or "no message"


def host_state(verdict, unreachable=None, error=None, name=None):
    """(state, cause) of a host. The state is UNREACHABLE, RUN_FAILED (when the run stopped before any layer
    could decide), or the verdict; the cause is what the hosts of one group share: the unreachable or
    run-failed cause (``classify``), the failure signature, or the inconclusive reason normalised."""
    if unreachable:
        return UNREACHABLE, classify(unreachable, UNREACHABLE_CAUSES, name)
    if error and verdict["verdict"] == INCONCLUSIVE:
        return RUN_FAILED, classify(error, RUN_FAILED_CAUSES, name)
    if verdict["verdict"] == COMPUTE_VERIFIED:
        return COMPUTE_VERIFIED, "verified"
    if verdict["signature"]:
        return verdict["verdict"], verdict["signature"]
    return verdict["verdict"], normalise_message(verdict["reason"], name) or "no reason given"


def state_rank(state):
    return STATES.index(state) if state in STATES else len(STATES)


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
ID_LIMIT = 80


def cause_id(state, cause, points_to=None):
    """The id of the hosts of one state and cause (and where it points): the same in every run where they occur, so
    that a link to them (report.html#cause=<id>) holds from one nightly run to the next. Made of the state and the
    cause's own words (a signature is already one: failed-at-cdi--cdi.host.library_version--cdi); words that are not
    (a message, a long reason) are shortened and end with a digest of the whole, so two causes never share an id."""
    parts = [state_words(state), str(cause)] + ([str(points_to)] if points_to else [])
    slugs = [_UNSAFE.sub("-", p).strip("-") or "none" for p in parts]
    text = "--".join(slugs)
    if len(text) > ID_LIMIT or any(s != p for s, p in zip(slugs[1:], parts[1:])):
        digest = hashlib.sha1("\0".join([str(state)] + parts[1:]).encode("utf-8")).hexdigest()[:8]
        text = "%s-%s" % (text[:ID_LIMIT - 9].rstrip("-."), digest)
    return text


def group_hosts(entries):
    """The hosts grouped by (state, cause), most pressing state first, then the largest group. Each group:
    id (``cause_id``), state, cause, layer, signature, points_to, count, hosts (names), example (the first host) and its
    message (its ``unverifiable`` or its verdict's reason): what every host of the group shares is said here once."""
    groups = {}
    for e in entries:
        key = (e["state"], e["cause"], e.get("points_to"))
        groups.setdefault(key, []).append(e)
    out = []
    for (state, cause, points_to), members in sorted(groups.items(), key=lambda kv: (
            state_rank(kv[0][0]), -len(kv[1]), str(kv[0][1]), str(kv[0][2]))):
        first = members[0]
        out.append({"id": cause_id(state, cause, points_to), "state": state, "cause": cause,
                    "layer": first.get("failing_layer"), "signature": first.get("signature"), "points_to": points_to,
                    "count": len(members), "hosts": [m["name"] for m in members], "example": first["name"],
                    "message": first.get("unverifiable") or first.get("reason")})
    return out


STATE_WORDS = {COMPUTE_VERIFIED: "verified", UNREACHABLE: "unreachable", RUN_FAILED: "run failed",
               INCONCLUSIVE: "inconclusive"}


def state_words(state):
    """'verified', 'failed at cdi', 'unreachable', ... (a state as a person says it)."""
    if str(state).startswith("FAILED_AT_"):
        return "failed at %s" % state[len("FAILED_AT_"):].lower()
    return STATE_WORDS.get(state, str(state))
