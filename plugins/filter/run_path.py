# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filter gpuprobe.layers.run_path: a controller path of the run, a relative one under the directory ansible-playbook
was started in."""

from __future__ import annotations

DOCUMENTATION = r"""
name: run_path
author: gpuprobe.layers contributors (!UNKNOWN)
version_added: "1.0.0"
short_description: A path on the controller as the run means it
description:
  - Expands C(~) and joins a relative path to the directory C(ansible-playbook) was started in, the working directory
    of Ansible's controller processes. Not the playbook's directory, where a module run on C(localhost) would resolve
    it (a relative C(gpuprobe_status_file) of an installed collection's playbook landed inside the collection), nor
    the C(PWD) environment variable, which a process that starts C(ansible-playbook) in another directory does not
    change.
  - playbooks/verify-gpu.yml resolves C(gpuprobe_status_file), C(gpuprobe_retry_file), C(gpuprobe_metrics_file) and
    C(gpuprobe_report_dir) with it (L(docs/usage.md,https://github.com/gpuprobe/gpuprobe.layers/blob/main/docs/usage.md)).
positional: _input
options:
  _input:
    description: The path, absolute or relative.
    type: path
    required: true
"""

EXAMPLES = r"""
- name: The status file of this run, relative to where ansible-playbook was started
  ansible.builtin.debug:
    msg: "{{ gpuprobe_status_file | gpuprobe.layers.run_path }}"
"""

RETURN = r"""
_value:
  description: The absolute, normalised path.
  type: path
"""

import os

from ansible.errors import AnsibleFilterError


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
        return {"run_path": run_path}
