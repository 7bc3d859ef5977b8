# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE (gpuprobe.layers cdi layer): NVIDIA consequence checks (what a valid spec still gets wrong on a GPU)."""

from __future__ import annotations

import posixpath
import re

from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import PASS, WARN
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi.catalogue import CONSEQUENCES
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi.libraries import files_given, loader_checks


def is_nvidia(edits):
    return any((n["path"] or "").startswith("/dev/nvidia") for n in edits["deviceNodes"])


_STUB = re.compile(r"/stubs?/libcuda\.so(\.1)?$")


def nvidia_checks(builder, edits, root="/"):
    """Consequence checks for NVIDIA specs: WARN (the spec is valid; the compute layer shows the failure)."""
    paths = [n["path"] for n in edits["deviceNodes"]]
    for check, node, key in (("cdi.nvidia.nvidiactl", "/dev/nvidiactl", "nvidiactl"), ("cdi.nvidia.uvm", "/dev/nvidia-uvm", "uvm")):
        present = node in paths
        builder.add(check, PASS if present else WARN, node, "in deviceNodes", "present" if present else "absent",
                    hint=None if present else "expected consequence: %s" % CONSEQUENCES[key])
    ptx = [m["hostPath"] for m in edits["mounts"] if "libnvidia-ptxjitcompiler" in (m["containerPath"] or "") + (m["hostPath"] or "")]
    ptx = ptx or [p for m in edits["mounts"] for p in files_given(m, root, "libnvidia-ptxjitcompiler")]  # in a mounted directory
    builder.add("cdi.nvidia.ptxjit", PASS if ptx else WARN, "libnvidia-ptxjitcompiler.so.1", "mounted",
                ptx[0] if ptx else "no mount", hint=None if ptx else "expected consequence: %s" % CONSEQUENCES["ptxjit"])
    # the driver opens its nodes O_RDWR: the device cgroup must allow both r and w (no permissions field: rwm)
    for check, access in (("cdi.nvidia.cgroup_write", "w"), ("cdi.nvidia.cgroup_read", "r")):
        lacking = [n["path"] for n in edits["deviceNodes"]
                   if n["path"].startswith("/dev/nvidia") and access not in (n["permissions"] or "")]
        builder.add(check, WARN if lacking else PASS, ", ".join(lacking) or "/dev/nvidia*", "cgroup access includes %s" % access,
                    "without %s: %s" % (access, ", ".join(lacking)) if lacking else "rw",
                    hint="expected consequence: %s" % CONSEQUENCES["cgroup"] if lacking else None)
    cuda = [m for m in edits["mounts"] if posixpath.basename(m["containerPath"] or "").startswith("libcuda.so")]
    held = [p for m in edits["mounts"] if m not in cuda for p in files_given(m, root, "libcuda")]
    if not cuda and held:  # a directory the spec mounts holds libcuda: mounted, by the directory
        builder.add("cdi.nvidia.libcuda", PASS, held[0], "mounted from the driver", "in a directory the spec mounts")
    elif not cuda:
        builder.add("cdi.nvidia.libcuda", WARN, "libcuda.so.1", "mounted from the driver", "no libcuda mount",
                    hint="the image must bring a libcuda matching the host driver, else cuInit cannot load")
    for m in cuda:
        stub = bool(_STUB.search(m["hostPath"] or ""))
        builder.add("cdi.nvidia.libcuda", WARN if stub else PASS, m["containerPath"], "the driver's libcuda",
                    ("CUDA toolkit stub " if stub else "") + (m["hostPath"] or ""),
                    hint="expected consequence: %s" % CONSEQUENCES["stub"] if stub else None)
    loader_checks(builder, edits, root)
