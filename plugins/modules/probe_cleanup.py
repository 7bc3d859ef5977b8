#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: probe_cleanup
short_description: Remove probe containers and self-built CDI specs left by gpuprobe runs
version_added: 1.0.0
description:
  - Removes only what is provably this collection's and belongs to a run that is over. Ours means a container
    labelled C(gpuprobe.run) (exact label value, name C(gpuprobe-*)) or a spec file C(<spec_dir>/gpuprobe-<run_id>.yaml)
    whose parsed kind is C(gpuprobe.local/gpu-<run_id>) (or the old C(gpuprobe.local/gpu)) and whose env names that
    run id. Specs of other kinds and anything under C(/etc/cdi) are never touched.
  - With O(run_id), that run's container(s) and spec (the caller's own run, over by definition). Without it, every
    item of ours whose owner (label C(gpuprobe.owner), spec env C(GPUPROBE_OWNER), C(host:pid:started)) is a process
    of this host that is gone, or whose owner cannot be checked from here (another host, unknown) and that is older
    than O(max_age). An owner that runs on this host is never over, whatever the age. Anything else, such as the
    live probe of another operator's run, is reported in C(live) and never removed.
  - Looks in every supported runtime that is installed (podman, docker) with O(runtime=auto), and in containerd
    and CRI-O through the CRI where their socket exists (there it removes our pod sandboxes, labelled
    C(gpuprobe.run), with their containers).
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpuprobe.layers._attributes
attributes:
  check_mode:
    details: Reports what would be removed without removing it.
options:
  run_id:
    description: Only this run's container(s) and spec. Without it, everything labelled C(gpuprobe.run).
    type: str
  runtime:
    description: Which runtime to look in; V(auto) looks in podman and docker where installed, and in containerd and
      CRI-O where their CRI socket exists.
    type: str
    choices: [auto, podman, docker, containerd, crio]
    default: auto
  runtime_endpoint:
    description: The named runtime's socket, as for M(gpuprobe.layers.runtime_facts) (a CRI endpoint, or docker's
      C(DOCKER_HOST)). Not used with O(runtime=auto).
    type: str
  cri_descriptor:
    description: The CRI API descriptor set on the node, as for M(gpuprobe.layers.runtime_facts); unset,
      C(GPUPROBE_CRI_DESCRIPTOR).
    type: path
  spec_dir:
    description: Where the self-built specs live.
    type: path
    default: /var/run/cdi
  specs:
    description: Also remove the self-built specs.
    type: bool
    default: true
  max_age:
    description: Seconds after which an item of ours whose owner cannot be checked from here (a run on another host,
      or one whose owner is unknown) counts as over. An item whose owner runs on this host is never over.
    type: int
    default: 3600
  timeout:
    description: Seconds each runtime command may take; must be > 0.
    type: int
    default: 30
  environment:
    description:
      - Environment variables for the runtime commands (for example C(CONTAINERS_CONF) or C(DOCKER_HOST)), the
        same as the probe's, so that the sweep looks where the probe's containers live.
    type: dict
    default: {}
seealso:
  - module: gpuprobe.layers.runtime_facts
"""

EXAMPLES = r"""
- name: Remove what this run left
  gpuprobe.layers.probe_cleanup:
    run_id: "{{ run_id }}"

- name: Sweep what interrupted runs left (their owner is gone, or older than an hour); live probes are reported
  gpuprobe.layers.probe_cleanup:
    max_age: 3600
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
probe_dirs:
  description: Probe temp dirs (C(gpuprobe-run-<pid>-<started>-*) in the temp dir) of module processes that are gone.
  returned: always
  type: list
  elements: str
live:
  description:
    - Items of other runs that are not over (their owner runs, or cannot be checked from here and they are younger
      than O(max_age)), each with C(container) or C(spec), C(run_id) and C(why). Never removed.
  returned: always
  type: list
  elements: dict
not_listed:
  description:
    - With O(runtime=auto), the runtimes whose containers could not be listed (for example a docker CLI whose
      daemon is not running); they are reported as warnings, not failures. (Formerly C(skipped), a key that
      Ansible reserves, so that the task showed as skipped.)
  returned: always
  type: list
  elements: str
"""

import os

from ansible_collections.gpuprobe.layers.plugins.module_utils._common.module import run_layer_module
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.options import check_environment
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.vocab import RUNTIMES, SELF_BUILT_SPEC_DIR
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime.cleanup import cleanup


def probe_cleanup(p, check_mode):
    check_environment(p["environment"])
    for key, value in p["environment"].items():
        os.environ[str(key)] = str(value)
    try:
        result = cleanup(run_id=p["run_id"], runtime=p["runtime"], spec_dir=p["spec_dir"], specs=p["specs"],
                         check_mode=check_mode, timeout=p["timeout"], max_age=p["max_age"],
                         endpoint=p["runtime_endpoint"], descriptor=p["cri_descriptor"])
    except ValueError:
        raise
    except Exception as exc:  # pylint: disable=broad-except
        return {"failed": True, "msg": "cleanup failed: %s" % exc}
    if result["errors"]:
        return dict(result, failed=True, msg="cleanup incomplete: %s" % "; ".join(result["errors"]))
    return dict(result, warnings=["not swept: %s" % why for why in result["not_listed"]])


def main():
    run_layer_module(dict(
        run_id=dict(type="str"),
        runtime=dict(type="str", default="auto", choices=list(RUNTIMES)),
        runtime_endpoint=dict(type="str"),
        cri_descriptor=dict(type="path"),
        spec_dir=dict(type="path", default=SELF_BUILT_SPEC_DIR),
        specs=dict(type="bool", default=True),
        max_age=dict(type="int", default=3600),
        timeout=dict(type="int", default=30),
        environment=dict(type="dict", default={}),
    ), probe_cleanup)


if __name__ == "__main__":
    main()
