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

This file only documents the package: callers import the module that defines a name (the layer's entry is
``layer.py``; its checks are in ``catalogue.py``).
"""
