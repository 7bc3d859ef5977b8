# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: the runtime layer of gpuprobe.layers (a package; not public API, may change without notice).

Starts one probe container with the requested CDI devices through a real runtime, looks from inside at what
the runtime actually applied (device nodes and what open(O_RDWR) returns, mounts, env, groups, which libcuda
the loader finds) and compares it, edit by edit, with what the CDI layer expected. The same container can run
the compute steps (``compute: true``), whose raw output is handed to the compute layer.

The entries are ``runtime_facts`` (the record) and ``cleanup`` (probe_cleanup). The package is split by concern:
``catalogue`` (CHECKS, SIGNATURES, labels, start-error classes), ``engines`` (which engine, and starting,
listing and removing the probe container through it: podman and docker by their CLI), ``cri`` (containerd and CRI-O
through the CRI, as the kubelet runs a Pod), ``compare`` (the edit comparison and the loader check on
the probe's in-container inventory), ``signals`` (interrupts and the controller watch), ``cleanup`` (what a run
that is over left) and ``layer`` (the record itself).
"""

from __future__ import annotations

from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime.catalogue import (  # noqa: F401
    CHECKS,
    classify_start_error,
    CREATED_LABEL,
    CRI_ENGINES,
    ENV_KEEP,
    error_line,
    LABEL,
    NODE_TYPES,
    open_signature,
    OWNER_LABEL,
    PROBE_CONTAINER_DIR_RE,
    probe_in_container,
    RUN_ID_RE,
    RUNTIMES,
    SIGNATURES,
    START_PATTERNS,
    VERSION_RE,
)
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime.compare import (  # noqa: F401
    build_observed,
    clean_path,
    compare_edits,
    compare_env,
    compare_mounts,
    compare_nodes,
    container_path,
    edits_compared_check,
    expected_node,
    loader_check,
    observed_checks,
    _parse_mode,
    _relevant_env,
    _relevant_mounts,
    resolve_request,
)
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime.engines import (  # noqa: F401
    build_argv,
    cli_info,
    container_name,
    detect_runtime,
    _parse_ps,
    parse_version,
    probe_containers,
    remove_container,
)
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime.cri import (  # noqa: F401  (registers the CRI adapter)
    CriEngine,
)
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime_select import (  # noqa: F401  (the CRI detection)
    cri_info,
)
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime.signals import (  # noqa: F401
    ControllerWatch,
    deferred_signals,
    INTERRUPT_SIGNALS,
    Interrupted,
    interruptible,
)
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime.cleanup import (  # noqa: F401
    cleanup,
    PROBE_DIR_PREFIX,
    PROBE_DIR_RE,
    probe_parent_dir,
    remove_own_spec,
    sweep_probe_dirs,
)
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime.layer import (  # noqa: F401
    check_params,
    _probe_config,
    runtime_facts,
)

from ansible_collections.gpuprobe.layers.plugins.module_utils._result import LayerBuilder  # noqa: F401  (callers build runtime records with it)
