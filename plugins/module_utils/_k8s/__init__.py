# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""PRIVATE: the k8s layer: what the device plugin or DRA advertises, Pending GPU Pods, publishing verdicts to Nodes. Not public API.

The entry is ``layer.record`` (``layer.analyse`` over kubectl's JSON); the room is split by concern: ``catalogue``
(defaults, CHECKS), ``kubectl`` (running kubectl), ``nodes`` (what Nodes advertise; ``advertising_findings`` for the
fleet report), ``pods`` (Pending GPU Pods and why), ``dra`` (resource.k8s.io objects) and ``publish``. Code outside
the room imports only ``layer``, ``catalogue``, ``nodes`` and ``publish`` (tests/unit/test_layout.py, DOORS).

This file only documents the package: import the module that defines a name."""
