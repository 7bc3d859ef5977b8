# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: what binds the proof to the host's driver: compute.driver.binding; not public API.

The binding holds for a container run when cuDriverGetVersion is the host's NVML CUDA driver version and every driver
library the probe's process mapped (its mapped_libraries line: libcuda, NVML, the JIT compiler CUDA loads, any file
under a spec mount) has the content of the driver root's file of that library at the running driver version
(libX.so.<driver version>, hashed here with _common.digest.file_digest)."""

from __future__ import annotations

import posixpath
import threading

from ansible_collections.gpuprobe.layers.plugins.module_utils._host.driver import library_path
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.fs import under_root
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.digest import file_digest
from ansible_collections.gpuprobe.layers.plugins.module_utils._compute.catalogue import CHECKS
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import FAIL, NOT_RUN, PASS


def host_driver_facts(host_record):
    """What the host says the running driver is: cuda_driver_api (NVML's CUDA driver version, an int like 13000),
    driver_version (NVML, else the kernel module), and libcuda: the driver root's libcuda.so.<driver_version>
    hashed (file_digest); ``unknown`` lists what could not be told."""
    evidence = (host_record or {}).get("evidence") or {}
    nvml = evidence.get("nvml") or {}
    module = evidence.get("kernel_module") or {}
    driver_version = nvml.get("driver_version") or module.get("proc_driver_version") or module.get("sys_module_version")
    facts = {"cuda_driver_api": nvml.get("cuda_driver_version_int"), "driver_version": driver_version,
             "driver_root": evidence.get("driver_root"), "libcuda": None, "unknown": []}
    if isinstance(facts["driver_root"], dict):
        facts["driver_root"] = facts["driver_root"].get("path")
    if not isinstance(facts["cuda_driver_api"], int):
        facts["cuda_driver_api"] = None
        facts["unknown"].append("the host's CUDA driver version (NVML: %s)" % (
            nvml.get("error") or ("not read" if host_record else "no host record")))
    if not facts["driver_version"] or not facts["driver_root"]:
        facts["unknown"].append("the running driver's libcuda file (driver version %s, driver root %s)" % (
            facts["driver_version"], facts["driver_root"]))
        return facts
    root = facts["root"] = evidence.get("root") or "/"
    name = "libcuda.so.%s" % facts["driver_version"]
    rel = library_path(root, facts["driver_root"], name)
    if rel is None:
        facts["unknown"].append("no %s in the driver root %s" % (name, facts["driver_root"]))
        return facts
    try:
        facts["libcuda"] = dict(file_digest(under_root(root, rel)), host_path=rel)
        facts["libraries"] = {name: dict(facts["libcuda"], name=name)}
    except OSError as exc:
        facts["unknown"].append("%s could not be read: %s" % (rel, exc))
    return facts


# the driver libraries every compute run maps besides libcuda (NVML, the PTX JIT compiler): hashed in the prefetch too
PREFETCHED = ("libnvidia-ml", "libnvidia-ptxjitcompiler")


def library_stem(path):
    """libnvidia-ml of .../libnvidia-ml.so.1 (None for a name without .so)."""
    base = posixpath.basename(path or "")
    return base.split(".so", 1)[0] if ".so" in base and not base.startswith(".so") else None


def host_library(host_facts, stem):
    """The driver root's file of the library ``stem`` at the running driver version (<stem>.so.<driver_version>),
    hashed: {name, host_path, sha256, size, ...} or {name, error}; kept in host_facts["libraries"] by name."""
    libs = host_facts.setdefault("libraries", {})
    name = "%s.so.%s" % (stem, host_facts.get("driver_version"))
    if name in libs:
        return libs[name]
    root, driver_root = host_facts.get("root") or "/", host_facts.get("driver_root")
    rel = library_path(root, driver_root, name) if host_facts.get("driver_version") and driver_root else None
    if rel is None:
        out = {"name": name, "error": "no %s in the driver root %s" % (name, driver_root)}
    else:
        try:
            out = dict(file_digest(under_root(root, rel)), host_path=rel, name=name)
        except OSError as exc:
            out = {"name": name, "host_path": rel, "error": "%s could not be read: %s" % (rel, exc)}
    libs[name] = out
    return out


def prefetch_host_driver_facts(host_record):
    """``host_driver_facts`` started in a daemon thread: the driver root's libcuda (~100 MB), NVML and the JIT compiler
    (PREFETCHED) are hashed while the probe container runs, and file_digest keeps the digest for the compute layer's own call after it (~90 ms less after the
    container on the H200; hashlib releases the GIL). Returns the thread (None when none could be started); nothing
    waits for it."""
    def run():
        try:
            facts = host_driver_facts(host_record)
            for stem in PREFETCHED:
                host_library(facts, stem)
        except Exception:  # pylint: disable=broad-except
            pass  # the compute layer's own call meets the same error and reports it
    thread = threading.Thread(target=run, name="gpuprobe-libcuda-digest", daemon=True)
    try:
        thread.start()
    except RuntimeError:  # no thread to be had (a pids limit): the compute layer hashes it itself, after the container
        return None
    return thread


def _loaded_identity(parsed):
    dlopen = next((s for s in (parsed or {}).get("steps") or [] if s.get("step") == "dlopen"), None)
    if dlopen is None or not dlopen.get("ok"):
        return None, dlopen
    return dlopen.get("identity") or {}, dlopen


def library_rows(parsed, host_facts):
    """One row per driver library the probe reported mapped (its mapped_libraries line), judged against the driver
    root's file of that library: path, realpath, why, sha256, size, host_name, host_path, host_sha256, status (PASS:
    the same content; FAIL: other content; NOT_RUN: the probe could not hash it, or the driver root has no such file)
    and observed. None when the probe reported none (an older probe, or it did not get to its last line)."""
    mapped = ((parsed or {}).get("mapped_libraries") or {}).get("libraries")
    if not isinstance(mapped, list):
        return None
    rows = []
    for item in mapped:
        item = item if isinstance(item, dict) else {}
        identity = item.get("identity") if isinstance(item.get("identity"), dict) else {}
        row = {"path": item.get("path"), "realpath": item.get("realpath"), "why": item.get("why"),
               "sha256": identity.get("sha256"), "size": identity.get("size")}
        stem = library_stem(row["path"])
        host = host_library(host_facts, stem) if stem else {"name": None, "error": "not named as a library (.so)"}
        row.update(host_name=host.get("name"), host_path=host.get("host_path"), host_sha256=host.get("sha256"))
        if not row["sha256"]:
            row["status"], row["observed"] = NOT_RUN, "the probe did not hash %s: %s" % (
                row["path"], identity.get("error") or "no digest")
        elif not host.get("sha256"):
            row["status"], row["observed"] = NOT_RUN, "%s: nothing of the host's to compare with: %s" % (
                row["path"], host.get("error"))
        elif row["sha256"] != host["sha256"]:
            row["status"], row["observed"] = FAIL, "the loaded %s (%s bytes, sha256 %s) is not the driver root's %s (%s " \
                "bytes, sha256 %s)" % (row["path"], row["size"], row["sha256"][:16], host["host_path"], host.get("size"),
                                       host["sha256"][:16])
        else:
            row["status"], row["observed"] = PASS, "%s is the driver root's %s" % (row["path"], host["host_path"])
        rows.append(row)
    return rows


def binding_check(builder, parsed, where, host_facts):
    """compute.driver.binding for one container run: PASS only when cuDriverGetVersion equals the host's NVML CUDA
    driver version, the loaded libcuda's sha256 equals the driver root file's AND every driver library the probe's
    process mapped is the driver root's file of that library (``library_rows``). Returns the evidence row."""
    row, observed = _libcuda_binding(parsed, where, host_facts)
    row["libraries"] = rows = library_rows(parsed, host_facts)
    foreign = [r for r in rows or [] if r["status"] == FAIL]
    unknown = [r for r in rows or [] if r["status"] == NOT_RUN]
    subject = "%s: libcuda.so.1" % where
    if foreign:
        subject = "%s: %s" % (where, ", ".join(posixpath.basename(r["path"] or "?") for r in foreign))
        row["differs"] += [r["observed"] for r in foreign]
        row["status"], observed = FAIL, "; ".join(row["differs"])
    elif row["status"] == PASS and rows is None:
        row["status"], observed = NOT_RUN, "the probe reported no mapped libraries (an older probe, or it did not " \
                                           "finish): the libraries its process loaded are not shown to be the host's"
    elif row["status"] == PASS and unknown:
        row["status"], observed = NOT_RUN, "cannot tell: %s" % "; ".join(r["observed"] for r in unknown)
    elif row["status"] == PASS:
        observed += "; every driver library mapped in the probe is the driver root's: %s" % ", ".join(
            posixpath.basename(r["path"] or "?") for r in rows)
    host_lib = host_facts.get("libcuda") or {}
    expected = "CUDA driver %s, libcuda sha256 %s (%s), every mapped driver library the driver root's" % (
        host_facts.get("cuda_driver_api"), host_lib.get("sha256"), host_lib.get("host_path"))
    builder.add("compute.driver.binding", row["status"], subject=subject, expected=expected, observed=observed,
                hint=None if row["status"] != FAIL else CHECKS["compute.driver.binding"]["next"])
    return row


def _libcuda_binding(parsed, where, host_facts):
    """The libcuda half of the binding: (row, observed); row: where, cuda_driver_api, libcuda, status, differs."""
    identity, dlopen = _loaded_identity(parsed)
    cuda = ((parsed or {}).get("facts") or {}).get("cuda_driver_api")
    host_lib = host_facts.get("libcuda") or {}
    row = {"where": where, "cuda_driver_api": cuda, "libcuda": identity, "status": None, "differs": []}
    if dlopen is None or identity is None:
        row["status"] = NOT_RUN
        observed = "no libcuda was loaded in the container (%s)" % ((dlopen or {}).get("error") or "no dlopen step")
    elif not identity.get("sha256"):
        row["status"] = NOT_RUN
        observed = "the probe recorded no digest of the loaded file %s (%s)" % (
            dlopen.get("realpath"), identity.get("error") or "an older probe")
    else:
        if host_lib.get("sha256") and identity["sha256"] != host_lib["sha256"]:
            row["differs"].append("the loaded file %s (%s bytes, sha256 %s) is not the driver root's %s (%s bytes, sha256 %s)" % (
                identity.get("path") or dlopen.get("realpath"), identity.get("size"), identity["sha256"][:16],
                host_lib.get("host_path"), host_lib.get("size"), host_lib["sha256"][:16]))
        if cuda is not None and host_facts.get("cuda_driver_api") is not None and cuda != host_facts["cuda_driver_api"]:
            row["differs"].append("cuDriverGetVersion %s in the container, the host's NVML CUDA driver version %s" % (
                cuda, host_facts["cuda_driver_api"]))
        if row["differs"]:
            row["status"] = FAIL
            observed = "; ".join(row["differs"])
        elif host_facts["unknown"]:
            row["status"] = NOT_RUN
            observed = "cannot tell: unknown on the host: %s" % "; ".join(host_facts["unknown"])
        elif cuda is None:
            row["status"] = NOT_RUN
            observed = "the container did not get to cuDriverGetVersion (its libcuda's content is the host's)"
        else:
            row["status"] = PASS
            observed = "CUDA driver %s, %s has the content of %s (sha256 %s)" % (
                cuda, identity.get("path") or dlopen.get("realpath"), host_lib.get("host_path"), identity["sha256"][:16])
    return row, observed
