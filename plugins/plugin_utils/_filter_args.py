# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: the input the filters that take a node's records accept (node_verdict, layer_gate, drill_result)."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError


def layer_records(value, name):
    """A mapping layer -> record without its empty entries ({} for None); ``name`` names the filter in the error."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise AnsibleFilterError("%s expects a mapping layer -> record, got %s" % (name, type(value).__name__))
    return dict((k, v) for k, v in value.items() if v)
