# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE (runtime layer): the removal of what is provably ours and belongs to a run that is over: probe
containers, self-built specs, probe temp dirs."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import time

from ansible_collections.gpuprobe.layers.plugins.module_utils._common import owner as _owner
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.fs import names_in
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.options import check_absolute, check_timeout
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.run import which
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.vocab import CRI_ENGINES, ENGINES, SELF_BUILT_SPEC_DIR, check_run_id
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import docker_context
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime.select import cri_info
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime.adapters import adapter
# registers the CRI adapter (containerd, CRI-O) with adapters.adapter: nothing else imports it since __init__ re-exports
# nothing (issue 33)
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import cri as _cri_adapter  # noqa: F401  pylint: disable=unused-import
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime.signals import deferred_signals


PROBE_DIR_PREFIX = "gpuprobe-run-"


PROBE_DIR_RE = re.compile(r"^gpuprobe-run-(\d+)-(\d+|-)-[A-Za-z0-9_]+$")


def probe_parent_dir(tmp_dir=None):
    """A private temp dir for the probe script, named after this process (pid and start time), so that what a
    SIGKILLed module leaves is found by cleanup once that process is gone."""
    pid = os.getpid()
    started = _owner.proc_started(pid)
    return tempfile.mkdtemp(prefix="%s%d-%s-" % (PROBE_DIR_PREFIX, pid, "-" if started is None else started), dir=tmp_dir)


def sweep_probe_dirs(tmp_dir=None, check_mode=False):
    """Remove probe temp dirs (gpuprobe-run-<pid>-<started>-*) whose process is gone; returns their paths."""
    tmp_dir = tmp_dir or tempfile.gettempdir()
    removed = []
    for name in sorted(names_in(tmp_dir)):
        m = PROBE_DIR_RE.match(name)
        path = os.path.join(tmp_dir, name)
        if not m or os.path.islink(path) or not os.path.isdir(path):
            continue
        owner = {"host": _owner.this_host(), "pid": int(m.group(1)),
                 "started": None if m.group(2) == "-" else int(m.group(2))}
        if _owner.alive(owner) is False:
            if not check_mode:
                shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def remove_own_spec(params):
    """After an interrupt: this run's self-built spec (``spec_dir``, the dir cdi_spec wrote it to), removed as
    ``cdi_spec state=absent`` would remove it (only gpuprobe-<run_id>.yaml of this run's own kind). The play's
    always-cleanup never runs once ansible-playbook is interrupted, and the interrupt usually arrives during
    the probe, which is this module. Returns a short text for the failure message."""
    from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import spec as _cdi_spec  # pylint: disable=import-outside-toplevel

    spec_dir = params.get("spec_dir")
    if not spec_dir:
        return "no self-built spec named (spec_dir)"
    with deferred_signals():
        try:
            out = _cdi_spec.ensure_spec(params["run_id"], state="absent", spec_dir=spec_dir)
        except (_cdi_spec.SpecError, OSError) as exc:
            return "this run's spec was not removed: %s" % exc
    return "this run's spec %s was removed" % out["path"] if out["changed"] else "this run had no spec in %s" % spec_dir


def cleanup(run_id=None, runtime="auto", spec_dir=SELF_BUILT_SPEC_DIR, specs=True, check_mode=False, timeout=30,
            max_age=_owner.DEFAULT_MAX_AGE, tmp_dir=None, endpoint=None, descriptor=None):
    """Remove what is provably ours and belongs to a run that is over (_owner.is_over): probe containers
    (labelled gpuprobe.run) and self-built specs (gpuprobe-<run_id>.yaml of our kind). With ``run_id``, that
    run's items (the caller's own run: over by definition); without it, every item whose owner is gone or
    that is older than ``max_age``. Items of other runs that are not over are listed in ``live``, never
    removed. Probe temp dirs of processes that are gone are removed too. Returns a dict: changed, containers,
    specs, probe_dirs, live, errors, not_listed (runtimes that could not be listed under runtime=auto; not
    ``skipped``, which Ansible reserves). ``endpoint`` (the named runtime's socket: a CRI endpoint, docker's
    DOCKER_HOST) and ``descriptor`` (the CRI API descriptor set) as for runtime_facts; under runtime=auto a CRI
    runtime is looked in when its socket (CONTAINER_RUNTIME_ENDPOINT or the default) exists."""
    from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import spec as _cdi_spec  # pylint: disable=import-outside-toplevel

    if run_id is not None:
        check_run_id(run_id)
    _owner.check_max_age(max_age)
    check_timeout(timeout)
    check_absolute(spec_dir, "spec_dir")
    out = {"changed": False, "containers": [], "specs": [], "probe_dirs": [], "live": [], "errors": [], "not_listed": []}
    engines = []
    auto = runtime in (None, "auto")
    candidates = ENGINES if auto else (runtime,)
    for name in candidates:
        if name in CRI_ENGINES:
            info = cri_info(name, None if auto else endpoint, timeout, descriptor)
            if info["usable"]:
                engines.append(adapter(info))
            elif not auto:
                out["errors"].append(info["reason"])
            elif "no CRI socket" not in info["reason"]:  # a CRI socket is there, and could not be read
                out["not_listed"].append(info["reason"])
            continue
        path = which(name)
        if path and name == "docker":
            # the daemon the run's docker calls went to: the endpoint given, else the one the docker CLI really uses
            # (DOCKER_HOST, else its current context); a context that is another machine's is not swept
            ctx = {"endpoint": endpoint, "refused": None} if endpoint and not auto else docker_context.resolve()
            if ctx["refused"]:
                (out["not_listed"] if auto else out["errors"]).append(ctx["refused"])
                continue
            engines.append(adapter({"name": name, "path": path, "env": {"DOCKER_HOST": ctx["endpoint"]}}))
        elif path:
            engines.append(adapter({"name": name, "path": path, "env": {}}))
    now = time.time()
    caller = _owner.resolve(None, fallback_pid=os.getpid()) if run_id else None
    for engine in engines:
        try:
            found = engine.list_ours(run_id, timeout)
        except RuntimeError as exc:
            # with runtime=auto an installed CLI whose daemon is not running (docker here) holds nothing we
            # could remove: say so instead of failing the cleanup; a runtime named explicitly must answer
            (out["not_listed"] if runtime in (None, "auto") else out["errors"]).append(str(exc))
            continue
        for c in found:
            over, why = _owner.is_over(c["run_id"], c["owner"], c["created"], run_id=run_id, max_age=max_age, now=now,
                                       caller=caller)
            if not over:
                out["live"].append({"container": "%s:%s" % (engine.name, c["name"]), "run_id": c["run_id"],
                                    "state": c["state"], "why": why})
                continue
            if not check_mode:
                result = engine.remove(c["name"], timeout)
                if result["rc"] != 0:
                    out["errors"].append("%s rm %s: %s" % (engine.name, c["name"], result["error"]))
                    continue
            out["containers"].append("%s:%s" % (engine.name, c["name"]))
    if specs and os.path.isdir(spec_dir):
        if run_id:
            path = _cdi_spec.spec_path(spec_dir, run_id)
            info = _cdi_spec.spec_owner_info(path) if os.path.lexists(path) else None
            if info and info["ours"] and info["run_id"] == run_id and _owner.other_live_owner(info["owner"], caller):
                out["live"].append({"spec": path, "run_id": run_id, "why": "run id %s is also used by the live run of %s"
                                    % (run_id, _owner.format_owner(info["owner"]))})
            elif info and info["ours"] and info["run_id"] == run_id:
                if not check_mode:
                    _cdi_spec.remove_spec(spec_dir, run_id)
                out["specs"].append(path)
        else:
            swept = _cdi_spec.sweep_specs(spec_dir, max_age=max_age, check_mode=check_mode, now=now)
            out["specs"] = swept["removed"]
            out["live"] += [{"spec": x["path"], "run_id": x["run_id"], "why": x["why"]} for x in swept["live"]]
    out["probe_dirs"] = sweep_probe_dirs(tmp_dir, check_mode=check_mode)
    out["changed"] = bool(out["containers"] or out["specs"] or out["probe_dirs"])
    return out
