# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: which CDI spec versions and spec dirs the node's container runtime reads. Not public API.

A CDI spec is read by the CDI library the runtime vendors, and that library refuses a spec whose cdiVersion it
does not know ("invalid version"): NVIDIA Container Toolkit 1.19 writes cdiVersion 0.7.0 specs that podman 4.9.3
(library v0.6.2, versions up to 0.6.0) cannot read, so its containers fail with "unresolvable CDI devices" while
the spec is valid. ``spec_compat`` judges each requested device's specs for the runtime that will read them:
runtime and version (host record, ``evidence.tools``) -> the library version its release vendors (its go.mod /
vendor.mod at that tag) -> the highest spec version that library reads (its ``validSpecVersions``). Every row of
``RUNTIME_LIBRARIES`` and ``LIBRARIES`` names the file and tag it was read from (docs/identity.md has the table).
A runtime or version the table does not cover is "unknown": NOT_RUN, never PASS.
"""

from __future__ import annotations

import posixpath
import re

from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi.readings import reading_for
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import FAIL, NOT_RUN, PASS, WARN, make_check
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.vocab import ENGINES, SPEC_DIRS

CDI = "container-device-interface"
PROTOTYPE_DIRS = ("/etc/cdi",)                 # the 2021 prototype (pkg/devices.go): /etc/cdi/*.json only
# The first release that hands its configured spec dirs to the CDI library; before it, the library's defaults are
# read whatever the configuration says (measured: podman 4.3.1 ignores containers.conf cdi_spec_dirs).
CONFIG_DIRS_SINCE = {
    "podman": ("5.5.0", "containers/podman libpod/container_internal_common.go: cdi.NewCache(cdi.WithSpecDirs(engine "
                        "cdi_spec_dirs)) @ v5.5.0; cdi.NewCache without spec dirs @ v4.3.1..v5.4.2"),
}

# The highest cdiVersion each vendored library reads: the largest key of its validSpecVersions
# (cncf-tags/container-device-interface; pkg/cdi/spec.go up to v0.5.3, pkg/cdi/version.go from v0.5.4 to v0.8.x,
# specs-go/version.go of the specs-go module from v1.0.0, where the specs-go version the runtime requires decides).
# None: a library that reads no released spec format.
LIBRARIES = {
    "v0.0.0-20210325223243-f99e8b6c10b9": (None, "pkg/devices.go @ f99e8b6 (2021 prototype: /etc/cdi/*.json only, "
                                                 "pre-0.3.0 schema, no cdiVersion check)"),
    "v0.0.0-20220111162300-46367ec063fd": ("0.2.0", "pkg/cdi/spec.go validSpecVersions @ 46367ec: 0.1.0, 0.2.0"),
    "v0.4.0": ("0.4.0", "pkg/cdi/spec.go validSpecVersions @ v0.4.0"),
    "v0.5.2": ("0.5.0", "pkg/cdi/spec.go validSpecVersions @ v0.5.2"),
    "v0.5.3": ("0.5.0", "pkg/cdi/spec.go validSpecVersions @ v0.5.3"),
    "v0.5.4": ("0.5.0", "pkg/cdi/version.go validSpecVersions @ v0.5.4"),
    "v0.6.1": ("0.6.0", "pkg/cdi/version.go validSpecVersions @ v0.6.1"),
    "v0.6.2": ("0.6.0", "pkg/cdi/version.go validSpecVersions @ v0.6.2"),
    "v0.7.1": ("0.7.0", "pkg/cdi/version.go validSpecVersions @ v0.7.1"),
    "v0.7.2": ("0.7.0", "pkg/cdi/version.go validSpecVersions @ v0.7.2"),
    "v0.8.0": ("0.8.0", "pkg/cdi/version.go validSpecVersions @ v0.8.0"),
    "v0.8.1": ("0.8.0", "pkg/cdi/version.go validSpecVersions @ v0.8.1"),
    "specs-go/v1.0.0": ("1.0.0", "specs-go/version.go validSpecVersions @ specs-go/v1.0.0"),
    "specs-go/v1.1.0": ("1.1.0", "specs-go/version.go validSpecVersions @ specs-go/v1.1.0"),
}

# (repository, file, tag prefix)
_PODMAN = ("containers/podman", "go.mod", "v")
_DOCKER = ("moby/moby", "vendor.mod", "v")
_DOCKER29 = ("moby/moby", "go.mod", "docker-v")
_CONTAINERD = ("containerd/containerd", "go.mod", "v")

# (runtime, first version, last version, library (LIBRARIES key, None: no CDI library), source file): the
# library version is the go.mod/vendor.mod requirement at the release tags from first to last (every tag in the
# range was read; docker tags v25-v28 and docker-v29.x). Versions below the first row have no CDI.
RUNTIME_LIBRARIES = (
    ("podman", "0.0.0", "3.1.2", None, _PODMAN),
    ("podman", "3.2.0", "3.4.7", "v0.0.0-20210325223243-f99e8b6c10b9", _PODMAN),
    ("podman", "4.0.0", "4.0.3", "v0.0.0-20220111162300-46367ec063fd", _PODMAN),
    ("podman", "4.1.0", "4.2.1", "v0.4.0", _PODMAN),
    ("podman", "4.3.0", "4.3.1", "v0.5.2", _PODMAN),
    ("podman", "4.4.0", "4.4.4", "v0.5.3", _PODMAN),
    ("podman", "4.5.0", "4.6.2", "v0.5.4", _PODMAN),
    ("podman", "4.7.0", "4.7.2", "v0.6.1", _PODMAN),
    ("podman", "4.8.0", "5.0.3", "v0.6.2", _PODMAN),
    ("podman", "5.1.0", "5.1.2", "v0.7.2", _PODMAN),
    ("podman", "5.2.0", "5.4.2", "v0.8.0", _PODMAN),
    ("podman", "5.5.0", "5.8.2", "specs-go/v1.0.0", _PODMAN),       # library v1.0.1
    ("docker", "0.0.0", "24.0.9", None, _DOCKER),
    ("docker", "25.0.0", "25.0.16", "v0.6.2", _DOCKER),
    ("docker", "25.0.17", "25.0.17", "v0.8.1", _DOCKER),
    ("docker", "26.0.0", "26.0.2", "v0.6.2", _DOCKER),
    ("docker", "26.1.0", "26.1.0", "v0.7.1", _DOCKER),
    ("docker", "26.1.1", "27.3.1", "v0.7.2", _DOCKER),
    ("docker", "27.4.0", "28.0.0", "v0.8.0", _DOCKER),
    ("docker", "28.0.1", "28.0.4", "v0.8.1", _DOCKER),
    ("docker", "28.1.0", "28.5.2", "specs-go/v1.0.0", _DOCKER),     # library v1.0.1
    ("docker", "29.0.0", "29.1.5", "specs-go/v1.0.0", _DOCKER29),   # library v1.0.1
    ("docker", "29.2.0", "29.7.2", "specs-go/v1.1.0", _DOCKER29),   # library v1.1.0
    ("containerd", "0.0.0", "1.6.39", None, _CONTAINERD),
    ("containerd", "1.7.0", "1.7.11", "v0.5.4", _CONTAINERD),
    ("containerd", "1.7.12", "1.7.12", "v0.6.1", _CONTAINERD),
    ("containerd", "1.7.13", "1.7.15", "v0.6.2", _CONTAINERD),
    ("containerd", "1.7.16", "1.7.26", "v0.7.2", _CONTAINERD),
    ("containerd", "1.7.27", "1.7.34", "v0.8.1", _CONTAINERD),
    ("containerd", "2.0.0", "2.0.2", "v0.8.0", _CONTAINERD),
    ("containerd", "2.0.3", "2.0.4", "v0.8.1", _CONTAINERD),
    ("containerd", "2.0.5", "2.2.0", "specs-go/v1.0.0", _CONTAINERD),  # library v1.0.0 (2.0.x), v1.0.1 (2.1.0-2.2.0)
    ("containerd", "2.2.1", "2.3.4", "specs-go/v1.1.0", _CONTAINERD),  # library v1.1.0
)

# Distribution builds link the distribution's own CDI library, not upstream go.mod's: (runtime, version text as the
# runtime reports it, or its prefix, library (LIBRARIES key), go122 (built in GOPATH mode with Go >= 1.22: no
# loop-variable aliasing, readings.py), the build, source). A distribution build not listed is unknown (NOT_RUN).
DISTRIBUTION_BUILDS = (
    ("containerd", "1.7.24~ds1", "v0.8.0", True, "Debian 13 (trixie) containerd 1.7.24~ds1-6+deb13u1",
     "its Built-Using: golang-tags.cncf-container-device-interface (= 0.8.0-5), golang-1.24 (= 1.24.4-1); the binary "
     "has pkg/cdi.requiresV080 (upstream go.mod @ v1.7.24: v0.7.2)"),
    ("podman", "5.4.2+ds1", "v0.8.0", True, "Debian 13 (trixie) podman 5.4.2+ds1-2+b2",
     "its Built-Using: golang-tags.cncf-container-device-interface (= 0.8.0-5), golang-1.24 (= 1.24.4-1)"),
    ("docker", "26.1.5+dfsg1", "v0.7.2", True, "Debian 13 (trixie) docker.io 26.1.5+dfsg1-9+deb13u1",
     "dockerd vendors its own copy (github.com/docker/docker/vendor/tags.cncf.io/container-device-interface; no CDI "
     "package in its Built-Using, golang-1.24 (= 1.24.4-1)); the binary has requiresV070 and no requiresV080: "
     "upstream vendor.mod @ v26.1.5: v0.7.2"),
    ("podman", "4.3.1+ds1", "v0.5.2", False, "Debian 12 (bookworm) podman 4.3.1+ds1-8+deb12u1",
     "podman vendors its own copy (github.com/containers/podman/vendor/github.com/container-orchestrated-devices/"
     "container-device-interface; Debian 12's -dev package is 0.5.2-2 too), golang-1.19: upstream go.mod @ v4.3.1: v0.5.2"),
)
# A version text a distribution writes: Debian ~ds/+ds/+dfsg, Ubuntu -Nubuntu, RHEL/Fedora .elN/.fcN, Amazon .amznN
_DISTRIBUTION = re.compile(r"(~ds\d*|\+ds\d*|\+dfsg\d*|\+deb\d+|ubuntu\d*|\.el\d+|\.fc\d+|\.amzn\d+|\+really)", re.I)

NOTES = {
    "docker": "docker --version reports the client; CDI needs the daemon's CDI feature (daemon.json features.cdi: off "
              "unless set before 28.2.0, on unless set false from 28.2.0, moby/moby cmd/dockerd/daemon.go cdiEnabled) "
              "and reads its cdi-spec-dirs (docker info CDISpecDirs: cdi.engine.config where docker was selected)",
    "containerd": "containerd's CRI plugin injects CDI devices only with enable_cdi (default false in 1.7, "
                  "pkg/cri/config/config_unix.go @ v1.7.0; true from 2.0, internal/cri/config/config_unix.go @ v2.0.0)",
}

CHECKS = {
    "cdi.runtime.cdi_support": {
        "title": "the runtime that will read the specs (each runtime the verdict speaks for, docs/usage.md; where none was "
                 "selected, podman, else docker, else containerd on PATH) is found with a version the table maps to a CDI "
                 "library and its highest readable cdiVersion (docs/identity.md)",
        "fail": "this runtime version has no CDI support (FAIL), or the table does not cover it (NOT_RUN: spec "
                "versions cannot be judged for it)",
        "next": "upgrade the runtime (podman >= 4.1, docker >= 25, containerd >= 1.7) or tell which runtime reads the specs",
    },
    "cdi.runtime.spec_version": {
        "title": "each requested device has a providing spec whose cdiVersion the runtime's CDI library reads",
        "fail": "the runtime refuses every spec of the device ('invalid version'): the container fails with "
                "'unresolvable CDI devices' though the spec is valid (WARN: it reads a lower-priority spec instead of "
                "the one the cdi layer resolved)",
        "next": "regenerate the spec with a cdiVersion the runtime reads (nvidia-ctk cdi generate writes the lowest "
                "version its fields need), or upgrade the runtime",
    },
    "cdi.runtime.spec_dir": {
        "title": "each requested device has a providing spec in a directory the runtime reads (its configured "
                 "cdi_spec_dirs, else /etc/cdi and /var/run/cdi), from the runtimes' configuration files; only where no "
                 "engine was selected and asked (root is not /): else cdi.engine.config says it from the engine itself",
        "fail": "the runtime never sees the spec: the container fails with 'unresolvable CDI devices'",
        "next": "write the spec into one of the runtime's spec dirs, or add its dir to the runtime's cdi_spec_dirs",
    },
}

_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?([-+~].*)?$")
_PRERELEASE = re.compile(r"^-(rc|dev|alpha|beta)", re.I)


def parse_version(text):
    """(major, minor, patch) of a runtime or spec version, or None. A pre-release (-rc, -dev) is None: its vendored
    library is not that of the release. Distribution suffixes (+ds1, ~ubuntu) are ignored."""
    m = _VERSION.match(str(text or "").strip())
    if not m or (m.group(4) and _PRERELEASE.match(m.group(4))):
        return None
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)


def distribution_build(version):
    """The distribution marker of a runtime's version text (``~ds1``, ``+dfsg1``, ``.el9``), or None for an upstream
    build (or one whose version text does not say: podman 4.3.1 of Debian 12 reports 4.3.1)."""
    m = _DISTRIBUTION.search(str(version or ""))
    return m.group(1) if m else None


def _distribution_row(runtime, version):
    text = str(version or "").strip().lstrip("v")
    for row in DISTRIBUTION_BUILDS:
        if row[0] == runtime and (text == row[1] or text.startswith(row[1])):
            return row
    return None


def _vtext(v):
    return "%d.%d.%d" % v


def readable_versions(runtime, version):
    """What the table says of ``runtime`` at ``version``: dict(runtime, version, status, max_readable, library,
    source, why). status: 'known' (max_readable set), 'no_cdi', 'prototype' or 'unknown'."""
    out = {"runtime": runtime, "version": version, "status": "unknown", "max_readable": None, "library": None,
           "source": None, "why": None, "build": None, "reading": None}
    v = parse_version(version)
    marker = distribution_build(version) if v is not None else None
    if marker:
        row = _distribution_row(runtime, version)
        if row is None:
            out.update(build="distribution (%s)" % marker, why=(
                "%s %s is a distribution build (%s): distributions link their own CDI library, not upstream go.mod's "
                "(Debian 13's containerd 1.7.24~ds1 links CDI 0.8.0, upstream v0.7.2), and this build is not in the "
                "table of distribution builds (docs/identity.md)" % (runtime, version, marker)))
            return out
        lib = row[2]
        out.update(status="known", library=lib, max_readable=LIBRARIES[lib][0], build=row[4],
                   reading=(reading_for(lib, row[3]) or {}).get("name"),
                   source="%s: %s; %s/%s %s" % (row[4], row[5], "cncf-tags", CDI, LIBRARIES[lib][1]))
        return out
    rows = [r for r in RUNTIME_LIBRARIES if r[0] == runtime]
    if not rows:
        out["why"] = "no table of %s releases (known: %s)" % (runtime, ", ".join(sorted(set(r[0] for r in RUNTIME_LIBRARIES))))
        return out
    if v is None:
        out["why"] = "%s version %r unknown or a pre-release" % (runtime, version)
        return out
    for _rt, first, last, lib, (repo, path, tag) in rows:
        if parse_version(first) <= v <= parse_version(last):
            break
    else:
        last = rows[-1]
        out["why"] = "%s %s is not in the table (releases %s to %s, read from %s %s)" % (
            runtime, _vtext(v), rows[1][1], last[2], last[4][0], last[4][1])
        return out
    where = "%s %s @ %s%s..%s%s" % (repo, path, tag, first, tag, last) if first != "0.0.0" else "%s %s @ %s%s" % (
        repo, path, tag, last)
    if lib is None:
        out.update(status="no_cdi", source="%s: no %s requirement" % (where, CDI),
                   why="%s %s vendors no CDI library (no CDI support)" % (runtime, _vtext(v)))
        return out
    max_readable, lib_source = LIBRARIES[lib]
    out.update(library=lib, source="%s requires %s %s; %s/%s %s" % (where, CDI, lib, "cncf-tags", CDI, lib_source),
               build="upstream %s%s..%s%s" % (tag, first, tag, last), reading=(reading_for(lib) or {}).get("name"))
    if max_readable is None:
        out.update(status="prototype", why="%s %s vendors a pre-release CDI prototype: %s" % (runtime, _vtext(v), lib_source))
    else:
        out.update(status="known", max_readable=max_readable)
    return out


def pick_runtime(host_record, runtime="auto"):
    """(name, tool info, why) of the runtime that will read the specs; name None with why when none is found."""
    ev = (host_record or {}).get("evidence") or {}
    if not host_record:
        return None, None, "no host record: the node's runtimes are unknown"
    if not ev.get("tools_probed", True):
        return None, None, "the host layer did not probe tools (root is not /)"
    tools = ev.get("tools") or {}
    names = ENGINES if runtime in (None, "auto") else (runtime,)
    for name in names:
        info = tools.get(name)
        if isinstance(info, dict) and info.get("path"):
            return name, info, None
    return None, None, "no %s found in host.evidence.tools" % " / ".join(names)


def _read_but_version(rec):
    """The file is read, or refused for its cdiVersion alone (the runtime's library does not know it)."""
    return bool(rec.get("ok")) or (bool(rec.get("rule_errors")) and set(rec["rule_errors"]) == set(["version"]))


def _version_of(rec):
    v = parse_version(rec.get("cdiVersion"))
    return v if rec.get("cdiVersion") is not None and v is not None else None


def spec_compat(files, requested_sources, host_record, runtime="auto", runtime_dirs=None, root="/", engine=None,
                judge_dirs=True):
    """Judge the requested devices' specs for the runtime that will read them.

    files: the cdi layer's file records (path, dir, cdiVersion, kind, devices, ok); requested_sources: requested
    qualified name -> the spec path the cdi layer resolved it to; host_record: the host layer record (its
    evidence.tools give runtime and version); runtime: 'auto' (podman, else docker, else containerd, else crio) or a
    name; runtime_dirs: the cdi layer's evidence.runtime_spec_dirs ({runtime: {spec_dirs}}), for the dirs the
    runtime reads; root: the root the file paths are under.

    Returns (checks, evidence): check dicts (id, status, subject, expected, observed, hint) with ids in CHECKS, and
    {"runtime": the judged runtime's table row, "runtimes": {name: row} for every runtime found, "spec_dirs": [...],
    "devices": {qualified: {"source", "providers": [{path, cdiVersion, readable_version, in_runtime_dir}]}}}.
    """
    checks = []

    def add(check_id, status, subject, expected=None, observed=None):
        hint = CHECKS[check_id]["next"] if status in (FAIL, WARN) else None
        checks.append(make_check(check_id, status, subject, expected, observed, hint))

    ev = (host_record or {}).get("evidence") or {}
    runtimes = {}
    for name, info in sorted((ev.get("tools") or {}).items()):
        if name in ENGINES and isinstance(info, dict) and info.get("path"):
            runtimes[name] = readable_versions(name, info.get("version"))
    name, info, why = (engine["name"], engine, None) if engine and engine.get("name") else pick_runtime(host_record, runtime)
    row = readable_versions(name, info.get("version")) if name else {
        "runtime": None, "version": None, "status": "unknown", "max_readable": None, "library": None, "source": None,
        "why": why}
    if name and name in NOTES:
        row["note"] = NOTES[name]
    subject = "%s %s" % (name, row["version"]) if name else "runtime"
    if row["status"] == "known":
        add("cdi.runtime.cdi_support", PASS, subject, "a CDI library of known spec versions",
            "reads cdiVersion <= %s (%s)" % (row["max_readable"], row["source"]))
    elif row["status"] == "no_cdi":
        add("cdi.runtime.cdi_support", FAIL, subject, "a CDI library", "%s (%s)" % (row["why"], row["source"]))
    else:
        add("cdi.runtime.cdi_support", NOT_RUN, subject, "a CDI library of known spec versions", row["why"])

    configured = ((runtime_dirs or {}).get(name) or {}).get("spec_dirs") if name else None
    dirs, origin, maybe = spec_dirs_read(name, row, configured)
    host_dirs = [posixpath.normpath(_under(root, d)) for d in dirs]
    maybe_dirs = [posixpath.normpath(_under(root, d)) for d in maybe or []]
    dirs_text = "%s (%s)" % (", ".join(dirs), origin)

    devices_ev = {}
    for q, source in sorted((requested_sources or {}).items()):
        kind, _sep, dev = q.partition("=")
        providers = [r for r in files or [] if _read_but_version(r) and r.get("kind") == kind and dev in (r.get("devices") or [])]
        if source and not any(r.get("path") == source for r in providers):
            providers += [r for r in files or [] if r.get("path") == source]
        if not source and not providers:
            continue  # an unresolved device no file provides: nothing here to judge (cdi.resolve.device says it)
        rows = []
        for r in providers:
            v = _version_of(r)
            spec_dir = posixpath.normpath(r.get("dir") or posixpath.dirname(r.get("path") or ""))
            in_dir = spec_dir in host_dirs
            if maybe is not None and in_dir != (spec_dir in maybe_dirs):
                in_dir = None  # read by some versions of the runtime only, and its version is unknown
            readable = None if row["max_readable"] is None or v is None else v <= parse_version(row["max_readable"])
            rows.append({"path": r.get("path"), "cdiVersion": r.get("cdiVersion"), "readable_version": readable,
                         "in_runtime_dir": in_dir})
        devices_ev[q] = {"source": source, "providers": rows}
        listed = "; ".join("%s (cdiVersion %s)" % (p["path"], p["cdiVersion"]) for p in rows) or "no providing spec"
        if not name or row["status"] != "known":
            add("cdi.runtime.spec_version", NOT_RUN if row["status"] != "no_cdi" else FAIL, q,
                "a spec the runtime reads", "%s; %s" % (row["why"], listed))
        else:
            _judge_version(add, q, source, rows, row, subject, listed)
        if name and row["status"] != "no_cdi" and judge_dirs:
            seen = [p for p in rows if p["in_runtime_dir"]]
            unsure = [p for p in rows if p["in_runtime_dir"] is None]
            if seen:
                add("cdi.runtime.spec_dir", PASS, q, "a providing spec in %s" % dirs_text, ", ".join(p["path"] for p in seen))
            elif unsure:
                add("cdi.runtime.spec_dir", NOT_RUN, q, "a providing spec in %s" % dirs_text,
                    "%s: read by some %s versions only (%s), and the version is unknown" % (
                        ", ".join(p["path"] for p in unsure), name, CONFIG_DIRS_SINCE[name][1]))
            else:
                add("cdi.runtime.spec_dir", FAIL, q, "a providing spec in %s" % dirs_text,
                    "%s reads %s; providers: %s" % (subject, dirs_text, listed))
    evidence = {"runtime": row, "runtimes": runtimes, "spec_dirs": dirs, "devices": devices_ev}
    return checks, evidence


def spec_dirs_read(name, row, configured):
    """(dirs, origin, maybe) the runtime reads: maybe is None when certain, else the dirs read by the runtime's
    versions that do honour its configuration (its own version being unknown)."""
    if row["status"] == "prototype":
        return list(PROTOTYPE_DIRS), "the prototype's only dir", None
    if not configured:
        return list(SPEC_DIRS), "default", None
    since = CONFIG_DIRS_SINCE.get(name)
    if since is None:
        return list(configured), "configured", None
    v = parse_version(row["version"])
    if v is None:
        return list(SPEC_DIRS), "default; configured %s honoured from %s %s only" % (", ".join(configured), name, since[0]), \
            list(configured)
    if v >= parse_version(since[0]):
        return list(configured), "configured", None
    return list(SPEC_DIRS), "default: %s %s ignores the configured cdi_spec_dirs %s (%s)" % (
        name, row["version"], ", ".join(configured), since[1]), None


def _under(root, path):
    if not root or root == "/":
        return path
    return posixpath.join(root, path.lstrip("/"))


def _judge_version(add, q, source, rows, row, subject, listed):
    candidates = [p for p in rows if p["in_runtime_dir"]] or rows
    usable = [p for p in candidates if p["readable_version"]]
    reads = "%s reads cdiVersion <= %s (%s)" % (subject, row["max_readable"], row["source"])
    expected = "cdiVersion <= %s" % row["max_readable"]
    if not usable:
        add("cdi.runtime.spec_version", FAIL, q, expected, "%s; every providing spec is above it: %s" % (reads, listed))
    elif not any(p["path"] == source for p in usable):
        add("cdi.runtime.spec_version", WARN, q, expected,
            "%s; the resolved spec %s is above it, so the runtime uses %s instead" % (reads, source, usable[0]["path"]))
    else:
        add("cdi.runtime.spec_version", PASS, q, expected, "%s; %s has cdiVersion %s" % (
            reads, source, [p["cdiVersion"] for p in usable if p["path"] == source][0]))
