# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Action plugin gpuprobe.layers.fleet_report: the one place where the fleet is aggregated.

Runs on the controller, reads the layer records of every host from hostvars, builds the report with
module_utils/_report.py (verdicts from _verdict.node_verdict) and writes it atomically. Documentation:
plugins/modules/fleet_report.py."""

from __future__ import annotations

import datetime
import json
import os
import tempfile

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.text.converters import to_bytes
from ansible.plugins.action import ActionBase

from ansible_collections.gpuprobe.layers.plugins.module_utils import _report

NO_RECORD = ("no verify record for this host: it failed or became unreachable during the verify play "
             "(see the play output for that host)")


def _plain(value):
    """Template-free, JSON-clean copy of a hostvar (drops Ansible's tagged/lazy types)."""
    return json.loads(json.dumps(value, default=str))


def write_atomic(path, text, mode=0o644):
    """Write ``text`` to ``path`` through a temporary file in the same directory and os.replace()."""
    directory = os.path.dirname(path)
    fd, tmp = tempfile.mkstemp(prefix=".%s." % os.path.basename(path), dir=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(to_bytes(text))
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def collect_hosts(hostvars, names, records_var, pins_var, unreachable_var, error_var):
    """The per-host inputs of _report.build_report, read from hostvars."""
    hosts = []
    for name in names:
        hv = hostvars[name] if name in hostvars else {}
        records = hv.get(records_var)
        unreachable = hv.get(unreachable_var)
        error = hv.get(error_var)
        if not records and not unreachable and not error:
            error = NO_RECORD
        hosts.append({
            "name": name,
            "records": _plain(records) if records else None,
            "unreachable": str(unreachable) if unreachable else None,
            "error": str(error) if error else None,
            "pins": _plain(hv.get(pins_var) or {}),
        })
    return hosts


def collect_drills(hostvars, names, drills_var):
    rows = []
    for name in names:
        hv = hostvars[name] if name in hostvars else {}
        rows.extend(_plain(hv.get(drills_var) or []))
    return rows


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp
        _validation, args = self.validate_argument_spec(argument_spec=_report.FLEET_REPORT_ARGSPEC)
        hostvars = task_vars.get("hostvars") or {}
        names = list(dict.fromkeys(args["hosts"]))
        hosts = collect_hosts(hostvars, names, args["records_var"], args["pins_var"],
                              args["unreachable_var"], args["error_var"])
        drills = collect_drills(hostvars, names, args["drills_var"]) if args["drills_var"] else None
        now = datetime.datetime.now(datetime.timezone.utc)
        run = dict(args["run"])
        run.setdefault("ansible_version", (task_vars.get("ansible_version") or {}).get("full"))
        report = _report.build_report(hosts, now.strftime("%Y-%m-%dT%H:%M:%SZ"), run=run, drills=drills)

        files = {}
        if not self._task.check_mode:
            report_dir = args["report_dir"]
            try:
                os.makedirs(report_dir, exist_ok=True)
                stamp = now.strftime("%Y%m%dT%H%M%SZ")
                base = os.path.join(report_dir, "%s-%s" % (args["basename"], stamp))
                n = 1
                while any(os.path.exists(base + _report.RENDERERS[f][0]) for f in args["formats"]):
                    n += 1
                    base = os.path.join(report_dir, "%s-%s-%d" % (args["basename"], stamp, n))
                for fmt in args["formats"]:
                    suffix, render = _report.RENDERERS[fmt]
                    text = render(report)
                    write_atomic(base + suffix, text)
                    write_atomic(os.path.join(report_dir, "%s-latest%s" % (args["basename"], suffix)), text)
                    files[fmt] = base + suffix
            except OSError as exc:
                raise AnsibleActionFail("cannot write the fleet report to %s: %s" % (report_dir, exc))

        result.update(
            changed=bool(files),
            files=files,
            generated_at=report["generated_at"],
            summary=report["summary"],
            counts=report["counts"],
            drift=report["drift"],
            verdicts=dict((name, entry["verdict"]) for name, entry in report["hosts"].items()),
            signatures=dict((name, entry["signature"]) for name, entry in report["hosts"].items()),
            summary_lines=_report.summary_lines(report),
        )
        if drills is not None:
            result["drills"] = drills
        return result
