# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Action plugin gpuprobe.layers.fleet_report: the one place where the fleet is aggregated.

Runs on the controller, reads the layer records of every host from hostvars, builds the report with
plugin_utils/_report/model.py and fleet.py (verdicts from _verdict.node_verdict), renders it with
plugin_utils/_report/render.py (Jinja2 templates shipped in plugin_utils/_report/templates/) and writes its files as one set: all of them
or none, <basename>-latest switched to it in one atomic step. Documentation:
plugins/modules/fleet_report.py.

Its memory grows by a brief entry per host, not by the hosts' records (issue 24): one host at a time, its records
are read (from the file verify_node spooled them to), its full entry is made, counted in the fleet (_report.fleet.Fleet)
and kept in a temporary file (_spool.EntrySpool); every rendering is then written to its file as it is made,
each host's part from its full entry read back then."""

from __future__ import annotations

import copy
import datetime
import json
import os

from ansible import constants as C
from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

# first: the collection code imported below is compiled once, not on every run (plugin_utils/_code_cache)
from ansible_collections.gpuprobe.layers.plugins.plugin_utils import _code_cache  # noqa: F401  pylint: disable=unused-import
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report import fleet as _fleet
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report import model as _report
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.args import FLEET_REPORT_ARGSPEC
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.limits import DEFAULT_LIMITS, limits_of
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report import intake as _intake
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report.escape import display_lines, display_text
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report.render import RENDERERS
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._spool import EntrySpool, records_path, unspool
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report.files import write_atomic, write_report_set
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report.jsonfile import json_chunks
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report import metrics as _metrics
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report import slices as _slices
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report import status as _status

REPORT_NOT_WRITTEN = "gpuprobe report not written to %s (no file of this run was kept; latest.* are the previous run's)"
LOST = "the node became unreachable or failed during the verify play (see the play output for that host)"
NO_RECORD = ("no verify record for this host: it failed or became unreachable during the verify play "
             "(see the play output for that host)")


def _plain(value):
    """Template-free, JSON-clean copy of a hostvar (drops Ansible's tagged/lazy types); a NaN or infinity in the
    inventory's values (pins, group_by variables) becomes its text, so that every file of the report is strict JSON."""
    return json.loads(json.dumps(value, default=str), parse_constant=str)


def write_status(path, status):
    """The run's status file (gpuprobe_status_file): the gate (plugin_utils/_report/status.py), one list of hosts per case."""
    if not path:
        return
    write_atomic(path, json.dumps(status, indent=2, sort_keys=True, allow_nan=False) + "\n")


def _spooled_over(result, limits):
    """Why a spooled result's file is not even read (larger than max_bytes), or None."""
    try:
        size = os.path.getsize(records_path(result)) if isinstance(result, dict) and result.get("records_file") else 0
    except OSError:
        return None  # unspool says why it cannot be read
    if size <= limits["max_bytes"]:
        return None
    return "{0}: over the cap: its spool file holds {1:,} bytes (record_limits.max_bytes: {2:,})".format(
        _intake.MALFORMED, size, limits["max_bytes"])


def run_of(result):
    """The run a verify_node result names ({"id", "started"} for _intake.admit), or None when it names none (a result of
    an older collection, or records given another way)."""
    if not isinstance(result, dict) or not isinstance(result.get("run_id"), str):
        return None
    started = _intake.epoch_of(result.get("run_started_at"))
    return None if started is None else {"id": result["run_id"], "started": started}


def _from_result(result, host=None, limits=None):
    """(records, unreachable, error, runtimes, run) of a registered verify_node result (read back when it was spooled;
    ``run``: ``run_of`` the result read back, whose run an unreachable node's result keeps in its file)."""
    if not isinstance(result, dict) or result.get("skipped"):
        return None, None, None, None, run_of(result)
    limits = limits or DEFAULT_LIMITS
    message = _intake.message(str(result.get("msg") or "").strip() or None, limits)
    over = _spooled_over(result, limits)
    if over and result.get("unreachable"):
        return None, message or "unreachable", None, None, run_of(result)
    if over:
        return None, None, over, None, run_of(result)
    try:
        result = unspool(result, host)
    except (OSError, ValueError) as exc:
        unreadable = "the records of this node were kept in %s, which cannot be used: %s" % (result["records_file"], exc)
        if result.get("unreachable"):
            return None, message or "unreachable", None, None, run_of(result)
        return None, None, unreadable, None, run_of(result)
    if result.get("unreachable"):
        return result.get("records"), message or "unreachable", None, result.get("runtimes"), run_of(result)
    error = (message or "the verify task failed") if result.get("failed") else None
    return result.get("records"), None, error, result.get("runtimes"), run_of(result)


def collect_hosts(hostvars, names, result_var, records_var, pins_var, active=None, limits=None, group_by=None):  # pylint: disable=too-many-arguments
    """The per-host inputs of _report.fleet.build_report, read from hostvars one host at a time (a generator).

    Each host's registered verify_node result (``result_var``) gives its records, or why it has none
    (unreachable, failed); a host without one may have records in ``records_var`` (the drills). A host that is
    not in ``active`` (when given) left the run before the report (it became unreachable or failed in a way
    the verify play did not absorb): its records are incomplete, so only the layers that ran are kept and the
    host is reported as not verified (LOST). What a node returned is read only after ``_intake.admit``: records above
    the cap (``limits``, record_limits) or that do not conform make the host RUN_FAILED (``_intake.MALFORMED``, the
    sizes or the violations named), and are dropped; so are records that are not the run's their result names (its
    ``run_id`` and ``run_started_at``: ``_intake.OTHER_RUN``). Where each host is: its inventory groups (``group_names``) and
    the values of the ``group_by`` variables it has.
    """
    limits = limits or DEFAULT_LIMITS
    for name in names:
        hv = hostvars[name] if name in hostvars else {}
        run = None
        # records read back from their spool file are JSON as json.load gives it: once admitted (finite numbers within
        # bounds only) a copy through _plain would be the same records, at about a fifth of the host's time
        spooled = False
        if records_var:
            records, unreachable, error, runtimes = hv.get(records_var), None, None, None
        else:
            records, unreachable, error, runtimes, run = _from_result(hv.get(result_var), name, limits)
            spooled = isinstance(hv.get(result_var), dict) and bool(hv.get(result_var).get("records_file"))
        plain = (lambda value: value) if spooled else _plain
        records, runtimes, malformed = _intake.admit(records, runtimes, limits, run)
        if malformed and not unreachable:
            error = "%s; %s" % (malformed, error) if error else malformed
        if active is not None and name not in active and not unreachable and not error:
            error = LOST
            records = dict((layer, rec) for layer, rec in (records or {}).items()
                           if isinstance(rec, dict) and rec.get("status") not in (None, "NOT_RUN"))
        if not records and not unreachable and not error:
            error = NO_RECORD
        yield {
            "name": name,
            "records": plain(records) if records else None,
            # verified through several runtimes (a list in verify_probe_runtime): each runtime's runtime and compute
            # records, for node_verdict to speak for all of them
            "runtimes": plain(runtimes) if isinstance(runtimes, list) and len(runtimes) > 1 and not error else None,
            "unreachable": str(unreachable) if unreachable else None,
            "error": str(error) if error else None,
            "pins": _plain(hv.get(pins_var) or {}),
            "groups": _plain(hv.get("group_names") or []),
            "vars": dict((var, _plain(hv.get(var))) for var in group_by or [] if hv.get(var) is not None),
        }


def entry_of(item):
    """The host's report entry (``_report.model.entry_of``). Records that passed ``_intake.admit`` and that the report still
    cannot read (a field the intake does not know of) make this host RUN_FAILED, never the report fail."""
    try:
        return _report.entry_of(item)
    except Exception as exc:  # pylint: disable=broad-except
        why = "%s: the report cannot read it (%s: %s)" % (_intake.MALFORMED, type(exc).__name__, _intake.clip(exc, 300))
        return _report.entry_of(dict(item, records=None, runtimes=None, error=why))


def failing_hosts(report, require_verified, where):
    """Host -> why the run fails it: could not be verified, or (post-check) not COMPUTE_VERIFIED. The playbook prints it
    as the node's failure: one line, its control characters visible (_escape.display_text)."""
    failing = {}
    for name, entry in report["hosts"].items():
        if entry["unverifiable"]:
            failing[name] = "%s could not be verified: %s; see %s" % (name, entry["unverifiable"], where)
        elif require_verified and entry["verdict"] != "COMPUTE_VERIFIED":
            failing[name] = "%s is %s%s, not COMPUTE_VERIFIED; see %s" % (
                name, entry["verdict"], " (%s)" % entry["signature"] if entry["signature"] else "", where)
    return dict((name, display_text(why)) for name, why in failing.items())


def gate_reasons(report, require_verified):
    """Host -> what the playbook's gate prints for each host of ``failing_hosts``: its state (and, in a post-check, that
    it is not COMPUTE_VERIFIED) in words every host of that state shares. The why, per cause, is said once by the
    summary (its groups) and per host by the report and the status file; ansible-core 2.19 prints a failed task's error
    with its origin once per distinct message, so a fleet that failed one way reads it once (docs/usage.md, "Progress
    and summary")."""
    reasons = {}
    for name, entry in report["hosts"].items():
        if entry["unverifiable"]:
            reasons[name] = "not checked: %s" % entry["state"]
        elif require_verified and entry["verdict"] != "COMPUTE_VERIFIED":
            reasons[name] = "not COMPUTE_VERIFIED: %s" % entry["state"]
    return dict((name, display_text(why)) for name, why in reasons.items())


def _slice_settings(args, run):
    """What the slices of a run and their merge must share (_report.slices.SAME)."""
    return dict(mode=run.get("mode"), cdi_source=run.get("cdi_source"), require_verified=args["require_verified"],
                group_by=args["group_by"])


def collect_drills(hostvars, names, drills_var):
    rows = []
    for name in names:
        hv = hostvars[name] if name in hostvars else {}
        rows.extend(_plain(hv.get(drills_var) or []))
    return rows


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    @staticmethod
    def _status(args, report, state, files=None, error=None):
        """The gate in the status file, and the hosts to run again in the retry file (each when asked for); the gate."""
        status = _status.gate(report["hosts"], (args["run"] or {}).get("mode"), args["require_verified"], state,
                              failing=failing_hosts(report, args["require_verified"], (files or {}).get("html") or "the report"),
                              error=error)
        status.update(files=dict(files or {}), retry_file=args.get("retry_file"), metrics_file=args.get("metrics_file"))
        for key, path, text in (("retry_file", args.get("retry_file"), _status.retry_text(status)),
                                ("status_file", args.get("status_file"), None)):
            if not path:
                continue
            try:
                if key == "status_file":
                    write_status(path, status)
                else:
                    write_atomic(path, text)
            except OSError as exc:
                gone = ""
                if key == "status_file":
                    # an earlier run's status must not be read as this run's: removed (or said that it could not be)
                    try:
                        os.unlink(path)
                        gone = "; the status file there, an earlier run's, was removed"
                    except FileNotFoundError:
                        pass
                    except OSError as why:
                        gone = "; the status file there, an earlier run's, could not be removed either (%s): do not read it" % why
                raise AnsibleActionFail("cannot write the %s %s: %s%s" % (key.replace("_", " "), path, exc, gone))
        return status

    def _not_written(self, args, exc, report):
        message = "%s: %s" % (REPORT_NOT_WRITTEN % args["report_dir"], exc)
        self._status(args, report, "failed", error=message)
        raise AnsibleActionFail(message)

    @staticmethod
    def _metrics(args, report, full, now):
        """The fleet's OpenMetrics file (metrics_file), written atomically after the report; a file that cannot be written
        fails the task (the report is written)."""
        try:
            write_atomic(args["metrics_file"], _metrics.fleet_text(report, full, (args["run"] or {}).get("mode"), now.timestamp()))
        except OSError as exc:
            raise AnsibleActionFail("the report is written, the metrics file %s is not: %s" % (args["metrics_file"], exc))

    @staticmethod
    def _write_slice(args, run, report, store):
        """A slice's file (_report.slices): its hosts' full entries, for the merge."""
        settings = _slice_settings(args, run)
        path = _slices.slice_path(args["slice"]["dir"], args["slice"]["run_id"], report["hosts"])
        head = _slices.header(args["slice"]["run_id"], report["hosts"], settings, run)
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            write_atomic(path, _slices.slice_text(head, sorted(report["hosts"]), store.get))
        except OSError as exc:
            raise AnsibleActionFail("the slice file %s of run %s is not written: %s" % (path, args["slice"]["run_id"], exc))
        return {"slice": path}

    @staticmethod
    def _refused(args, why):
        """A merge of slices refused (_report.slices): the gate is report_not_written with the reason, and no report,
        retry or metrics file of this merge is written (a partial fleet is never reported)."""
        message = "%s: the slices of run %s were not merged: %s" % (
            REPORT_NOT_WRITTEN % args["report_dir"], args["slice"]["run_id"], why)
        status = _status.gate({}, (args["run"] or {}).get("mode"), args["require_verified"], "failed", error=message)
        status.update(files={}, retry_file=None, metrics_file=None)
        try:
            write_status(args.get("status_file"), status)
        except OSError as exc:
            message += "; the status file %s is not written either: %s" % (args["status_file"], exc)
        raise AnsibleActionFail(message)

    def _entries(self, args, hostvars, names, active, limits):
        """Each host's full entry in name order, and the run's facts: from hostvars (a run, or a slice of one), or
        from the slice files of the run (a merge, after _report.slices.headers has found them whole)."""
        run = dict(args["run"])
        if not (args["slice"] and args["slice"]["merge"]):
            items = collect_hosts(hostvars, sorted(names), args["result_var"],
                                  args["records_var"], args["pins_var"], active, limits, args["group_by"])
            return (entry_of(item) for item in items), run
        settings = _slice_settings(args, run)
        try:
            heads = _slices.headers(args["slice"]["dir"], args["slice"]["run_id"], names, settings, args["slice"]["count"])
        except (_slices.SliceError, OSError) as exc:
            self._refused(args, exc)
        return _slices.merged(heads), _slices.merged_run(heads, run)

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp
        # a copy: the validation fills record_limits' default with its suboptions in place (_common.module)
        _validation, args = self.validate_argument_spec(argument_spec=copy.deepcopy(FLEET_REPORT_ARGSPEC))
        try:
            limits = limits_of(args["record_limits"])
        except ValueError as exc:
            raise AnsibleActionFail(str(exc))
        slicing = args["slice"]
        if slicing and _slices.run_id_error(slicing["run_id"]):
            raise AnsibleActionFail(_slices.run_id_error(slicing["run_id"]))
        if slicing and not slicing["merge"]:
            # a slice writes its hosts' entries only: the gate, retry and metrics files are the merge's
            args = dict(args, status_file=None, retry_file=None, metrics_file=None)
        hostvars = task_vars.get("hostvars") or {}
        names = list(dict.fromkeys(args["hosts"]))
        active = set(args["active_hosts"]) if args["active_hosts"] is not None else None
        drills = collect_drills(hostvars, names, args["drills_var"]) if args["drills_var"] else None
        now = datetime.datetime.now(datetime.timezone.utc)
        entries, run = self._entries(args, hostvars, names, active, limits)
        run.setdefault("ansible_version", (task_vars.get("ansible_version") or {}).get("full"))

        files = {}
        store = failure = None
        if not self._task.check_mode:
            try:
                store = EntrySpool(C.DEFAULT_LOCAL_TMP)
            except OSError as exc:
                failure = exc
        try:
            # one host at a time, in the report's (name) order: its full entry goes to the fleet's figures and the
            # store, and only its brief entry stays
            fleet = _fleet.Fleet(args["group_by"])
            # the JSON report's line of each host is encoded against its shape now, while its entry is at hand (the
            # shapes are made in this order too), and read back when the JSON is written instead of the whole entry
            encode = fleet.shapes.encode if "json" in args["formats"] and not (slicing and not slicing["merge"]) else None
            try:
                for entry in entries:
                    fleet.add(entry)
                    if store is not None and failure is None:
                        try:
                            store.put(entry["name"], entry, encode(entry) if encode else None)
                        except OSError as exc:
                            failure = exc
            except (_slices.SliceError, ValueError, OSError) as exc:
                if not (slicing and slicing["merge"]):
                    raise
                self._refused(args, exc)   # a slice file that is not whole, read in the merge
            entry = None
            report = fleet.report(now.strftime("%Y-%m-%dT%H:%M:%SZ"), run=run, drills=drills)
            del fleet
            unverifiable = dict((name, entry["unverifiable"]) for name, entry in report["hosts"].items()
                                if entry["unverifiable"])
            if failure is not None:
                self._not_written(args, failure, report)
            if store is not None and slicing and not slicing["merge"]:
                files = self._write_slice(args, run, report, store)
            elif store is not None:
                report_dir = args["report_dir"]

                def full(name):
                    return _report.grouped(store.get(name), report["hosts"][name])
                try:
                    os.makedirs(report_dir, exist_ok=True)
                    texts = dict((RENDERERS[fmt][0], json_chunks(report, full, store.line) if fmt == "json"
                                  else RENDERERS[fmt][1](report, full)) for fmt in args["formats"])
                    _run_dir, written = write_report_set(report_dir, args["basename"], now.strftime("%Y%m%dT%H%M%SZ"), texts)
                    files = dict((fmt, written[RENDERERS[fmt][0]]) for fmt in args["formats"])
                except Exception as exc:  # pylint: disable=broad-except  # whatever it is: the documented not-written path
                    self._not_written(args, exc if isinstance(exc, OSError) else "%s: %s" % (type(exc).__name__, exc),
                                      report)
                if args["metrics_file"]:
                    self._metrics(args, report, full, now)
        finally:
            if store is not None:
                store.close()
        gate = self._status(args, report, "written" if files else "not written (check mode)", files)

        result.update(
            changed=bool(files),
            files=files,
            generated_at=report["generated_at"],
            summary=report["summary"],
            counts=report["counts"],
            drift=report["drift"],
            verdicts=dict((name, entry["verdict"]) for name, entry in report["hosts"].items()),
            signatures=dict((name, entry["signature"]) for name, entry in report["hosts"].items()),
            summary_lines=display_lines(_fleet.summary_lines(report)),  # printed by the playbook and the callbacks
            unverifiable=unverifiable,
            failing=gate["failing"],
            gate_reasons=gate_reasons(report, args["require_verified"]),
            gate=dict((k, gate[k]) for k in ("status", "exit_status")),
            gate_lines=display_lines(_status.gate_lines(gate, args.get("retry_file"))),
        )
        if drills is not None:
            result["drills"] = drills
        return result
