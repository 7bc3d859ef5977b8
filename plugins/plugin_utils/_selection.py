# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE (controller): which layers a gpuprobe.layers.verify_node task runs, from the run's tags or its option
``layers``, what the layers left out are told, and the key of the task's result that the gpuprobe_summary callback
counts the nodes done by. Not public API; never shipped to a node.
"""

from __future__ import annotations

from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import LAYERS
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.vocab import PROBE_LAYERS

# a layer runs when any of its tags is selected and none is skipped: a layer's tag also runs the layers it
# needs (the same tags the verify role's tasks carried: --tags compute runs host, cdi, runtime and compute)
LAYER_TAGS = {
    "host": ("host", "cdi", "runtime", "compute"),
    "cdi": ("cdi", "runtime", "compute"),
    "runtime": ("runtime", "compute"),
    "compute": ("runtime", "compute"),
    "k8s": ("k8s",),
}
# what a layer needs to have run first; skipping one of them (--skip-tags) skips the layer too
NEEDS = {
    "host": ("host",),
    "cdi": ("host", "cdi"),
    "runtime": ("host", "cdi", "runtime", "compute"),
    "compute": ("host", "cdi", "runtime", "compute"),
    "k8s": ("k8s",),
}
# the key of verify_node's result that the gpuprobe_summary callback reads for its progress line
PROGRESS_KEY = "gpuprobe_host_done"
NOT_SELECTED = "not selected in this run (tags)"
K8S_DISABLED = "disabled (verify_k8s is false)"


def selected_layers(run_tags=None, skip_tags=None, k8s=True):
    """The layers a run selects with ``--tags``/``--skip-tags``, in LAYERS order (k8s only when enabled).

    ``--tags L`` runs L and what it needs (LAYER_TAGS); ``--skip-tags L`` skips L and the layers that need it
    (NEEDS): --skip-tags compute leaves host, cdi and k8s.
    """
    run = set(run_tags or ["all"])
    skip = set(skip_tags or [])
    chosen = []
    for layer in LAYERS:
        wanted = bool(run & ({"all", "tagged"} | set(LAYER_TAGS[layer])))
        if wanted and not (skip & (set(NEEDS[layer]) | {"tagged"})) and (layer != "k8s" or k8s):
            chosen.append(layer)
    return chosen


def needed_layers(layers):
    """``layers`` with what they need: runtime and compute run together and need host and cdi."""
    chosen = set(layers)
    if chosen & set(PROBE_LAYERS):
        chosen |= {"host", "cdi", "runtime", "compute"}
    elif "cdi" in chosen:
        chosen.add("host")
    return [layer for layer in LAYERS if layer in chosen]
