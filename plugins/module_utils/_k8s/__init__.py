# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""PRIVATE: the k8s layer: what the device plugin or DRA advertises, Pending GPU Pods, publishing verdicts to Nodes. Not public API.

This file only documents the package: import the module that defines a name."""
