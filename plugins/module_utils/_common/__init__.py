# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""PRIVATE: the pieces every layer shares: the record contract, the one process runner and its allowlist,
interrupts, owners, digests, TOML, option checks, the argument specs, the per-node record cap. Not public API.

This file only documents the package: import the module that defines a name."""
