# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE (gpuprobe.layers cdi layer): the cdi layer's constants and its check catalogue (CHECKS; docs/checks.md is generated from it)."""

from __future__ import annotations

from ansible_collections.gpuprobe.layers.plugins.module_utils._common.vocab import HOOK_STAGES

DEFAULT_KINDS = ("nvidia.com/gpu",)
DEFAULT_MAX_SPEC_SIZE = 1024 * 1024
# At most this many spec files are read per spec dir (the record of 10,000 specs was 90,000 checks, 19 MB): a node
# has a handful of vendor specs and one per prepared DRA claim. The rest are reported (cdi.discovery.spec_file_count).
DEFAULT_MAX_SPEC_FILES = 1024
# The layer's own limit for reading the spec dirs, enforced on the node (each file also has bounded.DEFAULT_READ_TIMEOUT).
DEFAULT_LAYER_TIMEOUT = 60
MAX_ERRORS_PER_FILE = 50
MAX_NODES_PER_FILE = 200000

# specs-go/version.go: the released spec versions, oldest first. vEarliest (the floor of the minimum
# required version) is 0.3.0; 0.1.0 and 0.2.0 are still accepted as known versions.
KNOWN_VERSIONS = ("0.1.0", "0.2.0", "0.3.0", "0.4.0", "0.5.0", "0.6.0", "0.7.0", "0.8.0", "1.0.0", "1.1.0")
EARLIEST_VERSION = "0.3.0"
VALID_HOOK_NAMES = HOOK_STAGES
VALID_NODE_TYPES = ("", "b", "c", "u", "p")
NO_PERMISSIONS = "none"
ANNOTATIONS_MAX_BYTES = 256 * 1024  # Kubernetes TotalAnnotationSizeLimitB

CHECKS = {
    "cdi.discovery.spec_dirs": {
        "title": "at least one CDI spec directory exists (defaults /etc/cdi, /var/run/cdi, plus runtime-configured dirs)",
        "fail": "no CDI spec directory exists, so no runtime can resolve any CDI device",
        "next": "generate a spec (nvidia-ctk cdi generate --output=/var/run/cdi/nvidia.yaml) or fix spec_dirs",
    },
    "cdi.discovery.spec_dir_readable": {
        "title": "each existing spec directory can be listed",
        "fail": ("its specs were not checked; the library skips an unreadable dir silently (filepath.Walk's error for "
                 "the dir itself is ignored), so its devices do not exist for a runtime with the same rights"),
        "next": "check the directory's permissions (chmod 0755) and run the check with the rights of the runtime",
    },
    "cdi.discovery.runtime_config": {
        "title": "the CDI spec dirs configured for containerd, CRI-O or podman could be read",
        "fail": "a runtime configuration file exists but could not be read; its cdi_spec_dirs are unknown",
        "next": "check the file's permissions and syntax",
    },
    "cdi.discovery.spec_file_count": {
        "title": "each spec directory holds at most max_spec_files spec files (default 1024), all of them read",
        "fail": ("WARN: the files past the limit (in name order) were not read or checked; a requested device not found "
                 "in the files read is NOT_RUN, not a FAIL (the runtime reads every file)"),
        "next": "remove leftover specs (DRA claim specs of claims long gone, old generators' files) or raise max_spec_files",
    },
    "cdi.discovery.time_limit": {
        "title": "every spec file was read within the layer's own time limit (timeout, enforced on the node)",
        "fail": "timeout: reading the spec dirs took longer than the limit (a slow or hung filesystem); the files left were not checked",
        "next": "look for a spec dir on a network or FUSE filesystem, or a spec file whose read blocks; raise timeout",
    },
    "cdi.spec.parse": {
        "title": ("the spec file can be read (a regular file, not on procfs/sysfs/devtmpfs, within the size cap and the read "
                  "time limit, not a dangling link) and parses as YAML/JSON into a mapping"),
        "fail": "the runtime cannot load this file; devices it defines do not exist for the runtime",
        "next": "fix the file's syntax or regenerate it",
    },
    "cdi.spec.schema": {
        "title": "strict unmarshalling: no unknown fields, no duplicate keys, every field of the right type",
        "fail": "the reference library (yaml.UnmarshalStrict) rejects the whole file",
        "next": "remove the unknown field or fix its type; check the field against the spec version",
    },
    "cdi.spec.library_panic": {
        "title": ("no null entry in deviceNodes, mounts, hooks or netDevices and no one-character vendor or class where the "
                  "runtime's CDI library gets to them (it checks the cdiVersion first, from v0.5.4 the minimum version too; "
                  "a file it rejects there panics nothing, docs/cdi-loader.md)"),
        "fail": ("the runtime's CDI library panics while it loads the spec dirs (the runtime may crash): it dereferences the "
                 "nil entry in ContainerEdits.Validate, or slices the one-character name (v0.5.2-v0.5.4 ValidateVendorName/"
                 "ValidateClassName, v0.6.0-v1.1.0 validateVendorOrClassName)"),
        "next": "remove the empty list entry ('- ' or '- null') from the spec, or give the kind a longer vendor and class",
    },
    "cdi.spec.version": {
        "title": ("cdiVersion is a version the runtime's CDI library knows and, from library v0.5.4, not lower than the minimum the "
                  "fields used require (each spec is read as the library version of the runtime it is judged for, "
                  "docs/cdi-loader.md)"),
        "fail": "the runtime rejects the file (invalid version, or 'the spec version must be at least vX')",
        "next": "raise cdiVersion to the minimum required version shown, or regenerate the spec",
    },
    "cdi.spec.version_aliasing": {
        "title": "cdiVersion covers deviceNodes[].hostPath and mounts[].type of every device, not only of the last one",
        "fail": "WARN only: today's library accepts the file (its version check sees only the last device's edits), a fixed one rejects it",
        "next": "raise cdiVersion to the version named (0.5.0 for hostPath, 0.4.0 for mount type)",
    },
    "cdi.spec.kind": {
        "title": "kind is vendor/class with valid vendor and class names",
        "fail": "the runtime rejects the file: its devices cannot be named",
        "next": "fix kind to the form vendor.example/class",
    },
    "cdi.spec.devices": {
        "title": "at least one device; device names valid and unique; every device has non-empty container edits",
        "fail": "the runtime rejects the whole file",
        "next": "fix the device list",
    },
    "cdi.spec.edits": {
        "title": "container edits are valid: env KEY=VALUE, device node path/type/permissions, hook names and absolute paths, mounts, intelRdt, netDevices",
        "fail": "the runtime rejects the whole file",
        "next": "fix the edit named in the error",
    },
    "cdi.spec.annotations": {
        "title": ("spec and device annotations follow the Kubernetes annotation rules (checked by CDI library v1.0.0 and later; "
                  "v0.6.0-v0.8.1 never check them, v0.5.x has no annotations field: a schema error)"),
        "fail": "the runtime rejects the whole file",
        "next": "fix the annotation key or value",
    },
    "cdi.spec.symlink": {
        "title": "the spec file is a regular file, not a symbolic link",
        "fail": "the spec's content is controlled by the link target, outside the spec directory",
        "next": "replace the link with the file, or audit who can write the target",
    },
    "cdi.resolve.kind": {
        "title": "a valid spec provides each requested kind (vendor/class)",
        "fail": "no CDI spec provides the kind: a container asking for it cannot start",
        "next": "generate the vendor's spec (nvidia-ctk cdi generate) into a spec dir the runtime reads",
    },
    "cdi.resolve.device": {
        "title": "each requested qualified device name resolves to exactly one device",
        "fail": "the runtime reports 'unresolvable CDI devices' and the container does not start",
        "next": "list the devices with nvidia-ctk cdi list; request one of them",
    },
    "cdi.resolve.all_expanded": {
        "title": "vendor/class=all names a device defined as 'all' (else it was expanded here to every device of the kind)",
        "fail": "no device named 'all' exists: a runtime given vendor/class=all refuses it",
        "next": "request explicit device names, or regenerate the spec with an 'all' device",
    },
    "cdi.resolve.conflict": {
        "title": "no device is defined by two spec files of the same priority",
        "fail": "the device is dropped (from both files) and cannot be injected",
        "next": "remove one of the two files; keep one generator per kind",
    },
    "cdi.host.device_node": {
        "title": "each device node of the merged edits exists on the host and is a char/block device",
        "fail": "the runtime cannot inject the node (stat failed): e.g. a spec on a node without the GPU or driver",
        "next": "check the host layer (driver loaded? /dev/nvidia* created?), then regenerate the spec",
    },
    "cdi.inject.device_node": {
        "title": ("each device node the library's Apply visits (also one a later node replaces) passes fillMissingInfo: "
                  "the host node stats, and a declared type without a major equals the host node's"),
        "fail": "the runtime fails to create the container with the library's error (observed), e.g. 'failed to stat CDI host device' or 'host type mismatch'",
        "next": "fix or drop the node named; give type 'c' (not 'u') or a major; remove a duplicate node whose host path is missing",
    },
    "cdi.host.device_number": {
        "title": "a declared type/major:minor equals the host node's",
        "fail": "the container gets a node and cgroup rule for a different device than the host path",
        "next": "regenerate the spec: device numbers changed (driver reinstall, other GPU)",
    },
    "cdi.host.host_layer_match": {
        "title": "the node's major:minor equals what the host layer saw",
        "fail": "the device changed between the host and cdi checks, or the host layer saw another device",
        "next": "re-run both layers; compare the host layer's device_nodes evidence",
    },
    "cdi.host.mount_source": {
        "title": "each bind mount's hostPath exists on the host (and, mounted at a library name lib*.so*, is an ELF file)",
        "fail": "the runtime cannot bind-mount a missing source: the container fails to start; WARN: a directory or a "
                "file without an ELF header mounted as a library, which the loader will refuse",
        "next": "regenerate the spec against the installed driver",
    },
    "cdi.host.library_version": {
        "title": "a driver library whose file name carries a version carries the running driver's version",
        "fail": "stale spec: it points at a library of another driver (typically the one before an upgrade)",
        "next": "regenerate the spec after every driver upgrade (nvidia-ctk cdi generate)",
    },
    "cdi.host.hook": {
        "title": "each hook exists, is executable and owned by root",
        "fail": "the runtime cannot run the hook (container creation fails), or a non-root user owns code run as root",
        "next": "install the hook (e.g. nvidia-ctk) at the path the spec names",
    },
    "cdi.nvidia.nvidiactl": {
        "title": "NVIDIA: the merged edits include /dev/nvidiactl",
        "fail": "without /dev/nvidiactl the driver cannot be opened inside the container (cuInit fails)",
        "next": "add /dev/nvidiactl to the spec (nvidia-ctk cdi generate adds it)",
    },
    "cdi.nvidia.uvm": {
        "title": "NVIDIA: the merged edits include /dev/nvidia-uvm",
        "fail": "observed: cuInit returns CUDA_ERROR_UNKNOWN (999) while NVML-only tools still work",
        "next": "add /dev/nvidia-uvm (and nvidia-uvm-tools) to the spec; load nvidia-uvm on the host",
    },
    "cdi.nvidia.ptxjit": {
        "title": "NVIDIA: a libnvidia-ptxjitcompiler mount is present",
        "fail": "observed: cuInit and context work, PTX load fails with CUDA_ERROR_JIT_COMPILER_NOT_FOUND (221)",
        "next": "mount libnvidia-ptxjitcompiler.so.1 from the driver root",
    },
    "cdi.nvidia.cgroup_write": {
        "title": "NVIDIA: the device nodes' cgroup permissions include 'w'",
        "fail": "observed: nodes visible but open(O_RDWR) is denied; cuInit returns CUDA_ERROR_NO_DEVICE (100)",
        "next": "drop the permissions field (default rwm) from the NVIDIA device nodes",
    },
    "cdi.nvidia.cgroup_read": {
        "title": "NVIDIA: the device nodes' cgroup permissions include 'r' (the driver opens its nodes O_RDWR)",
        "fail": "WARN: nodes visible but open(O_RDWR) is denied (EPERM); cuInit cannot open the driver (CUDA_ERROR_NO_DEVICE)",
        "next": "drop the permissions field (default rwm) from the NVIDIA device nodes",
    },
    "cdi.host.library_soname": {
        "title": "a file mounted at a library name (lib*.so*) is that library: its ELF SONAME names the same library "
                 "(libcuda.so.580.x and libcuda.so.1 are libcuda; GLVND's libGLX_indirect may be libGLX_nvidia)",
        "fail": "the loader finds the file by the name the spec gives it and gets another library (NVML's mounted as "
                "libnvidia-ptxjitcompiler.so.1: PTX load fails with CUDA_ERROR_JIT_COMPILER_NOT_FOUND); FAIL when one of "
                "the two is a driver library, WARN for others or for another major version of the same library",
        "next": "mount each driver library under its own name (regenerate the spec with nvidia-ctk cdi generate)",
    },
    "cdi.host.driver_library": {
        "title": "a driver library the spec mounts (libnvidia-ml, libnvidia-ptxjitcompiler, or a libnvidia-* file named by a "
                 "driver version) is the driver root's <name>.so.<running driver> (the same file or the same content); "
                 "NOT_RUN without a host record naming the driver root, or no such file there",
        "fail": "WARN: the container would load another library than the running driver's (another driver's, another library)",
        "next": "mount the driver root's file of the running driver version (regenerate the spec with nvidia-ctk)",
    },
    "cdi.host.libcuda_identity": {
        "title": "a mount at libcuda.so* gives the driver root's libcuda.so.<running driver> (the same file or the same "
                 "content: inode first, sha256 only when they differ); NOT_RUN without a host record naming the driver root",
        "fail": "WARN: another file is mounted as libcuda (a stub, another driver's, a library named like the driver's): the "
                "container's CUDA would not be the host's driver and compute.driver.binding fails",
        "next": "mount the driver root's libcuda.so.<driver version> (regenerate the spec with nvidia-ctk)",
    },
    "cdi.nvidia.libcuda": {
        "title": "NVIDIA: libcuda is mounted from the driver, not the CUDA toolkit's stub",
        "fail": "the stub libcuda makes cuInit return CUDA_ERROR_STUB_LIBRARY (34); without libcuda the image must bring its own",
        "next": "mount libcuda.so.<driver version> from the driver root",
    },
    "cdi.security.spec_file_writable": {
        "title": "spec files are owned by root and not writable by group/other",
        "fail": "anyone who can write the spec can inject host mounts and devices into GPU containers",
        "next": "chown root:root and chmod 0644 the spec file",
    },
    "cdi.security.spec_dir_writable": {
        "title": "spec directories are owned by root and not writable by group/other",
        "fail": "anyone who can write the directory can add a spec that injects host mounts into containers",
        "next": "chown root:root and chmod 0755 the spec directory",
    },
    "cdi.security.sensitive_mount": {
        "title": "no mount of a sensitive host path (/, /etc, /root, /boot, /dev, runtime sockets, /proc or /sys read-write)",
        "fail": "the spec gives containers control of the host",
        "next": "remove the mount from the spec; find out who wrote it",
    },
    "cdi.security.hook_writable": {
        "title": "hooks and their directories are not writable by anyone but root",
        "fail": "a non-root user can replace code that the runtime runs as root",
        "next": "chown root:root and chmod 0755 the hook and its directory",
    },
}

_LOADED_TITLES = {"libcuda": ("libcuda.so.1", "the probe's dlopen of libcuda.so.1 fails"),
                  "ptxjit": ("libnvidia-ptxjitcompiler.so.1",
                             "CUDA cannot load its PTX JIT compiler: cuModuleLoadData fails with CUDA_ERROR_JIT_COMPILER_NOT_FOUND"),
                  "nvml": ("libnvidia-ml.so.1", "NVML cannot be loaded in the container")}
for _key, (_name, _effect) in sorted(_LOADED_TITLES.items()):
    CHECKS["cdi.nvidia.%s_noexec" % _key] = {
        "title": "NVIDIA: %s is not mounted with the noexec option" % _name,
        "fail": "WARN: the loader cannot map its code (\"failed to map segment from shared object\"): %s" % _effect,
        "next": "drop noexec from the mount's options",
    }
    CHECKS["cdi.nvidia.%s_path" % _key] = {
        "title": ("NVIDIA: %s is mounted where a loader finds it by that name: in a directory some distribution's loader "
                  "searches by default, one of the spec's LD_LIBRARY_PATH, or one a spec hook adds to the loader's cache") % _name,
        "fail": ("WARN (the image's own LD_LIBRARY_PATH or ld.so.conf may still cover it, which the cdi layer cannot see): "
                 "%s" % _effect),
        "next": "mount it into the image's library directory, or set LD_LIBRARY_PATH / an update-ldcache hook in the spec",
    }

# Consequences observed on a real H200 (docs/lab.md; the runs are in docs/evidence/), used in WARN details.
CONSEQUENCES = {
    "uvm": "cuInit -> CUDA_ERROR_UNKNOWN (999)",
    "ptxjit": "PTX load -> CUDA_ERROR_JIT_COMPILER_NOT_FOUND (221)",
    "cgroup": "cuInit -> CUDA_ERROR_NO_DEVICE (100); open(O_RDWR) -> EPERM",
    "nvidiactl": "cuInit fails: the driver control node is absent",
    "stub": "cuInit -> CUDA_ERROR_STUB_LIBRARY (34)",
}
