#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: node_metrics
short_description: Write a node's gpuprobe metrics file for node_exporter's textfile collector
version_added: 1.0.0
description:
  - Writes O(content) (Prometheus text format, rendered on the controller by M(gpuprobe.layers.verify_node) from the
    node's records and verdict) to O(dir)/O(name) in one step, so that node_exporter never reads half a file - a hidden
    temporary file in the same directory (node_exporter's textfile collector reads only C(*.prom)), flushed and synced,
    then renamed over O(name). The file is mode 0644 (node_exporter's user reads it).
  - Never creates O(dir) (the collector's directory exists where node_exporter is installed, for example
    C(/var/lib/prometheus/node-exporter) with Debian's prometheus-node-exporter), never follows a symlink in place of
    O(name), never writes under C(/etc/cdi), and writes nothing else.
  - M(gpuprobe.layers.verify_node) calls it after each node's verdict when its option C(metrics_dir) is set
    (C(verify_metrics_dir) of the P(gpuprobe.layers.verify#role) role);
    L(docs/usage.md,https://github.com/gpuprobe/gpuprobe.layers/blob/main/docs/usage.md), "Metrics", lists the series.
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpuprobe.layers._attributes
attributes:
  check_mode:
    support: full
    details: Writes nothing; says whether the file would change.
options:
  dir:
    description:
      - The textfile collector's directory; an absolute path that exists. C(/etc/cdi) and anything under it are refused.
    type: path
    required: true
  name:
    description:
      - The file's name, C(gpuprobe-<mode>.prom) (one file per mode, so that an audit does not replace a full run's
        metrics).
    type: str
    required: true
  content:
    description:
      - The file's text (at most 4 MiB).
    type: str
    required: true
notes:
  - A run that cannot reach the node leaves its file as it was; C(gpuprobe_node_last_run_timestamp_seconds) says when
    it was written.
"""

EXAMPLES = r"""
- name: Write this node's metrics (what verify_node does with metrics_dir)
  gpuprobe.layers.node_metrics:
    dir: /var/lib/prometheus/node-exporter
    name: gpuprobe-full.prom
    content: |
      # HELP gpuprobe_node_verified 1 when the node's last run proved a CUDA kernel in a container.
      # TYPE gpuprobe_node_verified gauge
      gpuprobe_node_verified{mode="full"} 1
"""

RETURN = r"""
path:
  description: The file written (or that would be written in check mode).
  type: str
  returned: always
  sample: /var/lib/prometheus/node-exporter/gpuprobe-full.prom
bytes:
  description: The size of O(content) in bytes.
  type: int
  returned: always
"""

import os
import re
import uuid

from ansible.module_utils.basic import AnsibleModule

NAME = re.compile(r"^gpuprobe-[a-z]{1,16}\.prom$")
MAX_BYTES = 4 << 20
FORBIDDEN = "/etc/cdi"


def problem(directory, name, data):
    """Why the file may not be written there, or None."""
    if not os.path.isabs(directory):
        return "dir %r is not an absolute path" % directory
    real = os.path.realpath(directory)
    for path in (os.path.normpath(directory), real):
        if path == FORBIDDEN or path.startswith(FORBIDDEN + "/"):
            return "dir %r is, or resolves under, %s: refused" % (directory, FORBIDDEN)
    if not NAME.match(name or ""):
        return "name %r is not gpuprobe-<mode>.prom" % name
    if len(data) > MAX_BYTES:
        return "content is %d bytes, more than %d" % (len(data), MAX_BYTES)
    if not os.path.isdir(directory):
        return "dir %s does not exist or is not a directory (it is not created: install node_exporter, or make it)" % directory
    target = os.path.join(directory, name)
    if os.path.lexists(target) and (os.path.islink(target) or not os.path.isfile(target)):
        return "%s exists and is not a regular file: refusing to replace it" % target
    return None


def write(directory, name, data):
    """The file in one step; returns whether its content changed."""
    target = os.path.join(directory, name)
    try:
        with open(target, "rb") as f:
            if f.read(MAX_BYTES + 1) == data:
                return False
    except OSError:
        pass
    tmp = os.path.join(directory, ".%s.%d.%s.tmp" % (name, os.getpid(), uuid.uuid4().hex[:12]))
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # whatever the umask: node_exporter's user reads it
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return True


def main():
    module = AnsibleModule(argument_spec=dict(dir=dict(type="path", required=True), name=dict(type="str", required=True),
                                              content=dict(type="str", required=True)),
                           supports_check_mode=True)
    directory, name = module.params["dir"], module.params["name"]
    data = module.params["content"].encode("utf-8")
    path = os.path.join(directory, name)
    why = problem(directory, name, data)
    if why:
        module.fail_json(msg="gpuprobe metrics not written: %s" % why, path=path, bytes=len(data))
    if module.check_mode:
        try:
            with open(path, "rb") as f:
                changed = f.read(MAX_BYTES + 1) != data
        except OSError:
            changed = True
        module.exit_json(changed=changed, path=path, bytes=len(data))
    try:
        changed = write(directory, name, data)
    except OSError as exc:
        module.fail_json(msg="gpuprobe metrics not written to %s: %s" % (path, exc), path=path, bytes=len(data))
    module.exit_json(changed=changed, path=path, bytes=len(data))


if __name__ == "__main__":
    main()
