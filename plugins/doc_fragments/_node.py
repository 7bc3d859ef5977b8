# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE doc fragment: the options of the node side of verify_node (not public API). DOCUMENTATION: the inspect
stage's (gpuprobe.layers.node_layers, gpuprobe.layers.node_verify); PROBE: the probe's own (gpuprobe.layers.node_probe,
gpuprobe.layers.node_verify). The argument specs are _common.args.NODE_LAYERS_ARGSPEC and NODE_PROBE_ARGSPEC
(tests/unit/plugins/module_utils/test__args.py holds them to this fragment)."""


class ModuleDocFragment(object):  # pylint: disable=too-few-public-methods

    DOCUMENTATION = r"""
options:
  layers:
    description: The layers to run, always in the order host, cdi, k8s.
    type: list
    elements: str
    choices: [host, cdi, k8s]
    default: [host, cdi]
  run_id:
    description: The run's id (C([a-z0-9-])); it names the self-built spec and its kind. Required with O(cdi_source=self-built).
    type: str
    default: ""
  root:
    description: As the O(gpuprobe.layers.host_facts#module:root) option (fixture trees only when not C(/)).
    type: path
    default: /
  driver_root:
    description: As the O(gpuprobe.layers.host_facts#module:driver_root) option.
    type: path
  nvml:
    description: Read NVML (host layer).
    type: bool
    default: true
  cdi_source:
    description:
      - V(node) reads the node's own specs from O(cdi_spec_dirs); V(self-built) reads this run's spec (written
        here unless O(cdi_spec) names one already written).
    type: str
    choices: [node, self-built]
    default: node
  cdi_spec_dirs:
    description: As the O(gpuprobe.layers.cdi_facts#module:spec_dirs) option.
    type: list
    elements: path
    default: [/etc/cdi, /var/run/cdi]
  cdi_kinds:
    description: As the O(gpuprobe.layers.cdi_facts#module:kinds) option.
    type: list
    elements: str
    default: [nvidia.com/gpu]
  cdi_devices:
    description: As the O(gpuprobe.layers.cdi_facts#module:devices) option.
    type: list
    elements: str
    default: []
  cdi_spec:
    description: The result of a M(gpuprobe.layers.cdi_spec) call of this run (C(path), C(kind), C(devices)) to read instead of writing one.
    type: dict
    default: {}
  trusted_edits:
    description:
      - Spec edits the site declares trusted, beyond what NVIDIA's CDI generators write (the cdi layer's allowlist,
        check C(cdi.trust.accounted)). An edit of a requested device that is neither is unaccounted, a cdi FAIL, and
        the probe does not run for it.
      - Each item is a mapping with one or more of C(hostPath), C(containerPath) (a mount; a device node's
        C(hostPath)), C(env) (an env entry's name), C(hook) (a hook's program path), C(deviceNode) (a device node's
        path), each a shell-style pattern (C(*) also matches C(/)) that the edit's field must match whole, and an
        optional C(why). An edit is accounted for by the first item whose every pattern matches it.
      - A verdict that rests on a declared edit says so (its reason, and C(evidence.trust) of the cdi record).
    type: list
    elements: dict
    default: []
  self_built_spec_dir:
    description: Where the self-built spec is written and removed (never under C(/etc/cdi)).
    type: path
    default: /var/run/cdi
  self_built_variant:
    description: As the O(gpuprobe.layers.cdi_spec#module:variant) option.
    type: str
    choices: [full, no_ptxjit_mount, no_uvm_node, cgroup_read_only, stub_libcuda, file_mode_0000, missing_hostpath, stale_library]
    default: full
  stub_libcuda:
    description: As the O(gpuprobe.layers.cdi_spec#module:stub_libcuda) option.
    type: path
  health_thresholds:
    description: As the O(gpuprobe.layers.host_facts#module:health_thresholds) option.
    type: dict
    default: {}
  dcgm_diag:
    description: As the O(gpuprobe.layers.host_facts#module:dcgm_diag) option.
    type: int
    default: 0
    choices: [0, 1, 2, 3, 4]
  mode:
    description:
      - The run's mode (the O(gpuprobe.layers.verify_node#module:mode) option). In V(audit) mode, as in check mode,
        nothing that loads the GPU runs - O(dcgm_diag) levels 2 to 4 are C(NOT_RUN) with the reason; level 1 (no load
        on the GPU) runs.
    type: str
    default: full
    choices: [full, audit]
  runtime:
    description:
      - The runtime(s) the verdict speaks for - V(auto), one of V(podman), V(docker), V(containerd), V(crio), or a
        list of them. The cdi layer selects them (V(auto) - the running kubelet's CRI runtime, else the installed
        kubelet's, else a running docker daemon at the docker CLI's endpoint, else podman;
        L(docs/runtimes.md,https://github.com/gpuprobe/gpuprobe.layers/blob/main/docs/runtimes.md#which-runtime-a-nodes-pods-use-the-layouts)),
        reads each one's own CDI configuration and judges the spec versions and dirs for each
        (C(cdi.engine.config), C(cdi.runtime.*)); C(evidence.engines) lists them with why each was chosen.
    type: raw
    default: auto
  runtime_endpoint:
    description: As the O(gpuprobe.layers.verify_node#module:probe_runtime_endpoint) option, which verify_node passes here.
    type: str
  runtime_handler:
    description:
      - The CRI runtime handler the probe runs with (a RuntimeClass's C(handler)); unset - the handler most GPU Pods on
        this node use (the k8s layer's RuntimeClasses), else the engine's default handler from its running
        configuration. V(containerd) and V(crio) only.
    type: str
  cri_descriptor:
    description: The CRI API descriptor set on the node, to ask V(containerd) or V(crio) through the CRI (default - C(GPUPROBE_CRI_DESCRIPTOR)).
    type: path
  runtime_timeout:
    description:
      - Seconds each question to a runtime may take while the runtimes are selected and their CDI configuration is read
        (C(podman info), C(docker info), the CRI C(Version) and C(Status) calls, C(containerd config dump),
        C(crio status config)); must be > 0. P(gpuprobe.layers.verify_node#module) passes its
        O(gpuprobe.layers.verify_node#module:probe_timeout) (the verify role's C(verify_probe_timeout)).
    type: int
    default: 120
"""

    PROBE = r"""
options:
  image:
    description: The probe image; never pulled.
    type: str
    default: localhost/gpuprobe-probe:local
  timeout:
    description: Seconds the probe container and the host control may each take.
    type: int
    default: 120
  user:
    description: Run the probe as this uid[:gid] or name[:group]; empty for the image's user.
    type: str
    default: ""
  environment:
    description: Environment variables set for the probe and the host control (for example C(CONTAINERS_CONF)).
    type: dict
    default: {}
  isolation:
    description: As the O(gpuprobe.layers.runtime_facts#module:isolation) option.
    type: str
    choices: [shared, per_device]
    default: shared
  allow_busy_gpu:
    description: Probe GPUs that run compute processes of others, or when the host record cannot tell.
    type: bool
    default: false
  host_control:
    description: Run the same probe on the host as the control of the compute layer.
    type: bool
    default: true
"""
