# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: the words both sides of a run share, each written once. Not public API.

The runtimes a run can verify through, the CDI spec dirs, the self-built spec variants, the layers of each
node-side stage and the run id rule. The argument specs (``_common.args``), the layers and the controller's option
checks take them from here. Nothing is imported: every node-side module may ship this file at no cost.
"""

from __future__ import annotations

import re

# The container runtimes. A "runtime" is one of these names (the options', the records' and the report's word; ``auto``
# lets the node's own setup choose: _runtime.select); an "engine" is one runtime as the selection found it on the node
# (a dict: name, path or endpoint, version, why it was chosen: evidence.engines, _verdict.verdict.ENGINE_KEYS); an
# "adapter" drives one to start, list and remove the probe container (_runtime.adapters: CliAdapter, CriAdapter).
ENGINES = ("podman", "docker", "containerd", "crio")
CRI_ENGINES = ("containerd", "crio")   # reached through the CRI (_runtime.cri), the others by their CLI
RUNTIMES = ("auto",) + ENGINES

# The CDI library's default spec dirs (pkg/cdi DefaultSpecDirs since v0.3.0), lowest priority first, and where a run's
# self-built spec is written (never under /etc/cdi: _cdi.spec)
SPEC_DIRS = ("/etc/cdi", "/var/run/cdi")
SELF_BUILT_SPEC_DIR = "/var/run/cdi"

# The OCI hook stages (runtime-spec config.md "POSIX-platform Hooks"; a CDI hook's hookName is one of them), in the order
# runc runs them
HOOK_STAGES = ("prestart", "createRuntime", "createContainer", "startContainer", "poststart", "poststop")

# The self-built spec's variants (_cdi.spec.VARIANTS says what each breaks and the failure it predicts)
VARIANTS = ("full", "no_ptxjit_mount", "no_uvm_node", "cgroup_read_only", "stub_libcuda", "file_mode_0000",
            "missing_hostpath", "stale_library")

# The layers of each node-side stage: inspect (node_layers) and probe (node_probe); node_verify runs both
INSPECT_LAYERS = ("host", "cdi", "k8s")
PROBE_LAYERS = ("runtime", "compute")

# A run id names the probe containers (a label and the name), the self-built spec's file and its CDI class: 1 to
# RUN_ID_MAX letters, digits, '_', '.', '-', starting with a letter or digit. The controller's options take only the
# lower-case part of it (a-z, 0-9, '-': plugin_utils/_report/options.py), with the same limit.
RUN_ID_MAX = 63
RUN_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,%d}$" % (RUN_ID_MAX - 1))


def check_run_id(run_id, name="run_id"):
    """``run_id`` when it follows the rule (RUN_ID_RE), else ValueError naming the option."""
    if not isinstance(run_id, str) or not RUN_ID_RE.match(run_id):
        raise ValueError("%s %r: use 1-%d letters, digits, '_', '.', '-', starting with a letter or digit" % (
            name, run_id, RUN_ID_MAX))
    return run_id
