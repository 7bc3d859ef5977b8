# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: what binds the proof to the host's driver: compute.driver.binding; not public API."""

from __future__ import annotations

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
    root = evidence.get("root") or "/"
    name = "libcuda.so.%s" % facts["driver_version"]
    rel = library_path(root, facts["driver_root"], name)
    if rel is None:
        facts["unknown"].append("no %s in the driver root %s" % (name, facts["driver_root"]))
        return facts
    try:
        facts["libcuda"] = dict(file_digest(under_root(root, rel)), host_path=rel)
    except OSError as exc:
        facts["unknown"].append("%s could not be read: %s" % (rel, exc))
    return facts


def prefetch_host_driver_facts(host_record):
    """``host_driver_facts`` started in a daemon thread: the driver root's libcuda (~100 MB) is hashed while the probe
    container runs, and file_digest keeps the digest for the compute layer's own call after it (~90 ms less after the
    container on the H200; hashlib releases the GIL). Returns the thread (None when none could be started); nothing
    waits for it."""
    def run():
        try:
            host_driver_facts(host_record)
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


def binding_check(builder, parsed, where, host_facts):
    """compute.driver.binding for one container run: PASS only when cuDriverGetVersion equals the host's NVML CUDA
    driver version AND the loaded libcuda's sha256 equals the driver root file's. Returns the evidence row."""
    identity, dlopen = _loaded_identity(parsed)
    cuda = ((parsed or {}).get("facts") or {}).get("cuda_driver_api")
    host_lib = host_facts.get("libcuda") or {}
    row = {"where": where, "cuda_driver_api": cuda, "libcuda": identity, "status": None, "differs": []}
    expected = "CUDA driver %s, libcuda sha256 %s (%s)" % (host_facts.get("cuda_driver_api"), host_lib.get("sha256"),
                                                           host_lib.get("host_path"))
    subject = "%s: libcuda.so.1" % where
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
    builder.add("compute.driver.binding", row["status"], subject=subject, expected=expected, observed=observed,
                hint=None if row["status"] != FAIL else CHECKS["compute.driver.binding"]["next"])
    return row
