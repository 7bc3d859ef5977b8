# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: the options of a gpuprobe.layers fleet run, checked on the controller before any node runs.

This file is not public API; it may change without notice. Pure functions: the filter
``gpuprobe.layers.option_errors`` (plugins/filter/options.py) gives them the variables of every host and
the role's argument specs; playbooks/verify-gpu.yml fails its first play with the errors returned here
(docs/usage.md, "Exit statuses").

Every variable whose name starts with ``gpuprobe_`` or ``verify_`` (or with a near miss of those prefixes,
such as ``gpuprob_`` or ``verfy_``) must be an option of the playbook, an option of the
gpuprobe.layers.verify role (its meta/argument_specs.yml), or a variable the collection itself sets;
otherwise it is reported with its closest known name, so that a misspelt ``gpuprobe_mdoe=audit`` never
silently runs the default mode.
"""

from __future__ import annotations

import difflib
import re

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

PREFIXES = ("gpuprobe", "verify")

MODES = ("audit", "full", "postcheck")
CDI_SOURCES = ("node", "self-built")

# options of playbooks/verify-gpu.yml (and of fault-drills.yml, which may share group_vars with it)
PLAYBOOK_OPTIONS = (
    "gpuprobe_mode", "gpuprobe_hosts", "gpuprobe_cdi_source", "gpuprobe_report_dir", "gpuprobe_pins",
    "gpuprobe_status_file", "gpuprobe_dedicated_node", "gpuprobe_drill_variants",
)

# variables the collection sets itself (facts of its modules, set_fact/register of its playbooks and roles):
# present in hostvars when the playbook is imported after another gpuprobe play
SET_BY_COLLECTION = (
    "gpuprobe_host", "gpuprobe_cdi", "gpuprobe_runtime", "gpuprobe_compute", "gpuprobe_k8s", "gpuprobe_probe",
    "gpuprobe_fleet", "gpuprobe_drills", "gpuprobe_drill_rows", "gpuprobe_drill_predictions", "gpuprobe_drill_records",
    "gpuprobe_report_diff", "gpuprobe_host_done", "verify_result",
)

# role options the playbook sets from its own option: setting them directly is ignored (inventory) or
# overrides the playbook's mode (extra vars), both wrong
SET_BY_PLAYBOOK = {"verify_mode": "gpuprobe_mode", "verify_cdi_source": "gpuprobe_cdi_source"}

TIMEOUTS = ("layer_timeout", "probe_timeout")

# role options that only a self-built spec uses, with their "not used" value
SELF_BUILT_ONLY = {"verify_cdi_spec": ({}, None, ""), "verify_self_built_variant": ("full", None, ""),
                   "verify_stub_libcuda": ("", None)}

# a run id names the probe container, the self-built spec file and its CDI class: empty (generated) or 1-63 of
# a-z, 0-9 and '-', starting with a letter or digit (what _runtime and _cdi_spec accept, lower case)
RUN_ID = re.compile(r"^([a-z0-9][a-z0-9-]{0,62})?$")
ETC_CDI = re.compile(r"^/etc/cdi(/|$)")


def _validator_spec(role_options):
    spec = {}
    for name, option in (role_options or {}).items():
        spec[name] = dict((k, option[k]) for k in ("type", "elements", "choices") if k in option)
    return spec


def _prefix_near_miss(name):
    """True when ``name`` starts with a near miss of a prefix (``gpuprob_``, ``verfy_``), not the prefix itself."""
    head = name.split("_", 1)[0]
    if "_" not in name or head in PREFIXES:
        return False
    return any(difflib.SequenceMatcher(None, head, prefix).ratio() >= 0.8 for prefix in PREFIXES)


def candidate_names(names):
    """The names among ``names`` that must be known: our prefixes and near misses of them."""
    out = []
    for name in names:
        name = str(name)
        if name.startswith(tuple(p + "_" for p in PREFIXES)) or _prefix_near_miss(name):
            out.append(name)
    return sorted(set(out))


def known_names(role_options):
    return sorted(set(PLAYBOOK_OPTIONS) | set(SET_BY_COLLECTION) | set(role_options or {}))


def unknown_name_errors(names, role_options):
    """One error per unknown name, with its closest known name when there is one."""
    known = known_names(role_options)
    errors = []
    for name in candidate_names(names):
        if name in known:
            continue
        match = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
        errors.append("unknown variable %s%s (gpuprobe_* and verify_* variables must be options of "
                      "playbooks/verify-gpu.yml or of the gpuprobe.layers.verify role)"
                      % (name, ": did you mean %s?" % match[0] if match else ""))
    return errors


def value_errors(values, role_options):
    """The errors of one host's option values (``values``: name -> value, only the names that are set)."""
    errors = []
    mode = values.get("gpuprobe_mode", "full")
    source = values.get("gpuprobe_cdi_source", "node")
    if mode == "drill":
        errors.append("gpuprobe_mode=drill is no longer a mode of verify-gpu.yml: run the fault drills with "
                      "ansible-playbook playbooks/fault-drills.yml -e gpuprobe_dedicated_node=true")
    elif mode not in MODES:
        errors.append("gpuprobe_mode is %r: must be one of %s" % (mode, ", ".join(MODES)))
    if source not in CDI_SOURCES:
        errors.append("gpuprobe_cdi_source is %r: must be one of %s" % (source, ", ".join(CDI_SOURCES)))
    if mode == "audit" and source == "self-built":
        errors.append("gpuprobe_mode=audit with gpuprobe_cdi_source=self-built: audit is read-only and writes "
                      "no spec; use gpuprobe_mode=full (or postcheck) with a self-built spec")
    for name, instead in sorted(SET_BY_PLAYBOOK.items()):
        if name in values:
            errors.append("%s is set by verify-gpu.yml from %s: set %s instead" % (name, instead, instead))
    if source != "self-built":
        for name, unused in sorted(SELF_BUILT_ONLY.items()):
            if name in values and values[name] not in unused:
                errors.append("%s is only used with gpuprobe_cdi_source=self-built (the source is %s)" % (name, source))

    params = dict((k, v) for k, v in values.items() if k in (role_options or {}) and k not in SET_BY_PLAYBOOK)
    result = ArgumentSpecValidator(_validator_spec(role_options)).validate(params)
    errors.extend(str(e) for e in result.error_messages)
    checked = result.validated_parameters
    errors.extend(verify_value_errors(dict((k[len("verify_"):], v) for k, v in checked.items()
                                           if k.startswith("verify_") and k in params), prefix="verify_"))
    return errors


def verify_value_errors(values, prefix=""):
    """What the argument spec of the verify options cannot say: timeouts > 0, never /etc/cdi, the run id's
    characters. ``values``: option name without the ``verify_`` prefix -> value; messages name ``prefix`` + name.
    Shared by the fleet playbook's option check and gpuprobe.layers.verify_node."""
    errors = []
    for name in TIMEOUTS:
        value = values.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value <= 0:
            errors.append("%s%s is %s: must be a whole number of seconds greater than 0" % (prefix, name, value))
    spec_dir = values.get("self_built_spec_dir")
    if isinstance(spec_dir, str) and ETC_CDI.search(spec_dir):
        errors.append("%sself_built_spec_dir is %s: a self-built spec is never written to /etc/cdi" % (prefix, spec_dir))
    run_id = values.get("run_id")
    if isinstance(run_id, str) and not RUN_ID.match(run_id):
        errors.append("%srun_id is %r: only a-z, 0-9 and '-' (at most 63, starting with a letter or digit)" % (prefix, run_id))
    return errors


def option_errors(host_values, role_options):
    """Every error of a run: unknown names and invalid values, each naming the hosts it concerns.

    ``host_values``: host -> (name -> value) for every candidate name set for that host (see
    ``candidate_names``). Returns a sorted list of one-line messages (empty when the run may start).
    """
    by_error = {}
    for host in sorted(host_values):
        values = host_values[host]
        for error in unknown_name_errors(values, role_options) + value_errors(values, role_options):
            by_error.setdefault(error, []).append(host)
    total = len(host_values)
    out = []
    for error in sorted(by_error):
        hosts = by_error[error]
        where = "every host" if len(hosts) == total and total > 1 else ", ".join(hosts)
        out.append("%s [%s]" % (error, where))
    return out
