# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""PRIVATE: the probe script that runs inside the container (script.py, standalone) and its contract with the assessors. Not public API.

This file only documents the package: import the module that defines a name."""
