#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: runtime_facts
short_description: The runtime layer of GPU-in-container readiness (what the container really got)
version_added: 1.0.0
description:
  - Starts one short-lived probe container with the requested CDI devices through a real container runtime
    and returns the runtime layer record (L(docs/contract.md,https://github.com/gpuprobe/gpuprobe.layers/blob/main/docs/contract.md))
    as the fact C(gpuprobe_runtime).
  - From inside the container the probe (Python standard library only, bind-mounted read-only) records each
    expected device node (type, major:minor, mode) and what C(open(O_RDWR)) returns on it (C(EPERM) from the
    device cgroup and C(EACCES) from the file mode are different findings), the mounts
    (C(/proc/self/mountinfo)), the environment, the process's groups, and which C(libcuda.so.1) and
    C(libnvidia-ml.so.1) the loader resolves (C(ldconfig -p) where it exists, C(dlopen) and C(/proc/self/maps) always).
  - Each expected device node, mount and env entry (O(expected_edits), from the cdi layer) becomes one check,
    PASS or FAIL with expected and observed. A C(fileMode) the runtime did not apply is a WARN.
  - A container that does not start is a FAIL whose signature classifies the runtime's message
    (C(runtime.start.cdi_unresolvable), C(runtime.start.hostpath_missing), C(runtime.start.permission_denied),
    C(runtime.start.oci_error), C(runtime.start.image_missing), C(runtime.start.timeout)).
  - With O(compute=true) the same container also runs the compute steps (CUDA driver API through ctypes and a
    PTX kernel); their raw output is returned as C(gpuprobe_probe) for M(gpuprobe.layers.compute_facts).
  - The container runs with C(--network=none), is labelled C(gpuprobe.run=<run_id>), C(gpuprobe.owner=<host:pid:started>)
    and C(gpuprobe.created=<epoch>), named C(gpuprobe-<run_id>-<random>), and is removed afterwards, also after a
    timeout and when the module is interrupted by SIGINT, SIGTERM or SIGHUP (the runtime client's process group is
    killed, the container force-removed and the probe's temporary directory deleted before the module fails), or
    when the C(ansible-playbook) process that runs it on this host is gone (a SIGHUP or SIGKILL to the controller
    never reaches the module, which Ansible's worker runs in a session of its own).
    A module killed with SIGKILL leaves the container; M(gpuprobe.layers.probe_cleanup) removes it once its owner
    is gone.
  - A runtime version string that is not a version is recorded as C(unknown) (check C(runtime.engine.version)
    NOT_RUN), never trusted.
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpuprobe.layers._attributes.facts
attributes:
  check_mode:
    details: In check mode no container is started; the record is C(NOT_RUN) with the reason C(check mode).
options:
  runtime:
    description:
      - The container runtime. V(auto) takes the runtime the node's workloads use, and says why in one sentence in
        C(evidence.engine.selected_because) - the CRI endpoint of the kubelet, found running first (C(kubelet),
        C(hyperkube kubelet), MicroK8s' C(kubelite), the kubelet inside k3s or RKE2), else from its unit, drop-ins and
        environment files, in the kubelet's precedence (C(--container-runtime-endpoint), else C(--config-dir) drop-ins,
        else the C(--config) file, else C(unix:///run/containerd/containerd.sock)), matched with the containerd or
        CRI-O process serving it by socket identity; else a running docker daemon at the endpoint the docker CLI
        really uses (C(DOCKER_HOST), else its current context; a context that is not a local unix socket is
        refused); else podman
        (L(docs/runtimes.md,https://github.com/gpuprobe/gpuprobe.layers/blob/main/docs/runtimes.md#which-runtime-a-nodes-pods-use-the-layouts)).
      - V(containerd) and V(crio) are reached through the CRI at O(runtime_endpoint) (else the kubelet's endpoint, else
        the engine's default socket). A runtime that cannot be used (docker with CDI off, no CRI adapter or
        nothing on the socket) gives a C(NOT_RUN) record with the reason.
      - V(containerd) and V(crio) are run as the kubelet runs a Pod, with a pod sandbox (host network, the runtime's
        configured sandbox image) and a container in it whose CDI devices are given both as the CRI C(CDIDevices)
        field and as C(cdi.k8s.io/) annotations, so the runtime's own CDI code injects them. This needs the Python
        libraries grpcio and protobuf on the node and the CRI API descriptor (O(cri_descriptor)); without them the
        record is C(NOT_RUN) with the reason.
    type: str
    choices: [auto, podman, docker, containerd, crio]
    default: auto
  runtime_endpoint:
    description:
      - The runtime's socket. For V(containerd) and V(crio) the CRI endpoint (C(unix:///path.sock)); unset,
        C(CONTAINER_RUNTIME_ENDPOINT), else the kubelet's endpoint, else C(unix:///run/containerd/containerd.sock) or
        C(unix:///var/run/crio/crio.sock). With V(auto) the engine behind it is used.
      - For V(docker) the daemon's socket (as C(DOCKER_HOST)); unset, the endpoint the docker CLI uses (C(DOCKER_HOST),
        else C(DOCKER_CONTEXT), else the current context of its C(config.json), else docker's default), pinned as
        C(DOCKER_HOST) for every docker call of the run.
      - Not used by podman (give C(CONTAINER_HOST) or C(CONTAINERS_CONF) in the task's environment).
    type: str
  cri_descriptor:
    description:
      - The CRI API descriptor set (protobuf C(FileDescriptorSet) of C(runtime.v1)) on the node, for V(containerd) and
        V(crio). C(scripts/engines.sh stubs) builds it on the controller from the CRI's C(api.proto); the
        C(gpuprobe.layers.verify) role takes it on the controller (C(verify_cri_descriptor)). Unset, C(GPUPROBE_CRI_DESCRIPTOR).
    type: path
  image:
    description:
      - The probe image. It needs C(python3) with its standard library only; CUDA must come from the host
        through CDI, never from the image. Build one with C(scripts/build-probe-image.sh) or the role's Containerfile.
    type: str
    required: true
  pull:
    description: Whether the runtime may pull the image.
    type: str
    choices: [never, missing]
    default: never
  cdi_devices:
    description: Fully qualified CDI device names to request, for example C(gpuprobe.local/gpu-<run id>=0).
    type: list
    elements: str
    default: []
  expected_edits:
    description:
      - The merged container edits the cdi layer expects for these devices (its C(evidence.expected_edits)),
        with the keys C(env), C(deviceNodes), C(mounts), C(hooks) and C(additionalGids).
    type: dict
    default: {}
  run_id:
    description: The run id (letters, digits, C(_ . -)); labels the container and names it.
    type: str
    required: true
  timeout:
    description:
      - Seconds after which the container is killed and removed (FAIL C(runtime.start.timeout) or C(compute.timeout)).
      - Also the limit of each question to the runtime while it is detected here (C(podman info), C(docker info), the
        CRI calls), when no engine selected by the inspect stage is given.
      - Must be > 0; other values fail the task (they are the caller's error, not the node's).
    type: int
    default: 60
  owner:
    description:
      - The process that owns this run (C(host), C(pid), C(started)), recorded in the label C(gpuprobe.owner).
      - Default the C(ansible-playbook) process among the module's ancestors (local connection), else this module's
        own process.
    type: dict
  spec_dir:
    description:
      - Where this run's self-built spec lives (the O(gpuprobe.layers.cdi_spec#module:spec_dir) it was written to).
      - >-
        When the module is interrupted (SIGINT, SIGTERM, SIGHUP from Ctrl-C of C(ansible-playbook) or a cancelled CI
        job), it removes that run's spec there (only C(gpuprobe-<run_id>.yaml) of this run's own kind) after its
        container, since the play's own cleanup never runs after an interrupt.
      - Unset, an interrupt leaves the spec to M(gpuprobe.layers.probe_cleanup) (its owner is gone).
    type: path
  compute:
    description:
      - Also run the compute steps in the same container, on every GPU the container sees (each listed by
        UUID, each with its own context, kernel and check of every element).
      - Only a GPU or MIG instance the O(host) record's NVML reported idle is touched (C(idle_uuids)); any other
        device CUDA lists (busy, busy state unknown, or a UUID NVML never listed) is listed but never touched;
        without host NVML evidence of compute processes the compute steps do not run at all
        (C(cannot tell whether the GPU is in use)) unless O(allow_busy_gpu=true).
    type: bool
    default: false
  isolation:
    description:
      - With O(compute=true), V(shared) runs the compute steps in the one container that gets every device.
      - V(per_device) runs the runtime checks in that container without compute, then one compute container
        per requested CDI device, so that each sees exactly its GPU; C(gpuprobe_probe.containers) holds their
        probes, in the order of O(cdi_devices). With one device both are the same.
    type: str
    choices: [shared, per_device]
    default: shared
  allow_busy_gpu:
    description: Run the compute steps even on GPUs with compute processes, or when their busy state is unknown.
    type: bool
    default: false
  host:
    description: The host layer record (C(gpuprobe_host)), read for each GPU's running compute processes.
    type: dict
  user:
    description: Run the probe as this C(uid:gid) inside the container.
    type: str
notes:
  - Needs root or a runtime that may create device nodes; tested with podman 4.3.1 and runc 1.1.5, containerd 1.7.24
    over the CRI and docker 26.1.5 (Debian 13's, with runc 1.1.5).
seealso:
  - module: gpuprobe.layers.compute_facts
  - module: gpuprobe.layers.probe_cleanup
"""

EXAMPLES = r"""
- name: What did the container really get?
  gpuprobe.layers.runtime_facts:
    image: localhost/gpuprobe-probe:local
    run_id: "{{ run_id }}"
    cdi_devices: ["{{ spec.devices[0] }}"]
    expected_edits: "{{ ansible_facts.gpuprobe_cdi.evidence.expected_edits }}"
    host: "{{ ansible_facts.gpuprobe_host }}"
    compute: true
"""

RETURN = r"""
ansible_facts:
  description: The runtime layer's record and the probe's raw output, as the facts C(gpuprobe_runtime) and C(gpuprobe_probe).
  returned: always
  type: dict
  contains:
    gpuprobe_runtime:
      description:
        - The runtime layer record (L(docs/contract.md,https://github.com/gpuprobe/gpuprobe.layers/blob/main/docs/contract.md)).
        - C(evidence) holds C(requested_devices), C(expected_edits), C(engine) (runtime name, path, version,
          OCI runtime; C(version) is C(unknown) when the runtime's answer is not a version), C(owner) (host, pid,
          started), C(container) (name, argv, rc, wall_ms, timed_out, started, stderr, cleanup, stdout_bytes,
          stderr_bytes, output_truncated) and C(observed) (nodes, relevant mounts and env, groups, libraries, ldconfig).
      returned: always
      type: dict
      sample:
        layer: runtime
        status: FAIL
        reason: "runtime.device_node.open: /dev/nvidia0 (observed EPERM ..., expected open(O_RDWR) OK)"
        signature: runtime.device_node.open.EPERM
        points_to: runtime
    gpuprobe_probe:
      description:
        - The raw output of the in-container probe (start, inventory, steps, nvml, facts, complete, hung_step),
          with C(executed), C(cdi_devices), C(runtime), C(container_name); null when the container never ran.
        - C(facts.devices) lists every GPU the probe saw (ordinal, name, uuid, listed, skipped); per-device
          steps carry C(device) (the ordinal) and C(uuid).
        - With O(isolation=per_device), C(containers) holds one such probe per requested device.
      returned: always
      type: dict
"""

from ansible_collections.gpuprobe.layers.plugins.module_utils._common.module import run_layer_module
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.signals import Interrupted
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.vocab import RUNTIMES
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime.cleanup import remove_own_spec
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime.layer import record


def runtime_facts(p, check_mode):
    try:
        runtime, probe = record(p, check_mode=check_mode)
    except Interrupted as exc:
        return {"failed": True, "msg": "%s: the probe container was removed; %s" % (exc, remove_own_spec(p))}
    return {"ansible_facts": {"gpuprobe_runtime": runtime, "gpuprobe_probe": probe}}


def main():
    run_layer_module(dict(
        runtime=dict(type="str", default="auto", choices=list(RUNTIMES)),
        runtime_endpoint=dict(type="str"),
        cri_descriptor=dict(type="path"),
        image=dict(type="str", required=True),
        pull=dict(type="str", default="never", choices=["never", "missing"]),
        cdi_devices=dict(type="list", elements="str", default=[]),
        expected_edits=dict(type="dict", default={}),
        run_id=dict(type="str", required=True),
        timeout=dict(type="int", default=60),
        compute=dict(type="bool", default=False),
        isolation=dict(type="str", default="shared", choices=["shared", "per_device"]),
        allow_busy_gpu=dict(type="bool", default=False),
        host=dict(type="dict"),
        user=dict(type="str"),
        owner=dict(type="dict"),
        spec_dir=dict(type="path"),
    ), runtime_facts)


if __name__ == "__main__":
    main()
