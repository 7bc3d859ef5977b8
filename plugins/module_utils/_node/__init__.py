# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""PRIVATE: the node stages: ``inspect`` (host, cdi, k8s: node_layers), ``gate`` (whether and through which runtimes
the probe can run, applied on both sides), ``probe`` (runtime, compute: node_probe) and ``verify`` (the whole node in
one call: node_verify). Not public API. Their options are in _common.args; the controller's layer selection from
tags is plugin_utils/_selection.py.

This file only documents the package: import the module that defines a name."""
