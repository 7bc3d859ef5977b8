# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE doc fragment: what every gpuprobe.layers module declares alike (not public API).

Used after ansible.builtin.action_common_attributes; each module still states its own check_mode support,
with the details of what check mode does there. ``diff_mode`` is ``none`` here: a module that returns a ``diff``
(cdi_spec, k8s_publish) states ``full`` and what its diff shows (tests/unit/plugins/modules/test_diff_mode.py holds
the two to it).
"""


class ModuleDocFragment(object):  # pylint: disable=too-few-public-methods

    DOCUMENTATION = r"""
author:
  - gpuprobe.layers contributors (!UNKNOWN)
attributes:
  diff_mode:
    support: none
  platform:
    platforms: posix
"""

    # Facts modules (with ansible.builtin.action_common_attributes.facts)
    FACTS = r"""
attributes:
  facts:
    support: full
"""
