# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: the cdi layer's entry (``record``): reads the spec dirs, resolves the requested devices, runs the host,
injection and audit checks and returns the layer's record (the ``_common.result`` contract). Not public API.
The package's ``__init__`` says how the cdi layer is split by concern and where each rule comes from."""

from __future__ import annotations

import hashlib
import os
import posixpath
import re
import time

from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import (
    FAIL, NOT_RUN, PASS, WARN, LayerBuilder,
)
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi.audit import SENSITIVE_EXACT, SENSITIVE_UNDER, audit, sensitive_mount
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import byruntime as _byruntime
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import compat as _compat, engine as _engine, identity as _identity
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import trust as _trust
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi.bounded import DEFAULT_READ_TIMEOUT, Deadline
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi.catalogue import (
    ANNOTATIONS_MAX_BYTES, CHECKS as _SPEC_CHECKS, CONSEQUENCES, DEFAULT_KINDS, DEFAULT_LAYER_TIMEOUT, DEFAULT_MAX_SPEC_FILES,
    DEFAULT_MAX_SPEC_SIZE, EARLIEST_VERSION,
    KNOWN_VERSIONS, MAX_ERRORS_PER_FILE, MAX_NODES_PER_FILE, NO_PERMISSIONS, VALID_HOOK_NAMES, VALID_NODE_TYPES,
)
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi.files import (
    RUNTIME_CONFIGS, discover_runtime_dirs, list_spec_files, load_spec_file, parse_cdi_spec_dirs,
)
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi.host import host_checks, host_device_info, inject_checks, running_driver_version
from ansible_collections.gpuprobe.layers.plugins.module_utils._host.driver import library_version
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi.loader import HAS_YAML, parse_bytes
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi.names import (
    minimum_version, normalize_version, parse_qualified_name, parse_qualifier, validate_device_name, validate_vendor_or_class,
)
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi.resolve import build_registry, device_of, merge_edits, select_devices
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi.validate import (
    RULES, RULE_CHECK, annotation_key_error, load_spec_data, validate_annotations, validate_edits, validate_spec,
)
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi.vendor import is_nvidia, nvidia_checks
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.fs import under_root
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.vocab import SPEC_DIRS

# the layer's one catalogue: spec, resolution, host and audit checks, the identity map, runtime compatibility
CHECKS = dict(_SPEC_CHECKS)
CHECKS.update(_identity.CHECKS)
CHECKS.update(_compat.CHECKS)
CHECKS.update(_engine.CHECKS)
CHECKS.update(_trust.CHECKS)

# names other code imports from _cdi (tests, _cdi_spec, benchmarks), re-exported from the package's modules
__all__ = [
    "ANNOTATIONS_MAX_BYTES", "CHECKS", "CONSEQUENCES", "DEFAULT_KINDS", "DEFAULT_MAX_SPEC_SIZE",
    "EARLIEST_VERSION", "HAS_YAML", "KNOWN_VERSIONS", "MAX_ERRORS_PER_FILE", "MAX_NODES_PER_FILE", "NO_PERMISSIONS",
    "RULES", "RULE_CHECK", "RUNTIME_CONFIGS", "SENSITIVE_EXACT", "SENSITIVE_UNDER", "VALID_HOOK_NAMES", "VALID_NODE_TYPES",
    "annotation_key_error", "audit", "build_registry", "device_of", "discover_runtime_dirs", "host_checks",
    "host_device_info", "library_version", "list_spec_files", "load_spec_data", "load_spec_file", "merge_edits",
    "minimum_version", "normalize_version", "nvidia_checks", "parse_bytes", "parse_cdi_spec_dirs",
    "parse_qualified_name", "parse_qualifier", "record", "running_driver_version", "select_devices", "sensitive_mount",
    "inject_checks", "spec_digest", "validate_annotations", "validate_device_name", "validate_edits", "validate_spec",
    "validate_vendor_or_class",
]


# ---------------------------------------------------------------------------------------------------
# The layer


_NODE_INTERNAL = ("declared", "host", "replaced", "inject_error")


def _spec_checks(builder, rec, judged):
    """The rule checks of one spec file; ``judged`` is (status, why) of its errors for this request (file_judgement)."""
    bad, why = judged
    blocked = False
    if bad == FAIL and rec.get("uncertain"):
        bad, why = NOT_RUN, why + "; " + rec["uncertain"]
    for rule in RULES:
        errors = rec["rule_errors"].get(rule)
        check = RULE_CHECK[rule]
        if errors:
            if rule == "panic":
                # the library panics while it loads the spec dirs (refresh), before any device is looked up
                builder.add(check, FAIL, rec["path"], "valid", "; ".join(errors[:5]) + " (whatever is requested)")
            else:
                builder.add(check, bad, rec["path"], "valid", "; ".join(errors[:5]) + why)
            if rule in ("parse", "schema"):
                blocked = True
        elif blocked:
            builder.add(check, NOT_RUN, rec["path"], observed="not checked: the file did not load")
        else:
            builder.add(check, PASS, rec["path"], "valid", "valid")
    for warning in rec.get("warnings") or []:
        builder.add("cdi.spec.version_aliasing", WARN, rec["path"], "cdiVersion covers every field used", warning)
    if rec["symlink"]:
        builder.add("cdi.spec.symlink", WARN, rec["path"], "regular file", "symlink -> %s" % rec["symlink"])


def file_judgement(rec, explicit, resolved, unresolved, sources, requested_kinds):
    """(status, why) of an invalid spec file's errors for this request, as the runtime's CDI library judges it.

    The library drops an invalid file whole and records its error for that path only (pkg/cdi/cache.go
    ``refresh``: ``collectError(..., path); return nil``); ``InjectDevices`` ignores those errors and fails only
    for a requested device that no valid file provides ("unresolvable CDI devices"). So an invalid file FAILs
    only where it is the reason a requested device does not resolve: it names that device (or its devices are
    unknown because it did not parse, and its kind is the device's or unknown); with no explicit request, where
    no device of its kind resolves at all. Otherwise it is a WARN naming what it would have provided."""
    kind = rec.get("kind")
    if kind is None:  # a DRA claim spec says its kind in its name (dra_claim_specs)
        m = _DRA_FILE.match(os.path.basename(rec["path"]))
        kind = m.group(1) + "/claim" if m else None
    known = [d for d in rec.get("devices") or [] if isinstance(d, str)]
    if explicit:
        hits = []
        for item in unresolved:
            try:
                parse_qualified_name(item["device"])
            except ValueError:
                continue  # a malformed request: no file is why it does not resolve
            ukind, _sep, name = item["device"].partition("=")
            if kind is None or (ukind == kind and (not known or name in known or name == "all")):
                hits.append(item["device"])
        if hits:
            return FAIL, " (the runtime drops this file, so %s does not resolve)" % ", ".join(hits)
        shadowed = ["%s (taken from %s)" % (q, sources[q]) for q in resolved
                    if q.split("=", 1)[0] == kind and q.split("=", 1)[1] in known and sources.get(q) != rec["path"]]
        if shadowed:
            return WARN, " (the runtime drops this file; it provides none of the requested devices: %s)" % ", ".join(shadowed)
        return WARN, " (the runtime drops this file; it provides none of the requested devices)"
    if kind is None or kind in requested_kinds:
        if not any(q.split("=", 1)[0] == kind for q in resolved) and (kind is not None or not resolved):
            return FAIL, " (the runtime drops this file, and no valid spec provides %s)" % (kind or ", ".join(requested_kinds))
        lost = [d for d in known if "%s=%s" % (kind, d) not in resolved]
        return WARN, " (the runtime drops this file%s)" % (
            "; its devices %s do not exist for the runtime" % ", ".join(lost) if lost else "")
    return WARN, " (kind %s is not requested: the runtime drops this file and uses none of it)" % kind


def _other_edit_fields(registry, qualified):
    """The containerEdits fields of a device and of its spec that the merge does not carry (intelRdt, netDevices...)."""
    rec = registry[qualified]
    blocks = [rec["spec"].get("containerEdits"), device_of(registry, qualified).get("containerEdits")]
    return sorted(set(k for block in blocks if isinstance(block, dict) for k, v in block.items()
                      if k not in _trust.EDIT_KEYS and v not in (None, [], {}, "")))


def _requested_kinds(devices, kinds):
    out = []
    for d in devices or []:
        kind = str(d).split("=", 1)[0]
        if kind not in out:
            out.append(kind)
    return out or list(kinds)


# NVIDIA's DRA driver (kubernetes-sigs/dra-driver-nvidia-gpu, formerly NVIDIA/k8s-dra-driver-gpu, @ 22407113):
# cmd/gpu-kubelet-plugin/cdi.go writes one transient spec per prepared ResourceClaim into /var/run/cdi, kind
# "k8s.gpu.nvidia.com/claim" (cdiVendor "k8s." + DriverName, cdiClaimClass "claim"), file name
# cdiapi.GenerateTransientSpecName(vendor, class, claimUID) + ".yaml" = "k8s.gpu.nvidia.com-claim_<claim UID>.yaml"
# (pkg/cdi/spec.go: vendor + "-" + class + "_" + the ID with "/" as "_"), devices "<claim UID>-<canonical name>"
# (GetClaimDeviceName: gpu-<minor>, a MIG or vfio name), and removes it on unprepare (DeleteClaimSpecFile). The
# compute-domain plugin (cmd/compute-domain-kubelet-plugin/cdi.go) does the same with k8s.compute-domain.nvidia.com.
DRA_CLAIM_KINDS = {"k8s.gpu.nvidia.com/claim": "gpu.nvidia.com", "k8s.compute-domain.nvidia.com/claim": "compute-domain.nvidia.com"}
_UID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
_DRA_FILE = re.compile(r"^(k8s\.(?:gpu|compute-domain)\.nvidia\.com)-claim_(%s)\.(?:yaml|json)$" % _UID)
_DRA_DEVICE = re.compile(r"^(%s)-(.+)$" % _UID)


def dra_claim_specs(files):
    """The DRA driver's per-claim specs among the spec files: [{path, kind, driver, claim_uid, ok, error, devices:
    [{name, claim_uid, device}]}]. Evidence of claims prepared on this node, never judged as the node's own specs."""
    out = []
    for rec in files:
        m = _DRA_FILE.match(os.path.basename(rec["path"]))
        kind = rec.get("kind") if rec.get("kind") in DRA_CLAIM_KINDS else (m.group(1) + "/claim" if m else None)
        if kind is None:
            continue
        devices = []
        for name in rec.get("devices") or []:
            dm = _DRA_DEVICE.match(name or "") if isinstance(name, str) else None
            devices.append({"name": name, "claim_uid": dm.group(1) if dm else None, "device": dm.group(2) if dm else None})
        uids = sorted(set(d["claim_uid"] for d in devices if d["claim_uid"]))
        out.append({"path": rec["path"], "kind": kind, "driver": DRA_CLAIM_KINDS[kind],
                    "claim_uid": m.group(2) if m else (uids[0] if len(uids) == 1 else None),
                    "ok": rec["ok"], "error": rec.get("error"), "devices": devices})
    return out


def spec_digest(files):
    h = hashlib.sha256()
    for rec in sorted(files, key=lambda r: r["path"]):
        h.update(("%s\0%s\n" % (rec["path"], rec["sha256"])).encode("utf-8"))
    return "sha256:" + h.hexdigest()


def _public_file(rec):
    out = dict((k, v) for k, v in rec.items() if k not in ("spec", "rule_errors", "_data", "_device_index"))
    out["conflicts"] = rec.get("conflicts", [])
    return out


def _uncertain_for(files, device):
    """The reason of the first uncertain file (byruntime) that may provide ``device`` (kind=name; kind= for any)."""
    kind, _sep, name = device.partition("=")
    for rec in files:
        if rec.get("uncertain") and rec.get("kind") in (None, kind) and (not name or not rec.get("devices") or name in rec["devices"]):
            return "%s: %s" % (rec["path"], rec["uncertain"])
    return None


def _read_spec_dirs(b, host_dirs, existing, max_size, max_files, deadline, reading=None):
    """(file records, {dir: [paths not read]}): every spec file of every dir, in priority order, bounded: at most
    ``max_files`` per dir (cdi.discovery.spec_file_count) and within the layer's time limit (cdi.discovery.time_limit)."""
    files, unread, timed_out = [], {}, []
    started = time.monotonic()
    for priority, d in enumerate(host_dirs):
        paths = list_spec_files(d)
        if d in existing:
            over = len(paths) - max_files
            b.add("cdi.discovery.spec_file_count", WARN if over > 0 else PASS, d, "at most %d spec files (max_spec_files)" % max_files,
                  "%d spec files: the last %d in name order (from %s) were not read" % (len(paths), over, os.path.basename(paths[max_files]))
                  if over > 0 else "%d spec files" % len(paths))
            if over > 0:
                unread[d] = paths[max_files:]
                paths = paths[:max_files]
        for path in paths:
            left = deadline.left()
            if deadline.spent():
                timed_out.append(path)
                unread.setdefault(d, []).append(path)
                continue
            rec = load_spec_file(path, max_size, DEFAULT_READ_TIMEOUT if left is None else min(DEFAULT_READ_TIMEOUT, left), reading)
            rec["priority"] = priority
            rec["dir"] = d
            files.append(rec)
    if deadline.seconds is not None:
        took = time.monotonic() - started
        if timed_out:
            b.add("cdi.discovery.time_limit", FAIL, ", ".join(existing), "every spec file read within %g s" % deadline.seconds,
                  "timeout: %d file(s) read in %.1f s, %d not read (first %s)" % (len(files), took, len(timed_out), timed_out[0]))
        else:
            b.add("cdi.discovery.time_limit", PASS, ", ".join(existing) or "no spec dir", "every spec file read within %g s" % deadline.seconds,
                  "%d file(s) read in %.2f s" % (len(files), took))
    return files, unread


def _judge_engines(engines, files, sources, resolved, host, runtime, runtime_dirs, root):  # pylint: disable=too-many-arguments
    """(checks, runtime_compat evidence, {engine: compat evidence} or None): the spec versions and dirs judged for the
    runtime(s) the verdict speaks for, and each engine's own CDI configuration (cdi.engine.config). With several
    engines every check speaks for one of them: its ``runtime`` key names it (the verdict's per-runtime view)."""
    if engines is None:
        checks, compat = _compat.spec_compat(files, sources, host, runtime=runtime or "auto", runtime_dirs=runtime_dirs, root=root)
        return checks, compat, None
    checks, by_engine, first = [], {}, None
    for info in engines:
        name = info.get("name")
        cfg = info.get("cdi_config") or {}
        dirs = dict(runtime_dirs or {})
        configured = cfg.get("configured_spec_dirs") if name == "podman" else (cfg.get("spec_dirs") if cfg.get("origin") != "default" else None)
        if name:
            dirs[name] = {"spec_dirs": configured}
        own, compat = _compat.spec_compat(files, sources, host, runtime=name or "auto", runtime_dirs=dirs, root=root,
                                          engine=info if name else None, judge_dirs=not name)
        own += _engine.engine_checks([info], files, sources, resolved, root)
        for c in own:
            if name:
                c["runtime"] = name
        checks += own
        by_engine[name or "none"] = compat
        first = compat if first is None else first
    return checks, first, by_engine


def _judge_files(b, files, devices, requested_kinds, unread):
    """The spec-file and resolution checks of the file records as one library version read them: (registry, conflicts,
    overrides, resolved, unresolved, expansions, sources)."""
    registry, conflicts, overrides = build_registry(files)
    resolved, unresolved, expansions = select_devices(registry, devices, requested_kinds)
    sources = dict((q, registry[q]["path"]) for q in resolved)
    for rec in files:
        _spec_checks(b, rec, file_judgement(rec, bool(devices), resolved, unresolved, sources, requested_kinds))
    for kind in requested_kinds:
        providers = sorted(set(r["path"] for r in files if r["ok"] and r["kind"] == kind))
        if not providers and unread:
            b.add("cdi.resolve.kind", NOT_RUN, kind, "a valid spec provides it", "no CDI spec read provides %s; %d spec file(s) were "
                  "not read (%s)" % (kind, sum(len(v) for v in unread.values()), ", ".join(sorted(unread))))
            continue
        if not providers and _uncertain_for(files, kind + "="):
            b.add("cdi.resolve.kind", NOT_RUN, kind, "a valid spec provides it", _uncertain_for(files, kind + "="))
            continue
        b.add("cdi.resolve.kind", PASS if providers else FAIL, kind, "a valid spec provides it",
              ", ".join(providers) if providers else "no CDI spec provides %s" % kind)
    for item in unresolved:
        if unread:
            # a file not read may provide it: not a FAIL the layer could show
            b.add("cdi.resolve.device", NOT_RUN, item["device"], "resolves", "%s in the files read; %d spec file(s) were not read (%s)"
                  % (item["reason"], sum(len(v) for v in unread.values()), ", ".join(sorted(unread))))
        elif _uncertain_for(files, item["device"]):
            b.add("cdi.resolve.device", NOT_RUN, item["device"], "resolves", "%s; %s" % (item["reason"], _uncertain_for(files, item["device"])))
        else:
            b.add("cdi.resolve.device", FAIL, item["device"], "resolves", item["reason"])
    for q in resolved:
        b.add("cdi.resolve.device", PASS, q, "resolves", registry[q]["path"])
    for e in expansions:
        b.add("cdi.resolve.all_expanded", WARN, e["request"], "a device named 'all'",
              "none; expanded here to %s" % ", ".join(e["devices"]))
    requested_set = set(devices) | set(resolved)
    for c in conflicts:
        wanted = c["device"] in requested_set or (not devices and c["device"].split("=", 1)[0] in requested_kinds)
        b.add("cdi.resolve.conflict", FAIL if wanted else WARN, c["device"], "defined once per priority",
              "defined in %s (dropped)" % ", ".join(c["files"]))
    return registry, conflicts, overrides, resolved, unresolved, expansions, sources


def record(spec_dirs=SPEC_DIRS, discover_runtime_dirs_=True, devices=None, kinds=DEFAULT_KINDS,
           host=None, root="/", max_spec_size=DEFAULT_MAX_SPEC_SIZE, environ=None, runtime="auto",
           max_spec_files=DEFAULT_MAX_SPEC_FILES, timeout=DEFAULT_LAYER_TIMEOUT, engines=None, trusted_edits=None):
    """Run the cdi layer and return its record (plugins/module_utils/_common/result.py contract). ``timeout``: the layer's own
    time limit for reading the spec dirs (seconds, None: none), enforced here on the node. ``engines``: the runtimes
    the verdict speaks for (``_runtime_select.select_runtimes``' dicts, each with ``cdi_config`` from
    ``_engine.read_engine_config``): their own CDI configuration is judged (``cdi.engine.config``, per runtime) and the
    spec versions are judged for each of them; None: the runtime ``runtime`` names or the first found (compat).
    ``trusted_edits``: the site's declared trusted edits (``_cdi.trust.check_declared``; ValueError when malformed)."""
    _trust.check_declared(trusted_edits)
    b = LayerBuilder("cdi", CHECKS)
    devices = [str(d) for d in (devices or [])]
    kinds = list(kinds or DEFAULT_KINDS)
    requested_kinds = _requested_kinds(devices, kinds)
    dirs = [posixpath.normpath(d) for d in (spec_dirs or SPEC_DIRS)]
    runtime_dirs = {}
    if discover_runtime_dirs_:
        runtime_dirs = discover_runtime_dirs(root, environ)
        for runtime, info in sorted(runtime_dirs.items()):
            for err in info["errors"]:
                b.add("cdi.discovery.runtime_config", WARN, runtime, "readable", err)
            if not info["errors"]:
                b.add("cdi.discovery.runtime_config", PASS, runtime, "cdi_spec_dirs",
                      info["spec_dirs"] if info["spec_dirs"] is not None else "not set (runtime default)")
            for d in info["spec_dirs"] or []:
                d = posixpath.normpath(d)
                if d not in dirs:
                    dirs.append(d)
    host_dirs = [under_root(root, d) for d in dirs]
    existing = [d for d in host_dirs if os.path.isdir(d)]
    b.add("cdi.discovery.spec_dirs", PASS if existing else FAIL, ", ".join(host_dirs), "at least one exists",
          ", ".join(existing) if existing else "none exists")
    for d in existing:
        try:
            os.listdir(d)
            b.add("cdi.discovery.spec_dir_readable", PASS, d, "listable", "listable")
        except OSError as exc:
            b.add("cdi.discovery.spec_dir_readable", WARN, d, "listable", "cannot list: %s; its specs were not checked" % (exc.strerror or exc))
    groups = _byruntime.reading_groups(engines, host, runtime)
    files, unread = _read_spec_dirs(b, host_dirs, existing, max_spec_size, max_spec_files, Deadline(timeout), groups[0]["reading"])
    files = _byruntime.read_as(files, groups[0])
    # runtimes whose libraries read the specs differently: a check they do not all give alike speaks for its runtimes
    collected = [_byruntime.Collect() for _g in groups]
    registry, conflicts, overrides, resolved, unresolved, expansions, sources = _judge_files(
        collected[0], files, devices, requested_kinds, unread)
    judged = [(registry, resolved)]  # each reading's devices: the trust check judges what each runtime injects
    for group, collect in zip(groups[1:], collected[1:]):
        g_registry, _c, _o, g_resolved, _u, _e, _s = _judge_files(collect, _byruntime.read_as(files, group), devices, requested_kinds, unread)
        judged.append((g_registry, g_resolved))
    _byruntime.merge(b, groups, collected)
    edits, sources = merge_edits(registry, resolved, root) if resolved else (
        {"env": [], "deviceNodes": [], "mounts": [], "hooks": [], "additionalGids": []}, {})
    driver = running_driver_version(host, root) if edits["mounts"] else (None, "no mounts")
    trusted = {}
    # Which host GPU(s) every device of the requested kinds gives (from its own merged device nodes), and
    # whether the node's runtime can read the specs that provide the requested devices.
    identity_devices = [{"name": q, "deviceNodes": merge_edits(registry, [q], root)[0]["deviceNodes"]}
                        for q in sorted(registry) if q.split("=", 1)[0] in requested_kinds]
    identity_checks, identity = _identity.identity_map(identity_devices, resolved, host, requested_kinds)
    # an explicitly requested device that does not resolve is judged too: its spec may be one the runtime cannot read
    compat_sources = dict(sources, **dict((u["device"], None) for u in unresolved if u["device"] not in sources))
    compat_checks, compat, by_engine = _judge_engines(engines, files, compat_sources, resolved, host, runtime, runtime_dirs, root)
    for c in identity_checks + compat_checks:
        added = b.add(c["id"], c["status"], c["subject"], c["expected"], c["observed"], c["hint"])
        if c.get("runtime"):
            added["runtime"] = c["runtime"]  # the runtime this check speaks for (several runtimes verified)
    if resolved:
        host_checks(b, edits, root, host, driver)
        inject_checks(b, edits)
        # every edit of each requested device accounted for, else a FAIL that blocks the probe (docs/safety.md), as
        # each runtime's library reads the specs: a file one reading drops (a WARN when another file provides the
        # device) leaves that runtime the other file's device, whose edits are judged for it
        trust_collected = [_byruntime.Collect() for _g in groups]
        for i, ((g_registry, g_resolved), collect) in enumerate(zip(judged, trust_collected)):
            trust_rows, g_trusted = _trust.trust_checks(
                [(q, merge_edits(g_registry, [q], root)[0], _other_edit_fields(g_registry, q)) for q in g_resolved], root,
                host, trusted_edits, driver[0])
            if i == 0:
                trusted = g_trusted
            for c in trust_rows:
                collect.add(c["id"], c["status"], c["subject"], c["expected"], c["observed"], c["hint"])
        _byruntime.merge(b, groups, trust_collected)
        if is_nvidia(edits):
            nvidia_checks(b, edits, root)
    audit(b, files, list(existing), edits, root, used=set(sources.values()), dir_order=host_dirs)
    source_paths = set(sources.values())
    providing = [r for r in files if r["path"] in source_paths]
    versions_used = sorted(set(str(r["cdiVersion"]) for r in providing if r["cdiVersion"]))
    b.versions = {"cdi_spec": ", ".join(versions_used) or None}
    if driver[0]:
        b.versions["driver"] = driver[0]
    expected = {"env": edits["env"],
                "deviceNodes": [dict((k, v) for k, v in n.items() if k not in _NODE_INTERNAL) for n in edits["deviceNodes"]],
                "mounts": edits["mounts"], "hooks": edits["hooks"], "additionalGids": edits["additionalGids"]}
    b.evidence = {
        "spec_dirs": host_dirs,
        "spec_dirs_existing": existing,
        "runtime_spec_dirs": runtime_dirs,
        "root": root,
        "requested": devices,
        "kinds": requested_kinds,
        "requested_devices": resolved,
        "unresolved": unresolved,
        "expanded": expansions,
        "device_sources": sources,
        "all_devices": sorted(registry),
        "conflicts": conflicts,
        "overrides": overrides,
        "files": [_public_file(r) for r in files],
        "expected_edits": expected,
        "device_nodes_host": dict((n["path"], n["host"]) for n in edits["deviceNodes"]),
        "injected_nodes": [{"path": n["path"], "hostPath": n["hostPath"], "replaced": n["replaced"], "error": n["inject_error"]}
                           for n in edits.get("injected_nodes") or []],
        "cgroup_rules": edits.get("cgroup_rules") or [],
        "driver_version": {"version": driver[0], "source": driver[1]},
        "spec_digest": spec_digest(providing) if providing else None,
        "identity": identity,
        "runtime_compat": compat,
        "engines": [dict((k, v) for k, v in e.items()) for e in engines] if engines is not None else None,
        "runtime_compat_by_engine": by_engine,
        "dra_claims": dra_claim_specs(files),
        "readings": [{"reading": g["reading"]["name"] if g["reading"] else None, "runtimes": g["runtimes"], "why": g["why"],
                      "source": g["source"], "build": g["build"], "library": g["library"]} for g in groups],
        "unread_files": dict((d, len(paths)) for d, paths in unread.items()),
        "trust": {"devices": trusted, "declared": list(trusted_edits or [])},
    }
    return b.build()
