# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: the ``main()`` of the collection's modules, written once. Not public API.

A module file is its DOCUMENTATION, EXAMPLES and RETURN, its argument spec (its own, or _common.args' where several
plugins share it) and one function that does its work: ``run_layer_module(spec, fn)`` parses the options, calls
``fn`` and ends the module. ``documentation_only`` is the body of a module file that only documents an action plugin.
"""

from __future__ import annotations

import copy

from ansible.module_utils.basic import AnsibleModule


def run_layer_module(spec, fn, diff=False):
    """Run a module: its options parsed with the argument spec ``spec`` (check mode supported), then
    ``fn(params, check_mode)`` (``fn(params, check_mode, diff_mode)`` for a module that supports diff mode: ``diff``
    true), whose dict is the module's result (``changed`` false unless it says so).

    A ValueError from ``fn`` (options that cannot work, said in one clear message) fails the module with that message
    and no record: a malformed option is the caller's error, never a node's. A result with ``failed`` true (an
    interrupted probe, an incomplete cleanup) fails the module with its ``msg`` and the rest of the result; each of
    its ``warnings`` is a warning of the task. The validation gets a copy of ``spec``: Ansible fills a dict option's
    default with its suboptions in place, and a shared spec (_common.args) must stay as written."""
    module = AnsibleModule(argument_spec=copy.deepcopy(spec), supports_check_mode=True)
    try:
        out = dict(fn(module.params, module.check_mode, module._diff) if diff else fn(module.params, module.check_mode))
    except ValueError as exc:
        module.fail_json(msg=str(exc))
    for warning in out.pop("warnings", None) or []:
        module.warn(warning)
    out.setdefault("changed", False)
    if out.pop("failed", False):
        module.fail_json(**out)
    module.exit_json(**out)


def documentation_only(spec, name):
    """The body of a module file that only documents an action plugin: run on a node, it says so and fails."""
    module = AnsibleModule(argument_spec=copy.deepcopy(spec), supports_check_mode=True)
    module.fail_json(msg="gpuprobe.layers.%s runs on the controller as an action plugin; this module file only documents it" % name)
