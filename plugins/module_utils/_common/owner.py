# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: who owns a self-built spec or a probe container, and whether its run is over. Not public API.

An owner is ``{"host": hostname, "pid": int|None, "started": int|None}``: the process of the run (the
``ansible-playbook`` controller when it runs on this host, found among the module's ancestors; else what the
caller passes), and its start time in clock ticks since boot (``/proc/<pid>/stat`` field 22), so that a
recycled pid is not taken for the owner. Written as ``host:pid:started`` (``-`` for unknown) into the
spec's env (``GPUPROBE_OWNER``) and the container's label (``gpuprobe.owner``).

The rule (``is_over``): an item of ours is over when it belongs to the caller's own run (exact run id, and not
owned by another live process: two overlapping runs given the same fixed run id never remove each other's), or
its owner is on this host and that process is gone (or is another process with the same pid), or its owner
cannot be checked from here (another host, unknown) and it is older than ``max_age`` seconds. An owner that is
running on this host is never over, whatever the age. Anything else is live: reported, never removed.
"""

from __future__ import annotations

import os
import re
import socket
import time

DEFAULT_MAX_AGE = 3600
CONTROLLERS = ("ansible-playbook", "ansible")
HOST_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,252}$")


def this_host():
    return socket.gethostname()


def proc_started(pid):
    """Start time of ``pid`` in clock ticks since boot, or None when there is no such process."""
    try:
        with open("/proc/%d/stat" % int(pid), "r") as f:
            text = f.read()
    except (OSError, ValueError, TypeError):
        return None
    try:
        return int(text.rsplit(")", 1)[1].split()[19])
    except (IndexError, ValueError):
        return None


def _ppid(pid):
    try:
        with open("/proc/%d/stat" % pid, "r") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def _is_controller(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            argv = [a.decode("utf-8", "replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return False
    return any(os.path.basename(a) in CONTROLLERS for a in argv[:2])


def controller(start_pid=None):
    """The topmost ansible-playbook process among the ancestors of ``start_pid`` (default: this process), as
    an owner dict; None when there is none on this host (a remote connection, or no Ansible at all)."""
    pid = start_pid or os.getpid()
    found = None
    for _hop in range(64):
        pid = _ppid(pid)
        if not pid or pid <= 1:
            break
        if _is_controller(pid):
            found = pid
        elif found:
            break
    if found is None:
        return None
    return {"host": this_host(), "pid": found, "started": proc_started(found)}


def normalize(owner):
    """A caller's ``owner`` option -> owner dict; raises ValueError with a clear message when malformed."""
    if owner is None:
        return None
    if not isinstance(owner, dict):
        raise ValueError("owner must be a dict {host, pid, started} (got %s)" % type(owner).__name__)
    unknown = sorted(set(owner) - {"host", "pid", "started"})
    if unknown:
        raise ValueError("owner has unknown keys %s (allowed: host, pid, started)" % ", ".join(unknown))
    host = owner.get("host") or this_host()
    if not isinstance(host, str) or not HOST_RE.match(host):
        raise ValueError("owner.host %r is not a host name" % (host,))
    out = {"host": host}
    for key in ("pid", "started"):
        value = owner.get(key)
        if value in (None, ""):
            out[key] = None
            continue
        try:
            value = int(value)
        except (TypeError, ValueError):
            raise ValueError("owner.%s %r is not an integer" % (key, value))
        if value < (1 if key == "pid" else 0):
            raise ValueError("owner.%s %r is out of range" % (key, value))
        out[key] = value
    if out["pid"] is not None and out["started"] is None and host == this_host():
        out["started"] = proc_started(out["pid"])
    return out


def resolve(owner=None, fallback_pid=None):
    """The owner to record: the caller's, else the local controller, else ``fallback_pid`` on this host
    (None: only the age decides)."""
    given = normalize(owner)
    if given:
        return given
    found = controller()
    if found:
        return found
    return {"host": this_host(), "pid": fallback_pid, "started": proc_started(fallback_pid) if fallback_pid else None}


def format_owner(owner):
    owner = owner or {}
    return "%s:%s:%s" % (owner.get("host") or "-", "-" if owner.get("pid") is None else owner["pid"],
                         "-" if owner.get("started") is None else owner["started"])


def parse_owner(text):
    """``host:pid:started`` -> owner dict; None when it is not in that form."""
    parts = str(text or "").split(":")
    if len(parts) != 3 or not HOST_RE.match(parts[0]):
        return None
    out = {"host": parts[0]}
    for key, value in zip(("pid", "started"), parts[1:]):
        if value == "-":
            out[key] = None
        elif value.isdigit():
            out[key] = int(value)
        else:
            return None
    return out


def _state(pid):
    """The state letter of ``pid`` (R, S, D, Z, ...), or None."""
    try:
        with open("/proc/%d/stat" % int(pid), "r") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError, ValueError, TypeError):
        return None


def alive(owner):
    """True (running), False (gone, or its pid now belongs to another process), None (cannot tell here). A zombie is
    gone: it has exited and only waits for its parent to collect it (a controller killed by SIGHUP or SIGKILL whose
    parent reads its output before waiting for it stays one until then)."""
    if not owner or owner.get("pid") is None or owner.get("host") != this_host():
        return None
    started = proc_started(owner["pid"])
    if started is None or _state(owner["pid"]) in ("Z", "X"):
        return False
    if owner.get("started") is not None and started != owner["started"]:
        return False
    return True


def same(a, b):
    """Whether two owners are the same process (host, pid and start time)."""
    return bool(a and b and a.get("pid") is not None) and all(a.get(k) == b.get(k) for k in ("host", "pid", "started"))


def other_live_owner(owner, caller):
    """Whether ``owner`` is a running process of this host that is not ``caller``: another run that uses the same
    run id (a fixed verify_run_id given to two overlapping runs)."""
    return caller is not None and alive(owner) is True and not same(owner, caller)


def is_over(item_run_id, owner, created, run_id=None, max_age=DEFAULT_MAX_AGE, now=None, caller=None):
    """(over, why) by the ownership rule in this module's docstring; ``created`` is epoch seconds or None.
    ``caller``: the owner of the run asking; an item of its run id whose owner is another live process belongs
    to another run given the same id, and is never over."""
    if run_id is not None and item_run_id == run_id:
        if other_live_owner(owner, caller):
            return False, "run id %s is also used by the live run of %s" % (run_id, format_owner(owner))
        return True, "run %s (the caller's own run)" % run_id
    state = alive(owner)
    if state is False:
        return True, "its owner %s is gone" % format_owner(owner)
    if state is True:
        # a live owner is never over, whatever the item's age (max_age=0 must not remove a running probe)
        return False, "its owner %s is running" % format_owner(owner)
    now = time.time() if now is None else now
    if created is not None and max_age is not None and now - created > max_age:
        return True, "older than %ds (created %ds ago)" % (max_age, now - created)
    return False, "owner %s cannot be checked from here and it is younger than %ss" % (format_owner(owner), max_age)


def check_max_age(max_age):
    if max_age is None or isinstance(max_age, bool) or not isinstance(max_age, int) or max_age < 0:
        raise ValueError("max_age must be an integer >= 0 seconds (got %r)" % (max_age,))
    return max_age
