# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE (controller): the run's gate, what a pipeline relies on (README, "Exit statuses"); not public API.

``gate`` sorts the hosts of a report into one list per case (verified, checked and not verified, unreachable, run
failed) and says the run's status and its exit status:

====================  ====  ==============================================================================
status                exit  when
====================  ====  ==============================================================================
passed                0     every host was checked; in a post-check every host is COMPUTE_VERIFIED
not_verified          1     a post-check: a host was checked and is not COMPUTE_VERIFIED
not_checked           2     a host could not be checked (unreachable, no usable Python, its run failed)
report_not_written    3     the report could not be written
invalid_invocation    5     nothing ran (invalid options, no host selected); written by the playbook itself
====================  ====  ==============================================================================

When several apply, the first of 5, 3, 1, 2 is the status: a proven failure outranks a host to try again (the retry
file lists both). In an audit or a full run a verdict other than COMPUTE_VERIFIED is a finding of the report (the host
is in ``not_verified``), not a failure of the run.
"""

from __future__ import annotations

import re

SCHEMA_VERSION = 1
PASSED, NOT_VERIFIED, NOT_CHECKED, REPORT_NOT_WRITTEN, INVALID = (
    "passed", "not_verified", "not_checked", "report_not_written", "invalid_invocation")
EXIT = {PASSED: 0, NOT_VERIFIED: 1, NOT_CHECKED: 2, REPORT_NOT_WRITTEN: 3, INVALID: 5}
COMPUTE_VERIFIED = "COMPUTE_VERIFIED"


def _plural(n, word):
    return "%d %s%s" % (n, word, "" if n == 1 else "s")


def gate(hosts, mode, require_verified, report, failing=None, error=None):
    """The status file's content (without ``files`` and the paths, the caller's). ``hosts``: name -> brief entry
    (verdict, signature, reachable, unverifiable); ``report``: "written", "failed" or "not written (check mode)";
    ``failing``: host -> why the run fails it (``failing_hosts``)."""
    verified, not_verified, unreachable, run_failed, verdicts = [], {}, {}, {}, {}
    for name in sorted(hosts):
        entry = hosts[name]
        if entry.get("unverifiable"):
            (run_failed if entry.get("reachable", True) else unreachable)[name] = entry["unverifiable"]
            continue
        verdicts[name] = entry["verdict"]
        if entry["verdict"] == COMPUTE_VERIFIED:
            verified.append(name)
        else:
            not_verified[name] = entry["verdict"] + (" %s" % entry["signature"] if entry.get("signature") else "")
    if report == "failed":
        status = REPORT_NOT_WRITTEN
    elif require_verified and not_verified:
        status = NOT_VERIFIED
    elif unreachable or run_failed:
        status = NOT_CHECKED
    else:
        status = PASSED
    out = {
        "schema_version": SCHEMA_VERSION,
        "status": status,
        "exit_status": EXIT[status],
        "mode": mode,
        "report": report,
        "hosts": len(hosts),
        "verified": verified,
        "not_verified": not_verified,
        "unreachable": unreachable,
        "run_failed": run_failed,
        "verdicts": verdicts,
        "unverifiable": dict(unreachable, **run_failed),
        "failing": dict(failing or {}),
    }
    if error:
        out["error"] = error
    return out


# a host name that ``--limit @FILE`` reads as that one name: Ansible reads each line of the file as a host pattern, where
# a leading '!', '&', '~' or '@', a glob ('*', '?', '[...]'), a subscript ('name[0]') or a line break mean something else
_PLAIN_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:-]*$")


def limit_pattern(name):
    """The line of the retry file for host ``name``: the name itself when Ansible's host patterns read it as just that
    name (``_PLAIN_NAME``), else a regular expression that matches exactly it (``~^...\\Z``, every character outside
    letters, digits and '_' written as a \\x, \\u or \\U escape): never a second line, a glob or an exclusion."""
    name = str(name)
    if _PLAIN_NAME.match(name):
        return name
    out = []
    for ch in name:
        code = ord(ch)
        if ch.isascii() and (ch.isalnum() or ch == "_"):
            out.append(ch)
        elif code < 0x100:
            out.append("\\x%02x" % code)
        elif code < 0x10000:
            out.append("\\u%04x" % code)
        else:
            out.append("\\U%08x" % code)
    return "~^%s\\Z" % "".join(out)


def retry_text(status):
    """The retry file: the hosts the run fails (could not be checked; in a post-check, not verified), one per line
    (``limit_pattern``), for ``--limit @FILE``; empty when there is none."""
    return "".join("%s\n" % limit_pattern(name) for name in sorted(status["failing"]))


def gate_lines(status, retry_file=None):
    """What the playbook's summary says about the gate: the status, and why the play recap counts a host failed."""
    lines = ["gate: %s (exit status %d with scripts/verify.sh or the status file)" % (status["status"], status["exit_status"])]
    failing = status["failing"]
    if failing:
        parts = [text % _plural(n, "host") for n, text in (
            (len(status["unreachable"]), "%s unreachable"), (len(status["run_failed"]), "%s whose verify run failed"),
            (sum(1 for h in failing if h in status["not_verified"]), "%s not COMPUTE_VERIFIED in this post-check")) if n]
        lines.append("the play recap counts %s failed=1 by the final gate: %s (the report says why, per host)%s" % (
            _plural(len(failing), "host"), ", ".join(parts),
            "; to run them again: --limit @%s" % retry_file if retry_file else ""))
        escaped = sum(1 for name in failing if limit_pattern(name) != name)
        if retry_file and escaped:
            lines.append("the retry file gives %s as a regular expression (~^...\\Z) that matches only that name: "
                         "%s a character --limit would read as a pattern or a line break" % (
                             _plural(escaped, "host"), "its name holds" if escaped == 1 else "their names hold"))
    return lines
