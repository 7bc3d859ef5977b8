#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: probe_cleanup
short_description: Remove probe containers and self-built CDI specs left by gpuprobe runs
version_added: 0.1.0
description:
  - Removes the containers labelled C(gpuprobe.run) (all of them, or those of one O(run_id)) with every
    supported runtime that is installed (podman, docker).
  - Removes the self-built CDI specs C(<spec_dir>/gpuprobe-<run_id>.yaml) of the kind C(gpuprobe.local/gpu),
    that run's spec with O(run_id), every such spec without it (a sweep after an interrupted run).
    Specs of other kinds and anything under C(/etc/cdi) are never touched.
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpuprobe.layers._attributes
attributes:
  check_mode:
    support: full
    details: Reports what would be removed without removing it.
options:
  run_id:
    description: Only this run's container(s) and spec. Without it, everything labelled C(gpuprobe.run).
    type: str
  runtime:
    description: Which runtime to look in; V(auto) looks in podman and docker where installed.
    type: str
    choices: [auto, podman, docker]
    default: auto
  spec_dir:
    description: Where the self-built specs live.
    type: path
    default: /var/run/cdi
  specs:
    description: Also remove the self-built specs.
    type: bool
    default: true
seealso:
  - module: gpuprobe.layers.runtime_facts
"""

EXAMPLES = r"""
- name: Remove what this run left
  gpuprobe.layers.probe_cleanup:
    run_id: "{{ run_id }}"

- name: Sweep everything an interrupted run may have left
  gpuprobe.layers.probe_cleanup:
"""

RETURN = r"""
containers:
  description: The containers removed (or that would be), as C(<runtime>:<name>).
  returned: always
  type: list
  elements: str
specs:
  description: The spec files removed (or that would be).
  returned: always
  type: list
  elements: str
errors:
  description: What could not be listed or removed (the module fails when this is not empty).
  returned: always
  type: list
  elements: str
skipped:
  description:
    - With O(runtime=auto), the runtimes whose containers could not be listed (for example a docker CLI whose
      daemon is not running); they are reported as warnings, not failures.
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import cleanup


def main():
    module = AnsibleModule(
        argument_spec=dict(
            run_id=dict(type="str"),
            runtime=dict(type="str", default="auto", choices=["auto", "podman", "docker"]),
            spec_dir=dict(type="path", default="/var/run/cdi"),
            specs=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )
    p = module.params
    try:
        result = cleanup(run_id=p["run_id"], runtime=p["runtime"], spec_dir=p["spec_dir"], specs=p["specs"],
                         check_mode=module.check_mode)
    except Exception as exc:  # pylint: disable=broad-except
        module.fail_json(msg="cleanup failed: %s" % exc)
    if result["errors"]:
        module.fail_json(msg="cleanup incomplete: %s" % "; ".join(result["errors"]), **result)
    for skipped in result["skipped"]:
        module.warn("not swept: %s" % skipped)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
