# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filter gpuprobe.layers.option_errors: the options of a fleet run checked before any node runs
(plugin_utils/_report/options.py decides)."""

from __future__ import annotations

DOCUMENTATION = r"""
name: option_errors
author: gpuprobe.layers contributors (!UNKNOWN)
version_added: "1.0.0"
short_description: The errors of the gpuprobe_* and verify_* variables of a fleet run
description:
  - Checks, for every host, each variable whose name starts with C(gpuprobe_) or C(verify_) (or with a near
    miss of those prefixes such as C(gpuprob_)) against the options of playbooks/verify-gpu.yml and of the
    P(gpuprobe.layers.verify#role) role (its meta/argument_specs.yml), and their values (modes, CDI
    sources, types from the argument specs, whole-number timeouts greater than 0, combinations).
  - "An unknown name is reported with its closest known name (C(unknown variable gpuprobe_mdoe: did you mean gpuprobe_mode?))."
  - Each message ends with the hosts it concerns. The playbook fails its options play, before any node
    runs, when the list is not empty (L(docs/usage.md#exit-statuses,https://github.com/gpuprobe/gpuprobe.layers/blob/main/docs/usage.md#exit-statuses)).
  - "A misspelt pin name in C(gpuprobe_pins) is named the same way (C(drver_version: did you mean driver_version?))."
positional: _input, hosts, current, current_host
options:
  _input:
    description: C(hostvars).
    type: dict
    required: true
  hosts:
    description: The hosts of the run, usually C(ansible_play_hosts_all).
    type: list
    elements: str
    required: true
  current:
    description:
      - The C(gpuprobe_*)/C(verify_*) variables of the task's own context (name -> value), which also holds
        extra vars and the play vars of an importing playbook (absent from C(hostvars)).
    type: dict
    default: {}
  current_host:
    description: The host whose context C(current) comes from (C(inventory_hostname)).
    type: str
"""

EXAMPLES = r"""
- name: Check the options before any node runs
  ansible.builtin.assert:
    that: __errors | length == 0
    fail_msg: "{{ __errors }}"
  vars:
    __names: "{{ query('ansible.builtin.varnames', '^(gpuprobe|verify)_') }}"
    __errors: >-
      {{ hostvars | gpuprobe.layers.option_errors(ansible_play_hosts_all,
           dict(__names | zip(query('ansible.builtin.vars', *__names))), inventory_hostname) }}
  run_once: true
"""

RETURN = r"""
_value:
  description: One line per error, naming the variable, its closest known name when misspelt, and the hosts; empty when the run may start.
  type: list
  elements: str
"""

import json
import os

import yaml

from ansible.errors import AnsibleFilterError

# first: the collection code imported below is compiled once, not on every run (plugin_utils/_code_cache)
from ansible_collections.gpuprobe.layers.plugins.plugin_utils import _code_cache  # noqa: F401  pylint: disable=unused-import
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report.options import candidate_names, option_errors

ROLE_SPECS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                          "roles", "verify", "meta", "argument_specs.yml")


def role_options(path=ROLE_SPECS):
    """The options of the gpuprobe.layers.verify role, from its meta/argument_specs.yml."""
    try:
        with open(path, encoding="utf-8") as handle:
            # libyaml when PyYAML has it (2 ms against 28 ms of the pure-Python parser here, on every run)
            return yaml.load(handle, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))["argument_specs"]["main"]["options"]
    except (OSError, KeyError, TypeError, yaml.YAMLError) as exc:
        raise AnsibleFilterError("option_errors: cannot read the verify role's argument specs %s: %s" % (path, exc))


def _plain(value):
    """A JSON-clean copy of a variable's value (drops Ansible's lazy containers, which name themselves in errors)."""
    return json.loads(json.dumps(value, default=str))


def option_errors_filter(hostvars, hosts, current=None, current_host=None):
    """Errors of the gpuprobe_*/verify_* variables of ``hosts`` (read from ``hostvars``).

    ``current`` holds the candidate variables of the task's own context (extra vars, play vars of an
    importing playbook, the variables of ``current_host``); those not set on ``current_host`` itself are
    play-level and apply to every host.
    """
    current = dict(current or {})
    own = set()
    if current_host is not None and current_host in hostvars:
        own = set(candidate_names(hostvars[current_host].keys()))
    play_level = dict((k, _plain(v)) for k, v in current.items() if k not in own)
    host_values = {}
    for host in hosts:
        hv = hostvars[host]
        values = dict(play_level)
        for name in candidate_names(hv.keys()):
            values[name] = _plain(hv[name])
        host_values[str(host)] = values
    return option_errors(host_values, role_options())


class FilterModule(object):
    def filters(self):
        return {"option_errors": option_errors_filter}
