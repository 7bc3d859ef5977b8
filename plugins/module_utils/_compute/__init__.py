# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: the compute layer of gpuprobe.layers (a package; not public API, may change without notice).

Turns the compute steps the probe recorded inside the CDI-injected container (``gpuprobe_probe`` from
runtime_facts) into the compute record, runs the SAME probe on the host as the control, and asks
``_verdict.compute_points_to`` where a failure points (host PASS + container FAIL -> runtime; both FAIL ->
host). A busy GPU is not touched: compute is NOT_RUN "GPU in use, not preempting" unless allowed.

The one entry is ``compute_record``. The package is split by concern: ``catalogue`` (CHECKS, SIGNATURES),
``assess`` (the outcome of one probe run: failed step, crash, hang, per device), ``rows`` (the per-GPU rows),
``host_control`` (the same probe on the host), ``binding`` (compute.driver.binding: the container's driver is
the host's) and ``record`` (the record itself). What the probe prints and how it is read is the probe's side of
the contract: ``_probe_contract``.
"""

from __future__ import annotations

from ansible_collections.gpuprobe.layers.plugins.module_utils._compute.assess import (  # noqa: F401
    assess, assess_device, assess_global, crash_outcome, signal_of, step_hint, step_signature,
)
from ansible_collections.gpuprobe.layers.plugins.module_utils._compute.binding import (  # noqa: F401
    binding_check, file_digest, host_driver_facts, prefetch_host_driver_facts,
)
from ansible_collections.gpuprobe.layers.plugins.module_utils._compute.catalogue import CHECKS, SIGNATURES  # noqa: F401
from ansible_collections.gpuprobe.layers.plugins.module_utils._compute.host_control import (  # noqa: F401
    CONTROL_ENV_CLEARED, EarlyControl, concurrent_scope, control_gpus, control_status, env_cleared, host_control_env,
    run_host_control,
)
from ansible_collections.gpuprobe.layers.plugins.module_utils._compute.record import (  # noqa: F401
    compute_record, container_evidence, container_probes, output_check, step_checks,
)
from ansible_collections.gpuprobe.layers.plugins.module_utils._compute.rows import (  # noqa: F401
    MIG_UUID_SYMBOL, ROW_KEYS, gpu_rows, normalize_expected,
)

__all__ = [
    "CHECKS", "CONTROL_ENV_CLEARED", "EarlyControl", "MIG_UUID_SYMBOL", "ROW_KEYS", "SIGNATURES", "assess", "assess_device",
    "assess_global", "binding_check", "compute_record", "concurrent_scope", "container_evidence", "container_probes", "control_gpus", "control_status",
    "crash_outcome", "env_cleared", "file_digest", "gpu_rows", "host_control_env", "host_driver_facts", "normalize_expected",
    "output_check", "prefetch_host_driver_facts", "run_host_control", "signal_of", "step_checks", "step_hint", "step_signature",
]
