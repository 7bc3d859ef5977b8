# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE (runtime layer): the runtime layer's checks and failure signatures, its labels and names, and how a
runtime's start error is classified."""

from __future__ import annotations

import os
import re

from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime.select import VERSION_RE, error_line  # noqa: F401 pylint: disable=unused-import


LABEL = "gpuprobe.run"


OWNER_LABEL = "gpuprobe.owner"      # host:pid:started of the run's owner (_owner.format_owner)


CREATED_LABEL = "gpuprobe.created"  # epoch seconds


# The probe's path in the container is drawn per run: a spec that mounts a file at a fixed path cannot take its
# place (it would run under -I -S with the run's token). No spec edit is accounted for there (_cdi.trust: the driver's
# files only where NVIDIA's generators put them), so the cdi layer refuses such a device before the container starts.
PROBE_CONTAINER_DIR_RE = re.compile(r"^/gpuprobe-[0-9a-f]{16}$")


def probe_in_container():
    """A fresh container path for the probe script, /gpuprobe-<16 random hex>/probe.py (unpredictable from a spec)."""
    return "/gpuprobe-%s/probe.py" % os.urandom(8).hex()


# CDI deviceNode types the CDI library accepts ("" = the host node's type) -> the file type the probe reports:
# 'u' is an unbuffered character device, which is a character device ('c') for mknod and stat
NODE_TYPES = {"c": "c", "u": "c", "b": "b", "p": "fifo"}


# env keys of the container worth keeping in the record besides the expected ones
ENV_KEEP = re.compile(r"^(NVIDIA_|CUDA_|LD_LIBRARY_PATH$|LD_PRELOAD$|PATH$)")


CHECKS = {
    "runtime.engine.available": {
        "title": "a supported container runtime with CDI support is installed; its version is recorded",
        "fail": "the runtime is missing, or (docker) its CDI support is not enabled",
        "next": "install podman >= 4.1, or enable CDI in docker (daemon.json features.cdi)",
    },
    "runtime.engine.handler": {
        "title": "the runtime handler the probe ran with (the option, the GPU Pods' RuntimeClass, else the engine's "
                 "default), its OCI runtime binary and who injects the CDI devices, from the running engine's configuration",
        "fail": "(recorded, PASS: what the probe went through; a handler the engine does not know fails the start: "
                "runtime.start.unknown_handler)",
        "next": "crictl info (containerd's live runtimes), the RuntimeClasses (kubectl get runtimeclasses)",
    },
    "runtime.engine.version": {
        "title": "the runtime's version string is understood (recorded; a string that is not a version is 'unknown')",
        "fail": "NOT_RUN: the runtime answered with something that is not a version; nothing is inferred from it",
        "next": "the runtime's own 'info'/'version' output",
    },
    "runtime.container.started": {
        "title": "the probe container started with the requested CDI devices and the probe ran inside it",
        "fail": "the runtime refused or failed to start the container (the signature classifies its message)",
        "next": "the runtime's own message in observed; the signature's row below",
    },
    "runtime.probe.inventory": {
        "title": "the in-container probe reported what it saw (device nodes, mounts, env)",
        "fail": "the container ran but the probe printed no inventory (image without python3? killed?)",
        "next": "the container's stderr in evidence.container.stderr",
    },
    "runtime.probe.unchanged": {
        "title": "the probe file the collection wrote on the host (its sha256) and its private directory (its entries) are "
                 "as written once the container is gone: what ran in the container is the probe",
        "fail": "the probe file or its directory changed while the container ran (a hook run on the host, such as a "
                "spec's createRuntime or createContainer hook, rewrote it): the verdict is FAILED_AT_CDI "
                "cdi.inject.probe_integrity",
        "next": "the spec's hooks (cdi.host.hook) and the runtime's own hooks directory; evidence.probe_file",
    },
    "runtime.device_node.present": {
        "title": "each expected device node exists inside the container (its path cleaned and the container's symlinks "
                 "resolved, as runc creates it)",
        "fail": "the runtime did not create a device node the CDI edits ask for",
        "next": "the runtime's CDI support and the spec's deviceNodes",
    },
    "runtime.device_node.type": {
        "title": "each expected device node has the expected type and major:minor inside the container (every type the "
                 "CDI library accepts: c and u are character devices, b block; p, a FIFO, is not compared: NOT_RUN)",
        "fail": "the node exists but is not the device the spec names",
        "next": "the spec's type/major/minor vs the host node (cdi layer); stale nodes in the image",
    },
    "runtime.device_node.mode": {
        "title": "the file mode the spec asks for (fileMode) was applied to the node",
        "fail": "WARN: the runtime did not apply fileMode (the mode inside differs from the spec's)",
        "next": "do not rely on fileMode for access control with this runtime",
    },
    "runtime.device_node.open": {
        "title": "open(O_RDWR) succeeds on each expected node inside the container",
        "fail": "EPERM = the device cgroup denies it (permissions); EACCES = the file mode/owner denies it; "
                "ENXIO/ENODEV = no driver behind the major:minor. EACCES caused by the spec's own fileMode, applied "
                "as asked, is a WARN: the runtime did what the spec said, and CUDA may still work (the compute layer decides)",
        "next": "EPERM: the deviceNodes' permissions (need rw); EACCES: fileMode/uid/gid vs the container user",
    },
    "runtime.mount.present": {
        "title": "each expected mount's containerPath is a mount point in the container (/proc/self/mountinfo), at the place "
                 "the runtime puts it: the path cleaned and the container's own symlinks resolved, as runc does (a spec's "
                 "/lib64/x is /usr/lib64/x on a merged-/usr image)",
        "fail": "the runtime did not apply a mount the CDI edits ask for",
        "next": "the spec's mounts; the runtime's CDI support",
    },
    "runtime.mount.source": {
        "title": "the file mounted at containerPath is the hostPath's file (its resolved name), and read-only when asked",
        "fail": "something else is mounted there, or the options differ",
        "next": "compare mountinfo root/options in evidence with the spec",
    },
    "runtime.env.value": {
        "title": "each expected env entry (K=V) is set to that value in the container",
        "fail": "the variable is missing or has another value (image ENV or --env overriding it?)",
        "next": "the image's ENV and the runtime's env handling",
    },
    "runtime.group.additional": {
        "title": "each expected additionalGid is among the container process's groups",
        "fail": "the runtime did not add the group",
        "next": "the runtime's support of CDI additionalGids (CDI spec >= 0.7)",
    },
    "runtime.loader.libcuda": {
        "title": "the file the dynamic loader really resolves for libcuda.so.1 in the container (the probe's mapped file "
                 "after dlopen, with LD_LIBRARY_PATH and the ld.so cache as evidence) is the CDI-mounted driver library",
        "fail": "a CUDA toolkit stub, or a file other than the mounted driver libcuda (another version, the image's own), "
                "is resolved first; or the loader does not find the mounted file at all",
        "next": "the paths in observed: remove the stub/other directory from LD_LIBRARY_PATH (spec env, image ENV) or "
                "mount the driver's libcuda where the loader looks",
    },
    "runtime.edits.compared": {
        "title": "at least one CDI edit (device node, mount, env, group) was compared with the container (a runtime "
                 "PASS needs one)",
        "fail": "WARN: no expected edit was given, so the layer proves only that a container started",
        "next": "pass the cdi layer's evidence.expected_edits to runtime_facts (expected_edits)",
    },
    "runtime.hook.effect": {
        "title": "CDI hooks: recorded, not observable from inside the container (NOT_RUN)",
        "fail": "(never FAILs)",
        "next": "the hook's own logs",
    },
}


SIGNATURES = {
    "runtime.start.cdi_unresolvable": {
        "points_to": "cdi",
        "meaning": "the runtime did not find the requested CDI device (no/invalid spec, wrong kind or name)",
        "next": "the cdi layer record: spec dirs, parse errors, the qualified name",
    },
    "runtime.start.hostpath_missing": {
        "points_to": "cdi",
        "meaning": "the container never started: a hostPath of the spec does not exist (stat failed)",
        "next": "the cdi layer's hostPath checks; the path in the runtime's message",
    },
    "runtime.start.permission_denied": {
        "points_to": "runtime",
        "meaning": "the runtime was refused an operation (permission denied) while creating the container",
        "next": "rootless vs root, SELinux/AppArmor, the path in the message",
    },
    "runtime.start.oci_error": {
        "points_to": "runtime",
        "meaning": "the OCI runtime (runc/crun) failed to create or start the container",
        "next": "the runtime's message; the OCI runtime's version and cgroup setup",
    },
    "runtime.start.image_missing": {
        "points_to": "runtime",
        "meaning": "the probe image is not present (pull: never) or could not be pulled",
        "next": "bring the image to the node (docs/probe-image.md): build it there (scripts/build-probe-image.sh), pull it from "
                "your registry pinned by digest (verify_probe_image: REGISTRY/gpuprobe-probe@sha256:...), or podman load a saved "
                "tar (scripts/probe-image.sh save/load)",
    },
    "runtime.start.timeout": {
        "points_to": "runtime",
        "meaning": "the container did not report within the timeout; it was killed and removed",
        "next": "the runtime's health (podman info), storage locks, a hung hook",
    },
    "runtime.start.unknown_handler": {
        "points_to": "runtime",
        "meaning": "the engine has no runtime handler of the name the probe ran with (the option, or the GPU Pods' "
                   "RuntimeClass): RunPodSandbox refused it",
        "next": "the engine's words in the check; crictl info (containerd: containerd.runtimes) or crio status config; "
                "verify_probe_runtime_handler, the RuntimeClass's handler",
    },
    "runtime.start.failed": {
        "points_to": "runtime",
        "meaning": "the container did not start, for a reason not classified above",
        "next": "the runtime's message in the check's observed",
    },
    "runtime.device_node.open.EPERM": {
        "points_to": "runtime",
        "meaning": "open() refused by the device cgroup: the spec grants less than rw (e.g. permissions: r)",
        "next": "deviceNodes[].permissions in the spec (rw or rwm); CUDA then fails cuInit with NO_DEVICE (100)",
    },
    "runtime.device_node.open.EACCES": {
        "points_to": "runtime",
        "meaning": "open() refused by the node's file mode/owner for the container's user",
        "next": "deviceNodes[].fileMode/uid/gid vs the container user",
    },
    "runtime.device_node.open.ENXIO": {
        "points_to": "host",
        "meaning": "no driver answers for this major:minor (module not loaded, or a wrong minor)",
        "next": "the host layer: kernel module and /dev nodes",
    },
    "runtime.device_node.open.ENODEV": {
        "points_to": "host",
        "meaning": "the device is gone (GPU fallen off the bus, driver unbound)",
        "next": "the host layer and the kernel log (Xid)",
    },
    "runtime.loader.libcuda": {
        "points_to": "cdi when the spec's env/mounts put the file first, else image",
        "meaning": "the loader in the container resolves libcuda.so.1 to a stub or to another file than the CDI-mounted "
                   "driver library (CUDA then fails with CUDA_ERROR_STUB_LIBRARY or a version mismatch)",
        "next": "runtime.loader.libcuda's observed paths; the spec's LD_LIBRARY_PATH env and libcuda mounts",
    },
    "runtime.probe.unchanged": {
        "points_to": "cdi",
        "meaning": "the probe file changed on the host while its container ran: what ran is not shown to be the probe "
                   "(the verdict: FAILED_AT_CDI cdi.inject.probe_integrity)",
        "next": "the spec's hooks and the runtime's own hooks directory; evidence.probe_file",
    },
    "runtime.device_node.open.other": {
        "points_to": "runtime",
        "meaning": "open() failed with another errno (named in the check)",
        "next": "the errno in the check's observed",
    },
}


# Runtime messages -> start signature, first match wins (order matters: runc appends a misleading
# "OCI runtime attempted to invoke a command that was not found" to stat failures).
START_PATTERNS = (
    # containerd's RunPodSandbox for a handler it does not have (pkg/cri/server: "no runtime for %q is configured"),
    # CRI-O's ("failed to find runtime handler ... from runtime list")
    ("runtime.start.unknown_handler", re.compile(r"no runtime for \".*\" is configured|failed to find runtime handler", re.I)),
    ("runtime.start.cdi_unresolvable", re.compile(r"unresolvable CDI devices|CDI device.*not found|unknown CDI device|"
                                                  r"could not resolve CDI|CDI.*not resolv", re.I)),
    ("runtime.start.hostpath_missing", re.compile(r"failed to stat CDI host device|stat [^:]+: no such file or directory|"
                                                  r"error mounting .*no such file or directory|"
                                                  r"no such file or directory.*(mount|device)", re.I)),
    ("runtime.start.image_missing", re.compile(r"image not known|image not found|no such image|manifest unknown|"
                                               r"initializing source docker://|pull access denied|"
                                               r"unable to find image|"
                                               # containerd's CRI PullImage (pull: missing, the image nowhere to be had)
                                               r"failed to pull and unpack image|failed to resolve reference", re.I)),
    ("runtime.start.permission_denied", re.compile(r"permission denied|operation not permitted|EACCES|EPERM", re.I)),
    ("runtime.start.oci_error", re.compile(r"OCI runtime|runc create failed|crun:|runc:|container init|"
                                           r"executable file not found", re.I)),
)


def classify_start_error(text, timed_out=False):
    """Signature of a container that did not start, from the runtime's message."""
    if timed_out:
        return "runtime.start.timeout"
    for signature, pattern in START_PATTERNS:
        if pattern.search(text or ""):
            return signature
    return "runtime.start.failed"


def open_signature(errno_name):
    sig = "runtime.device_node.open.%s" % errno_name
    return sig if sig in SIGNATURES else "runtime.device_node.open.other"
