#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: cdi_facts
short_description: The cdi layer of GPU-in-container readiness (CDI specs, resolution, host objects)
version_added: 1.0.0
description:
  - Loads every Container Device Interface (CDI) spec file of the spec directories strictly, resolves the
    requested devices the way the reference Go library (container-device-interface C(pkg/cdi)) does, and
    checks every device node, mount and hook of the merged edits on the host. Returns the cdi layer record
    (L(docs/contract.md,https://github.com/gpuprobe/gpuprobe.layers/blob/main/docs/contract.md)) as the fact C(gpuprobe_cdi).
  - "Reading: every spec, JSON and YAML alike, is read as the library reads it (sigs.k8s.io/yaml on go-yaml v2,
    then encoding/json): go-yaml v2 scalars (C(1:30) and C(2001-12-14) stay text, C(name: 1.0) is device C(1),
    C(y)/C(n) are booleans), the first YAML document only, JSON C(\\/) escapes rejected; a spec that would make
    the library panic is a FAIL (C(cdi.spec.library_panic));
    L(docs/cdi-loader.md,https://github.com/gpuprobe/gpuprobe.layers/blob/main/docs/cdi-loader.md) gives each rule and its
    source."
  - "Reading is bounded: each spec file is opened non-blocking and judged as opened (a regular file only, never one on
    procfs, sysfs, devtmpfs or another kernel pseudo-filesystem, whatever link led there), read up to O(max_spec_size)
    bytes within 5 s; at most O(max_spec_files) files per directory; the whole reading within O(timeout) seconds."
  - "Loading: only C(*.json) and C(*.yaml) directly in each directory; unknown fields, duplicate keys and wrong
    types are errors; C(cdiVersion) must be known (0.1.0 to 1.1.0) and not lower than the minimum the fields
    used require (mounts[].type 0.4.0; hostPath on device nodes or a device name starting with a digit 0.5.0;
    annotations or a dot in the class 0.6.0; intelRdt or additionalGids 0.7.0; netDevices, intelRdt.schemata
    or enableMonitoring 1.1.0); kind, device names, env, device node types, cgroup permissions, hooks,
    mounts and annotations are validated. Each error is reported against its file."
  - "Resolution: a later spec directory has a higher priority and overrides; a device defined twice at the
    same priority is dropped and reported as a conflict against both files. The merged container edits of
    the requested devices (C(evidence.expected_edits)) are what the runtime layer compares the container with."
  - "Host checks: each device node exists and is a char/block device with the declared and the host layer's
    major:minor; every device node the library visits at injection (also one a later node with the same path
    replaces) passes its fillMissingInfo (host node stat, a declared type without a major equal to the host's;
    C(cdi.inject.device_node), with the library's words); each bind mount's hostPath exists; a driver library named after another driver version than
    the running one is a stale spec (FAIL); hooks exist, are executable and root-owned. A file mounted at a library
    name whose ELF SONAME is another library is a FAIL when either is a driver library (C(cdi.host.library_soname)), a
    driver library that is not the driver root's file of the running driver a WARN (C(cdi.host.driver_library)). For
    NVIDIA specs a missing C(/dev/nvidiactl), C(/dev/nvidia-uvm), libnvidia-ptxjitcompiler mount, read or write
    permission, a library the probe loads on a noexec mount or where no loader looks is a WARN naming the
    consequence observed on a real GPU."
  - "Security audit: spec files or directories writable by anyone but root, mounts of sensitive host paths
    (/, /etc, /root, runtime sockets, /proc or /sys read-write) and hooks writable by non-root are FAILs where the
    requested devices use them (the spec files that provide them, the directories where a spec could replace or
    override them, the mounts and hooks of their merged edits); elsewhere (a NIC spec, a foreign spec) a WARN naming
    the file."
  - "Invalid spec files are judged as the runtime's CDI library judges them (it drops the file and goes on): a FAIL
    where the file is why a requested device does not resolve, else a WARN naming it; a file that would make the
    library panic FAILs whatever is requested."
  - When no spec provides a requested kind the layer FAILs (C(no CDI spec provides nvidia.com/gpu)); it never
    PASSes without a spec. Parsing a spec proves nothing about the GPU; a spec on a node without the GPU FAILs
    because its device nodes are absent. Check ids are listed in L(docs/checks.md,https://github.com/gpuprobe/gpuprobe.layers/blob/main/docs/checks.md).
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpuprobe.layers._attributes.facts
attributes:
  check_mode:
    details: Only reads the spec files and the node; the same facts are returned in check mode.
options:
  spec_dirs:
    description:
      - CDI spec directories, lowest priority first (a later directory overrides an earlier one).
    type: list
    elements: path
    default: [/etc/cdi, /var/run/cdi]
  discover_runtime_dirs:
    description:
      - Also read C(cdi_spec_dirs) from the containerd, CRI-O and podman (containers.conf, C(CONTAINERS_CONF))
        configuration files that exist, and append the directories not already listed.
    type: bool
    default: true
  devices:
    description:
      - Requested devices as qualified names C(vendor/class=name). C(vendor/class=all) names the device
        C(all) when a spec defines one; otherwise it is expanded to every device of the kind (reported as a WARN,
        because a runtime would refuse it).
      - When empty, every device of O(kinds) is requested.
    type: list
    elements: str
    default: []
  kinds:
    description:
      - Device kinds (C(vendor/class)) whose devices are requested when O(devices) is empty.
    type: list
    elements: str
    default: [nvidia.com/gpu]
  host:
    description:
      - The host layer record (C(ansible_facts.gpuprobe_host) from M(gpuprobe.layers.host_facts)). When given,
        each device node's major:minor is compared with what the host layer saw, and the running driver
        version is taken from its NVML reading; otherwise C(/proc/driver/nvidia/version) is read.
    type: dict
  root:
    description:
      - Directory under which the host's paths (spec directories, device nodes, mount sources, hooks, runtime
        configuration) are looked up. Anything other than C(/) is for a host filesystem mounted elsewhere.
    type: path
    default: /
  max_spec_size:
    description:
      - Spec files larger than this many bytes are not read and are reported as errors.
    type: int
    default: 1048576
  max_spec_files:
    description:
      - At most this many spec files are read per spec directory (in name order, the order the runtime reads them).
        A directory with more is reported (C(cdi.discovery.spec_file_count), WARN) and the files past the limit are
        not checked; a requested device not found in the files read is then NOT_RUN, not a FAIL.
    type: int
    default: 1024
  timeout:
    description:
      - The layer's own limit, in seconds, for reading the spec directories, enforced on the node (each file's read
        is also limited to 5 s). Files left unread when it is spent are reported (C(cdi.discovery.time_limit), FAIL
        with C(timeout)). V(0) reads nothing.
    type: int
    default: 60
  runtime:
    description:
      - The container runtime that will read the specs (the one the runtime layer uses); the spec versions it can
        read decide C(cdi.runtime.spec_version). V(auto) judges for the first of podman, docker, containerd, CRI-O
        that the host record lists.
    type: str
    choices: [auto, podman, docker, containerd, crio]
    default: auto
requirements:
  - PyYAML on the managed node (without it every spec file is reported unreadable).
seealso:
  - module: gpuprobe.layers.host_facts
  - module: gpuprobe.layers.cdi_spec
"""

EXAMPLES = r"""
- name: Read the host layer
  gpuprobe.layers.host_facts:

- name: Read the cdi layer for every nvidia.com/gpu device, comparing with the host layer
  gpuprobe.layers.cdi_facts:
    host: "{{ ansible_facts.gpuprobe_host }}"

- name: Read the cdi layer for one device from a custom spec directory
  gpuprobe.layers.cdi_facts:
    spec_dirs: [/var/run/cdi]
    discover_runtime_dirs: false
    devices: [nvidia.com/gpu=0]

- name: Show what the runtime layer should find in the container
  ansible.builtin.debug:
    var: ansible_facts.gpuprobe_cdi.evidence.expected_edits
"""

RETURN = r"""
ansible_facts:
  description: The cdi layer's record, as the fact C(gpuprobe_cdi).
  returned: always
  type: dict
  contains:
    gpuprobe_cdi:
      description:
        - The cdi layer record (L(docs/contract.md,https://github.com/gpuprobe/gpuprobe.layers/blob/main/docs/contract.md)).
        - C(evidence.requested_devices) lists the qualified names resolved; C(evidence.expected_edits) holds
          their merged container edits in the order the reference library applies them, C(env) (K=V),
          C(deviceNodes) (path, hostPath, type, major, minor (filled from the host node when the spec omits
          them; null when the node is absent), permissions (the effective cgroup access, C(rwm) when the spec
          gives none), fileMode, uid, gid), C(mounts) (hostPath, containerPath, type, options), C(hooks)
          (hookName, path, args, env, timeout) and C(additionalGids).
        - C(evidence.files) has one entry per spec file (path, ok, error, errors, kind, cdiVersion, min_version,
          devices, symlink, mode, uid, gid, size, sha256, priority, dir, conflicts); C(evidence.spec_dirs),
          C(evidence.runtime_spec_dirs), C(evidence.all_devices), C(evidence.conflicts), C(evidence.overrides),
          C(evidence.device_sources), C(evidence.driver_version) and C(evidence.spec_digest) (sha256 over the
          files that provide the requested devices) complete it.
        - C(evidence.cgroup_rules) lists the device cgroup rules the library leaves in the OCI spec (type, major,
          minor, access, path), one per visited b/c node, also one replaced later; a node's C(permissions) is the
          union of the rules for its number. C(evidence.dra_claims) lists NVIDIA DRA driver per-claim specs (path,
          kind, driver, claim_uid, ok, error, devices with their claim_uid and device). C(evidence.unread_files)
          counts per directory the spec files not read (past O(max_spec_files) or O(timeout)).
        - C(versions.cdi_spec) is the cdiVersion of the files used; C(versions.driver) the running driver version
          the library names were compared with.
      returned: always
      type: dict
      sample:
        layer: cdi
        status: FAIL
        reason: "cdi.resolve.kind: nvidia.com/gpu (observed no CDI spec provides nvidia.com/gpu, expected a valid spec provides it)"
        checks:
          - id: cdi.resolve.kind
            status: FAIL
            subject: nvidia.com/gpu
            expected: a valid spec provides it
            observed: no CDI spec provides nvidia.com/gpu
            hint: generate the vendor's spec (nvidia-ctk cdi generate) into a spec dir the runtime reads
        evidence:
          requested_devices: []
          expected_edits: {env: [], deviceNodes: [], mounts: [], hooks: [], additionalGids: []}
          spec_digest: null
        not_proven: ["that the node has a working GPU", "that the container runtime applies these edits"]
        versions: {cdi_spec: null}
        started_at: "2026-12-02T18:30:00.000000Z"
        duration_ms: 3.1
        signature: cdi.resolve.kind
        points_to: cdi
"""

from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi.layer import record
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.module import run_layer_module
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.options import check_record, check_root
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.vocab import RUNTIMES, SPEC_DIRS


def cdi_facts(p, check_mode):
    check_root(p["root"])
    check_record(p["host"], "host", "host")
    if p["max_spec_size"] <= 0:
        raise ValueError("max_spec_size must be > 0 bytes (got %d)" % p["max_spec_size"])
    if p["max_spec_files"] <= 0:
        raise ValueError("max_spec_files must be > 0 (got %d)" % p["max_spec_files"])
    if p["timeout"] < 0:
        raise ValueError("timeout must be >= 0 seconds (got %d)" % p["timeout"])
    cdi = record(spec_dirs=p["spec_dirs"], discover_runtime_dirs_=p["discover_runtime_dirs"], devices=p["devices"],
                 kinds=p["kinds"], host=p["host"], root=p["root"], max_spec_size=p["max_spec_size"],
                 runtime=p["runtime"], max_spec_files=p["max_spec_files"], timeout=p["timeout"])
    return {"ansible_facts": {"gpuprobe_cdi": cdi}}


def main():
    run_layer_module(dict(
        spec_dirs=dict(type="list", elements="path", default=list(SPEC_DIRS)),
        discover_runtime_dirs=dict(type="bool", default=True),
        devices=dict(type="list", elements="str", default=[]),
        kinds=dict(type="list", elements="str", default=["nvidia.com/gpu"]),
        host=dict(type="dict"),
        root=dict(type="path", default="/"),
        max_spec_size=dict(type="int", default=1048576),
        max_spec_files=dict(type="int", default=1024),
        timeout=dict(type="int", default=60),
        runtime=dict(type="str", default="auto", choices=list(RUNTIMES)),
    ), cdi_facts)


if __name__ == "__main__":
    main()
