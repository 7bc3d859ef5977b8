# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: what the host layer reads from the node's files, all under ``root`` (``/`` on the node, a fixture tree in
tests). Not public API.

From /proc: the kernel module's version (/proc/driver/nvidia/version), the loaded modules (/proc/modules, else
/sys/module), the character device majors (/proc/devices), the GPUs the driver holds
(/proc/driver/nvidia/gpus/<bus id>/information), the MIG instances it lists (/proc/driver/nvidia/capabilities) and
their caps minors (/proc/driver/nvidia-caps/mig-minors). From /dev: the /dev/nvidia* nodes and their type, numbers,
mode and owner (names from <root>/etc/passwd and group). Every reader returns None (or an empty answer) for a file
that is absent or unreadable and never raises for node state; the parsers are pure.
"""

from __future__ import annotations

import os
import re
import stat

from ansible_collections.gpuprobe.layers.plugins.module_utils._common.fs import names_in, under_root

MODULES = ("nvidia", "nvidia_uvm", "nvidia_modeset", "nvidia_drm", "nouveau")
FIXED_NODES = ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset")
PROC_GPUS = "/proc/driver/nvidia/gpus"                  # <bus id>/information per GPU the driver holds
PROC_CAPS = "/proc/driver/nvidia/capabilities"          # gpu<minor>/mig/gi<I>[/ci<C>]/access per MIG instance
MIG_MINORS = "/proc/driver/nvidia-caps/mig-minors"      # "gpu<minor>/gi<I>[/ci<C>]/access <caps minor>"
CAPS_NODE = "/dev/nvidia-caps/nvidia-cap%d"

GPU_NODE = re.compile(r"^nvidia(\d+)$")                 # the name of a GPU's node in /dev
_BUS_ID = re.compile(r"^([0-9a-fA-F]{1,8}):([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})\.([0-7])$")
_INSTANCE_DIR = re.compile(r"^(gi|ci)(\d+)$")
_PROC_DRIVER_VERSION = re.compile(r"NVRM version:[^\n]*?\s(\d+\.\d+(?:\.\d+)?)(?:\s|$)")


def read_text(root, path):
    try:
        with open(under_root(root, path), encoding="utf-8", errors="replace") as f:
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


def read_modules(root):
    """(loaded map, source): /proc/modules when readable, else the /sys/module directories, else (None, None)."""
    text = read_text(root, "/proc/modules")
    if text is not None:
        names = parse_proc_modules(text)
        return dict((m, m in names) for m in MODULES), "/proc/modules"
    sys_module = under_root(root, "/sys/module")
    if os.path.isdir(sys_module):
        # a loadable module has initstate; built-ins have no such file
        return dict((m, any(os.path.exists(os.path.join(sys_module, m, name)) for name in ("initstate", "version")))
                    for m in MODULES), "/sys/module"
    return dict((m, None) for m in MODULES), None


def id_names(root, name):
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
        st = os.stat(under_root(root, path))
    except OSError:
        return node
    node.update(exists=True, type=_node_type(st.st_mode), mode="%04o" % stat.S_IMODE(st.st_mode), uid=st.st_uid,
                gid=st.st_gid, owner=users.get(st.st_uid), group=groups.get(st.st_gid))
    if node["type"] in ("char", "block"):
        node.update(major=os.major(st.st_rdev), minor=os.minor(st.st_rdev))
    return node


def list_nvidia_nodes(root):
    dev = under_root(root, "/dev")
    found = ["/dev/" + name for name in names_in(dev)
             if GPU_NODE.match(name) or name in ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset")]
    return found + ["/dev/nvidia-caps/" + n for n in names_in(os.path.join(dev, "nvidia-caps"))]


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
        names = sorted(os.listdir(under_root(root, PROC_GPUS)))
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
        names = os.listdir(under_root(root, path))
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
