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


def check_timeout(value, name="timeout"):
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ValueError("%s must be a number of seconds > 0 (got %r)" % (name, value))
    return value


def check_root(value, name="root"):
    if not isinstance(value, str) or not value.startswith("/"):
        raise ValueError("%s %r must be an absolute path" % (name, value))
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


def documentation_only(argspec, name):
    """The body of a module file that only documents an action plugin: run on a node, it says so and fails."""
    from ansible.module_utils.basic import AnsibleModule  # pylint: disable=import-outside-toplevel

    module = AnsibleModule(argument_spec=argspec, supports_check_mode=True)
    module.fail_json(msg="gpuprobe.layers.%s runs on the controller as an action plugin; this module file only documents it" % name)
