# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters gpuprobe.layers.option_errors: the options of a fleet run checked before any node runs
(plugin_utils/_report/options.py decides; documentation: option_errors.yml next to this file), and
gpuprobe.layers.run_path: a controller path of the run, a relative one under the directory ansible-playbook was started
in (run_path.yml)."""

from __future__ import annotations

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


def run_path(path):
    """``path`` (a file or directory on the controller: the status, retry, metrics file, the report dir) as this run
    means it: ``~`` expanded; a relative path joined to the directory ansible-playbook was started in, which stays the
    working directory of Ansible's controller processes (a module on localhost runs in the playbook's directory
    instead, and the shell's PWD may be another process's)."""
    if not isinstance(path, str) or not path:
        raise AnsibleFilterError("run_path: a non-empty path, not %r" % (path,))
    return os.path.normpath(os.path.join(os.getcwd(), os.path.expanduser(path)))


class FilterModule(object):
    def filters(self):
        return {"option_errors": option_errors_filter, "run_path": run_path}
