# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: the argument specs of the collection's modules and actions, in one place (as kubernetes.core's
args_common). Not public API.

Node-side modules and the controller-side actions import their spec from here; the documentation-only modules
(whose action plugin does the work) too, so that a spec is written once.
"""

from __future__ import annotations

# the renderings a fleet report has (plugin_utils/_report/render.py gives each its suffix and function)
FORMATS = ("json", "markdown", "html", "junit")

FLEET_REPORT_ARGSPEC = dict(
    hosts=dict(type="list", elements="str", required=True),
    active_hosts=dict(type="list", elements="str"),
    report_dir=dict(type="path", required=True),
    basename=dict(type="str", default="gpuprobe-report"),
    formats=dict(type="list", elements="str", default=list(FORMATS), choices=list(FORMATS)),
    result_var=dict(type="str", default="verify_result"),
    records_var=dict(type="str"),
    pins_var=dict(type="str", default="gpuprobe_pins"),
    require_verified=dict(type="bool", default=False),
    drills_var=dict(type="str"),
    run=dict(type="dict", default={}),
    status_file=dict(type="path"),
    retry_file=dict(type="path"),
    metrics_file=dict(type="path"),
)
