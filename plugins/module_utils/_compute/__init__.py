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

This file only documents the package: callers import the module that defines a name (the layer's entry is
``layer.py``; its checks are in ``catalogue.py``).
"""
