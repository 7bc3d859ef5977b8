# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: the probe script of gpuprobe.layers; not public API.

This one file is both a module_utils file (the runtime and compute layers import its pure parts and
read its source) and a stand-alone script, run ISOLATED with ``python3 -I -S _probe.py '<json config>'``
(_probe_contract.ISOLATED_FLAGS: no PYTHON* environment, no site, no user site, no script directory on sys.path, so nothing
the container's image or spec env holds can redirect it) inside the probe container (bind-mounted read-only)
and on the host as the control. It uses the standard library ONLY: the probe image holds python3 and nothing
else, and CUDA comes from the host through CDI. No test hook is read from the environment.

It writes JSON lines to stdout, flushed one by one, so that whatever it saw before a hang or a kill is
still there, each carrying this run's ``token``. The line kinds, their fields, the token and how the assessor
reads them are the contract in ``_probe_contract`` (which also says how this script is run).
Every device is listed and, unless skipped, runs its own context, kernel and check of every element; one
device failing does not stop the others.
Config keys: nodes (device paths to inspect), compute (bool), idle_uuids (when given, even empty: the only devices
it may touch, those the host's NVML reported idle; every other one is listed, never touched), skip_uuids (older
configs: devices never to touch), only_uuids (when given, run only on these; uuid: one more such UUID),
libcuda (explicit path to dlopen instead of the soname), n (buffer length, default 1024), capture_env
(default true; the host control records PATH and LD_LIBRARY_PATH only), skip_compute_reason (record why
compute is skipped, e.g. a busy GPU, and do not touch the GPU), token (bound to every line), a and b (the
kernel writes out[i] = i*a + b; the caller draws them per run, so a library that fakes results without
running the PTX fails verification), resolve_paths (container paths whose os.path.realpath the inventory
reports as resolved_paths, null when it cannot be resolved), spec_mounts (the spec mounts' container paths: a
file mapped in the probe's process from under one is reported with the driver libraries, ``mapped_libraries``).
"""

from __future__ import annotations

import ctypes
import errno
import hashlib
import json
import os
import stat
import subprocess
import sys
import tempfile
import time

PROBE_VERSION = "1.1"
DEFAULT_A, DEFAULT_B = 3, 7
TOKEN = None  # this run's token (config "token"), written on every line by emit()
LIBCUDA = "libcuda.so.1"
LIBNVML = "libnvidia-ml.so.1"
DEFAULT_N = 1024
FILL_PATTERN = 0xDEADBEEF
# NVIDIA driver library names (libcuda.so.1, libnvidia-ml.so.1, libnvidia-ptxjitcompiler.so.1, libnvidia-gpucomp, ...):
# every such file mapped in the probe's process is reported with its digest (mapped_libraries)
DRIVER_LIBRARY_PREFIXES = ("libcuda.", "libcuda-", "libcudadebugger.", "libnvidia-", "libnvcuvid.", "libnvoptix.",
                           "libnvidia_", "libEGL_nvidia.", "libGLX_nvidia.", "libGLESv1_CM_nvidia.", "libGLESv2_nvidia.")
MAX_MAPPED_LIBRARIES = 64
MAPPED_HASH_BUDGET_S = 30.0  # hashing past it is left undone (named), never blocks the run
MAX_LIBRARY_BYTES = 1 << 30

# CUresult codes (cuda.h). cuGetErrorName is asked first; this table names what it cannot
# (a stub libcuda answers 34 and leaves the name empty).
CU_RESULTS = {
    0: "CUDA_SUCCESS",
    1: "CUDA_ERROR_INVALID_VALUE",
    2: "CUDA_ERROR_OUT_OF_MEMORY",
    3: "CUDA_ERROR_NOT_INITIALIZED",
    4: "CUDA_ERROR_DEINITIALIZED",
    5: "CUDA_ERROR_PROFILER_DISABLED",
    34: "CUDA_ERROR_STUB_LIBRARY",
    35: "CUDA_ERROR_INSUFFICIENT_DRIVER",
    36: "CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER",
    46: "CUDA_ERROR_DEVICE_UNAVAILABLE",
    100: "CUDA_ERROR_NO_DEVICE",
    101: "CUDA_ERROR_INVALID_DEVICE",
    102: "CUDA_ERROR_DEVICE_NOT_LICENSED",
    200: "CUDA_ERROR_INVALID_IMAGE",
    201: "CUDA_ERROR_INVALID_CONTEXT",
    202: "CUDA_ERROR_CONTEXT_ALREADY_CURRENT",
    205: "CUDA_ERROR_MAP_FAILED",
    209: "CUDA_ERROR_NO_BINARY_FOR_GPU",
    214: "CUDA_ERROR_ECC_UNCORRECTABLE",
    216: "CUDA_ERROR_CONTEXT_ALREADY_IN_USE",
    218: "CUDA_ERROR_INVALID_PTX",
    220: "CUDA_ERROR_NVLINK_UNCORRECTABLE",
    221: "CUDA_ERROR_JIT_COMPILER_NOT_FOUND",
    222: "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
    223: "CUDA_ERROR_JIT_COMPILATION_DISABLED",
    300: "CUDA_ERROR_INVALID_SOURCE",
    301: "CUDA_ERROR_FILE_NOT_FOUND",
    302: "CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND",
    303: "CUDA_ERROR_SHARED_OBJECT_INIT_FAILED",
    304: "CUDA_ERROR_OPERATING_SYSTEM",
    400: "CUDA_ERROR_INVALID_HANDLE",
    401: "CUDA_ERROR_ILLEGAL_STATE",
    500: "CUDA_ERROR_NOT_FOUND",
    600: "CUDA_ERROR_NOT_READY",
    700: "CUDA_ERROR_ILLEGAL_ADDRESS",
    701: "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
    702: "CUDA_ERROR_LAUNCH_TIMEOUT",
    708: "CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE",
    709: "CUDA_ERROR_CONTEXT_IS_DESTROYED",
    710: "CUDA_ERROR_ASSERT",
    714: "CUDA_ERROR_HARDWARE_STACK_ERROR",
    715: "CUDA_ERROR_ILLEGAL_INSTRUCTION",
    716: "CUDA_ERROR_MISALIGNED_ADDRESS",
    719: "CUDA_ERROR_LAUNCH_FAILED",
    800: "CUDA_ERROR_NOT_PERMITTED",
    801: "CUDA_ERROR_NOT_SUPPORTED",
    802: "CUDA_ERROR_SYSTEM_NOT_READY",
    803: "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
    804: "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
    805: "CUDA_ERROR_MPS_CONNECTION_FAILED",
    806: "CUDA_ERROR_MPS_RPC_FAILURE",
    807: "CUDA_ERROR_MPS_SERVER_NOT_READY",
    808: "CUDA_ERROR_MPS_MAX_CLIENTS_REACHED",
    999: "CUDA_ERROR_UNKNOWN",
}

# nvmlReturn_t codes (nvml.h).
NVML_RESULTS = {
    0: "NVML_SUCCESS",
    1: "NVML_ERROR_UNINITIALIZED",
    2: "NVML_ERROR_INVALID_ARGUMENT",
    3: "NVML_ERROR_NOT_SUPPORTED",
    4: "NVML_ERROR_NO_PERMISSION",
    5: "NVML_ERROR_ALREADY_INITIALIZED",
    6: "NVML_ERROR_NOT_FOUND",
    7: "NVML_ERROR_INSUFFICIENT_SIZE",
    8: "NVML_ERROR_INSUFFICIENT_POWER",
    9: "NVML_ERROR_DRIVER_NOT_LOADED",
    10: "NVML_ERROR_TIMEOUT",
    11: "NVML_ERROR_IRQ_ISSUE",
    12: "NVML_ERROR_LIBRARY_NOT_FOUND",
    13: "NVML_ERROR_FUNCTION_NOT_FOUND",
    14: "NVML_ERROR_CORRUPTED_INFOROM",
    15: "NVML_ERROR_GPU_IS_LOST",
    16: "NVML_ERROR_RESET_REQUIRED",
    17: "NVML_ERROR_OPERATING_SYSTEM",
    18: "NVML_ERROR_LIB_RM_VERSION_MISMATCH",
    19: "NVML_ERROR_IN_USE",
    20: "NVML_ERROR_MEMORY",
    21: "NVML_ERROR_NO_DATA",
    999: "NVML_ERROR_UNKNOWN",
}

# A hand-written kernel: out[i] = i * a + b for i < n (a, b: kernel parameters, drawn per run by the caller). PTX 6.0 for sm_50, so any current driver JITs
# it for its GPU (this needs libnvidia-ptxjitcompiler.so.1: without it, CUDA_ERROR_JIT_COMPILER_NOT_FOUND).
KERNEL_NAME = "gpuprobe_fill"
PTX = r"""
.version 6.0
.target sm_50
.address_size 64

.visible .entry gpuprobe_fill(
    .param .u64 out,
    .param .u32 n,
    .param .u32 a,
    .param .u32 b
)
{
    .reg .pred %p<2>;
    .reg .b32 %r<10>;
    .reg .b64 %rd<4>;

    ld.param.u64 %rd1, [out];
    ld.param.u32 %r1, [n];
    ld.param.u32 %r7, [a];
    ld.param.u32 %r8, [b];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    setp.ge.u32 %p1, %r5, %r1;
    @%p1 bra DONE;
    cvta.to.global.u64 %rd2, %rd1;
    mul.wide.u32 %rd3, %r5, 4;
    add.s64 %rd2, %rd2, %rd3;
    mad.lo.s32 %r6, %r5, %r7, %r8;
    st.global.u32 [%rd2], %r6;
DONE:
    ret;
}
"""

# Exact driver API symbols where cuda.h maps a name to a versioned one (never guess a _v2: some _v2
# entry points take other arguments than the unversioned name).
SYMBOLS = {
    "cuMemAlloc": ("cuMemAlloc_v2",),
    "cuMemFree": ("cuMemFree_v2",),
    "cuMemcpyDtoH": ("cuMemcpyDtoH_v2",),
    "cuMemsetD32": ("cuMemsetD32_v2",),
    "cuDevicePrimaryCtxRelease": ("cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease"),
    "cuDeviceGetUuid": ("cuDeviceGetUuid_v2", "cuDeviceGetUuid"),
}

# The compute steps in order (a FAIL names the first one that did not succeed).
COMPUTE_STEPS = (
    "dlopen", "cuInit", "cuDriverGetVersion", "cuDeviceGetCount", "cuDeviceGet", "cuDeviceGetName",
    "cuDeviceGetUuid", "cuDevicePrimaryCtxRetain", "cuCtxSetCurrent", "cuModuleLoadData", "cuModuleGetFunction",
    "cuMemAlloc", "cuMemsetD32", "cuLaunchKernel", "cuCtxSynchronize", "cuMemcpyDtoH", "verify", "cuMemFree",
    "cuModuleUnload", "cuDevicePrimaryCtxRelease",
)


# ---------------------------------------------------------------------------------------------------
# pure helpers (unit-tested)

def cu_result_name(code, driver_name=None):
    """Name of a CUresult: the driver's own name when it gave one, else the table, else a generic name."""
    if driver_name:
        return driver_name
    if code in CU_RESULTS:
        return CU_RESULTS[code]
    return "CUDA_ERROR_%d" % code


def nvml_result_name(code):
    return NVML_RESULTS.get(code, "NVML_ERROR_%d" % code)


def expected_values(n, a=DEFAULT_A, b=DEFAULT_B):
    """What the kernel must write: out[i] = i * a + b (uint32)."""
    return [(i * a + b) & 0xFFFFFFFF for i in range(n)]


def verify_values(values, n=None, a=DEFAULT_A, b=DEFAULT_B):
    """Compare every element with the expected pattern. Returns dict ok, checked, mismatches, first_bad, a, b."""
    n = len(values) if n is None else n
    want = expected_values(n, a, b)
    bad = [i for i in range(n) if i >= len(values) or values[i] != want[i]]
    first = None
    if bad:
        i = bad[0]
        first = {"index": i, "expected": want[i], "observed": values[i] if i < len(values) else None}
    return {"ok": not bad and len(values) >= n, "checked": n, "mismatches": len(bad), "first_bad": first, "a": a, "b": b}


def format_uuid(raw):
    """16 raw bytes -> 'GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx' (the form nvidia-smi and NVML print)."""
    h = bytes(bytearray(raw)).hex()
    return "GPU-%s-%s-%s-%s-%s" % (h[0:8], h[8:12], h[12:16], h[16:20], h[20:32])


def norm_uuid(value):
    """A GPU/MIG UUID without its 'GPU-'/'MIG-' prefix, lower case (the form cuDeviceGetUuid and NVML share)."""
    text = str(value or "").strip().lower()
    for prefix in ("gpu-", "mig-"):
        if text.startswith(prefix):
            return text[len(prefix):]
    return text


def _unescape_mount(text):
    """mountinfo escapes space, tab, newline and backslash as \\ooo octal."""
    out = []
    i = 0
    while i < len(text):
        if text[i] == "\\" and len(text[i + 1:i + 4]) == 3 and text[i + 1:i + 4].isdigit():
            out.append(chr(int(text[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def parse_mountinfo(text):
    """Parse /proc/self/mountinfo into a list of dicts: mount_id, parent_id, dev, root, mount_point,
    options, fstype, source, super_options. Lines that do not parse are skipped."""
    mounts = []
    for line in (text or "").splitlines():
        parts = line.split()
        if len(parts) < 10 or "-" not in parts[6:]:
            continue
        sep = parts.index("-", 6)
        if len(parts) < sep + 3:
            continue
        try:
            mount_id, parent_id = int(parts[0]), int(parts[1])
        except ValueError:
            continue
        mounts.append({
            "mount_id": mount_id,
            "parent_id": parent_id,
            "dev": parts[2],
            "root": _unescape_mount(parts[3]),
            "mount_point": _unescape_mount(parts[4]),
            "options": parts[5].split(","),
            "fstype": parts[sep + 1],
            "source": _unescape_mount(parts[sep + 2]),
            "super_options": parts[sep + 3].split(",") if len(parts) > sep + 3 else [],
        })
    return mounts


def parse_maps_paths(text):
    """The distinct file paths mapped in /proc/self/maps, with their lowest start address."""
    seen = {}
    for line in (text or "").splitlines():
        parts = line.split(None, 5)
        if len(parts) == 6 and parts[5].startswith("/"):
            start, end = (int(x, 16) for x in parts[0].split("-"))
            path = parts[5].strip()
            lo, hi = seen.get(path, (start, end))
            seen[path] = (min(lo, start), max(hi, end))
    return seen


def path_for_address(maps_text, address):
    """The mapped file that holds ``address`` in /proc/self/maps text, or None."""
    for line in (maps_text or "").splitlines():
        parts = line.split(None, 5)
        if len(parts) == 6 and parts[5].startswith("/"):
            start, end = (int(x, 16) for x in parts[0].split("-"))
            if start <= address < end:
                return parts[5].strip()
    return None


def parse_ldconfig(text, names):
    """Paths `ldconfig -p` lists for each soname in ``names``."""
    found = dict((n, []) for n in names)
    for line in (text or "").splitlines():
        line = line.strip()
        if "=>" not in line:
            continue
        left, path = line.split("=>", 1)
        soname = left.split()[0] if left.split() else ""
        if soname in found:
            found[soname].append(path.strip())
    return found


# ---------------------------------------------------------------------------------------------------
# the script as a file (the runtime and compute layers mount it into the container / run it on the host)

def probe_source():
    """The probe script's text (from the file, or from the zip AnsiballZ runs us from)."""
    loader = globals().get("__loader__")
    if loader is not None and hasattr(loader, "get_source"):
        try:
            text = loader.get_source(__name__)
            if isinstance(text, bytes):  # Ansible's collection loader returns bytes, zipimport text
                text = text.decode("utf-8")
            if text:
                return text
        except (ImportError, OSError):
            pass
    with open(__file__, "r") as f:
        return f.read()


def write_probe(directory=None):
    """Write the probe script to a fresh private directory; returns (directory, path)."""
    d = tempfile.mkdtemp(prefix="gpuprobe-probe-", dir=directory)
    os.chmod(d, 0o755)
    path = os.path.join(d, "gpuprobe_probe.py")
    with open(path, "w") as f:
        f.write(probe_source())
    os.chmod(path, 0o644)
    return d, path


# ---------------------------------------------------------------------------------------------------
# collection (runs inside the container and on the host)

def emit(item):
    if TOKEN is not None:
        item = dict(item, token=TOKEN)
    sys.stdout.write(json.dumps(item, sort_keys=True) + "\n")
    sys.stdout.flush()


def _ms(t0):
    return round((time.monotonic() - t0) * 1000.0, 3)


def _read(path, limit=1 << 20):
    try:
        with open(path, "r") as f:
            return f.read(limit)
    except (IOError, OSError):
        return None


def inspect_node(path):
    """What a device node looks like from here and what open(O_RDWR) returns on it."""
    info = {"path": path, "present": False}
    try:
        st = os.lstat(path)
    except OSError as exc:
        info["stat_error"] = errno.errorcode.get(exc.errno, str(exc.errno))
        return info
    info["present"] = True
    if stat.S_ISCHR(st.st_mode):
        info["type"] = "c"
    elif stat.S_ISBLK(st.st_mode):
        info["type"] = "b"
    elif stat.S_ISLNK(st.st_mode):
        info["type"] = "symlink"
    elif stat.S_ISDIR(st.st_mode):
        info["type"] = "dir"
    else:
        info["type"] = "file"
    if info["type"] in ("c", "b"):
        info["major"] = os.major(st.st_rdev)
        info["minor"] = os.minor(st.st_rdev)
    info["mode"] = "%04o" % stat.S_IMODE(st.st_mode)
    info["uid"] = st.st_uid
    info["gid"] = st.st_gid
    t0 = time.monotonic()
    try:
        fd = os.open(path, os.O_RDWR | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        os.close(fd)
        info["open"] = "OK"
    except OSError as exc:
        info["open"] = errno.errorcode.get(exc.errno, str(exc.errno))
        info["open_error"] = os.strerror(exc.errno)
    info["open_ms"] = _ms(t0)
    return info


def list_dev_nvidia():
    out = []
    for d in ("/dev", "/dev/nvidia-caps", "/dev/dri"):
        try:
            names = sorted(os.listdir(d))
        except OSError:
            continue
        for name in names:
            if d != "/dev" or name.startswith("nvidia") or name == "dri":
                out.append(os.path.join(d, name))
    return out


def file_identity(path, chunk=1 << 20):
    """What a loaded library file is: realpath, size, st_dev, st_ino, mtime and its sha256 (read in chunks; the
    milliseconds the digest took are recorded; a file over MAX_LIBRARY_BYTES is not read). Compared with the host
    driver root's file by content."""
    info = {"path": path}
    t0 = time.monotonic()
    try:
        st = os.stat(path)
        info.update(size=st.st_size, dev=st.st_dev, ino=st.st_ino, mtime=int(st.st_mtime))
        if st.st_size > MAX_LIBRARY_BYTES or not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EFBIG, "not hashed: not a regular file of at most %d bytes" % MAX_LIBRARY_BYTES)
        digest = hashlib.sha256()
        with open(path, "rb") as f:
            while True:
                data = f.read(chunk)
                if not data:
                    break
                digest.update(data)
        info["sha256"] = digest.hexdigest()
    except (IOError, OSError) as exc:
        info["error"] = "%s: %s" % (errno.errorcode.get(exc.errno, str(exc.errno)), exc.strerror)
    info["sha256_ms"] = _ms(t0)
    return info


def ldconfig_lookup(names):
    # This script runs alone inside the container (standard library only, no _common/run.py there), so it calls
    # subprocess itself, with a timeout like every external call of the collection.
    for prog in ("/sbin/ldconfig", "/usr/sbin/ldconfig", "/sbin/ldconfig.real"):
        if os.path.exists(prog):
            try:
                proc = subprocess.run([prog, "-p"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=10,
                                      check=False)
            except (OSError, subprocess.SubprocessError) as exc:
                return {"available": True, "program": prog, "error": str(exc)}
            return {"available": True, "program": prog,
                    "found": parse_ldconfig(proc.stdout.decode("utf-8", "replace"), names)}
    return {"available": False, "found": {}}


def is_driver_library(path, spec_roots=()):
    """Why a file mapped in this process is reported with mapped_libraries: "name" (an NVIDIA driver library's),
    "spec mount" (under a spec mount's container path), both, or None."""
    name = os.path.basename(path)
    why = ["name"] if name.startswith(DRIVER_LIBRARY_PREFIXES) else []
    if any(path == r or path.startswith(r.rstrip("/") + "/") for r in spec_roots):
        why.append("spec mount")
    return ", ".join(why) or None


class Loaded(object):
    """Libraries dlopen'ed by this process, loaded once (the first load is the timed one), and every driver library
    mapped in it (``scan``: /proc/self/maps read after each load and step; each file hashed once, when first seen)."""

    def __init__(self, spec_mounts=()):
        self.cache = {}
        self.identities = {}
        self.mapped = {}
        self.scans = 0
        self.hash_s = 0.0
        roots = set()
        for path in spec_mounts or ():
            if isinstance(path, str) and path.startswith("/"):
                roots.update((path, os.path.realpath(path)))
        self.spec_roots = sorted(roots)

    def scan(self):
        """Record the driver libraries (``is_driver_library``) mapped now that were not seen before."""
        self.scans += 1
        for path in parse_maps_paths(_read("/proc/self/maps", 16 << 20) or ""):
            why = is_driver_library(path, self.spec_roots)
            if not why or path in self.mapped or len(self.mapped) >= MAX_MAPPED_LIBRARIES:
                continue
            entry = {"path": path, "realpath": os.path.realpath(path), "why": why, "scan": self.scans}
            if self.hash_s < MAPPED_HASH_BUDGET_S:
                t0 = time.monotonic()
                entry["identity"] = self.identity(entry["realpath"])
                self.hash_s += time.monotonic() - t0
            else:
                entry["identity"] = {"path": entry["realpath"], "error": "not hashed: %ss budget spent" % MAPPED_HASH_BUDGET_S}
            self.mapped[path] = entry

    def identity(self, path):
        """file_identity, once per file (by dev, inode, size, mtime)."""
        try:
            st = os.stat(path)
            key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime)
        except OSError:
            return file_identity(path)
        known = self.identities.get(key)
        if known is None:
            known = self.identities[key] = file_identity(path)
        return dict(known, path=path)

    def report(self):
        """The mapped_libraries line: every driver library seen mapped, in the order seen."""
        self.scan()
        return {"kind": "mapped_libraries", "libraries": list(self.mapped.values()), "scans": self.scans,
                "limit": MAX_MAPPED_LIBRARIES, "hash_ms": round(self.hash_s * 1000.0, 3)}

    def load(self, name, explicit=None):
        key = explicit or name
        if key in self.cache:
            return self.cache[key]
        entry = {"name": name, "requested": key}
        t0 = time.monotonic()
        try:
            handle = ctypes.CDLL(key, mode=getattr(ctypes, "RTLD_GLOBAL", 0))
            entry["ok"] = True
        except OSError as exc:
            handle = None
            entry["ok"] = False
            entry["error"] = str(exc)
        entry["ms"] = _ms(t0)
        if handle is not None:
            entry["path"] = self._loaded_path(handle, name)
            if entry["path"]:
                entry["realpath"] = os.path.realpath(entry["path"])
                try:
                    entry["size"] = os.stat(entry["path"]).st_size
                except OSError:
                    pass
                if name == LIBCUDA:
                    # the file /proc/self/maps says is mapped: its content identity binds the proof to the host driver
                    entry["identity"] = self.identity(entry["realpath"])
        self.cache[key] = (handle, entry)
        self.scan()
        return handle, entry

    @staticmethod
    def _loaded_path(handle, name):
        maps = _read("/proc/self/maps", 16 << 20) or ""
        for symbol in ("cuInit", "nvmlInit_v2", "nvmlInit"):
            try:
                address = ctypes.cast(getattr(handle, symbol), ctypes.c_void_p).value
            except AttributeError:
                continue
            path = path_for_address(maps, address)
            if path:
                return path
        stem = name.split(".so")[0] + ".so"
        for path in parse_maps_paths(maps):
            if os.path.basename(path).startswith(stem):
                return path
        return None


# where the container's own symlinks put the spec's paths (the runtime layer's path comparison, _runtime.container_path)
MAX_RESOLVE_PATHS = 1024


def resolve_paths(paths):
    """{path: its realpath inside this container, or None when it cannot be resolved}. runc resolves the rootfs's
    symlinks when it mounts or creates what a spec names (/lib64/x on a merged-/usr image lands at /usr/lib64/x)."""
    out = {}
    for path in list(paths or [])[:MAX_RESOLVE_PATHS]:
        if isinstance(path, str) and path.startswith("/"):
            try:
                out[path] = os.path.realpath(path)
            except (OSError, ValueError):
                out[path] = None
    return out


def collect_inventory(config, loaded):
    nodes = list(config.get("nodes") or [])
    for path in list_dev_nvidia():
        if path not in nodes and not os.path.isdir(path):
            nodes.append(path)
    libraries = {}
    for name in (LIBCUDA, LIBNVML):
        explicit = config.get("libcuda") if name == LIBCUDA else None
        _handle, entry = loaded.load(name, explicit)
        libraries[name] = entry
    groups = []
    try:
        groups = sorted(os.getgroups())
    except OSError:
        pass
    return {
        "kind": "inventory",
        "nodes": dict((p, inspect_node(p)) for p in nodes),
        "mounts": parse_mountinfo(_read("/proc/self/mountinfo")),
        "resolved_paths": resolve_paths(config.get("resolve_paths")),
        "env": dict(os.environ) if config.get("capture_env", True) else dict(
            (k, v) for k, v in os.environ.items() if k in ("PATH", "LD_LIBRARY_PATH")),
        "ld_library_path": os.environ.get("LD_LIBRARY_PATH"),
        "libraries": libraries,
        "ldconfig": ldconfig_lookup((LIBCUDA, LIBNVML)),
        "groups": groups,
        "driver_version_file": (_read("/proc/driver/nvidia/version") or "").strip() or None,
    }


class Cuda(object):
    """The CUDA driver API through ctypes; every call is one recorded step."""

    def __init__(self, handle, scan=None):
        self.lib = handle
        self.scan = scan  # called after each step: a library CUDA loads (the JIT compiler) is seen while mapped
        self.device = None  # the ordinal (and UUID) the next calls are about; None for global calls
        self.uuid = None

    def tag(self, item):
        if self.device is not None:
            item["device"] = self.device
            item["uuid"] = self.uuid
        return item

    def fn(self, name):
        for candidate in SYMBOLS.get(name, (name,)):
            try:
                return getattr(self.lib, candidate), candidate
            except AttributeError:
                continue
        return None, name

    def error_name(self, code):
        driver_name = None
        get_name, _sym = self.fn("cuGetErrorName")
        if get_name is not None and code != 0:
            out = ctypes.c_char_p()
            try:
                if get_name(ctypes.c_int(code), ctypes.byref(out)) == 0 and out.value:
                    driver_name = out.value.decode("ascii", "replace")
            except Exception:  # pylint: disable=broad-except
                driver_name = None
        return cu_result_name(code, driver_name), ("driver" if driver_name else "table")

    def call(self, step, name, *args):
        emit(self.tag({"kind": "begin", "step": step}))
        func, symbol = self.fn(name)
        if func is None:
            item = self.tag({"kind": "step", "step": step, "call": name, "ok": False, "rc": None,
                             "name": "SYMBOL_NOT_FOUND", "ms": 0.0})
            emit(item)
            return item
        t0 = time.monotonic()
        rc = func(*args)
        ms = _ms(t0)
        result_name, source = (CU_RESULTS[0], "table") if rc == 0 else self.error_name(rc)
        item = self.tag({"kind": "step", "step": step, "call": symbol, "ok": rc == 0, "rc": rc, "name": result_name,
                         "name_source": source, "ms": ms})
        emit(item)
        if self.scan is not None:
            self.scan()
        return item


def skip_reason_for(info, config):
    """Why the probe must not touch this device (None: run it). ``idle_uuids`` (a list, even empty): the only devices
    known idle, no other is touched; ``skip_uuids``: never touched; ``only_uuids``: when given, the only devices to
    run on (the host control runs on the container's GPUs)."""
    skip = set(norm_uuid(u) for u in config.get("skip_uuids") or [] if u)
    only = set(norm_uuid(u) for u in config.get("only_uuids") or [] if u)
    if config.get("uuid"):
        only.add(norm_uuid(config["uuid"]))
    uuid = norm_uuid(info.get("uuid")) if info.get("uuid") else None
    if config.get("idle_uuids") is not None and uuid not in set(norm_uuid(u) for u in config["idle_uuids"] if u):
        return "not known idle: %s, not preempting" % (
            "the host's NVML did not report %s idle" % info["uuid"] if uuid else "no UUID to match with the idle ones")
    if uuid is None and (skip or only):
        return "UUID unknown: cannot tell whether it is a GPU to leave alone"
    if uuid in skip:
        return "skipped: GPU in use (skip_uuids), not preempting"
    if only and uuid not in only:
        return "skipped: not among only_uuids"
    return None


def run_compute(config, loaded):  # pylint: disable=too-many-locals
    """The compute steps. dlopen, cuInit, cuDriverGetVersion and cuDeviceGetCount are global (a failure stops
    the run); then every device is listed (name, UUID) and, unless skipped, gets its own context, kernel and
    verification: one device failing never stops the others. Per-device lines carry "device" (the ordinal)."""
    n = int(config.get("n") or DEFAULT_N)
    kernel = (int(config.get("a", DEFAULT_A)) & 0xFFFFFFFF, int(config.get("b", DEFAULT_B)) & 0xFFFFFFFF)
    emit({"kind": "begin", "step": "dlopen"})
    handle, entry = loaded.load(LIBCUDA, config.get("libcuda"))
    step = {"kind": "step", "step": "dlopen", "call": "dlopen(%s)" % entry["requested"], "ok": entry["ok"],
            "rc": None, "name": "OK" if entry["ok"] else "DLOPEN_FAILED", "ms": entry["ms"],
            "path": entry.get("path"), "realpath": entry.get("realpath"), "error": entry.get("error"),
            "identity": entry.get("identity")}
    emit(step)
    if handle is None:
        return
    cu = Cuda(handle, getattr(loaded, "scan", None))
    if not cu.call("cuInit", "cuInit", ctypes.c_uint(0))["ok"]:
        return
    version = ctypes.c_int(0)
    item = cu.call("cuDriverGetVersion", "cuDriverGetVersion", ctypes.byref(version))
    if not item["ok"]:
        return
    emit({"kind": "fact", "cuda_driver_api": version.value})
    count = ctypes.c_int(0)
    if not cu.call("cuDeviceGetCount", "cuDeviceGetCount", ctypes.byref(count))["ok"]:
        return
    devices = []
    handles = {}
    for ordinal in range(min(count.value, 64)):
        cu.device, cu.uuid = ordinal, None
        info = {"ordinal": ordinal, "name": None, "uuid": None, "listed": False, "skipped": None}
        devices.append(info)
        dev = ctypes.c_int(0)
        if not cu.call("cuDeviceGet", "cuDeviceGet", ctypes.byref(dev), ctypes.c_int(ordinal))["ok"]:
            continue
        name = ctypes.create_string_buffer(256)
        if cu.call("cuDeviceGetName", "cuDeviceGetName", name, ctypes.c_int(256), dev)["ok"]:
            info["name"] = name.value.decode("utf-8", "replace")
        raw = (ctypes.c_ubyte * 16)()
        got = cu.call("cuDeviceGetUuid", "cuDeviceGetUuid", ctypes.byref(raw), dev)
        if got["ok"]:
            info["uuid"] = format_uuid(raw)
            # which entry point answered: without _v2 (drivers < 470) a MIG device gives its parent GPU's UUID
            info["uuid_symbol"] = got["call"]
        info["listed"] = info["uuid"] is not None
        info["skipped"] = skip_reason_for(info, config)
        handles[ordinal] = dev
    cu.device, cu.uuid = None, None
    emit({"kind": "fact", "devices": devices})
    if not devices:
        emit({"kind": "step", "step": "cuDeviceGet", "call": "cuDeviceGetCount", "ok": False, "rc": 100,
              "name": "CUDA_ERROR_NO_DEVICE", "name_source": "table", "ms": 0.0})
        return
    for info in devices:
        if info["ordinal"] not in handles or info["skipped"]:
            continue
        cu.device, cu.uuid = info["ordinal"], info["uuid"]
        emit({"kind": "device_begin", "device": info["ordinal"], "uuid": info["uuid"]})
        try:
            run_device(cu, handles[info["ordinal"]], n, kernel)
        except Exception as exc:  # pylint: disable=broad-except
            # one device's crash (a ctypes error) must not cost the other devices their run
            emit({"kind": "step", "step": "exception", "call": "python", "ok": False, "rc": None,
                  "name": "PROBE_EXCEPTION", "error": repr(exc)[:500], "ms": 0.0, "device": info["ordinal"],
                  "uuid": info["uuid"]})
        emit({"kind": "device_end", "device": info["ordinal"], "uuid": info["uuid"]})
    cu.device, cu.uuid = None, None


def run_device(cu, dev, n, kernel=(DEFAULT_A, DEFAULT_B)):
    """Primary context, kernel, verification and release on one device."""
    ctx = ctypes.c_void_p()
    if not cu.call("cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRetain", ctypes.byref(ctx), dev)["ok"]:
        return
    try:
        if cu.call("cuCtxSetCurrent", "cuCtxSetCurrent", ctx)["ok"]:
            _kernel(cu, n, kernel)
    finally:
        cu.call("cuDevicePrimaryCtxRelease", "cuDevicePrimaryCtxRelease", dev)


def _kernel(cu, n, kernel):
    module = ctypes.c_void_p()
    image = ctypes.create_string_buffer(PTX.encode("ascii"))
    if not cu.call("cuModuleLoadData", "cuModuleLoadData", ctypes.byref(module), image)["ok"]:
        return
    try:
        func = ctypes.c_void_p()
        if not cu.call("cuModuleGetFunction", "cuModuleGetFunction", ctypes.byref(func), module,
                       KERNEL_NAME.encode("ascii"))["ok"]:
            return
        dptr = ctypes.c_uint64(0)
        if not cu.call("cuMemAlloc", "cuMemAlloc", ctypes.byref(dptr), ctypes.c_size_t(4 * n))["ok"]:
            return
        try:
            _launch_and_verify(cu, func, dptr, n, kernel)
        finally:
            cu.call("cuMemFree", "cuMemFree", dptr)
    finally:
        cu.call("cuModuleUnload", "cuModuleUnload", module)


def _launch_and_verify(cu, func, dptr, n, kernel):
    # pre-fill with a pattern the kernel never writes, so stale memory cannot pass verification
    if not cu.call("cuMemsetD32", "cuMemsetD32", dptr, ctypes.c_uint(FILL_PATTERN), ctypes.c_size_t(n))["ok"]:
        return
    arg_n, arg_a, arg_b = ctypes.c_uint32(n), ctypes.c_uint32(kernel[0]), ctypes.c_uint32(kernel[1])
    params = (ctypes.c_void_p * 4)(*[ctypes.cast(ctypes.byref(x), ctypes.c_void_p) for x in (dptr, arg_n, arg_a, arg_b)])
    block = 256
    grid = (n + block - 1) // block
    if not cu.call("cuLaunchKernel", "cuLaunchKernel", func, ctypes.c_uint(grid), ctypes.c_uint(1), ctypes.c_uint(1),
                   ctypes.c_uint(block), ctypes.c_uint(1), ctypes.c_uint(1), ctypes.c_uint(0), ctypes.c_void_p(0),
                   params, ctypes.c_void_p(0))["ok"]:
        return
    if not cu.call("cuCtxSynchronize", "cuCtxSynchronize")["ok"]:
        return
    host = (ctypes.c_uint32 * n)()
    if not cu.call("cuMemcpyDtoH", "cuMemcpyDtoH", host, dptr, ctypes.c_size_t(4 * n))["ok"]:
        return
    t0 = time.monotonic()
    result = verify_values(list(host), n, kernel[0], kernel[1])
    item = cu.tag({"kind": "step", "step": "verify", "call": "verify out[i] == i*%d+%d" % kernel, "ok": result["ok"], "rc": None,
                   "name": "OK" if result["ok"] else "MISMATCH", "ms": _ms(t0)})
    item.update(result)
    emit(item)


def run_nvml(loaded):
    emit({"kind": "begin", "step": "nvmlInit"})
    handle, entry = loaded.load(LIBNVML)
    item = {"kind": "nvml", "library": entry, "ok": False}
    if handle is None:
        item["name"] = "LIBRARY_NOT_LOADED"
        emit(item)
        return
    init = getattr(handle, "nvmlInit_v2", None) or getattr(handle, "nvmlInit", None)
    t0 = time.monotonic()
    rc = init() if init is not None else None
    item["ms"] = _ms(t0)
    item["rc"] = rc
    item["name"] = nvml_result_name(rc) if rc is not None else "SYMBOL_NOT_FOUND"
    item["ok"] = rc == 0
    if rc == 0:
        count = ctypes.c_uint(0)
        get_count = getattr(handle, "nvmlDeviceGetCount_v2", None)
        if get_count is not None and get_count(ctypes.byref(count)) == 0:
            item["device_count"] = count.value
        buf = ctypes.create_string_buffer(96)
        get_version = getattr(handle, "nvmlSystemGetDriverVersion", None)
        if get_version is not None and get_version(buf, ctypes.c_uint(96)) == 0:
            item["driver_version"] = buf.value.decode("ascii", "replace")
        shutdown = getattr(handle, "nvmlShutdown", None)
        if shutdown is not None:
            shutdown()
    emit(item)


def main(argv=None):
    global TOKEN  # pylint: disable=global-statement
    argv = sys.argv if argv is None else argv
    try:
        config = json.loads(argv[1]) if len(argv) > 1 else {}
    except ValueError as exc:
        emit({"kind": "error", "error": "bad config: %s" % exc})
        return 2
    TOKEN = config.get("token")
    emit({"kind": "start", "probe_version": PROBE_VERSION, "pid": os.getpid(), "uid": os.getuid(), "gid": os.getgid(),
          "python": sys.version.split()[0], "executable": sys.executable, "compute": bool(config.get("compute")),
          "in_container": os.path.exists("/run/.containerenv") or os.path.exists("/.dockerenv"),
          "hostname": os.uname()[1], "isolated": bool(sys.flags.isolated and sys.flags.no_site),
          "a": config.get("a", DEFAULT_A), "b": config.get("b", DEFAULT_B)})
    loaded = Loaded(config.get("spec_mounts"))
    emit(collect_inventory(config, loaded))
    if config.get("compute"):
        if config.get("skip_compute_reason"):
            emit({"kind": "compute_skipped", "reason": config["skip_compute_reason"]})
        else:
            run_nvml(loaded)
            run_compute(config, loaded)
    emit(loaded.report())
    emit({"kind": "done"})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
