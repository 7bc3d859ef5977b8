#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: fleet_report
short_description: Aggregate the layer records of a fleet into JSON, Markdown, HTML and JUnit reports
version_added: "1.0.0"
description:
  - Runs on the controller (action plugin). Reads, for every host in O(hosts), the layer records that
    the P(gpuprobe.layers.verify#role) role left in hostvars, decides each node's verdict with the
    collection's single verdict function, and writes a fleet report into O(report_dir).
  - A host without records appears with every layer NOT_RUN and the reason (unreachable, the verify run
    failed, or the layer was not selected); never missing, never PASS.
  - A host that could not be verified (unreachable, no usable Python, the verify run stopped on it) is
    listed in RV(unverifiable); in JUnit its layers without a result are C(<error>), not C(<skipped>).
  - The files of one report are written into a new directory C(<basename>-<UTC timestamp>/) (files
    C(<basename>.<ext>)), which appears whole or not at all; then C(<basename>-latest), a symlink to the newest
    run's directory, is switched to it in one atomic rename. C(<basename>-latest.<ext>) are symlinks through
    C(<basename>-latest), so whatever stops the run (an error, Ctrl-C, SIGTERM, SIGKILL) they all read the
    previous set or all the new one. When a step before the switch fails, nothing of this run is kept and the
    task fails with C(gpuprobe report not written to ...); a path it would replace that is a directory (or
    C(<basename>-latest) that is not a symlink) is refused before anything is written. Regular
    C(<basename>-latest.<ext>) files of an earlier version are taken over as the previous set.
  - Files and directories get the mode the controller's umask leaves (0644 and 0755 under 022, 0600 and 0700 under
    077), as the reports name hosts, GPU UUIDs and process owners; run with the umask their readers need.
  - The JSON schema is versioned (C(schema_version)) and documented in
    L(docs/usage.md#reading-the-report,https://github.com/gpuprobe/gpuprobe.layers/blob/main/docs/usage.md#reading-the-report).
  - Run it once per play, for example with C(run_once) and C(delegate_to=localhost).
options:
  hosts:
    description: The hosts to report on, usually C(ansible_play_hosts_all).
    type: list
    elements: str
    required: true
  active_hosts:
    description:
      - The hosts still in the play, usually C(ansible_play_hosts). A host of O(hosts) that is not in it left
        the run before the report (unreachable or failed in the middle of the verify play); only its layers
        that ran are kept, and it is reported as not verified. Omitted, every host counts as active.
    type: list
    elements: str
  report_dir:
    description: Directory for the report files (created when missing).
    type: path
    required: true
  basename:
    description: File name prefix.
    type: str
    default: gpuprobe-report
  formats:
    description: Which renderings to write.
    type: list
    elements: str
    choices: [json, markdown, html, junit]
    default: [json, markdown, html, junit]
  result_var:
    description:
      - >-
        The host variable holding each node's registered P(gpuprobe.layers.verify_node#module) result (the
        gpuprobe.layers.verify role registers C(verify_result)): its C(records), or why there are none (the task
        was unreachable or failed, with its C(msg)).
    type: str
    default: verify_result
  records_var:
    description:
      - Instead of O(result_var), a host variable holding the mapping layer -> record (the fault drills build theirs).
        When set, O(result_var) is not read.
    type: str
  pins_var:
    description:
      - The host variable holding the expected versions (keys C(driver_version), C(cuda_driver_api),
        C(runtime_version), C(cdi_spec_digest)). Every host whose observed value differs is listed as drift.
    type: str
    default: gpuprobe_pins
  require_verified:
    description:
      - >-
        A post-check: every node that is not C(COMPUTE_VERIFIED) is listed in RV(failing), with the nodes that
        could not be verified.
    type: bool
    default: false
  drills_var:
    description: When set, the host variable holding fault-drill rows; the report then includes the drills table.
    type: str
  run:
    description: Free-form facts about the run (mode, CDI source, run id) copied into the report.
    type: dict
    default: {}
  status_file:
    description:
      - >-
        When set, a JSON file (written atomically, also in check mode and when the report is not written): the run's
        gate - C(status) and C(exit_status) (C(passed) 0, C(not_verified) 1, C(not_checked) 2, C(report_not_written)
        3), C(report) (C(written), C(failed) with C(error), C(not written (check mode))), C(files), and one list of
        hosts per case - C(verified), C(not_verified), C(unreachable), C(run_failed) - with C(verdicts) (the hosts
        that were checked), C(unverifiable) and C(failing). The README documents the schema (version 1);
        scripts/verify.sh exits with its C(exit_status).
    type: path
  retry_file:
    description:
      - >-
        When set, a file (written atomically) with the hosts to run again, one per line, for C(--limit @FILE) - the
        hosts of RV(failing) (could not be checked; with O(require_verified), not C(COMPUTE_VERIFIED)); empty when there
        is none.
    type: path
  metrics_file:
    description:
      - When set, an OpenMetrics file (written atomically after the report) of every host's verdict, state, failing
        layer and signature, layer statuses, per-GPU verification and health findings, and the fleet's counts, each
        host labelled C(host) (L(docs/usage.md,https://github.com/gpuprobe/gpuprobe.layers/blob/main/docs/usage.md), "Metrics"). Not written in check mode.
    type: path
  group_by:
    description:
      - >-
        Host variables whose values place a node, besides the inventory groups it is in (which are always used),
        for example C([rack, zone]). The report counts the hosts of every group and of every value of these
        variables by state, and says where the hosts of a cause are concentrated ("cdi.host.library_version:
        59 hosts, 40 of them in rack_r03"); the HTML report filters its hosts table by them. A host without the
        variable has no value for it. The playbook sets it from C(gpuprobe_report_group_by).
    type: list
    elements: str
  slice:
    description:
      - >-
        A run split into slices (AWX/AAP job slicing, or several C(ansible-playbook --limit) runs), all with the same
        O(slice.run_id) (L(docs/fleet.md,https://github.com/gpuprobe/gpuprobe.layers/blob/main/docs/fleet.md), "Sliced runs").
      - >-
        In a slice (O(slice.merge=false)) the full entries of the hosts in O(hosts), their verdicts decided, are written
        to one slice file, C(<dir>/<run_id>/<digest of the hosts>.slice.jsonl), and nothing else: no report set, and
        O(status_file), O(retry_file) and O(metrics_file) are the merge's (not written); RV(files) has C(slice).
      - >-
        In the merge (O(slice.merge=true)) every slice file of the run is read instead of hostvars, and the report,
        O(status_file), O(retry_file) and O(metrics_file) are written as for the same hosts run unsliced. The merge is
        refused, with the status C(report_not_written) (exit status 3) and the reason in O(status_file) and the task's
        error, and no other file written, when there is no slice of the run, a slice is of another run or was run with
        another mode, CDI source, O(require_verified) or O(group_by), O(slice.count) is given and differs, a host of
        O(hosts) is in no slice (a slice is missing), or a host is in two slices or not in O(hosts).
    type: dict
    suboptions:
      run_id:
        description: The run's id, shared by its slices and the merge (letters, digits, C(_), C(.), C(-)).
        type: str
        required: true
      dir:
        description: The directory of the slice files, shared by the slices and the merge.
        type: path
        required: true
      merge:
        description: Merge the run's slices into the report (true), or write this slice's file (false).
        type: bool
        default: false
      count:
        description: In the merge, the number of slices the run has (a missing slice is refused by its hosts anyway).
        type: int
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpuprobe.layers._record_limits
  - ansible.builtin.action_common_attributes.flow
  - gpuprobe.layers._attributes.action
attributes:
  check_mode:
    details: In check mode the report is built and summarised but no file is written.
notes:
  - The verdict rules are in L(docs/contract.md,https://github.com/gpuprobe/gpuprobe.layers/blob/main/docs/contract.md); the
    report format in
    L(docs/usage.md#reading-the-report,https://github.com/gpuprobe/gpuprobe.layers/blob/main/docs/usage.md#reading-the-report).
seealso:
  - module: gpuprobe.layers.verify_node
    description: Verifies one node and keeps its records for this report.
  - name: Reading the report
    description: The report's files, its states and where failures concentrate.
    link: https://github.com/gpuprobe/gpuprobe.layers/blob/main/docs/usage.md#reading-the-report
"""

EXAMPLES = r"""
- name: Write the fleet report
  gpuprobe.layers.fleet_report:
    hosts: "{{ ansible_play_hosts_all }}"
    report_dir: "{{ playbook_dir }}/../reports"
    run:
      mode: full
  run_once: true
  delegate_to: localhost
  register: fleet
"""

RETURN = r"""
files:
  description: Paths of the files written (in the run's directory), by format (empty in check mode); in a slice, C(slice), its slice file.
  returned: always
  type: dict
  sample: {json: /srv/reports/gpuprobe-report-20261202T183000Z/gpuprobe-report.json}
generated_at:
  description: UTC time of the report.
  returned: always
  type: str
summary:
  description:
    - Numbers of hosts, COMPUTE_VERIFIED, failed, inconclusive, unreachable and drifted hosts.
    - C(gpus) counts physical GPUs (C(total), C(verified), C(failed), C(not_run)); a GPU with MIG counts once, verified
      when every MIG instance requested on it passed; C(mig_instances) counts the requested MIG instances the same way
      and C(mig_gpus) the GPUs they are on.
  returned: always
  type: dict
counts:
  description: Hosts by verdict, by failing layer, by signature, and layer statuses by layer.
  returned: always
  type: dict
drift:
  description: Every pin that differs from the observed value, or could not be observed, per host.
  returned: always
  type: list
  elements: dict
verdicts:
  description: Host -> verdict.
  returned: always
  type: dict
signatures:
  description: Host -> failure signature (null unless the node failed).
  returned: always
  type: dict
unverifiable:
  description: Host -> why it could not be verified (unreachable, no usable Python, the verify run stopped), for those hosts only.
  returned: always
  type: dict
  sample: {node07: "host unreachable: Failed to connect to the host via ssh"}
failing:
  description:
    - Host -> why the run must fail it, for those hosts only; the message names the report. The hosts of
      RV(unverifiable), and with O(require_verified) every host that is not C(COMPUTE_VERIFIED).
  returned: always
  type: dict
  sample: {node07: "node07 is FAILED_AT_CDI (cdi.resolve.kind), not COMPUTE_VERIFIED; see /srv/reports/gpuprobe-report-20261203T101500Z.html"}
gate:
  description: The run's gate (O(status_file)'s C(status) and C(exit_status)).
  returned: always
  type: dict
  sample: {status: not_checked, exit_status: 2}
gate_reasons:
  description:
    - Host -> what the playbook's gate prints for each host of RV(failing) - C(not checked) or C(not COMPUTE_VERIFIED)
      with the host's state, in words every host of that state shares. The summary (RV(summary_lines)) says the cause
      of each group once; RV(failing), the status file and the report say each host's own.
  returned: always
  type: dict
  sample: {node07: "not checked: UNREACHABLE", node08: "not COMPUTE_VERIFIED: FAILED_AT_CDI"}
gate_lines:
  description: What the playbook's summary says about the gate, and why the play recap counts a host failed.
  returned: always
  type: list
  elements: str
summary_lines:
  description: A short fixed-width table (host, verdict, signature, drift) for the end of the run.
  returned: always
  type: list
  elements: str
drills:
  description: The fault-drill rows (predicted vs observed), when O(drills_var) is set.
  returned: when drills_var is set
  type: list
  elements: dict
"""

from ansible_collections.gpuprobe.layers.plugins.module_utils._common.args import FLEET_REPORT_ARGSPEC
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.module import documentation_only


def main():
    documentation_only(FLEET_REPORT_ARGSPEC, "fleet_report")


if __name__ == "__main__":
    main()
