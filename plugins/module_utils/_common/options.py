# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: checks of module options that Ansible's argument spec cannot express. Not public API.

Each function raises ValueError with one clear message naming the option; the modules turn it into
``fail_json(msg=...)``. A malformed option is the caller's error, never a node's: it must not end in a
traceback, nor in a record that blames a layer of the node.
"""

from __future__ import annotations

import os
import re

# The longest timeout of any option, in seconds (a day). A task's own timeout is built from them (the verify role:
# layer_timeout + 2 * probe_timeout + 60), and Ansible refuses a task timeout above 2**31 - 1 (signal.alarm's C
# int) only once the task runs on each node: every timeout is bounded here, before anything runs.
MAX_TIMEOUT = 86400
# A fully qualified CDI device name, exactly as the CDI library's pkg/parser ParseQualifiedName accepts it:
# vendor and class start with a letter, end with a letter or digit, and hold letters, digits, '_', '.', '-'; the
# name starts and ends with a letter or digit and also holds ':'. (The cdi layer's _cdi.names is the same rule as
# code; it is not imported here because the probe stage would then ship and compile the whole cdi layer.
# tests/unit/plugins/module_utils/test__runtime.py holds the two to the same answers.)
_VENDOR_OR_CLASS = r"[A-Za-z](?:[A-Za-z0-9_.-]*[A-Za-z0-9])?"
KIND_RE = re.compile(r"%s/%s" % (_VENDOR_OR_CLASS, _VENDOR_OR_CLASS))
QUALIFIED_DEVICE_RE = re.compile(r"%s/%s=[A-Za-z0-9](?:[A-Za-z0-9_.:-]*[A-Za-z0-9])?" % (_VENDOR_OR_CLASS, _VENDOR_OR_CLASS))
USER_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*(:[A-Za-z0-9_][A-Za-z0-9_.-]*)?")
ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def check_timeout(value, name="timeout"):
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= MAX_TIMEOUT:
        raise ValueError("%s must be a number of seconds > 0 and at most %d (got %r)" % (name, MAX_TIMEOUT, value))
    return value


def check_device(device, name="cdi_devices"):
    """``device`` when it is a fully qualified CDI name (vendor/class=name), else ValueError: nothing else (a host
    path, ``/dev/sda``, ``src:dst`` or an option) may reach a runtime's --device."""
    if not isinstance(device, str) or not QUALIFIED_DEVICE_RE.fullmatch(device):
        raise ValueError("%s: %r is not a fully qualified CDI device name vendor/class=name (as the CDI library "
                         "parses it); host paths and options are refused" % (name, device))
    return device


def check_kind(kind, name="cdi_kinds"):
    if not isinstance(kind, str) or not KIND_RE.fullmatch(kind):
        raise ValueError("%s: %r is not a CDI kind vendor/class (as the CDI library parses it)" % (name, kind))
    return kind


def check_image(image, name="image"):
    """``image`` when it can only be read as an image reference (not empty, not an option, no whitespace or
    control characters), else ValueError."""
    if not isinstance(image, str) or not image or image.startswith("-") or re.search(r"[\s\x00-\x1f\x7f]", image):
        raise ValueError("%s %r is not an image reference (empty, an option, or with whitespace)" % (name, image))
    return image


def check_user(user, name="user"):
    """'' / None (the image's user), or uid[:gid] / name[:group]."""
    if user in (None, "") or (isinstance(user, (str, int)) and not isinstance(user, bool) and USER_RE.fullmatch(str(user))):
        return user
    raise ValueError("%s %r must be uid[:gid] or name[:group]" % (name, user))


def check_environment(env, name="environment"):
    """A dict of environment variables: names [A-Za-z_][A-Za-z0-9_]*, values text or numbers without NUL."""
    if not isinstance(env, dict):
        raise ValueError("%s must be a dict of environment variables (got %s)" % (name, _type_name(env)))
    for key, value in env.items():
        if not isinstance(key, str) or not ENV_NAME_RE.fullmatch(key):
            raise ValueError("%s: %r is not an environment variable name" % (name, key))
        if isinstance(value, (dict, list)) or value is None or "\x00" in str(value):
            raise ValueError("%s.%s must be a text or a number without NUL (got %s)" % (name, key, _type_name(value)))
    return env


def check_absolute(value, name, empty_ok=False):
    """An absolute path without NUL or newline ('' / None too with ``empty_ok``)."""
    if empty_ok and value in (None, ""):
        return value
    if not isinstance(value, str) or not value.startswith("/") or re.search(r"[\x00\n]", value):
        raise ValueError("%s %r must be an absolute path" % (name, value))
    return value


def check_root(value, name="root"):
    check_absolute(value, name)
    if not os.path.isdir(value):
        raise ValueError("%s %s is not a directory" % (name, value))
    return value


def _type_name(value):
    return "null" if value is None else type(value).__name__


def _check_keys(obj, where, types):
    """Keys of ``obj`` that are present must have one of the given types (a tuple; None allows null)."""
    for key, allowed in types.items():
        if key not in obj:
            continue
        value = obj[key]
        if value is None and None in allowed:
            continue
        real = tuple(t for t in allowed if t is not None)
        if not isinstance(value, real) or (isinstance(value, bool) and bool not in real):
            raise ValueError("%s.%s must be %s (got %s)" % (where, key, " or ".join(
                "null" if t is None else t.__name__ for t in allowed), _type_name(value)))


PROBE_KEYS = {
    "executed": (bool,), "timed_out": (bool, None), "compute_requested": (bool, None), "steps": (list, None),
    "facts": (dict, None), "inventory": (dict, None), "nvml": (dict, None), "start": (dict, None),
    "cdi_devices": (list, None), "hung_step": (str, None), "container_name": (str, None), "image": (str, None),
    "compute_skipped": (str, None), "rc": (int, None), "wall_ms": (int, float, None), "stderr": (str, None),
    "runtime": (str, None),
}
RECORD_KEYS = {"layer": (str,), "status": (str,), "reason": (str, None), "checks": (list, None),
               "evidence": (dict, None), "versions": (dict, None)}


def check_container_probe(probe, name="container_probe"):
    """The gpuprobe_probe fact of runtime_facts (or null)."""
    if probe is None:
        return None
    if not isinstance(probe, dict):
        raise ValueError("%s must be the gpuprobe_probe fact of runtime_facts, a dict (got %s)" % (name, _type_name(probe)))
    _check_keys(probe, name, PROBE_KEYS)
    for i, step in enumerate(probe.get("steps") or []):
        if not isinstance(step, dict):
            raise ValueError("%s.steps[%d] must be a dict (got %s)" % (name, i, _type_name(step)))
    if any(not isinstance(d, str) for d in probe.get("cdi_devices") or []):
        raise ValueError("%s.cdi_devices must be a list of strings" % name)
    return probe


def check_record(record, name, layer=None):
    """A layer record (or null): a dict whose contract keys, where present, have the contract's types."""
    if record is None:
        return None
    if not isinstance(record, dict):
        raise ValueError("%s must be a layer record, a dict (got %s)" % (name, _type_name(record)))
    _check_keys(record, name, RECORD_KEYS)
    if layer and record.get("layer") not in (None, layer):
        raise ValueError("%s is a %s record, expected %s" % (name, record.get("layer"), layer))
    evidence = record.get("evidence") or {}
    if layer == "host":
        _check_keys(evidence, name + ".evidence", {"nvml": (dict, None), "gpus": (list, None),
                                                   "device_nodes": (dict, None), "driver_root": (str, None)})
    return record
