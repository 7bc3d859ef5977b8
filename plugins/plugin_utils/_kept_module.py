# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE (controller): the action of the layer facts modules (host_facts, cdi_facts, runtime_facts, compute_facts,
k8s_facts): ansible-core's own (ansible.builtin.normal: the module runs on the node with the task's arguments,
async and check mode as for any module), with the module's payload kept from one run to the next
(_controller_cache.Slot), as verify_node does for the modules it calls. The node receives the same code, lean (no
comments, no docstrings, every line in its place) and with its bytecode, and compiles none of it on the node's
Python when that is the controller's version; the controller does not parse the module's imports again on the next
run. Nothing else differs: the result is the module's own. Kept only where the controller cache keeps payloads
(ansible-core 2.19 and later; with 2.17 the module's payload is built as before). The action is ansible-core's
builtin ``normal``, not an ``ansible.legacy.normal`` a playbook may put beside it; ``ansible.builtin.gather_facts``
runs a facts module without its action plugin (its payload is built as before)."""

from __future__ import annotations

from ansible.plugins.action.normal import ActionModule as _NormalAction

# first: the collection code imported below is compiled once, not on every run (plugin_utils/_code_cache)
from ansible_collections.gpuprobe.layers.plugins.plugin_utils import _code_cache  # noqa: F401  pylint: disable=unused-import
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._controller_cache import Slot


class KeptPayloadAction(_NormalAction):
    """ansible.builtin.normal with the module's payload kept (``Slot``: primed before the call, kept after it)."""

    def _execute_module(self, *args, **kwargs):
        """ActionBase's (its arguments as they are: module_name, module_args, tmp, task_vars, ...), between the
        payload's priming and keeping."""
        module_name = kwargs.get("module_name", args[0] if args else None)
        task_vars = kwargs.get("task_vars", args[3] if len(args) > 3 else None)
        payload = Slot(module_name or getattr(self._task, "resolved_action", None) or self._task.action, task_vars or {})
        payload.prime()
        try:
            return super(KeptPayloadAction, self)._execute_module(*args, **kwargs)
        finally:
            payload.keep()
