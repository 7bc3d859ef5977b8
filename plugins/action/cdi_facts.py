# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Action plugin gpuprobe.layers.cdi_facts: the module as it is, its payload kept (plugin_utils/_kept_module)."""

from __future__ import annotations

from ansible_collections.gpuprobe.layers.plugins.plugin_utils._kept_module import KeptPayloadAction as ActionModule  # noqa: F401  pylint: disable=unused-import
