# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: the NVML reader of the host layer (the only place that imports pynvml and initialises NVML).

Not public API; it may change without notice. ``read_nvml`` takes the pynvml module as an argument so
that tests can hand it a fake module at that boundary (there is no GPU on a CI machine); every call is
wrapped on its own, so one failing attribute (``NVML_ERROR_NOT_SUPPORTED`` for MIG on a GPU without MIG)
never loses the GPU or the other attributes. It hands the module and each GPU's handle to
health/readers.py for the health readings; ``read_nvml_isolated`` runs it in a child process killed at a
timeout; ``nvml_inventory_works`` says whether NVML counted the GPUs.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import select
import signal
import time
import traceback
import warnings

from ansible_collections.gpuprobe.layers.plugins.module_utils._host.health.readers import error_code_name, read_gpu_health, read_mig_health
from ansible_collections.gpuprobe.layers.plugins.module_utils._host.health.limits import replay_again

DEFAULT_TIMEOUT = 30.0

# What an nvmlInit error usually means on a node (shown as the hint of host.nvml.init).
NVML_ERROR_MEANINGS = {
    "NVML_ERROR_LIB_RM_VERSION_MISMATCH": "Driver/library version mismatch: the loaded kernel module is not the version of the "
                                          "user-space libnvidia-ml (driver upgraded without reboot, or two driver installs)",
    "NVML_ERROR_DRIVER_NOT_LOADED": "the NVIDIA kernel module is not loaded",
    "NVML_ERROR_LIBRARY_NOT_FOUND": "libnvidia-ml.so.1 was not found by the dynamic loader (no driver, or its driver root is not "
                                    "on the loader path)",
    "NVML_ERROR_NO_PERMISSION": "no permission to open the NVIDIA device nodes",
    "NVML_ERROR_GPU_IS_LOST": "a GPU fell off the bus or stopped responding (dmesg: Xid 79)",
}

COMPUTE_MODES = {0: "Default", 1: "Exclusive_Thread", 2: "Prohibited", 3: "Exclusive_Process"}
MIG_ENABLED = 1             # NVML_DEVICE_MIG_ENABLE
_MIG_PROFILE_IN_NAME = re.compile(r"\bMIG\s+(\S+)\s*$")   # "NVIDIA H200 MIG 1g.18gb" -> "1g.18gb"


def import_pynvml():
    """Return (pynvml module, None) or (None, exact import error text)."""
    try:
        with warnings.catch_warnings():
            # The pynvml shim package warns that it is deprecated in favour of nvidia-ml-py; same module.
            warnings.simplefilter("ignore")
            import pynvml  # pylint: disable=import-outside-toplevel
        return pynvml, None
    except Exception as exc:  # pylint: disable=broad-except
        return None, "%s: %s" % (type(exc).__name__, exc)


def error_text(pynvml_module, exc):
    """The exact text of an exception raised by pynvml, with the NVML error constant when there is one."""
    nvml_error = getattr(pynvml_module, "NVMLError", None)
    if nvml_error is not None and isinstance(exc, nvml_error):
        value = getattr(exc, "value", None)
        name = error_code_name(pynvml_module, value)
        return "%s (%s, code %s)" % (exc, name or "unknown NVML error", value)
    return "%s: %s" % (type(exc).__name__, exc)


def error_meaning(text):
    for name, meaning in NVML_ERROR_MEANINGS.items():
        if text and name in text:
            return meaning
    return None


def _text(value):
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return value


def _call(nv, errors, key, func, *args):
    """Run one pynvml call; on any exception record its text under ``errors[key]`` and return None."""
    try:
        return func(*args)
    except Exception as exc:  # pylint: disable=broad-except
        errors[key] = error_text(nv, exc)
        return None


def cuda_version_text(value):
    """13000 -> "13.0" (NVML encodes the CUDA driver API version as 1000 * major + 10 * minor)."""
    if not isinstance(value, int):
        return None
    return "%d.%d" % (value // 1000, (value % 1000) // 10)


NOT_AVAILABLE_UINT = 0xFFFFFFFF     # NVML_VALUE_NOT_AVAILABLE_uint: an instance id of a process not on a MIG instance


def _instance_id(proc, field):
    """gpuInstanceId/computeInstanceId of a process info (v2/v3 structures), None when NVML gives none (an older
    structure without the field, or NVML_VALUE_NOT_AVAILABLE: the process is not known to run on an instance)."""
    value = getattr(proc, field, None)
    return value if isinstance(value, int) and value != NOT_AVAILABLE_UINT else None


def _processes(raw):
    """The compute processes of nvmlDeviceGetComputeRunningProcesses: pid, used_gpu_memory_bytes and, on a MIG
    GPU, the GPU and compute instance each runs on (gpu_instance_id/compute_instance_id, None when not given)."""
    if raw is None:
        return None
    out = []
    for proc in raw:
        used = getattr(proc, "usedGpuMemory", None)
        out.append({"pid": getattr(proc, "pid", None), "used_gpu_memory_bytes": used if isinstance(used, int) else None,
                    "gpu_instance_id": _instance_id(proc, "gpuInstanceId"),
                    "compute_instance_id": _instance_id(proc, "computeInstanceId")})
    return out


def mig_profile(name):
    """The MIG profile in a MIG device's NVML name ("NVIDIA H200 MIG 1g.18gb" -> "1g.18gb"), else None."""
    match = _MIG_PROFILE_IN_NAME.search(name or "") if isinstance(name, str) else None
    return match.group(1) if match else None


def _is_not_found(nv, exc):
    return getattr(exc, "value", None) == getattr(nv, "NVML_ERROR_NOT_FOUND", 6)


def _read_mig_device(nv, handle, slot):
    """One MIG device (a GPU instance + compute instance pair) in slot ``slot``, or None for an empty slot."""
    errors = {}
    try:
        mig = nv.nvmlDeviceGetMigDeviceHandleByIndex(handle, slot)
    except Exception as exc:  # pylint: disable=broad-except
        if _is_not_found(nv, exc):   # slots are sparse: NOT_FOUND is an empty slot, not an error
            return None
        return {"slot": slot, "uuid": None, "name": None, "profile": None, "gi": None, "ci": None,
                "compute_processes": None, "errors": {"handle": error_text(nv, exc)}}
    name = _text(_call(nv, errors, "name", nv.nvmlDeviceGetName, mig))
    # the processes of this instance alone (None when NVML does not give them, e.g. NVML_ERROR_NOT_SUPPORTED)
    procs = _processes(_call(nv, errors, "compute_processes", nv.nvmlDeviceGetComputeRunningProcesses, mig))
    return {"slot": slot, "uuid": _text(_call(nv, errors, "uuid", nv.nvmlDeviceGetUUID, mig)), "name": name,
            "profile": mig_profile(name), "gi": _call(nv, errors, "gi", nv.nvmlDeviceGetGpuInstanceId, mig),
            "ci": _call(nv, errors, "ci", nv.nvmlDeviceGetComputeInstanceId, mig), "compute_processes": procs,
            "errors": errors,
            # the per-instance health readings (read-only): health/readers.py's health_evidence moves them into evidence.health
            "health": read_mig_health(nv, mig, _call)}


def _read_mig_devices(nv, errors, handle):
    """The MIG devices of a MIG-enabled GPU (None when they could not be enumerated; the error is in ``errors``)."""
    count = _call(nv, errors, "mig_devices", nv.nvmlDeviceGetMaxMigDeviceCount, handle)
    if count is None:
        return None
    found = (_read_mig_device(nv, handle, slot) for slot in range(count))
    return [dev for dev in found if dev is not None]


def _read_gpu(nv, index, handles=None):
    """One GPU's NVML evidence; its handle is added to ``handles`` (index -> handle) for the readings taken again at the
    end of the session (replay_again)."""
    errors = {}
    gpu = {"index": index, "name": None, "uuid": None, "pci_bus_id": None, "minor_number": None, "mig_mode": None,
           "mig_devices": None, "persistence_mode": None, "compute_mode": None, "memory_total_bytes": None,
           "compute_processes": None, "errors": errors}
    handle = _call(nv, errors, "handle", nv.nvmlDeviceGetHandleByIndex, index)
    if handle is None:
        return gpu
    gpu["name"] = _text(_call(nv, errors, "name", nv.nvmlDeviceGetName, handle))
    gpu["uuid"] = _text(_call(nv, errors, "uuid", nv.nvmlDeviceGetUUID, handle))
    pci = _call(nv, errors, "pci_bus_id", nv.nvmlDeviceGetPciInfo, handle)
    if pci is not None:
        gpu["pci_bus_id"] = _text(getattr(pci, "busId", None))
    gpu["minor_number"] = _call(nv, errors, "minor_number", nv.nvmlDeviceGetMinorNumber, handle)
    mig = _call(nv, errors, "mig_mode", nv.nvmlDeviceGetMigMode, handle)
    if mig is not None:
        gpu["mig_mode"] = {"current": mig[0], "pending": mig[1]}
        # MIG devices only exist (and are only enumerable) while MIG is enabled now
        gpu["mig_devices"] = _read_mig_devices(nv, errors, handle) if mig[0] == MIG_ENABLED else []
    persistence = _call(nv, errors, "persistence_mode", nv.nvmlDeviceGetPersistenceMode, handle)
    if persistence is not None:
        gpu["persistence_mode"] = bool(persistence)
    mode = _call(nv, errors, "compute_mode", nv.nvmlDeviceGetComputeMode, handle)
    if mode is not None:
        gpu["compute_mode"] = COMPUTE_MODES.get(mode, "unknown (%s)" % mode)
    memory = _call(nv, errors, "memory_total_bytes", nv.nvmlDeviceGetMemoryInfo, handle)
    if memory is not None:
        gpu["memory_total_bytes"] = getattr(memory, "total", None)
    gpu["compute_processes"] = _processes(_call(nv, errors, "compute_processes", nv.nvmlDeviceGetComputeRunningProcesses, handle))
    # the host.health.* readings (read-only): layer.py's collect_evidence moves them into evidence.health
    gpu["health"] = read_gpu_health(nv, handle, _call)
    if handles is not None:
        handles[index] = handle
    return gpu


def empty_evidence(error):
    return {"ok": False, "error": error, "driver_version": None, "nvml_version": None, "cuda_driver_version": None,
            "cuda_driver_version_int": None, "gpu_count": None, "gpus": [], "errors": {}, "library_path": None}


def nvml_inventory_works(nvml):
    """Whether NVML's evidence counts the GPUs (it initialised and nvmlDeviceGetCount answered): the host inventory
    then comes from NVML, else from /proc/driver/nvidia/gpus."""
    return bool(nvml.get("ok")) and nvml.get("gpu_count") is not None


def _is_library_not_found(nv, exc):
    return getattr(exc, "value", None) == getattr(nv, "NVML_ERROR_LIBRARY_NOT_FOUND", 12)


def read_nvml(pynvml_module, fallback_library=None, loader=None):
    """Read everything the host layer needs from NVML; never raises.

    ``fallback_library``: a libnvidia-ml.so.1 path in the detected driver root. When nvmlInit fails only
    because the loader cannot find libnvidia-ml.so.1 (a driver root such as /usr/local/nvidia that is not
    on the loader path), that file is loaded first (``loader``, default ``ctypes.CDLL`` with RTLD_GLOBAL; the
    dynamic loader then resolves pynvml's dlopen by soname) and nvmlInit is tried once more;
    ``library_path`` records it.
    """
    nv = pynvml_module
    result = empty_evidence(None)
    try:
        nv.nvmlInit()
    except Exception as exc:  # pylint: disable=broad-except
        result["error"] = error_text(nv, exc)
        if not (fallback_library and _is_library_not_found(nv, exc)):
            return result
        try:
            (loader or _load_global)(fallback_library)
            nv.nvmlInit()
            result["library_path"] = fallback_library
            result["error"] = None
        except Exception as exc2:  # pylint: disable=broad-except
            result["error"] = "%s; after loading %s: %s" % (result["error"], fallback_library, error_text(nv, exc2))
            return result
    try:
        errors = result["errors"]
        result["driver_version"] = _text(_call(nv, errors, "driver_version", nv.nvmlSystemGetDriverVersion))
        result["nvml_version"] = _text(_call(nv, errors, "nvml_version", nv.nvmlSystemGetNVMLVersion))
        cuda = _call(nv, errors, "cuda_driver_version", nv.nvmlSystemGetCudaDriverVersion)
        result["cuda_driver_version_int"] = cuda
        result["cuda_driver_version"] = cuda_version_text(cuda)
        count = _call(nv, errors, "gpu_count", nv.nvmlDeviceGetCount)
        result["gpu_count"] = count
        handles = {}
        result["gpus"] = [_read_gpu(nv, i, handles) for i in range(count or 0)]
        # the PCIe replay counters read again: the replays over this session's interval (no wait is added for it)
        for gpu in result["gpus"]:
            if gpu["index"] in handles:
                replay_again(nv, _call, handles[gpu["index"]], gpu["health"]["pcie"], time.monotonic())
        result["ok"] = True
    except Exception:  # pylint: disable=broad-except
        result["error"] = "unexpected error while reading NVML: %s" % traceback.format_exc(limit=3)
    finally:
        try:
            nv.nvmlShutdown()
        except Exception:  # pylint: disable=broad-except
            pass
    return result


def _load_global(path):
    return ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)


def read_nvml_isolated(pynvml_module, fallback_library=None, timeout=DEFAULT_TIMEOUT, loader=None, forked=None):
    """``read_nvml`` in a forked child killed after ``timeout`` seconds: a GPU that hangs nvmlInit (fallen off the
    bus, driver wedged) gives an NVML error ``timeout after Ns`` instead of a hung module. Never raises.
    ``forked``: called in this process once the child exists (what runs while NVML answers; started after the fork, its
    threads and pipes are not the child's)."""
    rfd, wfd = os.pipe()
    try:
        pid = os.fork()
    except OSError as exc:
        os.close(rfd)
        os.close(wfd)
        return empty_evidence("cannot fork the NVML reader: %s" % exc)
    if pid == 0:  # child: read, send JSON, leave without running the parent's cleanup
        code = 0
        try:
            os.close(rfd)
            data = json.dumps(read_nvml(pynvml_module, fallback_library=fallback_library, loader=loader)).encode("utf-8")
            view = memoryview(data)
            while view:
                view = view[os.write(wfd, view):]
        except BaseException:  # pylint: disable=broad-except
            code = 1
        finally:
            os._exit(code)  # pylint: disable=protected-access
    os.close(wfd)
    if forked is not None:
        forked()
    chunks = []
    deadline = time.monotonic() + timeout
    timed_out = False
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                break
            ready, _w, _x = select.select([rfd], [], [], left)
            if not ready:
                continue
            chunk = os.read(rfd, 65536)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(rfd)
        if timed_out:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        os.waitpid(pid, 0)
    if timed_out:
        return empty_evidence("timeout after %gs: NVML did not answer (nvmlInit or a query hung; the reader was killed)" % timeout)
    try:
        return json.loads(b"".join(chunks).decode("utf-8"))
    except ValueError:
        return empty_evidence("the NVML reader died without an answer")
