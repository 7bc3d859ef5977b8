# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE doc fragment: what every gpuprobe.layers module declares alike (not public API).

Used after ansible.builtin.action_common_attributes (the attributes' descriptions); every module supports check mode
in full and states only the details of what check mode does there. ``diff_mode`` is ``none`` here: a module that
returns a ``diff`` (cdi_spec, k8s_publish) states ``full`` and what its diff shows
(tests/unit/plugins/modules/test_diff_mode.py holds the two to it). FACTS (a facts module, whose action plugin only
keeps its payload) and ACTION (an action plugin's module file, with ansible.builtin.action_common_attributes.flow)
are DOCUMENTATION and what such a module declares besides, written out whole: ansible-test's yamllint reads every
assignment of a fragment class as one string literal (tests/unit/plugins/doc_fragments/test__attributes.py holds the
two to DOCUMENTATION).
"""


class ModuleDocFragment(object):  # pylint: disable=too-few-public-methods

    DOCUMENTATION = r"""
author:
  - gpuprobe.layers contributors (!UNKNOWN)
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  platform:
    platforms: posix
"""

    # a facts module: its record is an C(ansible_facts) entry; its action plugin (plugin_utils/_kept_module) keeps its payload
    FACTS = r"""
author:
  - gpuprobe.layers contributors (!UNKNOWN)
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  platform:
    platforms: posix
  facts:
    description: The module returns an C(ansible_facts) dictionary that updates the host's facts.
    support: full
  action:
    description: The module has an action plugin. It runs the module on the node as it is and keeps its payload on the controller from one run to the next.
    support: full
"""

    # an action plugin's module file (the work runs on the controller)
    ACTION = r"""
author:
  - gpuprobe.layers contributors (!UNKNOWN)
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  platform:
    platforms: posix
  action:
    support: full
  async:
    support: none
  bypass_host_loop:
    support: none
"""
