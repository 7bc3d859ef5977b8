# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: the contract between the probe script (``_probe``) and its assessors (runtime and compute layers);
not public API.

How the probe is run: ``python3 -I -S <script> '<json config>'`` (ISOLATED_FLAGS), in the container and on the
host, with a config holding a fresh ``token`` and kernel ``a``, ``b`` per run (``new_run_keys``).

What it prints: JSON lines on stdout, flushed one by one (whatever it saw before a hang or a kill is still there),
every one carrying ``token``:
  {"kind": "start", ...}       who and where it runs
  {"kind": "inventory", ...}   device nodes (type, major:minor, mode, open(O_RDWR) result), mounts
                               (/proc/self/mountinfo), env, which libcuda/libnvidia-ml the loader finds
  {"kind": "begin", "step": s} right before each CUDA/NVML call (a hang leaves a begin without a step)
  {"kind": "step", ...}        each compute step: call, rc, CUresult name, milliseconds; the per-device
                               steps (context .. release, verify) also carry "device" (ordinal) and "uuid"
  {"kind": "fact", "cuda_driver_api": v}  what cuDriverGetVersion returned
  {"kind": "fact", "devices": [...]}  every device seen: ordinal, name, uuid, uuid_symbol (the cuDeviceGetUuid
                               entry point that gave it), listed, skipped (why not run)
  {"kind": "nvml", ...}        nvmlInit through libnvidia-ml.so.1 (library, rc, name, driver_version)
  {"kind": "compute_skipped", "reason": r}   compute asked for and not run (busy state unknown)
  {"kind": "device_begin"|"device_end", "device": o, "uuid": u}   around each device's run
  {"kind": "mapped_libraries", "libraries": [...]}   before done: every driver library (by name, or a file under a
                               spec mount's container path: config spec_mounts) mapped in the probe's process at any
                               of its scans (after each load and step): path, realpath, why, identity (as below)
  {"kind": "error", "error": e}   the config could not be read (no token: the run is unusable)
  {"kind": "done"}             the last line: no done line and a non-zero exit is a crash
The dlopen step and the inventory's libcuda carry ``identity`` (the mapped file's path, size, dev, ino, mtime,
sha256, sha256_ms); the verify step carries the ``a`` and ``b`` it checked; the inventory carries
``resolved_paths`` ({path: realpath or null} for the config's ``resolve_paths``).

How it is read: ``parse_output(text, token, kernel)`` keeps only the lines with this run's token (the rest is
noise, counted), folds them into one dict and cross-checks the step lines against the probe's own observations
(``cross_check``); ``first_failed_step`` and ``dlopen_class`` (what the loader's words say) are what the
assessors build signatures from.
"""

from __future__ import annotations

import json
import os
import re

from ansible_collections.gpuprobe.layers.plugins.module_utils._probe.script import LIBCUDA

# The interpreter flags of every probe run: -I (isolated: no PYTHON* env, no user site, no script dir on
# sys.path) and -S (no site: no sitecustomize, usercustomize or .pth file of the image runs).
ISOLATED_FLAGS = ("-I", "-S")
# Every line the probe prints is one JSON object (_probe.script emit): _common.run.run keeps such lines whole even from the
# dropped middle of a flood of other output (keep_prefix)
LINE_PREFIX = b'{"'


NOISE_KEPT = 20  # noise lines kept (each cut at 500 characters); all are counted


def parse_output(text, token=None, kernel=None):
    """Fold the probe's JSON lines into one dict: start, inventory, steps (list), nvml, complete (a done
    line was seen), hung_step (a begin without its step, i.e. where a kill caught it), noise (lines that
    are not this run's probe JSON, the first NOISE_KEPT of them) and noise_count. Per-device steps carry "device"
    (the ordinal) and "uuid"; ``facts["devices"]`` lists every device the probe saw (ordinal, name, uuid, listed,
    skipped); hung_device is the ordinal of a hung per-device call.

    ``token``: this run's token. When given, only JSON lines carrying exactly it are the probe's; any other
    line (a foreign JSON line with a wrong or no token, a library's chatter) is noise. None (replaying recorded
    output that predates tokens) reads every JSON line. ``kernel``: the (a, b) this run asked for.
    ``inconsistent`` lists what the step lines say that the probe's own observations contradict."""
    result = {"start": None, "inventory": None, "mapped_libraries": None, "steps": [], "nvml": None, "complete": False,
              "hung_step": None, "hung_device": None, "compute_requested": False, "compute_skipped": None, "facts": {}, "errors": [],
              "noise": [], "noise_count": 0, "token_checked": token is not None, "inconsistent": [], "last_step": None}
    open_step = None
    open_device = None
    for line in (text or "").splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            item = json.loads(line)
        except ValueError:
            item = None
        if not isinstance(item, dict) or (token is not None and item.get("token") != token):
            result["noise_count"] += 1
            if len(result["noise"]) < NOISE_KEPT:
                result["noise"].append(line[:500])
            continue
        kind = item.get("kind")
        if kind in ("start", "inventory", "mapped_libraries") and result[kind] is not None:
            result["inconsistent"].append("a second %s line" % kind)
        if kind == "start":
            result["start"] = item
            result["compute_requested"] = bool(item.get("compute"))
        elif kind in ("inventory", "mapped_libraries"):
            result[kind] = item
        elif kind == "begin":
            open_step = item.get("step")
            open_device = item.get("device")
        elif kind == "step":
            result["steps"].append(item)
            result["last_step"] = item.get("step")
            open_step = open_device = None
        elif kind == "nvml":
            result["nvml"] = item
            open_step = None
        elif kind == "compute_skipped":
            result["compute_skipped"] = item.get("reason")
        elif kind == "fact":
            result["facts"].update(dict((k, v) for k, v in item.items() if k not in ("kind", "token")))
        elif kind == "error":
            result["errors"].append(item.get("error"))
        elif kind == "done":
            result["complete"] = True
    result["hung_step"] = open_step
    result["hung_device"] = open_device if open_step else None
    result["inconsistent"] += cross_check(result, kernel)
    return result


def cross_check(parsed, kernel=None):
    """What the step lines claim that the probe's own observations contradict (each a sentence): the dlopen step's
    loaded file is the inventory's libcuda and one of the mapped libraries; a successful cuDriverGetVersion left its
    version; every per-device step names a device of the device list, with its UUID; a verified kernel used this run's
    (a, b)."""
    out = []
    steps = parsed.get("steps") or []
    inventory = parsed.get("inventory") or {}
    lib = (inventory.get("libraries") or {}).get(LIBCUDA) if isinstance(inventory.get("libraries"), dict) else None
    for s in steps:
        if s.get("step") == "dlopen" and s.get("ok") and isinstance(lib, dict):
            for key in ("path", "realpath"):
                if s.get(key) != lib.get(key):
                    out.append("the dlopen step loaded %s %r, the inventory's libcuda is %r" % (key, s.get(key), lib.get(key)))
            if (s.get("identity") or {}).get("sha256") != (lib.get("identity") or {}).get("sha256"):
                out.append("the dlopen step's libcuda digest differs from the inventory's")
            mapped = (parsed.get("mapped_libraries") or {}).get("libraries")
            if isinstance(mapped, list) and s.get("path") not in [m.get("path") for m in mapped if isinstance(m, dict)]:
                out.append("the dlopen step loaded %r, which the mapped libraries do not list" % s.get("path"))
        if s.get("step") == "cuDriverGetVersion" and s.get("ok") and "cuda_driver_api" not in (parsed.get("facts") or {}):
            out.append("cuDriverGetVersion succeeded but no version was reported")
    devices = (parsed.get("facts") or {}).get("devices")
    by_ordinal = dict((d.get("ordinal"), d) for d in devices or [] if isinstance(d, dict))
    for s in steps:
        if s.get("device") is None:
            continue
        if devices is None:
            if s.get("step") not in ("cuDeviceGet", "cuDeviceGetName", "cuDeviceGetUuid"):
                out.append("a %s step of device %s before any device list" % (s.get("step"), s.get("device")))
            continue
        dev = by_ordinal.get(s.get("device"))
        if dev is None:
            out.append("a %s step of device %s, which the device list does not hold" % (s.get("step"), s.get("device")))
        elif s.get("uuid") is not None and s.get("uuid") != dev.get("uuid"):
            out.append("a %s step of device %s names UUID %s, the device list %s" % (
                s.get("step"), s.get("device"), s.get("uuid"), dev.get("uuid")))
        elif dev.get("skipped") and s.get("step") not in ("cuDeviceGet", "cuDeviceGetName", "cuDeviceGetUuid"):
            out.append("a %s step of device %s, which the probe skipped (%s)" % (s.get("step"), s.get("device"), dev["skipped"]))
        if kernel is not None and s.get("step") == "verify" and s.get("ok") and (s.get("a"), s.get("b")) != tuple(kernel):
            out.append("a kernel verified with a=%s b=%s, this run asked for a=%s b=%s" % (
                s.get("a"), s.get("b"), kernel[0], kernel[1]))
    return out


_GLIBC_TOO_OLD = re.compile(r"version [`'\"]?GLIBC_[0-9.]+['`\"]? not found")
_MISSING_DEPENDENCY = re.compile(r"^(?:.*?: )?([^\s:]+): cannot open shared object file")


def dlopen_class(error):
    """What the loader's words (dlerror) say about a failed dlopen of libcuda.so.1: ``image_glibc`` (the image's glibc
    is older than the library needs), ``dependency`` (libcuda was found, a library it needs was not), else
    ``libcuda`` (libcuda itself not found or not loadable)."""
    text = str(error or "")
    if _GLIBC_TOO_OLD.search(text):
        return "image_glibc"
    m = _MISSING_DEPENDENCY.search(text)
    if m and not os.path.basename(m.group(1)).startswith("libcuda.so"):
        return "dependency"
    return "libcuda"


def new_run_keys():
    """The per-run part of a probe config: a random token (bound to every line) and the kernel's a and b."""
    raw = os.urandom(12)
    return {"token": raw[:8].hex(), "a": 2 + int.from_bytes(raw[8:10], "big") % 65000,
            "b": 1 + int.from_bytes(raw[10:12], "big")}


def first_failed_step(steps):
    for s in steps or []:
        if not s.get("ok"):
            return s
    return None
