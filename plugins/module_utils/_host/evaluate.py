# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: the host layer's judgements: ``evaluate`` turns the host evidence (_host/layer.py's ``collect_evidence``,
docs/contract.md) into the host layer record. Not public API.

Pure: no I/O. Each ``_check_*`` adds the checks of one concern (driver presence, kernel modules, driver root and
libraries, versions, NVML, GPU identity, device nodes, MIG), the health checks come from _host/health/judge.py, and a
check whose evidence could not be read is NOT_RUN with the reason, never PASS.
"""

from __future__ import annotations

import os
import re

from ansible_collections.gpuprobe.layers.plugins.module_utils._host.catalogue import CHECKS, TOOLS
from ansible_collections.gpuprobe.layers.plugins.module_utils._host.driver import DRIVER_ROOT_CANDIDATES, LIB_DIRS, LIBRARIES
from ansible_collections.gpuprobe.layers.plugins.module_utils._host.health.judge import check_health
from ansible_collections.gpuprobe.layers.plugins.module_utils._host.nvml import error_meaning, nvml_inventory_works
from ansible_collections.gpuprobe.layers.plugins.module_utils._host.procfs import CAPS_NODE, GPU_NODE, MIG_MINORS, PROC_CAPS, PROC_GPUS
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import (
    FAIL, NOT_RUN, PASS, WARN, LayerBuilder,
)

NVIDIA_MAJOR = 195          # registered by the nvidia module ("nvidia-frontend" in /proc/devices)
NVIDIACTL_MINOR = 255
UVM_HINT = ("without /dev/nvidia-uvm CUDA will fail (cuInit returns CUDA_ERROR_UNKNOWN, 999) while NVML tools such as "
            "nvidia-smi still work; the node appears when nvidia_uvm is loaded and the driver's device-node helper "
            "(or the driver container) creates it")
NO_DRIVER = "no NVIDIA driver / device nodes"
LIBRARY_HINTS = {
    "libnvidia-ptxjitcompiler": "without it CUDA cannot JIT-compile PTX: cuModuleLoadData fails with "
                                "CUDA_ERROR_JIT_COMPILER_NOT_FOUND (221) after cuInit and the context succeed",
    "libcuda": "without libcuda.so.<version> no CUDA program can start (dlopen libcuda.so.1 fails)",
}
MIG_CAPS_HINT = ("the driver's device-node helper creates the caps node of %s/gpu%s/mig/gi%s/access (and .../ci%s/access) "
                 "when asked for that file; a container gets the MIG device only with both nodes")
_CAP_NODE = re.compile(r"^nvidia-cap(\d+)$")


def _gpu_nodes(nodes):
    """{N: node} for the existing /dev/nvidiaN nodes."""
    out = {}
    for path, node in nodes.items():
        match = GPU_NODE.match(path[len("/dev/"):]) if path.startswith("/dev/") else None
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
    match = GPU_NODE.match(name)
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
