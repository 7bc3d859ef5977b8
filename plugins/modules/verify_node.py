#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: verify_node
short_description: Verify every GPU layer of one node in one task, with the verdict decided on the controller
version_added: 1.0.0
description:
  - >-
    Runs the layers of L(docs/contract.md,https://github.com/gpuprobe/gpuprobe.layers/blob/main/docs/contract.md) on one node in
    order host -> cdi -> runtime -> compute (+ k8s) with one node-side call, and returns every layer's record and the
    node verdict (the collection's single verdict function, decided on the controller). In full mode, when runtime
    or compute is selected, that call is M(gpuprobe.layers.node_verify): the inspect stage (host, cdi, k8s), the
    gate and the probe through each runtime, in one process. In audit mode, or when only host, cdi or k8s are
    selected, it is M(gpuprobe.layers.node_layers) (host, cdi and k8s). Both are internal modules of this action.
  - >-
    Runs on the controller (an action plugin). Whether the probe may run is one rule, applied on the node by
    M(gpuprobe.layers.node_verify) in full mode and on the controller otherwise: runtime and compute are C(NOT_RUN)
    "audit mode" with O(mode=audit), "blocked by <layer> FAIL" after a host or cdi FAIL (no device could be
    injected), and "blocked" when host or cdi did not run or no device was resolved. The cdi layer still runs after
    a host FAIL, for the evidence.
  - >-
    A layer whose code raises on the node is C(NOT_RUN) with the error and the next layers still run. When the
    node-side call itself fails (no usable Python, a killed module) every layer it was to run is C(NOT_RUN) with
    that error and the task fails (the node could not be verified); an interrupted probe still returns the host,
    cdi and k8s records. When the node becomes unreachable the task is unreachable and the records keep what ran.
    A probe container or self-built spec that the cleanup calls could not remove also fails the task.
  - >-
    Cleanup costs no call when the node-side call did its own; the controller calls M(gpuprobe.layers.probe_cleanup)
    only when a probe did not return, could not remove its container or ran with O(probe_isolation=per_device), and
    M(gpuprobe.layers.cdi_spec) C(state=absent) only when this run's self-built spec is still there (written by
    M(gpuprobe.layers.node_layers) with no probe to follow, or not removed by a call that failed).
  - "Tags select layers when O(layers) is not given: a layer runs when any of its tags is selected
    (C(--tags)) and none is skipped (C(--skip-tags)); a layer's tag also runs the layers it needs: host carries
    host, cdi, runtime and compute; cdi carries cdi, runtime and compute; runtime and compute carry both; k8s only k8s.
    Layers left out are C(NOT_RUN) C(not selected in this run (tags)). Give the task the tag C(always)."
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpuprobe.layers._record_limits
  - ansible.builtin.action_common_attributes.flow
  - gpuprobe.layers._attributes.action
attributes:
  check_mode:
    details: >-
      Nothing is written and no container starts: host, cdi and k8s read as usual (with O(cdi_source=self-built)
      the cdi layer is C(NOT_RUN), since the spec is not written); runtime and compute are C(NOT_RUN) "check mode".
options:
  mode:
    description:
      - V(full) runs every layer; V(audit) only host, cdi and k8s (read-only, no container is started, no spec is
        written; runtime and compute are C(NOT_RUN) "audit mode").
    type: str
    choices: [full, audit]
    default: full
  layers:
    description:
      - The layers to run (with the layers they need). When omitted, the run's tags decide (see the description).
    type: list
    elements: str
    choices: [host, cdi, runtime, compute, k8s]
  layer_timeout:
    description:
      - Seconds host, cdi and k8s are given in the verify role's task C(timeout), which is O(layer_timeout) +
        2 * O(probe_timeout) + 60 for the whole node (the task keyword is the bound; inside, NVML and kubectl
        have their own 30 s limits, the probe and each question to a runtime O(probe_timeout)). A node past it
        could not be verified.
    type: int
    default: 300
  root:
    description: Root of the node's filesystem for the host and cdi layers (another directory only for fixture trees).
    type: path
    default: /
  driver_root:
    description: Where the driver's user-space libraries live; omitted to let the host layer detect it.
    type: path
  nvml:
    description: Read NVML in the host layer.
    type: bool
    default: true
  cdi_source:
    description:
      - V(node) checks the node's own CDI specs for O(cdi_kinds).
      - V(self-built) writes a C(gpuprobe.local/gpu-<run id>) spec (a kind unique to the run, variant
        O(self_built_variant)) and removes it at the end, or uses the spec given in O(cdi_spec). Only with O(mode=full).
    type: str
    choices: [node, self-built]
    default: node
  cdi_spec_dirs:
    description: Spec directories read with O(cdi_source=node), lowest priority first.
    type: list
    elements: path
    default: [/etc/cdi, /var/run/cdi]
  cdi_kinds:
    description: CDI kinds checked with O(cdi_source=node).
    type: list
    elements: str
    default: [nvidia.com/gpu]
  cdi_devices:
    description: Fully-qualified CDI devices to request with O(cdi_source=node); empty requests every device of O(cdi_kinds).
    type: list
    elements: str
    default: []
  cdi_spec:
    description:
      - The registered result of a M(gpuprobe.layers.cdi_spec) task the caller ran itself (keys C(path), C(kind),
        C(devices)). With O(cdi_source=self-built) that spec is used and its removal is left to the caller.
    type: dict
    default: {}
  trusted_edits:
    description:
      - Spec edits the site declares trusted beyond what NVIDIA's CDI generators write (check C(cdi.trust.accounted)), as
        mappings with one or more of C(hostPath), C(containerPath), C(env), C(hook), C(deviceNode) (shell-style patterns
        the edit's field must match whole) and an optional C(why). An edit neither written by the generators nor declared
        is unaccounted (the node is FAILED_AT_CDI, the probe does not run); a verdict resting on a declared edit says so.
    type: list
    elements: dict
    default: []
  self_built_spec_dir:
    description: Where the self-built spec is written (never under C(/etc/cdi)).
    type: path
    default: /var/run/cdi
  self_built_variant:
    description: The variant of the self-built spec (see M(gpuprobe.layers.cdi_spec)).
    type: str
    choices: [full, no_ptxjit_mount, no_uvm_node, cgroup_read_only, stub_libcuda, file_mode_0000, missing_hostpath, stale_library]
    default: full
  stub_libcuda:
    description: Path of the CUDA toolkit's stub libcuda, for the V(stub_libcuda) variant.
    type: path
  run_id:
    description:
      - Id of this run (C([a-z0-9-]), it names the self-built spec and labels the probe containers); empty to
        generate one from the time and a random number.
    type: str
    default: ""
  probe_image:
    description: The local image the probe container runs (python3 + stdlib; the driver comes through CDI). Never pulled.
    type: str
    default: localhost/gpuprobe-probe:local
  probe_runtime:
    description:
      - The runtime(s) the verdict speaks for
        (L(docs/usage.md,https://github.com/gpuprobe/gpuprobe.layers/blob/main/docs/usage.md)) - V(auto), one of V(podman),
        V(docker), V(containerd),
        V(crio), or a list of them (V([containerd, docker])).
      - V(auto) takes the runtime the node's workloads use - the CRI endpoint of the kubelet, found running first
        (C(kubelet), C(hyperkube kubelet), MicroK8s' C(kubelite), the kubelet inside k3s or RKE2), else from its unit
        and files, in the kubelet's precedence (C(--container-runtime-endpoint), C(--config-dir), C(--config), else
        C(unix:///run/containerd/containerd.sock)); containerd or CRI-O, as the CRI Version call there answers, the
        daemon serving it found by socket identity), else a running docker daemon at the endpoint the docker CLI
        uses (C(DOCKER_HOST), else its current context; a remote context is refused; CDI off there is a cdi FAIL for
        docker), else podman. Why, in one sentence, is in C(records.cdi.evidence.engines[].selected_because) and
        C(verdict.runtime.selected_because)
        (L(docs/runtimes.md,https://github.com/gpuprobe/gpuprobe.layers/blob/main/docs/runtimes.md#which-runtime-a-nodes-pods-use-the-layouts)).
      - A list verifies through each runtime in turn - the runtime and compute layers run once per runtime
        (C(runtimes)), and the node is C(COMPUTE_VERIFIED) only when every one of them proved it.
    type: raw
    default: auto
  probe_runtime_endpoint:
    description:
      - The socket (C(unix:///path.sock)) of V(containerd) or V(crio) (default - the kubelet's, else the engine's default
        socket), or of docker's daemon when V(docker) alone is named.
    type: str
  probe_runtime_handler:
    description:
      - The CRI runtime handler the probe runs with (C(RunPodSandboxRequest.runtime_handler)), the one the node's GPU
        Pods use (a RuntimeClass's C(handler), for example V(nvidia-cdi) of GPU Operator). Unset - the handler most
        GPU Pods on this node use where the k8s layer reads their RuntimeClasses, else the engine's default handler
        from its running configuration. V(containerd) and V(crio) only; the verdict names the handler, its OCI runtime
        binary and who injects the CDI devices.
    type: str
  cri_descriptor:
    description:
      - The CRI API descriptor set on the controller (C(scripts/engines.sh stubs) builds it), for V(containerd) and
        V(crio) - the probe reaches them through the CRI and reads the API from this file.
      - It is copied into Ansible's remote temporary directory of the task (removed after it) and named to the node
        side as C(GPUPROBE_CRI_DESCRIPTOR). Empty, a node needs its own copy named by C(GPUPROBE_CRI_DESCRIPTOR) in
        O(probe_environment).
    type: str
    default: ""
  probe_timeout:
    description:
      - Timeout in seconds of each probe (container and host control), and of each question to a runtime while the
        runtimes are selected (C(podman info), C(docker info), the CRI calls, the engine's configuration) and while
        the probe containers of the run are swept.
    type: int
    default: 120
  probe_user:
    description: User (uid[:gid]) the probe runs as in the container; empty for the image's default.
    type: str
    default: ""
  probe_environment:
    description: Environment of the probe on the node (for example C(CONTAINERS_CONF) for podman).
    type: dict
    default: {}
  probe_isolation:
    description:
      - V(shared) verifies every GPU the requested devices give in one probe container; V(per_device) runs one
        compute container per requested CDI device (each sees exactly its GPU).
    type: str
    choices: [shared, per_device]
    default: shared
  allow_busy_gpu:
    description:
      - Run the compute probe even on GPUs with running compute processes, or when there is no host NVML
        evidence to tell (without it, compute is C(NOT_RUN) for them).
    type: bool
    default: false
  host_control:
    description: Also run the compute probe on the host, as the control that says where a container failure points.
    type: bool
    default: true
  k8s:
    description: Run the optional k8s layer (C(NOT_RUN) by itself without kubectl or a kubeconfig).
    type: bool
    default: true
  metrics_dir:
    description:
      - node_exporter's textfile collector directory on the node (for example C(/var/lib/prometheus/node-exporter)).
        After the verdict, the node's series (verdict, failing layer, signature, layer statuses, run time, per-GPU
        verification and health findings;
        L(docs/usage.md,https://github.com/gpuprobe/gpuprobe.layers/blob/main/docs/usage.md), "Metrics") are rendered on the controller and written there as
        C(gpuprobe-<mode>.prom) by M(gpuprobe.layers.node_metrics) (one more node-side call). Not for an unreachable
        node, nor in check mode. A file that cannot be written is a warning, not a failure of the node.
      - Empty (the default) writes nothing.
    type: path
    default: ""
  vars_prefix:
    description:
      - Read every option that is not given from the host's variable C(<vars_prefix><option>), templated by the action
        (the P(gpuprobe.layers.verify#role) role passes C(verify_)); only V(verify_).
      - One task argument instead of one template per option - Ansible compiles every template anew in each forked
        worker, about 30 ms of controller CPU per node for the role's options
        (L(docs/performance.md,https://github.com/gpuprobe/gpuprobe.layers/blob/main/docs/performance.md)).
    type: str
  spool:
    description:
      - Keep RV(records) and RV(runtimes) in a JSON file of this run on the controller (in Ansible's own local temp dir
        of this ansible-playbook process, removed when the run ends) instead of in the result, which then has
        RV(records_file) and RV(layer_status). M(gpuprobe.layers.fleet_report) reads them back. For runs of many
        nodes, where every registered result stays in the controller's memory until the run ends
        (L(docs/performance.md,https://github.com/gpuprobe/gpuprobe.layers/blob/main/docs/performance.md)).
      - A file that cannot be written leaves the records in the result, with a warning.
    type: bool
    default: false
  health_thresholds:
    description: As the O(gpuprobe.layers.host_facts#module:health_thresholds) option (per inventory group through the
      verify role's C(verify_health_thresholds)).
    type: dict
    default: {}
  dcgm_diag:
    description:
      - As the O(gpuprobe.layers.host_facts#module:dcgm_diag) option. The level's own timeout (120 s for level 1) must
        be shorter than O(layer_timeout).
    type: int
    default: 0
    choices: [0, 1, 2, 3, 4]
seealso:
  - module: gpuprobe.layers.fleet_report
  - name: The result contract and the verdict rules
    description: What every layer record holds, and how the node verdict is decided from the records.
    link: https://github.com/gpuprobe/gpuprobe.layers/blob/main/docs/contract.md
  - name: Running gpuprobe.layers over a fleet
    description: Modes, options, exit statuses, tags, check mode and the report.
    link: https://github.com/gpuprobe/gpuprobe.layers/blob/main/docs/usage.md
"""

EXAMPLES = r"""
- name: Verify this node (host, cdi, runtime, compute, k8s)
  gpuprobe.layers.verify_node:
  register: verify_result
  tags: [always]

- name: Stop when the node cannot compute in a container
  ansible.builtin.assert:
    that: verify_result.verdict.verdict == 'COMPUTE_VERIFIED'
    fail_msg: "{{ verify_result.verdict.reason }}"

- name: Read-only audit (no container, no spec written)
  gpuprobe.layers.verify_node:
    mode: audit
    k8s: false
  register: audit
"""

RETURN = r"""
records:
  description:
    - Every layer's record, layer name -> record
      (L(docs/contract.md,https://github.com/gpuprobe/gpuprobe.layers/blob/main/docs/contract.md)); the layers that did not run
      are C(NOT_RUN) with
      their reason. With several runtimes, C(runtime) and C(compute) are the first runtime's (every runtime's are in
      RV(runtimes)).
  returned: unless O(spool) (then in RV(records_file))
  type: dict
records_file:
  description:
    - With O(spool), the name of the controller-side JSON file holding RV(records) and RV(runtimes) in this run's spool
      directory (Ansible's local temp dir of this ansible-playbook process, C(gpuprobe-records); valid until the run ends).
    - For an unreachable node the file also holds RV(verdict), RV(run_id), RV(run_started_at), RV(layers) and RV(calls),
      and the result keeps only C(msg), this name and the verdict's name in C(gpuprobe_host_done) - Ansible's default
      callback prints an unreachable node's whole result. M(gpuprobe.layers.fleet_report) reads them back.
  returned: with O(spool)
  type: str
layer_status:
  description: With O(spool), each layer's status (layer -> C(PASS), C(FAIL), C(WARN) or C(NOT_RUN)); not for an unreachable node.
  returned: with O(spool)
  type: dict
runtimes:
  description:
    - One entry per runtime the verdict speaks for, in order - C(runtime) (the engine name), C(engine) (name,
      version, endpoint or path, label, cdi_library, selected_because), C(records) (its C(runtime) and C(compute)
      records) and C(verdict) (that runtime's own verdict, the same keys as RV(verdict)).
    - Empty when no runtime was selected (audit mode, root not /, the inspect call failed).
  returned: unless O(spool) (then in RV(records_file))
  type: list
  elements: dict
verdict:
  description:
    - The node verdict (C(verdict), C(layer), C(signature), C(points_to), C(reason), C(because), C(gpus), C(runtime),
      C(runtimes)) from the collection's single verdict function; C(verdict) is one of C(COMPUTE_VERIFIED),
      C(FAILED_AT_<LAYER>), C(INCONCLUSIVE), C(NOT_RUN).
    - C(runtime) is the runtime the verdict speaks for (name, version, endpoint or path, label, cdi_library,
      selected_because); C(runtimes) has one row per runtime (runtime, engine, verdict, layer, signature, points_to,
      reason). The node is C(COMPUTE_VERIFIED) only when every runtime asked for proved it.
  returned: always
  type: dict
  sample: {verdict: FAILED_AT_HOST, layer: host, signature: host.driver.missing, points_to: host, reason: "...", because: null, gpus: {}}
run_id:
  description: The id of this run.
  returned: always
  type: str
run_started_at:
  description:
    - When this task started, on the controller's clock (ISO-8601 UTC). Every record the node returned started after
      it and before the task ended, within O(record_limits.max_clock_skew); M(gpuprobe.layers.fleet_report) checks the
      records against it and O(run_id) again.
  returned: always
  type: str
layers:
  description: The layers this run selected.
  returned: always
  type: list
  elements: str
calls:
  description:
    - The node-side calls made (C(module), C(wall_ms), C(failed), C(payload_reused)), for the cost of a node.
      C(payload_reused) is true when the module's AnsiballZ payload was not built in this run but kept from an earlier
      run of the same sources (the controller cache, C(GPUPROBE_CACHE),
      L(docs/performance.md,https://github.com/gpuprobe/gpuprobe.layers/blob/main/docs/performance.md)).
  returned: always
  type: list
  elements: dict
spec:
  description: The self-built spec this run wrote and removed (C(path), C(kind), C(devices), C(variant)).
  returned: when a self-built spec was written
  type: dict
gpuprobe_host_done:
  description: Progress for the gpuprobe.layers.gpuprobe_summary callback (C(verdict), C(total) hosts in the play).
  returned: always
  type: dict
"""

from ansible_collections.gpuprobe.layers.plugins.module_utils._common.args import VERIFY_NODE_ARGSPEC
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.module import documentation_only


def main():
    documentation_only(VERIFY_NODE_ARGSPEC, "verify_node")


if __name__ == "__main__":
    main()
