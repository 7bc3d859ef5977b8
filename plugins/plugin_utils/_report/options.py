# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: the options of a gpuprobe.layers fleet run, checked on the controller before any node runs.

This file is not public API; it may change without notice. Pure functions: the filter
``gpuprobe.layers.option_errors`` (plugins/filter/option_errors.py) gives them the variables of every host and
the role's argument specs; playbooks/verify-gpu.yml fails its options play (after the selection check) with the
errors returned here (docs/usage.md, "Exit statuses").

Every variable whose name starts with ``gpuprobe_`` or ``verify_`` (or with a near miss of those prefixes,
such as ``gpuprob_`` or ``verfy_``) must be an option of the playbook, an option of the
gpuprobe.layers.verify role (its meta/argument_specs.yml), or a variable the collection itself sets;
otherwise it is reported with its closest known name, so that a misspelt ``gpuprobe_mdoe=audit`` never
silently runs the default mode.
"""

from __future__ import annotations

import difflib
import posixpath
import re

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.gpuprobe.layers.plugins.module_utils._common import options as _options
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.vocab import RUN_ID_MAX, VARIANTS
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import LAYERS
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime.handler import check_handler
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime.select import check_endpoint, parse_runtime_option

PREFIXES = ("gpuprobe", "verify")

MODES = ("audit", "full", "postcheck")
CDI_SOURCES = ("node", "self-built")

# options of playbooks/verify-gpu.yml (and of fault-drills.yml, which may share group_vars with it)
PLAYBOOK_OPTIONS = (
    "gpuprobe_mode", "gpuprobe_hosts", "gpuprobe_cdi_source", "gpuprobe_report_dir", "gpuprobe_pins",
    "gpuprobe_status_file", "gpuprobe_retry_file", "gpuprobe_metrics_file", "gpuprobe_dedicated_node", "gpuprobe_drill_variants",
    "gpuprobe_k8s_publish", "gpuprobe_k8s_publish_label", "gpuprobe_k8s_condition_type", "gpuprobe_k8s_kubeconfig",
    "gpuprobe_k8s_context", "gpuprobe_k8s_node_names", "gpuprobe_report_group_by",
    "gpuprobe_slice_run", "gpuprobe_slice_dir", "gpuprobe_slice_count",
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

# role options that only a self-built spec uses, with their "not used" value
SELF_BUILT_ONLY = {"verify_cdi_spec": ({}, None, ""), "verify_self_built_variant": ("full", None, ""),
                   "verify_stub_libcuda": ("", None)}

# a run id names the probe container, the self-built spec file and its CDI class: empty (generated) or the lower-case
# part of the node's rule (_common.vocab.RUN_ID_RE): 1 to RUN_ID_MAX of a-z, 0-9 and '-', starting with a letter or digit
RUN_ID = re.compile(r"^([a-z0-9][a-z0-9-]{0,%d})?$" % (RUN_ID_MAX - 1))
ETC_CDI = re.compile(r"^/etc/cdi(/|$)")


def _validator_spec(role_options):
    """The argument spec that checks the options' types; their choices are checked by each option's domain below,
    which says it once and in the words of every other value error ("verify_x is 9: must be one of ...")."""
    spec = {}
    for name, option in (role_options or {}).items():
        spec[name] = dict((k, option[k]) for k in ("type", "elements") if k in option)
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


def did_you_mean(name, known):
    """``": did you mean <the closest of known>?"``, or "" when none is close (Python's difflib): how every
    misspelt name (a variable, a pin) is answered."""
    match = difflib.get_close_matches(str(name), sorted(known), n=1, cutoff=0.6)
    return ": did you mean %s?" % match[0] if match else ""


def unknown_name_errors(names, role_options):
    """One error per unknown name, with its closest known name when there is one."""
    known = known_names(role_options)
    errors = []
    for name in candidate_names(names):
        if name in known:
            continue
        errors.append("unknown variable %s%s (gpuprobe_* and verify_* variables must be options of "
                      "playbooks/verify-gpu.yml or of the gpuprobe.layers.verify role)" % (name, did_you_mean(name, known)))
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

    errors.extend(playbook_value_errors(values))
    params = dict((k, v) for k, v in values.items() if k in (role_options or {}) and k not in SET_BY_PLAYBOOK)
    result = ArgumentSpecValidator(_validator_spec(role_options)).validate(params)
    errors.extend(str(e) for e in result.error_messages)
    checked = result.validated_parameters
    # a value the argument spec refused (its type) is reported once, by the spec
    refused = set(k for k in params if any("'%s'" % k in m for m in result.error_messages))
    errors.extend(verify_value_errors(dict((k[len("verify_"):], v) for k, v in checked.items()
                                           if k.startswith("verify_") and k in params and k not in refused), prefix="verify_"))
    return errors


# ---- the domain of every option: a function value -> None (valid) or what the value must be ----------------------

def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _timeout(value):
    if not (_is_int(value) and 0 < value <= _options.MAX_TIMEOUT):
        return "must be a whole number of seconds greater than 0 and at most %d" % _options.MAX_TIMEOUT
    return None


def _raises(check, *args):
    """A domain from one of _options' checks (ValueError -> the part of its message after the value)."""
    def domain(value):
        try:
            check(value, *args)
        except ValueError as exc:
            return "must be valid: %s" % exc
        return None
    return domain


def _one_of(choices):
    return lambda value: None if value in choices else "must be one of %s" % ", ".join(str(c) for c in choices)


def _boolean(value):
    return None if isinstance(value, bool) else "must be true or false"


def _text(value):
    if not isinstance(value, str) or not value.strip() or "\x00" in value or "\n" in value:
        return "must be a non-empty text on one line"
    return None


def _list_of(domain, non_empty=True):
    def check(value):
        if not isinstance(value, list) or (non_empty and not value):
            return "must be a %slist" % ("non-empty " if non_empty else "")
        for item in value:
            why = domain(item)
            if why:
                return "%r %s" % (item, why)
        return None
    return check


def _abs(empty_ok=False):
    return _raises(lambda v, name: _options.check_absolute(v, name, empty_ok), "the path")


def _spec_dir(value):
    why = _abs()(value)
    if why is None and ETC_CDI.search(posixpath.normpath(value)):
        return "a self-built spec is never written to /etc/cdi"
    return why


def _run_id(value):
    if not isinstance(value, str) or not RUN_ID.match(value):
        return "only a-z, 0-9 and '-' (at most %d, starting with a letter or digit)" % RUN_ID_MAX
    return None


def _cdi_spec(value):
    """{} or the result of a gpuprobe.layers.cdi_spec task: path (absolute), kind, devices (qualified names)."""
    if value in ({}, None):
        return None
    if not isinstance(value, dict):
        return "must be {} or the registered result of a gpuprobe.layers.cdi_spec task"
    for key, domain in (("path", _abs()), ("kind", _raises(_options.check_kind, "kind")),
                        ("devices", _list_of(_raises(_options.check_device, "device")))):
        why = domain(value.get(key))
        if why:
            return "must be the result of a gpuprobe.layers.cdi_spec task: %s %s" % (key, why)
    return None


def _health():
    """The health layer's thresholds and dcgmi timeouts (_host/health/limits.py), imported only when a run sets those
    options (the host layer's health code is not needed to check the options of every other run; controller time,
    docs/performance.md)."""
    from ansible_collections.gpuprobe.layers.plugins.module_utils._host.health import limits  # pylint: disable=import-outside-toplevel
    return limits


def _pins(value):
    from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report.model import PINS  # pylint: disable=import-outside-toplevel
    if not isinstance(value, dict):
        return "must be a dict of pin name -> expected value"
    unknown = sorted(str(k) for k in value if k not in PINS)
    if unknown:
        return "has unknown pin names %s (known: %s)" % (
            "; ".join("%s%s" % (name, did_you_mean(name, PINS)) for name in unknown), ", ".join(sorted(PINS)))
    bad = sorted(k for k, v in value.items() if isinstance(v, (dict, list)))
    return "values must be text or numbers (not %s)" % ", ".join(bad) if bad else None


def _variable_name(value):
    """A host variable's name (gpuprobe_report_group_by): letters, digits and underscores, not starting with a digit."""
    if not isinstance(value, str) or not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", value):
        return "must be a host variable's name (letters, digits and _)"
    return None


def _flag(value):
    """A bool, or the text an extra var gives (-e gpuprobe_dedicated_node=true), as Ansible's bool filter reads it."""
    if isinstance(value, bool) or str(value).lower() in ("true", "false", "yes", "no", "1", "0", "on", "off"):
        return None
    return "must be true or false"


def _record_limits(value):
    from ansible_collections.gpuprobe.layers.plugins.module_utils._common.limits import limits_of  # pylint: disable=import-outside-toplevel
    if not isinstance(value, dict):
        return "must be a dict of max_bytes, max_checks, max_string (positive integers)"
    try:
        limits_of(value)
    except ValueError as exc:
        return str(exc)
    return None


def _not_etc_cdi(value):
    """A directory the collection may write a file in: never /etc/cdi or under it (docs/safety.md)."""
    path = posixpath.normpath(str(value or "")) if value else ""
    return "must not be /etc/cdi or under it" if path == "/etc/cdi" or path.startswith("/etc/cdi/") else None


# the verify options (role option verify_<name>, verify_node option <name>) -> domain; every option has one
VERIFY_DOMAINS = {
    "mode": _one_of(("full", "audit")),
    "layers": lambda v: None if v is None else _list_of(_one_of(LAYERS), non_empty=False)(v),
    "layer_timeout": _timeout,
    "probe_timeout": _timeout,
    "root": _abs(),
    "driver_root": _abs(empty_ok=True),
    "nvml": _boolean,
    "cdi_source": _one_of(CDI_SOURCES),
    "cdi_spec_dirs": _list_of(_abs()),
    "cdi_kinds": _list_of(_raises(_options.check_kind, "kind")),
    "cdi_devices": _list_of(_raises(_options.check_device, "device"), non_empty=False),
    "cdi_spec": _cdi_spec,
    "trusted_edits": lambda v: _raises(_trust().check_declared)(v),  # pylint: disable=unnecessary-lambda
    "self_built_spec_dir": _spec_dir,
    "self_built_variant": _one_of(VARIANTS),
    "stub_libcuda": _abs(empty_ok=True),
    "run_id": lambda v: None if v in ("", None) else _run_id(v),
    "probe_image": _raises(_options.check_image, "probe_image"),
    "probe_runtime": _raises(parse_runtime_option),
    "probe_runtime_endpoint": lambda v: None if v in ("", None) else _raises(check_endpoint)(v),
    "probe_runtime_handler": _raises(check_handler),
    "probe_user": _raises(_options.check_user, "probe_user"),
    "probe_environment": _raises(_options.check_environment, "probe_environment"),
    "cri_descriptor": _abs(empty_ok=True),
    "probe_isolation": _one_of(("shared", "per_device")),
    "allow_busy_gpu": _boolean,
    "host_control": _boolean,
    "k8s": _boolean,
    "spool": _boolean,
    "record_limits": _record_limits,
    "health_thresholds": lambda v: _raises(_health().check_thresholds, "health_thresholds")(v),  # pylint: disable=unnecessary-lambda
    "dcgm_diag": _one_of((0, 1, 2, 3, 4)),
    "metrics_dir": lambda v: _abs(empty_ok=True)(v) or _not_etc_cdi(v),
    "vars_prefix": lambda v: None if v in (None, "verify_") else "must be verify_ (the verify role's variables)",
}


def _slice_run_error(value):
    """Why a slice run id cannot be used (it names a directory: _report.slices), or None."""
    from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report.slices import run_id_error  # pylint: disable=import-outside-toplevel
    return run_id_error(str(value))


def _trust():
    """The cdi layer's allowlist (its check of the declared trusted edits), imported when an option is checked."""
    from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import trust as _cdi_trust  # pylint: disable=import-outside-toplevel
    return _cdi_trust


def _publish_rules():
    """The Node condition and label rules of k8s_publish, imported only when a run sets those options (the module
    brings the k8s layer's kubectl code, which the option check of every other run does not need)."""
    from ansible_collections.gpuprobe.layers.plugins.module_utils._k8s import publish as _k8s_publish  # pylint: disable=import-outside-toplevel
    return _k8s_publish


# the playbooks' own options -> domain (gpuprobe_mode and gpuprobe_cdi_source: value_errors says more)
PLAYBOOK_DOMAINS = {
    "gpuprobe_mode": lambda v: None,
    "gpuprobe_cdi_source": lambda v: None,
    "gpuprobe_hosts": _text,
    "gpuprobe_report_dir": _text,
    "gpuprobe_status_file": _text,
    "gpuprobe_report_group_by": _list_of(_variable_name, non_empty=False),
    "gpuprobe_retry_file": _text,
    "gpuprobe_metrics_file": _text,
    "gpuprobe_slice_run": lambda v: None if v in ("", None) else _slice_run_error(v),
    "gpuprobe_slice_dir": _text,
    "gpuprobe_slice_count": lambda v: None if v in ("", None) or (isinstance(v, int) and not isinstance(v, bool) and v > 0) or (
        isinstance(v, str) and v.isdigit() and int(v) > 0) else "must be a whole number of slices greater than 0",
    "gpuprobe_pins": _pins,
    "gpuprobe_dedicated_node": _flag,
    "gpuprobe_drill_variants": _list_of(_one_of(VARIANTS)),
    "gpuprobe_k8s_publish": _flag,
    "gpuprobe_k8s_publish_label": lambda v: None if v in ("", None) else (
        _text(v) or _publish_rules().label_key_error(v)),
    "gpuprobe_k8s_condition_type": lambda v: _text(v) or _publish_rules().condition_type_error(v),
    "gpuprobe_k8s_kubeconfig": lambda v: None if v in ("", None) else _text(v),
    "gpuprobe_k8s_context": lambda v: None if v in ("", None) else _text(v),
    "gpuprobe_k8s_node_names": lambda v: None if isinstance(v, dict) and all(
        isinstance(n, str) and n for n in v.values()) else "must be a dict of inventory host -> Node name",
}


def verify_value_errors(values, prefix=""):
    """Every verify option's value against its domain (VERIFY_DOMAINS): what the argument spec cannot say
    (timeouts from 1 s to a day, never /etc/cdi, the run id's characters, qualified CDI names, an image that is not
    an option, ...). ``values``: option name without the ``verify_`` prefix -> value (only the options set);
    messages name ``prefix`` + name. Shared by the fleet playbook's option check and gpuprobe.layers.verify_node."""
    errors = []
    for name in sorted(values):
        domain = VERIFY_DOMAINS.get(name)
        why = domain(values[name]) if domain else None
        if why:
            errors.append("%s%s is %s: %s" % (prefix, name, _show(values[name]), why))
    level, layer_timeout = values.get("dcgm_diag"), values.get("layer_timeout", 300)
    timeouts = _health().DCGM_TIMEOUTS if level else {}
    if level in timeouts and _is_int(layer_timeout) and timeouts[level] >= layer_timeout:
        # the host layer runs dcgmi diag within the node's layer time: a level that may take longer would end the task
        errors.append("%sdcgm_diag is %d: dcgmi diag -r %d may take %d s, more than %slayer_timeout (%d s); raise it" % (
            prefix, level, level, timeouts[level], prefix, layer_timeout))
    return errors


def playbook_value_errors(values):
    """The playbooks' own options (PLAYBOOK_DOMAINS) that are set in ``values``."""
    errors = []
    for name in sorted(PLAYBOOK_DOMAINS):
        if name in values:
            why = PLAYBOOK_DOMAINS[name](values[name])
            if why:
                errors.append("%s is %s: %s" % (name, _show(values[name]), why))
    return errors


def _show(value):
    return str(value) if _is_int(value) or (isinstance(value, str) and value.startswith("/") and "\n" not in value) else repr(value)


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
