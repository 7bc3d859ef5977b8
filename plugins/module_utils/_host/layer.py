# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: the host layer of gpuprobe.layers: what GPU, driver and device nodes does the node have?

Not public API; it may change without notice. ``collect_host`` reads the node (NVML through _nvml.py,
/proc, /sys, /dev and the driver root, all under ``root`` so tests can point at fixture trees) into the
evidence documented in docs/contract.md, and ``evaluate`` turns that evidence into the host layer record;
``gpu_compute_processes`` is what the compute layer reads before it touches a GPU.
"""

from __future__ import annotations

import os
import re
import stat

from ansible_collections.gpuprobe.layers.plugins.module_utils._host.health.checks import (
    CHECKS as HEALTH_CHECKS, check_dcgm_level, check_health, check_thresholds, health_evidence, read_dcgm_diag, read_kernel_xids,
)
from ansible_collections.gpuprobe.layers.plugins.module_utils._host.nvml import (
    empty_evidence, error_meaning, import_pynvml, read_nvml_isolated,
)
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import (
    FAIL, NOT_RUN, PASS, WARN, LayerBuilder,
)
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.run import first_line, run, which

DRIVER_ROOT_CANDIDATES = ("/", "/usr/local/nvidia", "/run/nvidia/driver", "/home/kubernetes/bin/nvidia")
LIB_DIRS = ("lib64", "lib", "lib/x86_64-linux-gnu", "lib/aarch64-linux-gnu", "usr/lib64", "usr/lib/x86_64-linux-gnu",
            "usr/lib/aarch64-linux-gnu", "usr/lib")
LIBRARIES = ("libcuda", "libnvidia-ml", "libnvidia-ptxjitcompiler")
MODULES = ("nvidia", "nvidia_uvm", "nvidia_modeset", "nvidia_drm", "nouveau")
TOOLS = ("nvidia-ctk", "podman", "docker", "containerd", "runc", "crio")
TOOL_TIMEOUT = 10.0
NVML_TIMEOUT = 30.0         # the NVML reader runs in a child process killed after this
NVIDIA_MAJOR = 195          # registered by the nvidia module ("nvidia-frontend" in /proc/devices)
NVIDIACTL_MINOR = 255
FIXED_NODES = ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset")
UVM_HINT = ("without /dev/nvidia-uvm CUDA will fail (cuInit returns CUDA_ERROR_UNKNOWN, 999) while NVML tools such as "
            "nvidia-smi still work; the node appears when nvidia_uvm is loaded and the driver's device-node helper "
            "(or the driver container) creates it")
NO_DRIVER = "no NVIDIA driver / device nodes"
LIBRARY_HINTS = {
    "libnvidia-ptxjitcompiler": "without it CUDA cannot JIT-compile PTX: cuModuleLoadData fails with "
                                "CUDA_ERROR_JIT_COMPILER_NOT_FOUND (221) after cuInit and the context succeed",
    "libcuda": "without libcuda.so.<version> no CUDA program can start (dlopen libcuda.so.1 fails)",
}

PROC_GPUS = "/proc/driver/nvidia/gpus"                  # <bus id>/information per GPU the driver holds
PROC_CAPS = "/proc/driver/nvidia/capabilities"          # gpu<minor>/mig/gi<I>[/ci<C>]/access per MIG instance
MIG_MINORS = "/proc/driver/nvidia-caps/mig-minors"      # "gpu<minor>/gi<I>[/ci<C>]/access <caps minor>"
CAPS_NODE = "/dev/nvidia-caps/nvidia-cap%d"
MIG_MODES = {0: "disabled", 1: "enabled"}
MIG_CAPS_HINT = ("the driver's device-node helper creates the caps node of %s/gpu%s/mig/gi%s/access (and .../ci%s/access) "
                 "when asked for that file; a container gets the MIG device only with both nodes")

_GPU_NODE = re.compile(r"^nvidia(\d+)$")
_CAP_NODE = re.compile(r"^nvidia-cap(\d+)$")
_BUS_ID = re.compile(r"^([0-9a-fA-F]{1,8}):([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})\.([0-7])$")
_INSTANCE_DIR = re.compile(r"^(gi|ci)(\d+)$")
_VERSION_IN_TEXT = re.compile(r"\bv?(\d+\.\d+(?:\.\d+)*(?:[-+~][0-9A-Za-z.+~-]*)?)")
_PROC_DRIVER_VERSION = re.compile(r"NVRM version:[^\n]*?\s(\d+\.\d+(?:\.\d+)?)(?:\s|$)")


def _check(title, fail, nxt):
    return {"title": title, "fail": fail, "next": nxt}


CHECKS = {
    "host.driver.present": _check(
        "some sign of an NVIDIA driver exists: /proc/driver/nvidia/version, a loaded nvidia module, /dev/nvidia* or NVML",
        "no NVIDIA driver / device nodes: this node has no usable NVIDIA GPU (every later layer is meaningless)",
        "install/load the NVIDIA driver, or run on a GPU node; lspci -d 10de: shows whether a GPU is on the bus"),
    "host.kernel_module.loaded": _check(
        "the nvidia and nvidia_uvm kernel modules are loaded (/proc/modules, else /sys/module)",
        "the module is not loaded: without nvidia no GPU, without nvidia_uvm no CUDA (NVML still works)",
        "dmesg | grep -i nvrm; how the driver is installed (driver container, DKMS); the probe never loads modules"),
    "host.kernel_module.nouveau": _check(
        "the open-source nouveau module is not loaded",
        "nouveau holds the GPU, the NVIDIA driver cannot bind it",
        "blacklist nouveau in the kernel module configuration, rebuild the initramfs, reboot - outside this probe"),
    "host.nvml.init": _check(
        "pynvml imports and nvmlInit succeeds; reports NVML, driver and CUDA driver API versions",
        "NVML is unusable: the exact pynvml/NVML error is the observation (e.g. Driver/library version mismatch)",
        "the error text; nvidia-smi; host.driver.version_agreement (kernel module vs libnvidia-ml)"),
    "host.nvml.gpu": _check(
        "NVML enumerates the GPUs and reads index, name, UUID, PCI bus id and minor number of each",
        "no GPU enumerated, or a GPU whose identity could not be read (error per attribute in evidence)",
        "nvidia-smi -q; dmesg for Xid errors; lspci -d 10de:"),
    "host.nvml.persistence_mode": _check(
        "persistence mode is on (the driver keeps GPU state initialised between clients)",
        "(WARN) persistence off: every first client re-initialises the GPU (slower cuInit, state reset when idle)",
        "nvidia-persistenced should be running on compute nodes"),
    "host.nvml.compute_mode": _check(
        "the compute mode allows the probe to create a context",
        "Prohibited: no CUDA context can be created on this GPU (WARN for Exclusive_Process: one context at a time)",
        "nvidia-smi -q -d COMPUTE; who set the compute mode (the probe never changes it)"),
    "host.nvml.mig_mode": _check(
        "MIG is disabled, or enabled with no pending change",
        "(WARN) MIG enabled: CUDA needs a MIG device, not the whole GPU; or a MIG mode change waits for a GPU reset",
        "nvidia-smi -q -d MIG; use the MIG devices' CDI names"),
    "host.nvml.compute_processes": _check(
        "NVML lists the compute processes running on the GPU (what the compute layer looks at before it runs)",
        "the process list could not be read",
        "nvidia-smi --query-compute-apps=pid,used_memory --format=csv"),
    "host.driver_root.detected": _check(
        "a driver root holds libcuda.so.* / libnvidia-ml.so.* (given, or the first of /, /usr/local/nvidia, "
        "/run/nvidia/driver, /home/kubernetes/bin/nvidia)",
        "no driver libraries were found: a CDI spec cannot mount them into containers",
        "where the driver was installed (driver container: /run/nvidia/driver; GKE: /home/kubernetes/bin/nvidia); "
        "pass driver_root"),
    "host.library.present": _check(
        "the driver root holds libcuda, libnvidia-ml and libnvidia-ptxjitcompiler with a version suffix",
        "a driver library is missing (no libnvidia-ptxjitcompiler: PTX load fails with CUDA_ERROR_JIT_COMPILER_NOT_FOUND)",
        "ls -l <driver root>/lib64; reinstall the driver user-space"),
    "host.driver.version_agreement": _check(
        "NVML's driver version, the kernel module version and the libcuda / libnvidia-ml file suffixes are one version",
        "the kernel module and the user-space libraries differ (typically after a driver upgrade without reboot): "
        "NVML fails with Driver/library version mismatch, CUDA with CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
        "cat /proc/driver/nvidia/version; ls <driver root>/lib64/libcuda.so.*; reboot or reload the driver"),
    "host.device_node.present": _check(
        "/dev/nvidiactl exists (and, when no GPU inventory could be read, at least one /dev/nvidiaN)",
        "a device node is missing: containers cannot get any GPU",
        "ls -l /dev/nvidia*; the driver's device-node helper or the driver container creates the nodes"),
    "host.gpu.identity": _check(
        "per GPU: NVML and /proc/driver/nvidia/gpus/<bus id>/information describe the same GPU (joined by PCI bus id: "
        "same UUID and minor number), and no two GPUs share a UUID or minor number",
        "the two sources disagree (a GPU one of them does not list, another UUID or minor number), or an identity is "
        "not unique: device nodes and CDI names may point at another GPU than the one meant",
        "nvidia-smi --query-gpu=index,uuid,pci.bus_id --format=csv; cat /proc/driver/nvidia/gpus/*/information; dmesg for Xid"),
    "host.gpu.device_node": _check(
        "per GPU of the inventory: its /dev/nvidiaN (N = the GPU's minor number) exists",
        "the GPU has no device node: no container can be given this GPU",
        "ls -l /dev/nvidia*; the driver's device-node helper or the driver container creates it"),
    "host.device_node.unclaimed": _check(
        "every /dev/nvidiaN belongs to a GPU of the inventory (some GPU has minor number N)",
        "(WARN) a node of a GPU the driver does not report (stale after a GPU was removed or excluded): a CDI spec or "
        "container given it gets no GPU",
        "nvidia-smi -L; cat /proc/driver/nvidia/gpus/*/information; remove the stale node"),
    "host.mig.instance": _check(
        "per MIG device of a MIG-enabled GPU: GPU and compute instance ids read, and their caps nodes "
        "/dev/nvidia-caps/nvidia-cap<N> exist (N from /proc/driver/nvidia-caps/mig-minors)",
        "a caps node is missing: containers cannot be given this MIG device (WARN: MIG enabled without any MIG device)",
        "nvidia-smi mig -lgi; nvidia-smi mig -lci; ls -l /dev/nvidia-caps; grep gpu<minor>/ /proc/driver/nvidia-caps/mig-minors"),
    "host.device_node.uvm": _check(
        "/dev/nvidia-uvm (and /dev/nvidia-uvm-tools) exist as the nvidia-uvm character devices",
        "no /dev/nvidia-uvm: CUDA will fail (cuInit CUDA_ERROR_UNKNOWN) while NVML tools still work "
        "(WARN for nvidia-uvm-tools: profilers cannot attach)",
        "lsmod | grep nvidia_uvm; grep nvidia-uvm /proc/devices; the driver's device-node helper"),
    "host.device_node.char_device": _check(
        "every /dev/nvidia* node that exists is a character device",
        "a regular file or directory stands where a device node should be (e.g. a bind-mount target left behind)",
        "ls -l /dev/nvidia*; remove the stray file, let the driver recreate the node"),
    "host.device_node.minor": _check(
        "each node's major:minor matches its name (/dev/nvidiaN = 195:N, nvidiactl = 195:255, nvidia-uvm = <uvm major>:0)",
        "the node points at another device than its name says: the container gets the wrong GPU or none",
        "ls -l /dev/nvidia*; cat /proc/devices; recreate the node"),
    "host.device_node.mode": _check(
        "GPU device nodes are readable and writable by everyone (0666), as the driver creates them",
        "(WARN) non-root processes, and containers running as non-root users, cannot open the node",
        "the NVreg_DeviceFileMode / udev rule that changed the mode"),
}
CHECKS.update(HEALTH_CHECKS)
for _name in TOOLS:
    CHECKS["host.tool.%s" % _name] = _check(
        "%s is installed and answers --version (informational: what the next layers can use)" % _name,
        "(WARN) %s is on PATH but did not answer --version" % _name,
        "run %s --version by hand" % _name)


def _under(root, path):
    return os.path.join(root, path.lstrip("/"))


def read_text(root, path):
    try:
        with open(_under(root, path), encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def parse_proc_driver_version(text):
    """Kernel module version from /proc/driver/nvidia/version ("NVRM version: ... Kernel Module ... 580.159.04 ...")."""
    match = _PROC_DRIVER_VERSION.search(text or "")
    return match.group(1) if match else None


def parse_proc_modules(text):
    return set(line.split()[0] for line in (text or "").splitlines() if line.strip())


def parse_proc_devices(text):
    """Character device majors by name from /proc/devices."""
    majors = {}
    in_char = False
    for line in (text or "").splitlines():
        line = line.strip()
        if line.endswith("devices:"):
            in_char = line.startswith("Character")
            continue
        parts = line.split()
        if in_char and len(parts) == 2 and parts[0].isdigit():
            majors.setdefault(parts[1], int(parts[0]))
    return majors


def parse_tool_version(text):
    match = _VERSION_IN_TEXT.search(text or "")
    return match.group(1) if match else None


def read_modules(root):
    """(loaded map, source): /proc/modules when readable, else the /sys/module directories, else (None, None)."""
    text = read_text(root, "/proc/modules")
    if text is not None:
        names = parse_proc_modules(text)
        return dict((m, m in names) for m in MODULES), "/proc/modules"
    sys_module = _under(root, "/sys/module")
    if os.path.isdir(sys_module):
        # a loadable module has initstate; built-ins have no such file
        return dict((m, os.path.exists(os.path.join(sys_module, m, "initstate"))
                     or os.path.exists(os.path.join(sys_module, m, "version"))) for m in MODULES), "/sys/module"
    return dict((m, None) for m in MODULES), None


def _id_names(root, name):
    """uid -> user name from <root>/etc/passwd (or group)."""
    out = {}
    text = read_text(root, "/etc/%s" % name) or ""
    for line in text.splitlines():
        parts = line.split(":")
        if len(parts) > 2 and parts[2].isdigit():
            out.setdefault(int(parts[2]), parts[0])
    return out


def _node_type(mode):
    if stat.S_ISCHR(mode):
        return "char"
    if stat.S_ISBLK(mode):
        return "block"
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "dir"
    return "other"


def stat_node(root, path, users, groups):
    node = {"exists": False, "type": None, "major": None, "minor": None, "mode": None, "uid": None, "gid": None,
            "owner": None, "group": None}
    try:
        st = os.stat(_under(root, path))
    except OSError:
        return node
    node.update(exists=True, type=_node_type(st.st_mode), mode="%04o" % stat.S_IMODE(st.st_mode), uid=st.st_uid,
                gid=st.st_gid, owner=users.get(st.st_uid), group=groups.get(st.st_gid))
    if node["type"] in ("char", "block"):
        node.update(major=os.major(st.st_rdev), minor=os.minor(st.st_rdev))
    return node


def list_nvidia_nodes(root):
    dev = _under(root, "/dev")
    found = []
    try:
        names = os.listdir(dev)
    except OSError:
        return found
    for name in names:
        if _GPU_NODE.match(name) or name in ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset"):
            found.append("/dev/" + name)
    try:
        found.extend("/dev/nvidia-caps/" + n for n in os.listdir(os.path.join(dev, "nvidia-caps")))
    except OSError:
        pass
    return found


def _version_key(version):
    return [int(p) if p.isdigit() else 0 for p in version.split(".")]


def _is_regular(path):
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def find_library(root, driver_root, lib):
    """{path, version, versions_present} of ``lib``.so.<version> in the first lib dir of ``driver_root`` holding one."""
    pattern = re.compile(r"^%s\.so\.(\d+\.\d+(?:\.\d+)*)$" % re.escape(lib))
    for sub in LIB_DIRS:
        rel_dir = os.path.join(driver_root, sub)
        try:
            names = os.listdir(_under(root, rel_dir))
        except OSError:
            continue
        # only real files count: a root whose versioned names are links into another driver root (Ubuntu's
        # /usr/lib/libcuda.so.1 -> /usr/local/nvidia/...) does not hold the driver itself
        versions = sorted((m.group(1) for m in (pattern.match(n) for n in names)
                           if m and _is_regular(_under(root, os.path.join(rel_dir, m.group(0))))), key=_version_key)
        if not versions:
            continue
        chosen = versions[-1]
        try:  # prefer the file the .so.1 soname link points at
            target = os.path.basename(os.readlink(_under(root, os.path.join(rel_dir, lib + ".so.1"))))
            match = pattern.match(target)
            if match and match.group(1) in versions:
                chosen = match.group(1)
        except OSError:
            pass
        return {"path": os.path.join(rel_dir, "%s.so.%s" % (lib, chosen)), "version": chosen, "versions_present": versions}
    return None


def detect_driver_root(root, given=None):
    """The driver root (as seen from the node): the first candidate holding libcuda.so.<version> as a regular file,
    else the first holding libnvidia-ml.so.<version> (an NVML-only install), else None."""
    candidates = [given] if given else DRIVER_ROOT_CANDIDATES
    for lib in ("libcuda", "libnvidia-ml"):
        for candidate in candidates:
            if find_library(root, candidate, lib):
                return candidate
    return None


def probe_tools(root):
    """{tool: {path, version, error}|None} from PATH; None when root is not / (the tools are not under root)."""
    if os.path.realpath(root) != "/":
        return None
    tools = {}
    for name in TOOLS:
        path = which(name)
        if path is None:
            tools[name] = None
            continue
        res = run([path, "--version"], timeout=TOOL_TIMEOUT)
        text = (res["stdout"] or "") + "\n" + (res["stderr"] or "")
        version = parse_tool_version(first_line(text)) if res["rc"] == 0 else None
        error = None
        if version is None:
            error = res["error"] or "rc %s: %s" % (res["rc"], first_line(text) or "no output")
        tools[name] = {"path": path, "version": version, "error": error}
    return tools


def normalize_bus_id(text):
    """A PCI bus id in the Linux form dddd:bb:dd.f (lowercase): NVML's "00000000:06:00.0" and procfs' "0000:06:00.0"
    both give "0000:06:00.0". Text of another form is returned stripped (None when empty)."""
    text = (text or "").strip()
    match = _BUS_ID.match(text)
    if not match:
        return text or None
    return "%04x:%02x:%02x.%x" % tuple(int(g, 16) for g in match.groups())


def parse_gpu_information(text):
    """The fields of /proc/driver/nvidia/gpus/<bus id>/information ("Model: \\t\\t NVIDIA H200", "Device Minor: \\t 0")."""
    fields = {}
    for line in (text or "").splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip():
            fields.setdefault(key.strip(), value.strip())
    return fields


def _int_or_none(text):
    try:
        return int(str(text).strip())
    except (TypeError, ValueError):
        return None


def read_procfs_gpus(root):
    """One entry per /proc/driver/nvidia/gpus/<bus id>/information, sorted by bus id; None when the directory is absent."""
    try:
        names = sorted(os.listdir(_under(root, PROC_GPUS)))
    except OSError:
        return None
    entries = []
    for name in names:
        path = "%s/%s/information" % (PROC_GPUS, name)
        text = read_text(root, path)
        fields = parse_gpu_information(text)
        uuid = fields.get("GPU UUID")
        excluded = fields.get("GPU Excluded", fields.get("Blacklisted"))
        entries.append({"path": path, "readable": text is not None, "name": fields.get("Model"),
                        # the driver prints ??? for a UUID it could not read (GPU not initialised)
                        "uuid": uuid if uuid and uuid.startswith("GPU-") else None, "uuid_text": uuid,
                        "pci_bus_id": normalize_bus_id(fields.get("Bus Location") or name),
                        "minor": _int_or_none(fields.get("Device Minor")),
                        "excluded": {"Yes": True, "No": False}.get(excluded)})
    return entries


def parse_mig_minors(text):
    """/proc/driver/nvidia-caps/mig-minors ("gpu0/gi1/access 12") as {name: caps minor}."""
    table = {}
    for line in (text or "").splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit():
            table[parts[0]] = int(parts[1])
    return table


def _device_file_minor(text):
    return _int_or_none(parse_gpu_information(text).get("DeviceFileMinor"))


def _numbered_dirs(root, path, prefix):
    try:
        names = os.listdir(_under(root, path))
    except OSError:
        return None
    found = [_INSTANCE_DIR.match(n) for n in names]
    return sorted(int(m.group(2)) for m in found if m and m.group(1) == prefix)


def read_procfs_mig(root, minor):
    """The MIG instances the driver lists under /proc/driver/nvidia/capabilities/gpu<minor>/mig: [{gi, ci, gi_minor,
    ci_minor}] (the minors from each access file's DeviceFileMinor); ci None for a GPU instance without a compute
    instance; None when the directory is absent."""
    base = "%s/gpu%d/mig" % (PROC_CAPS, minor)
    gis = _numbered_dirs(root, base, "gi")
    if gis is None:
        return None
    out = []
    for gi in gis:
        gi_minor = _device_file_minor(read_text(root, "%s/gi%d/access" % (base, gi)))
        cis = _numbered_dirs(root, "%s/gi%d" % (base, gi), "ci")
        if not cis:
            out.append({"gi": gi, "ci": None, "gi_minor": gi_minor, "ci_minor": None})
        for ci in cis or ():
            ci_minor = _device_file_minor(read_text(root, "%s/gi%d/ci%d/access" % (base, gi, ci)))
            out.append({"gi": gi, "ci": ci, "gi_minor": gi_minor, "ci_minor": ci_minor})
    return out


def _caps_minors(table, minor, gi, ci, fallback=None):
    """The caps minors of a GPU instance and its compute instance, from mig-minors, else ``fallback``."""
    fallback = fallback or {}
    caps = {"gi": fallback.get("gi_minor"), "ci": fallback.get("ci_minor")}
    if table and minor is not None and gi is not None:
        caps["gi"] = table.get("gpu%d/gi%d/access" % (minor, gi), caps["gi"])
        if ci is not None:
            caps["ci"] = table.get("gpu%d/gi%d/ci%d/access" % (minor, gi, ci), caps["ci"])
    return caps


def _row(source, index, uuid, minor, pci_bus_id, name, memory, processes, mode_current, mode_pending, instances):
    return {"index": index, "uuid": uuid, "minor": minor if isinstance(minor, int) else None,
            "pci_bus_id": normalize_bus_id(pci_bus_id), "name": name, "memory_total_bytes": memory, "device_node": None,
            "source": source, "compute_processes": processes,
            "mig": {"mode_current": mode_current, "mode_pending": mode_pending, "instances": instances}}


def _nvml_row(gpu, table):
    minor = gpu.get("minor_number") if isinstance(gpu.get("minor_number"), int) else None
    mode = gpu.get("mig_mode")
    if mode:
        current, pending = MIG_MODES.get(mode.get("current")), MIG_MODES.get(mode.get("pending"))
    elif "NVML_ERROR_NOT_SUPPORTED" in ((gpu.get("errors") or {}).get("mig_mode") or ""):
        current = pending = "disabled"  # NVML says this GPU has no MIG at all
    else:
        current = pending = None
    instances = [{"uuid": dev.get("uuid"), "gi": dev.get("gi"), "ci": dev.get("ci"), "profile": dev.get("profile"),
                  "caps_minors": _caps_minors(table, minor, dev.get("gi"), dev.get("ci")),
                  "compute_processes": dev.get("compute_processes")}
                 for dev in gpu.get("mig_devices") or []]
    return _row("nvml", gpu.get("index"), gpu.get("uuid"), minor, gpu.get("pci_bus_id"), gpu.get("name"),
                gpu.get("memory_total_bytes"), gpu.get("compute_processes"), current, pending, instances)


def _procfs_row(root, entry, table):
    minor = entry["minor"]
    found = read_procfs_mig(root, minor) if minor is not None else None
    instances = [{"uuid": None, "gi": inst["gi"], "ci": inst["ci"], "profile": None,
                  "caps_minors": _caps_minors(table, minor, inst["gi"], inst["ci"], inst), "compute_processes": None}
                 for inst in found or []]
    return _row("procfs", None, entry["uuid"], minor, entry["pci_bus_id"], entry["name"], None, None, None, None, instances)


def nvml_inventory_works(nvml):
    return bool(nvml.get("ok")) and nvml.get("gpu_count") is not None


def gpu_inventory(root, nvml, procfs, table):
    """I1 (docs/contract.md): one row per GPU from NVML when it enumerated the GPUs, else from procfs; sorted by index
    (procfs rows have none: sorted by bus id). ``device_node`` is filled in once the nodes are read."""
    if nvml_inventory_works(nvml):
        rows = [_nvml_row(gpu, table) for gpu in nvml.get("gpus") or []]
    else:
        rows = [_procfs_row(root, entry, table) for entry in procfs or []]
    return sorted(rows, key=lambda r: (r["index"] is None, r["index"] or 0, r["pci_bus_id"] or "", r["minor"] or 0))


def _inventory_paths(rows):
    paths = set()
    for row in rows:
        if row["minor"] is not None:
            paths.add("/dev/nvidia%d" % row["minor"])
        for inst in row["mig"]["instances"]:
            paths.update(CAPS_NODE % m for m in inst["caps_minors"].values() if m is not None)
    return paths


def collect_evidence(root="/", driver_root=None, use_nvml=True, pynvml_module=None, nvml_timeout=NVML_TIMEOUT,
                     health_thresholds=None, dcgm_diag=0, no_gpu_load=None):
    """Read the node into the host evidence (docs/contract.md); never raises for a missing file or library.
    ``health_thresholds``, ``dcgm_diag`` and ``no_gpu_load`` as in ``collect_host`` (ValueError for a bad value,
    before any read)."""
    thresholds = check_thresholds(health_thresholds)
    check_dcgm_level(dcgm_diag)
    evidence = {"root": root}
    proc_text = read_text(root, "/proc/driver/nvidia/version")
    sys_version = read_text(root, "/sys/module/nvidia/version")
    evidence["kernel_module"] = {
        "proc_driver_version": parse_proc_driver_version(proc_text),
        "sys_module_version": sys_version.strip() if sys_version else None,
        "proc_version_text": proc_text.strip() if proc_text else None,
    }
    evidence["modules_loaded"], evidence["modules_source"] = read_modules(root)
    evidence["char_majors"] = parse_proc_devices(read_text(root, "/proc/devices"))
    detected = detect_driver_root(root, driver_root)
    evidence["driver_root_given"] = driver_root
    evidence["driver_root"] = detected
    evidence["libraries"] = dict((lib, find_library(root, detected, lib) if detected else None) for lib in LIBRARIES)

    if not use_nvml:
        evidence["nvml"] = empty_evidence("disabled by option (nvml: false)")
        evidence["nvml_disabled"] = True
    else:
        evidence["nvml_disabled"] = False
        import_error = None
        if pynvml_module is None:
            pynvml_module, import_error = import_pynvml()
        if pynvml_module is None:
            evidence["nvml"] = empty_evidence("pynvml cannot be imported: %s" % import_error)
        else:
            fallback = None
            ml = evidence["libraries"]["libnvidia-ml"]
            if ml and os.path.realpath(root) == "/":
                fallback = os.path.join(os.path.dirname(ml["path"]), "libnvidia-ml.so.1")
                fallback = fallback if os.path.exists(fallback) else ml["path"]
            evidence["nvml"] = read_nvml_isolated(pynvml_module, fallback_library=fallback, timeout=nvml_timeout)

    if os.path.realpath(root) == "/":
        users = {}
        groups = {}
        try:
            import grp  # pylint: disable=import-outside-toplevel
            import pwd  # pylint: disable=import-outside-toplevel
            users = dict((p.pw_uid, p.pw_name) for p in pwd.getpwall())
            groups = dict((g.gr_gid, g.gr_name) for g in grp.getgrall())
        except (ImportError, KeyError, OSError):
            pass
    else:
        users, groups = _id_names(root, "passwd"), _id_names(root, "group")
    evidence["procfs_gpus"] = read_procfs_gpus(root)
    mig_minors = read_text(root, MIG_MINORS)
    table = parse_mig_minors(mig_minors) if mig_minors is not None else None
    evidence["mig_minors_read"] = table is not None
    rows = gpu_inventory(root, evidence["nvml"], evidence["procfs_gpus"], table)
    paths = set(FIXED_NODES) | set(list_nvidia_nodes(root)) | _inventory_paths(rows)
    for gpu in evidence["nvml"]["gpus"]:
        if isinstance(gpu.get("minor_number"), int):
            paths.add("/dev/nvidia%d" % gpu["minor_number"])
    evidence["device_nodes"] = dict((p, stat_node(root, p, users, groups)) for p in sorted(paths, key=_node_sort_key))
    for row in rows:
        node = evidence["device_nodes"].get("/dev/nvidia%d" % row["minor"]) if row["minor"] is not None else None
        if node and node["exists"] and node["type"] == "char":
            row["device_node"] = "/dev/nvidia%d" % row["minor"]
    evidence["gpus"] = rows
    # per-GPU health readings (taken out of evidence.nvml.gpus[*].health) and this boot's Xid events
    evidence["health"] = health_evidence(evidence["nvml"], read_kernel_xids(root), thresholds,
                                         read_dcgm_diag(dcgm_diag, evidence["nvml"], root, no_gpu_load))
    tools = probe_tools(root)
    evidence["tools_probed"] = tools is not None
    evidence["tools"] = tools or {}
    return evidence


def _node_sort_key(path):
    match = _GPU_NODE.match(os.path.basename(path))
    return (0, int(match.group(1)), path) if match and path.startswith("/dev/nvidia") and "/nvidia-caps/" not in path \
        else (1, 0, path)


def _gpu_nodes(nodes):
    """{N: node} for the existing /dev/nvidiaN nodes."""
    out = {}
    for path, node in nodes.items():
        match = _GPU_NODE.match(path[len("/dev/"):]) if path.startswith("/dev/") else None
        if match and node["exists"]:
            out[int(match.group(1))] = node
    return out


def _describe_node(node):
    if not node["exists"]:
        return "absent"
    if node["type"] in ("char", "block"):
        return "%s %s:%s mode %s %s:%s" % (node["type"], node["major"], node["minor"], node["mode"],
                                           node["owner"] or node["uid"], node["group"] or node["gid"])
    return "%s (mode %s)" % (node["type"], node["mode"])


def _no_driver_evidence(ev):
    """The exact evidence of 'no driver' (empty list when any sign of a driver exists)."""
    km = ev["kernel_module"]
    nodes_present = [p for p, n in ev["device_nodes"].items() if n["exists"]]
    if km["proc_version_text"] or km["sys_module_version"] or ev["modules_loaded"].get("nvidia") or nodes_present \
            or ev["nvml"]["ok"]:
        return []
    source = ev["modules_source"] or "no /proc/modules or /sys/module to read"
    return ["/proc/driver/nvidia/version absent", "/sys/module/nvidia/version absent",
            "module nvidia not loaded (%s)" % source, "no /dev/nvidia* device nodes",
            "NVML: %s" % (ev["nvml"]["error"] or "not run")]


def _check_modules(b, ev):
    loaded = ev["modules_loaded"]
    source = ev["modules_source"]
    for mod in ("nvidia", "nvidia_uvm"):
        if source is None:
            b.add("host.kernel_module.loaded", NOT_RUN, mod, "loaded", "cannot tell: neither /proc/modules nor /sys/module is readable")
        elif loaded[mod]:
            b.add("host.kernel_module.loaded", PASS, mod, "loaded", "loaded (%s)" % source)
        else:
            hint = UVM_HINT if mod == "nvidia_uvm" else None
            b.add("host.kernel_module.loaded", FAIL, mod, "loaded", "not loaded (%s)" % source, hint=hint)
    if source is None:
        b.add("host.kernel_module.nouveau", NOT_RUN, "nouveau", "not loaded", "cannot tell: no module list readable")
    else:
        b.add("host.kernel_module.nouveau", FAIL if loaded["nouveau"] else PASS, "nouveau", "not loaded",
              "loaded (%s)" % source if loaded["nouveau"] else "not loaded")


def _check_nvml(b, ev):
    nvml = ev["nvml"]
    if ev["nvml_disabled"]:
        for cid in ("host.nvml.init", "host.nvml.gpu"):
            b.add(cid, NOT_RUN, "NVML", observed="disabled by option (nvml: false)")
        return
    if not nvml["ok"]:
        b.add("host.nvml.init", FAIL, "nvmlInit", "NVML initialised", nvml["error"],
              hint=error_meaning(nvml["error"]) or CHECKS["host.nvml.init"]["next"])
        b.add("host.nvml.gpu", FAIL, "GPUs", ">= 1 GPU enumerated", "not enumerated: %s" % nvml["error"])
        return
    b.add("host.nvml.init", PASS, "nvmlInit", "NVML initialised",
          "NVML %s, driver %s, CUDA driver API %s%s" % (nvml["nvml_version"], nvml["driver_version"], nvml["cuda_driver_version"],
                                                        ", loaded from %s" % nvml["library_path"] if nvml.get("library_path") else ""))
    if not nvml["gpus"]:
        b.add("host.nvml.gpu", FAIL, "GPUs", ">= 1 GPU enumerated",
              "NVML reports %s GPUs%s" % (nvml["gpu_count"], "; " + nvml["errors"]["gpu_count"] if "gpu_count" in nvml["errors"] else ""))
        return
    for gpu in nvml["gpus"]:
        subject = "GPU %s" % gpu["index"]
        errors = gpu.get("errors") or {}
        essential = [k for k in ("handle", "name", "uuid", "minor_number") if k in errors]
        if essential:
            b.add("host.nvml.gpu", FAIL, subject, "name, UUID and minor number readable",
                  "; ".join("%s: %s" % (k, errors[k]) for k in essential))
            continue
        b.add("host.nvml.gpu", PASS, subject, "name, UUID and minor number readable",
              "%s %s pci %s minor %s, %s bytes" % (gpu["name"], gpu["uuid"], gpu["pci_bus_id"], gpu["minor_number"],
                                                   gpu["memory_total_bytes"]))
        _check_gpu_modes(b, subject, gpu, errors)


def _check_gpu_modes(b, subject, gpu, errors):
    pm = gpu["persistence_mode"]
    if pm is None:
        b.add("host.nvml.persistence_mode", NOT_RUN, subject, "on", "not read: %s" % errors.get("persistence_mode"))
    else:
        b.add("host.nvml.persistence_mode", PASS if pm else WARN, subject, "on", "on" if pm else "off")
    mode = gpu["compute_mode"]
    if mode is None:
        b.add("host.nvml.compute_mode", NOT_RUN, subject, "Default", "not read: %s" % errors.get("compute_mode"))
    else:
        status = {"Default": PASS, "Prohibited": FAIL}.get(mode, WARN)
        b.add("host.nvml.compute_mode", status, subject, "Default", mode)
    mig = gpu["mig_mode"]
    if mig is None:
        err = errors.get("mig_mode") or ""
        if "NOT_SUPPORTED" in err:
            b.add("host.nvml.mig_mode", PASS, subject, "disabled", "not supported by this GPU (%s)" % err)
        else:
            b.add("host.nvml.mig_mode", NOT_RUN, subject, "disabled", "not read: %s" % err)
    else:
        observed = "current %s, pending %s" % (mig["current"], mig["pending"])
        b.add("host.nvml.mig_mode", PASS if (mig["current"], mig["pending"]) == (0, 0) else WARN, subject,
              "disabled (current 0, pending 0)", observed)
    _check_processes(b, subject, gpu["compute_processes"], errors)
    for dev in gpu.get("mig_devices") or []:
        # a MIG instance's own list (its MIG device handle): what says whether that instance is busy
        _check_processes(b, "%s MIG %s" % (subject, dev.get("uuid") or "slot %s" % dev.get("slot")), dev.get("compute_processes"),
                         dev.get("errors") or {})


def _check_processes(b, subject, procs, errors):
    if procs is None:
        b.add("host.nvml.compute_processes", NOT_RUN, subject, "process list",
              "not read: %s" % (errors.get("compute_processes") or errors.get("handle")))
        return
    b.add("host.nvml.compute_processes", PASS, subject, "process list",
          "%d running%s" % (len(procs), (" (pids %s)" % ", ".join(str(p["pid"]) for p in procs)) if procs else ""))


def _gpu_label(row):
    if row["index"] is not None:
        return "GPU %d" % row["index"]
    return "GPU %s" % (row["pci_bus_id"] or "minor %s" % row["minor"])


def _identity_text(uuid, minor, bus):
    return "uuid %s, minor %s, bus %s" % (uuid, minor, bus)


def _duplicates(rows, key):
    seen = {}
    for row in rows:
        if row[key] is not None:
            seen.setdefault(row[key], []).append(_gpu_label(row))
    return dict((value, labels) for value, labels in seen.items() if len(labels) > 1)


def _procfs_match(row, entries):
    for key in ("pci_bus_id", "uuid", "minor"):
        for entry in entries:
            if row[key] is not None and entry[key] == row[key]:
                return entry
    return None


def _check_identity(b, ev):
    """host.gpu.identity: NVML vs /proc/driver/nvidia/gpus per GPU, and unique UUIDs and minors."""
    rows = ev["gpus"]
    procfs = ev["procfs_gpus"]
    nvml = ev["nvml"]
    expected = "NVML and procfs agree on UUID, minor and bus id; UUID and minor unique"
    dups = dict((key, _duplicates(rows, key)) for key in ("uuid", "minor"))
    matched = []
    for row in rows:
        problems = ["%s %s shared with %s" % (key, row[key], ", ".join(label for label in dups[key][row[key]] if label != _gpu_label(row)))
                    for key in ("uuid", "minor") if row[key] in dups[key]]
        own = "%s: %s" % (row["source"], _identity_text(row["uuid"], row["minor"], row["pci_bus_id"]))
        if row["source"] == "procfs":
            note = "not cross-checked: NVML %s" % (nvml["error"] or "gave no GPU count")
        elif procfs is None:
            note = "not cross-checked: %s absent" % PROC_GPUS
        else:
            entry = _procfs_match(row, procfs)
            if entry is None:
                problems.append("no %s/<bus id>/information for this GPU (procfs lists %s)" % (
                    PROC_GPUS, ", ".join(e["pci_bus_id"] or "?" for e in procfs) or "none"))
                note = None
            else:
                matched.append(entry)
                # a value one side could not read is not a disagreement (host.nvml.gpu reports NVML's unread identity)
                problems.extend("%s differs (procfs %s)" % (key, entry[key]) for key in ("pci_bus_id", "uuid", "minor")
                                if None not in (entry[key], row[key]) and entry[key] != row[key])
                seen = _identity_text(entry["uuid"] or entry["uuid_text"], entry["minor"], entry["pci_bus_id"])
                note = "%s: %s" % (entry["path"], seen)
        observed = "; ".join([own] + ([note] if note else []) + problems)
        status = FAIL if problems else (NOT_RUN if note and note.startswith("not cross-checked") else PASS)
        b.add("host.gpu.identity", status, _gpu_label(row), expected, observed)
    if rows and rows[0]["source"] == "nvml":
        for entry in procfs or []:
            if any(entry is m for m in matched):
                continue
            b.add("host.gpu.identity", WARN if entry["excluded"] else FAIL, "GPU %s" % entry["pci_bus_id"], expected,
                  "%s lists a GPU NVML does not enumerate: %s%s" % (
                      entry["path"], _identity_text(entry["uuid"] or entry["uuid_text"], entry["minor"], entry["pci_bus_id"]),
                      " (GPU Excluded: Yes)" if entry["excluded"] else ""))


def _check_gpu_nodes(b, ev, nv_major, gpu_nodes):
    """host.gpu.device_node per GPU of the inventory; host.device_node.unclaimed for nodes no GPU has."""
    nodes = ev["device_nodes"]
    rows = ev["gpus"]
    for row in rows:
        label = _gpu_label(row)
        if row["minor"] is None:
            b.add("host.gpu.device_node", NOT_RUN, label, "/dev/nvidia<minor>", "minor number unknown (%s)" % row["source"])
            continue
        path = "/dev/nvidia%d" % row["minor"]
        node = nodes[path]
        b.add("host.gpu.device_node", PASS if node["exists"] else FAIL, path,
              "char %d:%d (%s %s, minor %d from %s)" % (nv_major, row["minor"], label, row["uuid"], row["minor"], row["source"]),
              _describe_node(node))
    if not rows and not nvml_inventory_works(ev["nvml"]) and ev["procfs_gpus"] is None:
        b.add("host.device_node.unclaimed", NOT_RUN, "/dev/nvidia[0-9]*", "a GPU for every node",
              "no GPU inventory: NVML %s, %s absent" % (ev["nvml"]["error"], PROC_GPUS))
        return
    claimed = set(row["minor"] for row in rows)
    source = rows[0]["source"] if rows else ("nvml" if nvml_inventory_works(ev["nvml"]) else "procfs")
    unclaimed = sorted(n for n in gpu_nodes if n not in claimed)
    for n in unclaimed:
        b.add("host.device_node.unclaimed", WARN, "/dev/nvidia%d" % n, "a GPU with minor %d" % n,
              "no GPU of the inventory (%s: minors %s) has minor %d" % (source, ", ".join(str(m) for m in sorted(claimed, key=str)) or "none", n))
    if not unclaimed:
        b.add("host.device_node.unclaimed", PASS, "/dev/nvidia[0-9]*", "a GPU for every node",
              "%d node(s), each a GPU's (%s)" % (len(gpu_nodes), source))


def _check_mig(b, ev):
    """host.mig.instance per MIG device: ids read and caps nodes present."""
    nodes = ev["device_nodes"]
    raw = dict((g.get("index"), g) for g in ev["nvml"].get("gpus") or [])
    for row in ev["gpus"]:
        label = _gpu_label(row)
        mig = row["mig"]
        instances = mig["instances"]
        if row["source"] == "nvml":
            if mig["mode_current"] != "enabled":
                continue
            gpu = raw.get(row["index"]) or {}
            if gpu.get("mig_devices") is None:
                b.add("host.mig.instance", NOT_RUN, label, "MIG devices", "not enumerated: %s" % (gpu.get("errors") or {}).get("mig_devices"))
                continue
        if not instances:
            if mig["mode_current"] == "enabled":
                b.add("host.mig.instance", WARN, label, ">= 1 MIG device",
                      "MIG enabled and no MIG device: CUDA sees no device on this GPU")
            continue
        for inst in instances:
            _check_mig_instance(b, ev, nodes, row, label, inst)


def _check_mig_instance(b, ev, nodes, row, label, inst):
    subject = "%s gi%s%s%s" % (label, inst["gi"], "/ci%s" % inst["ci"] if inst["ci"] is not None else "",
                               " " + inst["uuid"] if inst["uuid"] else "")
    caps = inst["caps_minors"]
    expected = "caps nodes %s (gi) and %s (ci)" % tuple(CAPS_NODE % caps[k] if caps[k] is not None else "nvidia-cap<?>"
                                                        for k in ("gi", "ci"))
    if inst["gi"] is None or inst["ci"] is None:
        b.add("host.mig.instance", NOT_RUN if inst["gi"] is None else WARN, subject, expected,
              "GPU instance id not read" if inst["gi"] is None else "GPU instance without a compute instance: not usable by CUDA")
        return
    unknown = [k for k in ("gi", "ci") if caps[k] is None]
    if unknown:
        where = MIG_MINORS if ev["mig_minors_read"] else "%s (unreadable)" % MIG_MINORS
        b.add("host.mig.instance", NOT_RUN, subject, expected, "no caps minor for the %s in %s" % (" and ".join(unknown), where))
        return
    seen = []
    missing = False
    for k in ("gi", "ci"):
        path = CAPS_NODE % caps[k]
        node = nodes.get(path) or {"exists": False}
        missing = missing or not (node["exists"] and node.get("type") == "char")
        seen.append("%s %s" % (path, _describe_node(node)))
    hint = MIG_CAPS_HINT % (PROC_CAPS, row["minor"], inst["gi"], inst["ci"]) if missing else None
    b.add("host.mig.instance", FAIL if missing else PASS, subject, expected, "; ".join(seen), hint=hint)


def _check_driver_root(b, ev):
    root = ev["driver_root"]
    if root is None:
        tried = [ev["driver_root_given"]] if ev["driver_root_given"] else list(DRIVER_ROOT_CANDIDATES)
        b.add("host.driver_root.detected", FAIL, ", ".join(tried), "libcuda.so.* or libnvidia-ml.so.* in one of %s" % ", ".join(LIB_DIRS),
              "no driver libraries found")
        for lib in LIBRARIES:
            b.add("host.library.present", NOT_RUN, lib, "%s.so.<driver version>" % lib, "no driver root to look in")
        return
    b.add("host.driver_root.detected", PASS, root, "driver libraries", "given" if ev["driver_root_given"] else "detected")
    for lib in LIBRARIES:
        info = ev["libraries"][lib]
        if info is None:
            hint = LIBRARY_HINTS.get(lib)
            b.add("host.library.present", FAIL, lib, "%s.so.<driver version> under %s" % (lib, root), "absent", hint=hint)
        else:
            extra = " (also present: %s)" % ", ".join(v for v in info["versions_present"] if v != info["version"]) \
                if len(info["versions_present"]) > 1 else ""
            b.add("host.library.present", PASS, lib, "%s.so.<driver version> under %s" % (lib, root), info["path"] + extra)


def _check_versions(b, ev):
    km = ev["kernel_module"]
    libs = ev["libraries"]
    nvml = ev["nvml"]
    sources = [
        ("NVML", nvml["driver_version"] if nvml["ok"] else None,
         "unavailable (%s)" % nvml["error"] if not nvml["ok"] else "unknown"),
        ("kernel module /proc/driver/nvidia/version", km["proc_driver_version"], "absent"),
        ("kernel module /sys/module/nvidia/version", km["sys_module_version"], "absent"),
        ("libcuda.so suffix", libs["libcuda"]["version"] if libs["libcuda"] else None, "absent"),
        ("libnvidia-ml.so suffix", libs["libnvidia-ml"]["version"] if libs["libnvidia-ml"] else None, "absent"),
    ]
    observed = "; ".join("%s %s" % (name, value or missing) for name, value, missing in sources)
    values = set(value for _name, value, _missing in sources if value)
    known = [value for _name, value, _missing in sources if value]
    if len(known) < 2:
        b.add("host.driver.version_agreement", NOT_RUN, "driver version", "one version everywhere",
              "fewer than two version sources: " + observed)
    else:
        b.add("host.driver.version_agreement", PASS if len(values) == 1 else FAIL, "driver version",
              "one version everywhere", observed)


def _check_device_nodes(b, ev):
    nodes = ev["device_nodes"]
    majors = ev["char_majors"]
    nv_major = majors.get("nvidia-frontend", majors.get("nvidia", NVIDIA_MAJOR))
    uvm_major = majors.get("nvidia-uvm")
    gpu_nodes = _gpu_nodes(nodes)

    ctl = nodes["/dev/nvidiactl"]
    b.add("host.device_node.present", PASS if ctl["exists"] else FAIL, "/dev/nvidiactl", "char %d:%d" % (nv_major, NVIDIACTL_MINOR),
          _describe_node(ctl))
    if not ev["gpus"]:
        b.add("host.device_node.present", PASS if gpu_nodes else FAIL, "/dev/nvidia[0-9]*", ">= 1 GPU node",
              ", ".join("/dev/nvidia%d" % n for n in sorted(gpu_nodes)) or "none")
    _check_gpu_nodes(b, ev, nv_major, gpu_nodes)

    for path, minor, status_if_missing in (("/dev/nvidia-uvm", 0, FAIL), ("/dev/nvidia-uvm-tools", 1, WARN)):
        node = nodes[path]
        expected = "char %s:%d" % (uvm_major if uvm_major is not None else "<nvidia-uvm major>", minor)
        if node["exists"] and node["type"] == "char":
            b.add("host.device_node.uvm", PASS, path, expected, _describe_node(node))
        else:
            b.add("host.device_node.uvm", status_if_missing, path, expected, _describe_node(node),
                  hint=UVM_HINT if path == "/dev/nvidia-uvm" else "CUDA profilers (CUPTI, Nsight) cannot attach without it")

    for path, node in nodes.items():
        if not node["exists"]:
            continue
        if node["type"] != "char":
            b.add("host.device_node.char_device", FAIL, path, "char device", _describe_node(node))
            continue
        b.add("host.device_node.char_device", PASS, path, "char device", _describe_node(node))
        expected = _expected_major_minor(path, nv_major, uvm_major, majors)
        if expected is not None:
            ok = all(want is None or want == got for want, got in zip(expected, (node["major"], node["minor"])))
            b.add("host.device_node.minor", PASS if ok else FAIL, path,
                  "%s:%s" % tuple("<any>" if e is None else e for e in expected), "%s:%s" % (node["major"], node["minor"]))
        if "/nvidia-caps/" not in path:
            mode = int(node["mode"], 8)
            b.add("host.device_node.mode", PASS if mode & 0o666 == 0o666 else WARN, path, "0666", node["mode"])


def _expected_major_minor(path, nv_major, uvm_major, majors):
    name = os.path.basename(path)
    match = _GPU_NODE.match(name)
    if match and "/nvidia-caps/" not in path:
        return (nv_major, int(match.group(1)))
    if name == "nvidiactl":
        return (nv_major, NVIDIACTL_MINOR)
    if name == "nvidia-modeset":
        return (nv_major, 254)
    if name == "nvidia-uvm":
        return (uvm_major, 0)
    if name == "nvidia-uvm-tools":
        return (uvm_major, 1)
    if "/nvidia-caps/" in path and majors.get("nvidia-caps") is not None:
        match = _CAP_NODE.match(name)  # nvidia-cap<N> is the caps device of minor N
        return (majors["nvidia-caps"], int(match.group(1)) if match else None)
    return None


def _check_tools(b, ev):
    if not ev["tools_probed"]:
        for name in TOOLS:
            b.add("host.tool.%s" % name, NOT_RUN, name, "--version", "tools are only probed when root is /")
        return
    for name in TOOLS:
        info = ev["tools"].get(name)
        if info is None:
            b.add("host.tool.%s" % name, NOT_RUN, name, "--version", "not installed (not on PATH)")
        elif info["version"] is None:
            b.add("host.tool.%s" % name, WARN, info["path"], "--version", info["error"])
        else:
            b.add("host.tool.%s" % name, PASS, info["path"], "--version", info["version"])


def evaluate(evidence, builder=None):
    """The host layer record from the evidence of ``collect_evidence`` (pure: no I/O)."""
    b = builder or LayerBuilder("host", CHECKS)
    ev = evidence
    no_driver = _no_driver_evidence(ev)
    b.add("host.driver.present", FAIL if no_driver else PASS, "NVIDIA driver", "driver and device nodes",
          "; ".join(no_driver) if no_driver else "present")
    _check_modules(b, ev)
    # libraries and the version comparison come before NVML: a kernel/library mismatch is the cause of the
    # NVML "Driver/library version mismatch", and the first FAIL is the record's signature
    _check_driver_root(b, ev)
    _check_versions(b, ev)
    _check_nvml(b, ev)
    _check_identity(b, ev)
    _check_device_nodes(b, ev)
    _check_mig(b, ev)
    check_health(b, ev)
    _check_tools(b, ev)
    nvml = ev["nvml"]
    km = ev["kernel_module"]
    b.evidence = ev
    b.versions = {
        "driver": nvml["driver_version"] or km["proc_driver_version"] or km["sys_module_version"],
        "nvml": nvml["nvml_version"],
        "cuda_driver_api": nvml["cuda_driver_version"],
        "kernel_module": km["proc_driver_version"] or km["sys_module_version"],
    }
    reason = "%s: %s" % (NO_DRIVER, "; ".join(no_driver)) if no_driver else None
    return b.build(reason=reason)


def collect_host(root="/", driver_root=None, use_nvml=True, pynvml_module=None, nvml_timeout=NVML_TIMEOUT,
                 health_thresholds=None, dcgm_diag=0, no_gpu_load=None):
    """The host layer record of the node under ``root`` (docs/contract.md). Never raises for node state.
    ``health_thresholds``: overrides of _health.THRESHOLDS (ValueError for an unknown name or a bad value);
    ``dcgm_diag``: 0, or the dcgmi diag run level to run where dcgmi exists and no GPU is busy (docs/health.md);
    ``no_gpu_load``: why nothing that loads the GPU may run ("check mode", "audit mode"; None: it may), which
    keeps dcgmi diag levels 2-4 from running (level 1 loads nothing)."""
    builder = LayerBuilder("host", CHECKS)
    evidence = collect_evidence(root=root, driver_root=driver_root, use_nvml=use_nvml, pynvml_module=pynvml_module,
                                nvml_timeout=nvml_timeout, health_thresholds=health_thresholds, dcgm_diag=dcgm_diag,
                                no_gpu_load=no_gpu_load)
    return evaluate(evidence, builder)
