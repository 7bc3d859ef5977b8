# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: the host layer of gpuprobe.layers, its entry: what GPU, driver and device nodes does the node have?

Not public API; it may change without notice. ``record`` is the layer's entry: ``collect_evidence`` reads the node
under ``root`` (so tests can point it at fixture trees) into the evidence documented in docs/contract.md: the driver
root and its libraries (_host/driver.py), /proc, /sys and /dev (_host/procfs.py), NVML in a child process
(_host/nvml.py), the GPU inventory joined from NVML and procfs, the health readings, this boot's Xid events and, where
asked, dcgmi diag (_host/health/), and the tools on PATH. ``evaluate`` (_host/evaluate.py) turns that evidence into the
host layer record, checks from _host/catalogue.py.
"""

from __future__ import annotations

import os
import re

from ansible_collections.gpuprobe.layers.plugins.module_utils._host.catalogue import CHECKS, TOOLS
from ansible_collections.gpuprobe.layers.plugins.module_utils._host.driver import LIBRARIES, detect_driver_root, versioned_library
from ansible_collections.gpuprobe.layers.plugins.module_utils._host.evaluate import evaluate
from ansible_collections.gpuprobe.layers.plugins.module_utils._host.health.dcgm import check_dcgm_level, read_dcgm_diag
from ansible_collections.gpuprobe.layers.plugins.module_utils._host.health.limits import check_thresholds
from ansible_collections.gpuprobe.layers.plugins.module_utils._host.health.readers import health_evidence
from ansible_collections.gpuprobe.layers.plugins.module_utils._host.health.xid import read_kernel_xids
from ansible_collections.gpuprobe.layers.plugins.module_utils._host.nvml import (
    empty_evidence, import_pynvml, nvml_inventory_works, read_nvml_isolated,
)
from ansible_collections.gpuprobe.layers.plugins.module_utils._host.procfs import (
    CAPS_NODE, FIXED_NODES, GPU_NODE, MIG_MINORS, id_names, list_nvidia_nodes, normalize_bus_id, parse_mig_minors,
    parse_proc_devices, parse_proc_driver_version, read_modules, read_procfs_gpus, read_procfs_mig, read_text, stat_node,
)
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import LayerBuilder
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.run import Started, first_line, run, which

TOOL_TIMEOUT = 10.0
NVML_TIMEOUT = 30.0         # the NVML reader runs in a child process killed after this
MIG_MODES = {0: "disabled", 1: "enabled"}
_VERSION_IN_TEXT = re.compile(r"\bv?(\d+\.\d+(?:\.\d+)*(?:[-+~][0-9A-Za-z.+~-]*)?)")


def parse_tool_version(text):
    match = _VERSION_IN_TEXT.search(text or "")
    return match.group(1) if match else None


def _tool_version(path):
    res = run([path, "--version"], timeout=TOOL_TIMEOUT)
    text = (res["stdout"] or "") + "\n" + (res["stderr"] or "")
    version = parse_tool_version(first_line(text)) if res["rc"] == 0 else None
    error = None
    if version is None:
        error = res["error"] or "rc %s: %s" % (res["rc"], first_line(text) or "no output")
    return {"path": path, "version": version, "error": error}


def probe_tools(root):
    """{tool: {path, version, error}|None} from PATH; None when root is not / (the tools are not under root). Each tool
    found is asked its version at once, all at the same time (each ``--version`` is a process start: one after the other,
    their starts added up)."""
    if os.path.realpath(root) != "/":
        return None
    asked = dict((name, Started(_tool_version, path)) for name, path in ((name, which(name)) for name in TOOLS) if path)
    return dict((name, asked[name].result() if name in asked else None) for name in TOOLS)


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
    ``health_thresholds``, ``dcgm_diag`` and ``no_gpu_load`` as in ``record`` (ValueError for a bad value,
    before any read)."""
    thresholds = check_thresholds(health_thresholds)
    check_dcgm_level(dcgm_diag)
    # the tools' versions and this boot's kernel log ask nothing of the rest: read while NVML and /proc are, started once
    # the NVML reader's child is forked (it inherits none of their pipes); the kernel log still before dcgmi diag
    beside = {}

    def start_beside():
        beside.update(tools=Started(probe_tools, root), xids=Started(read_kernel_xids, root))
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
    evidence["libraries"] = dict((lib, versioned_library(root, detected, lib) if detected else None) for lib in LIBRARIES)

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
            evidence["nvml"] = read_nvml_isolated(pynvml_module, fallback_library=fallback, timeout=nvml_timeout,
                                                  forked=start_beside)
    if not beside:  # no NVML reader was forked
        start_beside()

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
        users, groups = id_names(root, "passwd"), id_names(root, "group")
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
    evidence["health"] = health_evidence(evidence["nvml"], beside["xids"].result(), thresholds,
                                         read_dcgm_diag(dcgm_diag, evidence["nvml"], root, no_gpu_load))
    tools = beside["tools"].result()
    evidence["tools_probed"] = tools is not None
    evidence["tools"] = tools or {}
    return evidence


def _node_sort_key(path):
    match = GPU_NODE.match(os.path.basename(path))
    return (0, int(match.group(1)), path) if match and path.startswith("/dev/nvidia") and "/nvidia-caps/" not in path \
        else (1, 0, path)


def record(root="/", driver_root=None, use_nvml=True, pynvml_module=None, nvml_timeout=NVML_TIMEOUT,
           health_thresholds=None, dcgm_diag=0, no_gpu_load=None):
    """The host layer record of the node under ``root`` (docs/contract.md). Never raises for node state.
    ``health_thresholds``: overrides of the health thresholds (THRESHOLDS in _host/health/limits.py; ValueError for an
    unknown name or a bad value); ``dcgm_diag``: 0, or the dcgmi diag run level to run where dcgmi exists and no GPU
    is busy (docs/health.md); ``no_gpu_load``: why nothing that loads the GPU may run ("check mode", "audit mode";
    None: it may), which keeps dcgmi diag levels 2-4 from running (level 1 loads nothing)."""
    builder = LayerBuilder("host", CHECKS)
    evidence = collect_evidence(root=root, driver_root=driver_root, use_nvml=use_nvml, pynvml_module=pynvml_module,
                                nvml_timeout=nvml_timeout, health_thresholds=health_thresholds, dcgm_diag=dcgm_diag,
                                no_gpu_load=no_gpu_load)
    return evaluate(evidence, builder)
