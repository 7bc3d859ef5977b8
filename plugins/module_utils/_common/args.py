# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: the argument specs that more than one plugin uses, in one place (as kubernetes.core's args_common).
Not public API.

The node stages' modules (node_layers, node_probe, node_verify), the controller-side actions (verify_node,
fleet_report) and their documentation-only module files take their spec from here, so that a spec is written once:
node_verify's is node_layers' and node_probe's own options together, verify_node's is node_layers' with the probe_*
options of the controller. A facts module's spec, used by that module alone, stays in the module beside its
DOCUMENTATION (``_common.module.run_layer_module``). The option words (runtimes, spec dirs, variants, layers) come
from ``_common.vocab``; tests/unit/plugins/module_utils/test__args.py holds the specs to their documentation (the doc
fragment gpuprobe.layers._node, the modules' DOCUMENTATION, the verify role's meta/argument_specs.yml).
"""

from __future__ import annotations

from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import LAYERS
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.vocab import (
    INSPECT_LAYERS, RUNTIMES, SELF_BUILT_SPEC_DIR, SPEC_DIRS, VARIANTS,
)

DEFAULT_RUNTIME_TIMEOUT = 120   # the runtime_timeout option's default (verify_probe_timeout's)
DEFAULT_PROBE_IMAGE = "localhost/gpuprobe-probe:local"
ISOLATIONS = ["shared", "per_device"]
MODES = ["full", "audit"]

# the option record_limits of verify_node and fleet_report (what one node may return: _common.limits)
RECORD_LIMITS_SPEC = dict(type="dict", default={}, options=dict(
    max_bytes=dict(type="int"), max_checks=dict(type="int"), max_string=dict(type="int"), max_clock_skew=dict(type="int")))

# The node-side inspect stage (gpuprobe.layers.node_layers, _node.inspect): host, cdi and k8s.
NODE_LAYERS_ARGSPEC = dict(
    layers=dict(type="list", elements="str", default=["host", "cdi"], choices=list(INSPECT_LAYERS)),
    run_id=dict(type="str", default=""),
    root=dict(type="path", default="/"),
    driver_root=dict(type="path"),
    nvml=dict(type="bool", default=True),
    cdi_source=dict(type="str", default="node", choices=["node", "self-built"]),
    cdi_spec_dirs=dict(type="list", elements="path", default=list(SPEC_DIRS)),
    cdi_kinds=dict(type="list", elements="str", default=["nvidia.com/gpu"]),
    cdi_devices=dict(type="list", elements="str", default=[]),
    cdi_spec=dict(type="dict", default={}),
    # the site's own trusted spec edits (_cdi.trust.check_declared): patterns an unaccounted edit may match
    trusted_edits=dict(type="list", elements="dict", default=[]),
    self_built_spec_dir=dict(type="path", default=SELF_BUILT_SPEC_DIR),
    self_built_variant=dict(type="str", default="full", choices=list(VARIANTS)),
    stub_libcuda=dict(type="path"),
    runtime=dict(type="raw", default="auto"),
    runtime_endpoint=dict(type="str"),
    # the CRI runtime handler the probe runs with (verify_probe_runtime_handler); empty: the GPU Pods' (k8s layer), else
    # the engine's default (_runtime.handler.choose)
    runtime_handler=dict(type="str"),
    cri_descriptor=dict(type="path"),
    # seconds each question to a runtime may take while the runtimes are selected and their CDI configuration read
    # (verify_node passes its probe_timeout: verify_probe_timeout)
    runtime_timeout=dict(type="int", default=DEFAULT_RUNTIME_TIMEOUT),
    health_thresholds=dict(type="dict", default={}),
    dcgm_diag=dict(type="int", default=0, choices=[0, 1, 2, 3, 4]),
    mode=dict(type="str", default="full", choices=list(MODES)),
)

# The node-side probe stage (gpuprobe.layers.node_probe, _node.probe): runtime and compute.
NODE_PROBE_ARGSPEC = dict(
    records=dict(type="dict", required=True),
    run_id=dict(type="str", required=True),
    runtime=dict(type="str", default="auto", choices=list(RUNTIMES)),
    runtime_endpoint=dict(type="str"),
    image=dict(type="str", default=DEFAULT_PROBE_IMAGE),
    timeout=dict(type="int", default=120),
    user=dict(type="str", default=""),
    environment=dict(type="dict", default={}),
    isolation=dict(type="str", default="shared", choices=list(ISOLATIONS)),
    allow_busy_gpu=dict(type="bool", default=False),
    host_control=dict(type="bool", default=True),
    self_built_spec_dir=dict(type="path", default=SELF_BUILT_SPEC_DIR),
    remove_spec=dict(type="bool", default=False),
)

# The whole node in one process (gpuprobe.layers.node_verify, _node.verify): the inspect stage's options and the probe's
# own (runtime, runtime_endpoint, run_id and self_built_spec_dir are shared: the probe runs through the runtimes the
# inspect stage selected)
PROBE_OPTIONS = ("image", "timeout", "user", "environment", "isolation", "allow_busy_gpu", "host_control")
NODE_VERIFY_ARGSPEC = dict(NODE_LAYERS_ARGSPEC, **dict((name, NODE_PROBE_ARGSPEC[name]) for name in PROBE_OPTIONS))

# The controller-side action (gpuprobe.layers.verify_node): the verify role's options without their verify_ prefix.
# plugins/modules/verify_node.py documents them; roles/verify passes them 1:1.
VERIFY_NODE_ARGSPEC = dict(
    dict((name, spec) for name, spec in NODE_LAYERS_ARGSPEC.items()
         if name not in ("layers", "runtime", "runtime_endpoint", "runtime_handler", "cri_descriptor", "runtime_timeout")),
    layers=dict(type="list", elements="str", choices=list(LAYERS)),
    layer_timeout=dict(type="int", default=300),
    probe_image=dict(type="str", default=DEFAULT_PROBE_IMAGE),
    probe_runtime=dict(type="raw", default="auto"),
    probe_runtime_endpoint=dict(type="str"),
    probe_runtime_handler=dict(type="str"),
    probe_timeout=dict(type="int", default=DEFAULT_RUNTIME_TIMEOUT),
    probe_user=dict(type="str", default=""),
    probe_environment=dict(type="dict", default={}),
    cri_descriptor=dict(type="str", default=""),
    probe_isolation=dict(type="str", default="shared", choices=list(ISOLATIONS)),
    allow_busy_gpu=dict(type="bool", default=False),
    host_control=dict(type="bool", default=True),
    k8s=dict(type="bool", default=True),
    spool=dict(type="bool", default=False),
    record_limits=RECORD_LIMITS_SPEC,
    # node_exporter's textfile directory on the node: the node's metrics file is written there (node_metrics); "": none
    metrics_dir=dict(type="path", default=""),
    # every option not given is read from the host's variable <prefix><option> (the verify role passes verify_)
    vars_prefix=dict(type="str"),
)
# options whose empty value means "not set" when read from the variables (the verify role's default(omit, true))
EMPTY_IS_UNSET = ("driver_root", "stub_libcuda", "probe_runtime_endpoint", "probe_runtime_handler")

# the renderings a fleet report has (plugin_utils/_report/render.py gives each its suffix and function)
FORMATS = ("json", "markdown", "html", "junit")

# The controller-side action gpuprobe.layers.fleet_report (and its documentation-only module)
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
    record_limits=RECORD_LIMITS_SPEC,
    group_by=dict(type="list", elements="str"),
    # a run split into slices (plugin_utils/_report/slices.py): each slice writes its hosts' entries, the merge the report
    slice=dict(type="dict", options=dict(
        run_id=dict(type="str", required=True),
        dir=dict(type="path", required=True),
        merge=dict(type="bool", default=False),
        count=dict(type="int"),
    )),
)
