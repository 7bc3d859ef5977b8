# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Action plugin gpuprobe.layers.verify_node: every layer of one node in one task, decided on the controller.

On the node: one call, gpuprobe.layers.node_verify in full mode when runtime or compute is selected (host, cdi and
k8s, the gate, and the probe through each runtime, in one process), else gpuprobe.layers.node_layers (host, cdi, k8s).
On the controller: the layer selection (tags), the gate where no probe was asked of the node (audit mode), the
NOT_RUN records of what did not run, the verdict (_verdict.node_verdict), and the cleanup calls that are needed only
when a node-side call did not finish its own (the probe container, the self-built spec). Documentation:
plugins/modules/verify_node.py.
"""

from __future__ import annotations

import copy
import datetime
import random
import time

from ansible.errors import AnsibleActionFail, AnsibleConnectionFailure, AnsibleError
from ansible.plugins.action import ActionBase

# first: the collection code imported below is compiled once, not on every run (plugin_utils/_code_cache)
from ansible_collections.gpuprobe.layers.plugins.plugin_utils import _code_cache  # noqa: F401  pylint: disable=unused-import
from ansible_collections.gpuprobe.layers.plugins.module_utils._node import gate as _gate
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report.options import verify_value_errors
# imported with this action (the strategy loads it in ansible-playbook's main process), so that each forked worker finds
# it loaded: the option check of every node reads the health thresholds' rules (docs/performance.md)
from ansible_collections.gpuprobe.layers.plugins.module_utils._host.health import limits as _health_limits  # noqa: F401  pylint: disable=unused-import
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.limits import limits_of
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import LAYERS, not_run
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import cdi_for_runtime
from ansible_collections.gpuprobe.layers.plugins.module_utils._verdict.verdict import ENGINE_KEYS, node_verdict
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report import intake as _intake
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._controller_cache import Slot
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report.escape import display_text
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._spool import spool
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report import metrics as _metrics
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report import model as _model
from ansible_collections.gpuprobe.layers.plugins.plugin_utils import _selection
from ansible_collections.gpuprobe.layers.plugins.module_utils._common import args as _args
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.vocab import INSPECT_LAYERS, PROBE_LAYERS, RUNTIMES

INSPECT_MODULE = "gpuprobe.layers.node_layers"
VERIFY_MODULE = "gpuprobe.layers.node_verify"
METRICS_MODULE = "gpuprobe.layers.node_metrics"


def new_run_id(now=None):
    now = now or datetime.datetime.now(datetime.timezone.utc)
    return "%s-%d" % (now.strftime("%Y%m%d%H%M%S"), random.SystemRandom().randint(0, 999999))


def option_errors(args):
    """What the argument spec cannot say about the options (the rules the fleet playbook checks too)."""
    errors = verify_value_errors(args)
    if args["mode"] == "audit" and args["cdi_source"] != "node":
        errors.append("audit mode is read-only and needs cdi_source=node (got %s)" % args["cdi_source"])
    return errors


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def _call(self, module, args, task_vars, calls):
        """One node-side module execution; returns its result (a failed one too). Connection failures propagate."""
        started = time.monotonic()
        payload = Slot(module, task_vars)  # the payload kept from an earlier run of the same sources (plugin_utils/_controller_cache)
        reused = payload.prime()
        result = self._execute_module(module_name=module, module_args=args, task_vars=task_vars)
        payload.keep()
        calls.append({"module": module, "wall_ms": round((time.monotonic() - started) * 1000, 1),
                      "failed": bool(result.get("failed")), "payload_reused": reused})
        return result

    def run(self, tmp=None, task_vars=None):  # pylint: disable=too-many-locals,too-many-branches,too-many-statements
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp
        task_vars = task_vars or {}
        started = time.time()
        if self._task.args.get("vars_prefix"):
            self._task.args = self._options_from_vars(self._task.args, task_vars)
        # a copy: the validation fills record_limits' default with its suboptions in place (_common.module)
        _validation, args = self.validate_argument_spec(argument_spec=copy.deepcopy(_args.VERIFY_NODE_ARGSPEC))
        errors = option_errors(args)
        if errors:
            raise AnsibleActionFail("invalid gpuprobe.layers.verify_node options: %s" % "; ".join(errors))

        if args["layers"] is None:
            layers = _selection.selected_layers(task_vars.get("ansible_run_tags"), task_vars.get("ansible_skip_tags"), args["k8s"])
        else:
            layers = _selection.needed_layers(args["layers"])
        if not args["k8s"] and "k8s" in layers:
            layers.remove("k8s")
        run_id = args["run_id"] or new_run_id()
        not_selected = _selection.NOT_SELECTED if args["layers"] is None else "not selected in this run (option layers)"
        records = dict((layer, not_run(layer, not_selected)) for layer in LAYERS)
        if not args["k8s"]:
            records["k8s"] = not_run("k8s", _selection.K8S_DISABLED)
        calls = []
        problems = []  # why the node could not be verified, or what its run left behind: the task fails
        per_runtime = []  # one entry per runtime the probe ran through (runtime, engine, records)
        descriptor = None
        if args["cri_descriptor"]:
            # the CRI API descriptor (containerd, CRI-O) goes to the node in Ansible's own remote tmp dir, removed after
            # the task; the inspect stage gets its path, the probe (and the sweep) GPUPROBE_CRI_DESCRIPTOR
            descriptor = self._put_descriptor(args["cri_descriptor"])
            args["probe_environment"] = dict(args["probe_environment"] or {}, GPUPROBE_CRI_DESCRIPTOR=descriptor)
        inspect_args = dict((name, args[name]) for name in _args.NODE_LAYERS_ARGSPEC
                            if name in args and name not in ("layers", "cri_descriptor"))
        if descriptor:
            inspect_args["cri_descriptor"] = descriptor
        inspect_args.update(run_id=run_id, runtime=args["probe_runtime"], runtime_endpoint=args["probe_runtime_endpoint"],
                            runtime_handler=args["probe_runtime_handler"], runtime_timeout=args["probe_timeout"])
        own_spec = args["mode"] == "full" and args["cdi_source"] == "self-built" and not args["cdi_spec"]
        # full mode with the probe selected: one node-side call runs every layer, the gate included (node_verify)
        whole = args["mode"] == "full" and bool(set(PROBE_LAYERS) & set(layers))
        spec = None
        spec_left = False
        try:
            inspect_layers = [layer for layer in INSPECT_LAYERS if layer in layers]
            out = {}
            if inspect_layers:
                module = VERIFY_MODULE if whole else INSPECT_MODULE
                call_args = dict(inspect_args, layers=inspect_layers, **(_probe_args(args) if whole else {}))
                # where a node's records enter the controller: over the cap or not conforming, they are dropped here,
                # before anything reads, spools or keeps them (_intake.screen)
                # and that are not this run's (its id, its start): another run's records never make this node's verdict
                out = _intake.screen(self._call(module, call_args, task_vars, calls), limits_of(args["record_limits"]),
                                     {"id": run_id, "started": started, "self_built": own_spec})
                if out.get("failed") or not isinstance(out.get("records"), dict):
                    # a failed call that returned records was interrupted in the probe stage: those records are kept
                    problems.append("the node-side call (%s) failed: %s" % (module, self._failure(out, task_vars)))
                if not isinstance(out.get("records"), dict):
                    for layer in inspect_layers:
                        records[layer] = not_run(layer, problems[0])
                    spec_left = own_spec and "cdi" in inspect_layers and not self._task.check_mode
                else:
                    for layer in inspect_layers:
                        records[layer] = out["records"].get(layer) or not_run(
                            layer, "the node-side call (%s) returned no record for this layer" % module)
                    spec = out.get("spec")
                    spec_left = bool(own_spec and spec) and not self._task.check_mode
                    if whole:
                        spec_left = spec_left and ("spec_removed" not in out or bool(out.get("spec_error")))
            if set(PROBE_LAYERS) & set(layers):
                self._probe_runtimes(args, run_id, records, out if whole else None, task_vars, calls, problems, per_runtime)
        except AnsibleConnectionFailure as exc:
            # the node went away between or during the calls: what ran is kept, the rest is NOT_RUN; what this
            # run left there is removed by the node's next sweep (probe_cleanup, or the next spec write)
            for layer in layers:
                if records[layer]["status"] == "NOT_RUN" and records[layer]["reason"] == not_selected:
                    records[layer] = not_run(layer, "host unreachable: %s" % exc)
            result.update(unreachable=True, msg=display_text(exc))
            spec_left = False
        # not in a finally: after a task timeout or an internal error no further call is made (it could hang
        # as long as the one that timed out); the node-side interrupt handling and the next sweep remove the spec
        if spec_left:
            self._remove_spec(run_id, args, task_vars, calls, problems)

        if args["cri_descriptor"] and self._connection._shell.tmpdir:  # pylint: disable=protected-access
            self._remove_tmp_path(self._connection._shell.tmpdir)  # pylint: disable=protected-access
        verdict = node_verdict(records, runtimes=per_runtime if len(per_runtime) > 1 else None)
        for entry in per_runtime:  # each runtime's own verdict (the node's when there is one runtime)
            entry["verdict"] = verdict if len(per_runtime) == 1 else node_verdict(
                dict(records, cdi=cdi_for_runtime(records.get("cdi"), entry["runtime"]), **entry["records"]))
        result.update(
            changed=bool(own_spec and spec),
            records=records,
            runtimes=per_runtime,
            verdict=verdict,
            run_id=run_id,
            # when this node's part of the run started (the controller's clock): fleet_report binds the records to it
            run_started_at=_intake.iso_time(started),
            layers=layers,
            calls=calls,
        )
        result[_selection.PROGRESS_KEY] = {"verdict": verdict["verdict"]}
        if not result.get("unreachable"):
            # (the callbacks also take the total from the play; an unreachable node's result, printed whole by Ansible's
            # default callback, goes without it)
            result[_selection.PROGRESS_KEY]["total"] = len(task_vars.get("ansible_play_hosts_all") or []) or None
        if spec:
            result["spec"] = dict((k, spec.get(k)) for k in ("path", "kind", "devices", "variant"))
        if problems and not result.get("unreachable"):
            # printed as the task's failure: the node's words on one line, their control characters visible
            result.update(failed=True, msg=display_text("; ".join(problems)))
        if args["metrics_dir"] and not result.get("unreachable"):
            self._write_metrics(args, task_vars, records, per_runtime, started, calls, result)
        if args["spool"]:
            why = spool(result, task_vars.get("inventory_hostname"), run_id, brief=bool(result.get("unreachable")))
            if why:
                result.setdefault("warnings", []).append("spool: %s" % why)
        return result

    def _options_from_vars(self, given, task_vars):
        """The options with every one not given read from the host's variable <vars_prefix><option>, templated here: one
        task argument instead of one template per option, each of which Ansible compiles anew in every forked worker
        (about 30 ms of controller CPU per node for the verify role's 33; docs/performance.md)."""
        prefix = given["vars_prefix"]
        args = dict(given)
        for name in _args.VERIFY_NODE_ARGSPEC:
            if name in args or name == "vars_prefix" or prefix + name not in task_vars:
                continue
            value = self._templar.template(task_vars[prefix + name])
            if name in _args.EMPTY_IS_UNSET and value in ("", None):
                continue
            args[name] = value
        return args

    def _write_metrics(self, args, task_vars, records, per_runtime, started, calls, result):  # pylint: disable=too-many-arguments
        """The node's metrics file (metrics_dir): its series rendered here from its records and verdict, written on the
        node by node_metrics. A file that cannot be written is a warning: the verdict stands."""
        if self._task.check_mode:
            return
        name = str(task_vars.get("inventory_hostname") or "")
        entry = _model.host_entry(name, records, error=result.get("msg") if result.get("failed") else None,
                                  runtimes=per_runtime if len(per_runtime) > 1 else None)
        now = time.time()
        text = _metrics.node_text(entry, args["mode"], now, now - started)
        try:
            out = self._call(METRICS_MODULE, {"dir": args["metrics_dir"], "name": _metrics.NODE_FILE % args["mode"],
                                              "content": text}, task_vars, calls)
        except AnsibleConnectionFailure as exc:
            out = {"failed": True, "msg": str(exc)}
        calls[-1]["result"] = dict((k, out.get(k)) for k in ("path", "bytes", "msg") if out.get(k)) if calls else None
        if out.get("failed"):
            result.setdefault("warnings", []).append("metrics not written: %s" % display_text(_message(out)))

    def _probe_runtimes(self, args, run_id, records, out, task_vars, calls, problems, per_runtime):  # pylint: disable=too-many-arguments
        """The runtime and compute layers once per runtime the cdi layer selected (its evidence.engines; the option's
        own value when it selected none). ``out``: node_verify's result, whose ``probes`` hold what each runtime's
        probe gave (or why it did not run); None when no probe was asked of the node (audit mode), and each runtime
        gets the gate's NOT_RUN records. ``records`` gets the first runtime's records, ``per_runtime`` one entry per
        runtime (runtime, engine, records); the probe containers that may be left (a probe or a call that did not
        return, per_device) are swept."""
        probes = (out or {}).get("probes")
        probes = probes if isinstance(probes, list) else []
        for index, engine in enumerate(_gate.probe_engines(records.get("cdi"), args["probe_runtime"])):
            name = engine.get("name")
            entry = probes[index] if index < len(probes) and isinstance(probes[index], dict) else {}
            entry = entry if entry.get("runtime") == name else {}
            got = entry.get("records") if isinstance(entry.get("records"), dict) else None
            if entry.get("ran"):
                if not got or args["probe_isolation"] == "per_device" or _container_left(got.get("runtime")):
                    # a probe that did not return (interrupted), or per_device (one container per device, reporting
                    # only their outcome): swept every time
                    self._sweep(args, run_id, engine, task_vars, calls, problems)
            elif got is None:
                # audit mode, or the node did not get to this runtime (its call failed or was interrupted first)
                gate = _gate.engine_gate(records, engine, args["mode"], problems[0] if problems else None)[1]
                got = _gate.gated(gate or "blocked: the node-side call (%s) returned no entry for this runtime" % VERIFY_MODULE)
                if out is not None and not isinstance(out.get("records"), dict) and index == 0:
                    self._sweep(args, run_id, engine, task_vars, calls, problems, failed_call=out)  # it may have died mid-probe
            # else: the node's gate stopped this runtime's probe, and its records say why
            missing = "the node-side call (%s) did not return a record: %s" % (VERIFY_MODULE, _message(out or {}))
            got = dict((layer, (got or {}).get(layer) or not_run(layer, missing)) for layer in PROBE_LAYERS)
            identity = dict((k, engine.get(k)) for k in ENGINE_KEYS if engine.get(k) is not None)
            per_runtime.append({"runtime": name, "engine": identity or None, "records": got})
        for layer in PROBE_LAYERS:
            records[layer] = per_runtime[0]["records"][layer]

    def _put_descriptor(self, path):
        """Copy the controller's CRI API descriptor into the task's remote tmp dir; its path on the node."""
        try:
            source = self._find_needle("files", path)
        except AnsibleError as exc:
            raise AnsibleActionFail("cri_descriptor %s: %s (scripts/engines.sh stubs builds it)" % (path, exc))
        tmp = self._connection._shell.tmpdir or self._make_tmp_path()  # pylint: disable=protected-access
        remote = self._connection._shell.join_path(tmp, "cri-api.desc")  # pylint: disable=protected-access
        self._transfer_file(source, remote)
        self._fixup_perms2((tmp, remote))
        return remote

    def _failure(self, out, task_vars):
        """Why a node-side call failed; when no module output came back (the node's Python could not run it), with
        the interpreter named and the last line it wrote."""
        text = _message(out)
        if "module_stderr" not in out and "interpreter" not in text:
            return text
        interpreter = task_vars.get("ansible_python_interpreter")
        try:
            interpreter = self._templar.template(interpreter) if interpreter else None
        except AnsibleError:
            interpreter = str(interpreter)  # named as written
        said = str(out.get("module_stderr") or "").strip().splitlines()
        stderr = said[-1].strip() if said and said[-1].strip() not in text else ""
        return "the node's Python interpreter (%s) did not run it: %s%s" % (
            interpreter or "discovered by Ansible, ansible_python_interpreter unset", text,
            " (its stderr: %s)" % stderr if stderr else "")

    def _sweep(self, args, run_id, engine, task_vars, calls, problems, failed_call=None):  # pylint: disable=too-many-arguments
        """probe_cleanup of this run's probe containers through one runtime. ``failed_call``: the node-side call that
        did not return; when the sweep fails as that call did, no module ran on the node (its Python cannot run
        them), so nothing of this run was started there and none is said to be left."""
        sweep = {"run_id": run_id, "specs": False, "environment": args["probe_environment"], "timeout": args["probe_timeout"],
                 "runtime": engine["name"] if engine.get("name") in RUNTIMES else "auto"}
        if engine.get("endpoint") and engine.get("name") in ("containerd", "crio", "docker"):
            sweep["runtime_endpoint"] = engine["endpoint"]  # where this run's probe lives (a CRI socket, docker's)
        cleanup = self._call("gpuprobe.layers.probe_cleanup", sweep, task_vars, calls)
        calls[-1]["result"] = dict((k, cleanup.get(k)) for k in ("containers", "errors", "msg") if cleanup.get(k))
        if cleanup.get("failed") and not (failed_call is not None and _message(cleanup) == _message(failed_call)):
            problems.append("the probe container(s) of run %s may be left on the node: %s" % (run_id, _message(cleanup)))

    def _remove_spec(self, run_id, args, task_vars, calls, problems):
        out = self._call("gpuprobe.layers.cdi_spec", {"state": "absent", "run_id": run_id,
                                                      "spec_dir": args["self_built_spec_dir"]}, task_vars, calls)
        if out.get("failed"):
            problems.append("the self-built spec of run %s was not removed: %s" % (run_id, _message(out)))


def _probe_args(args):
    """node_verify's probe options from verify_node's (the probe_* options without their prefix)."""
    return {"image": args["probe_image"], "timeout": args["probe_timeout"], "user": args["probe_user"],
            "environment": args["probe_environment"], "isolation": args["probe_isolation"],
            "allow_busy_gpu": args["allow_busy_gpu"], "host_control": args["host_control"]}


def _message(out):
    text = out.get("msg") or out.get("module_stderr") or out.get("exception") or "no result"
    return str(text).strip().splitlines()[-1] if str(text).strip() else "no result"


def _container_left(runtime_record):
    """Whether the probe's own removal of its container failed."""
    container = ((runtime_record or {}).get("evidence") or {}).get("container") or {}
    cleanup = container.get("cleanup")
    return bool(cleanup) and cleanup.get("rc") not in (0, None)
