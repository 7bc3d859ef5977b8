# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE (cdi layer): the RUNNING engine's configuration, over its file. Not public API.

A daemon reads its configuration file when it starts; a file edited since (no restart) says what the next start will
do, not what the daemon does now. So what the verdict follows is what the running daemon answers:

- containerd: the CRI ``Status`` call with ``verbose: true`` (the kubelet's own call) returns ``info.config``, the CRI
  plugin's live configuration as JSON (containerd pkg/cri/config PluginConfig, json tags): ``enableCDI``,
  ``cdiSpecDirs``, ``containerd.defaultRuntimeName`` and ``containerd.runtimes.<handler>`` (``runtimeType``,
  ``runtimePath``, ``ContainerAnnotations``, ``options.BinaryName``). ``_runtime.handler.trim_cri_config`` keeps those keys
  (the detection stores them, ``cri_info``). The file side is ``containerd --config <the daemon's file> config dump``
  (``_cdi.engine.read_containerd``), read beside it: where the two disagree a ``cdi.engine.file`` WARN names both values
  and both sources. NRI (``plugins."io.containerd.nri.v1.nri"``) is not in the CRI's answer: whether it is on is the
  dump's, whether the running daemon listens on its socket and how many plugins are connected is /proc/net/unix's
  (an accepted connection carries the listening socket's path there).
- CRI-O: ``crio status config`` asks the running server over its socket (it is live already):
  ``crio.runtime.default_runtime``, ``crio.runtime.runtimes.<handler>`` (``runtime_path``, ``runtime_type``),
  ``crio.nri.enable_nri``.
- docker: ``docker info --format '{{json .}}'`` (live): ``CDISpecDirs``, ``DefaultRuntime``, ``Runtimes.<name>.path``;
  its file is the daemon.json of the dockerd process (``--config-file``, else /etc/docker/daemon.json):
  ``features.cdi``, ``cdi-spec-dirs``, ``default-runtime``.
"""

from __future__ import annotations

import json
import os
import posixpath

from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import NOT_RUN, PASS, WARN, make_check
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.vocab import SPEC_DIRS

CHECKS = {
    "cdi.engine.handler": {
        "title": "the runtime handler the probe will run with (verify_probe_runtime_handler, the GPU Pods' RuntimeClass, "
                 "else the engine's default) is one the running engine has; its OCI runtime binary and who injects the "
                 "CDI devices (the engine's CDI, NVIDIA's runtime in cdi mode) are named",
        "fail": "WARN: the engine has no handler of that name: the probe still runs, so that the engine says it "
                "(runtime.start.unknown_handler); NOT_RUN: the engine's handlers could not be read",
        "next": "crictl info (containerd.runtimes), crio status config, kubectl get runtimeclasses; "
                "verify_probe_runtime_handler",
    },
    "cdi.engine.file": {
        "title": "the engine's configuration file says what the running daemon does (CDI on/off, spec dirs, default "
                 "handler, handlers and their binaries): containerd config dump vs the CRI Status (verbose) config, "
                 "docker's daemon.json vs docker info",
        "fail": "WARN: the file was edited after the daemon started (or the daemon runs another file): the daemon does "
                "what it read at its start, and the next restart will do what the file says. The verdict follows "
                "the running daemon. NOT_RUN: the file could not be read",
        "next": "restart the engine to apply the file, or put the file back to what the daemon runs; compare "
                "`crictl info` (containerd) or `docker info` with the file",
    },
}

DOCKER_DAEMON_JSON = "/etc/docker/daemon.json"
# the runtimes dockerd registers itself, which `docker info` lists and no daemon.json names (moby daemon/runtime_unix.go:
# runc (defaultRuntimeName) and the shim io.containerd.runc.v2; io.containerd.runtime.v1.linux before docker 23)
DOCKER_BUILTIN_RUNTIMES = ("runc", "io.containerd.runc.v2", "io.containerd.runtime.v1.linux")
NRI_DEFAULT_SOCKET = "/var/run/nri/nri.sock"


def _result(engine, source, **values):
    out = {"engine": engine, "source": source, "enabled": None, "spec_dirs": None, "origin": None, "reason": None,
           "live": True, "default_handler": None, "handlers": None}
    out.update(values)
    return out


def _str_list(value):
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


# ---- containerd -------------------------------------------------------------------------------------------


def status_config(status):
    """The parsed ``info.config`` of a CRI Status (verbose) answer, or ValueError saying why there is none."""
    info = (status or {}).get("info") if isinstance(status, dict) else None
    text = (info or {}).get("config") if isinstance(info, dict) else None
    if not text:
        raise ValueError("the CRI Status (verbose) answer has no info.config")
    doc = json.loads(text)
    if not isinstance(doc, dict):
        raise ValueError("info.config is not a JSON object")
    return doc


def _cri_handler(rt):
    opts = rt.get("options") or {}
    return {"runtime_type": rt.get("runtimeType") or None, "binary": opts.get("BinaryName") or None,
            "runtime_path": rt.get("runtimePath") or None, "container_annotations": list(rt.get("ContainerAnnotations") or [])}


def containerd_live(config, source):
    """The CDI and handler configuration of the running containerd, from its CRI config (``trim_cri_config``'s keys)."""
    if not config:
        return _result("containerd", source, reason="the running containerd gave no CRI config (CRI Status verbose)")
    ctd = config.get("containerd") or {}
    handlers = dict((name, _cri_handler(rt)) for name, rt in sorted((ctd.get("runtimes") or {}).items()))
    out = _result("containerd", source, default_handler=ctd.get("defaultRuntimeName") or None, handlers=handlers)
    enabled, dirs = config.get("enableCDI"), config.get("cdiSpecDirs")
    if not isinstance(enabled, bool):
        out["reason"] = "the live CRI config's enableCDI is %r, not a boolean" % (enabled,)
        return out
    out["enabled"] = enabled
    if dirs is None:
        out.update(spec_dirs=list(SPEC_DIRS), origin="default")
    elif _str_list(dirs):
        out.update(spec_dirs=list(dirs), origin="configured")
    else:
        out["reason"] = "the live CRI config's cdiSpecDirs is %r, not a list of paths" % (dirs,)
    if not enabled:
        out["reason"] = "enableCDI is false in the running containerd"
    return out


def containerd_file(doc):
    """The handler part of a containerd ``config dump`` (the file): default handler, handlers, NRI."""
    try:
        version = int(doc.get("version", 1))
    except (TypeError, ValueError):
        version = None
    plugins = doc.get("plugins") or {}
    section = plugins.get({3: "io.containerd.cri.v1.runtime"}.get(version, "io.containerd.grpc.v1.cri")) or {}
    ctd = section.get("containerd") or {}
    handlers = {}
    for name, rt in sorted((ctd.get("runtimes") or {}).items()):
        if isinstance(rt, dict):
            opts = rt.get("options") or {}
            handlers[name] = {"runtime_type": rt.get("runtime_type") or None, "binary": opts.get("BinaryName") or None,
                              "runtime_path": rt.get("runtime_path") or None,
                              "container_annotations": list(rt.get("container_annotations") or [])}
    nri = plugins.get("io.containerd.nri.v1.nri")
    nri_out = None
    if isinstance(nri, dict):
        nri_out = {"enabled": not nri.get("disable", version is not None and version >= 3),
                   "socket_path": nri.get("socket_path") or NRI_DEFAULT_SOCKET, "plugin_path": nri.get("plugin_path")}
    return {"default_handler": ctd.get("default_runtime_name") or None, "handlers": handlers, "nri": nri_out}


# ---- NRI: is the running daemon listening, and who is connected --------------------------------------------


def unix_sockets(text):
    """[(state, path)] of /proc/net/unix's lines that carry a path (state 01: listening, 03: connected)."""
    out = []
    for line in (text or "").splitlines()[1:]:
        parts = line.split()
        if len(parts) >= 8 and parts[7].startswith("/"):
            out.append((parts[5], parts[7]))
    return out


def nri_live(nri, proc_net_unix="/proc/net/unix"):
    """The NRI plugin of containerd as the file configures it and the system shows it: enabled (file), listening
    (a listening socket at its path), plugins_connected (connections accepted on it: each external plugin holds one;
    plugins containerd launches itself from plugin_path use a socket pair and are listed from that directory)."""
    if not nri:
        return None
    out = dict(nri)
    try:
        with open(proc_net_unix) as fh:
            socks = unix_sockets(fh.read())
    except OSError as exc:
        out["listening"] = None
        out["reason"] = "%s not read: %s" % (proc_net_unix, exc)
        return out
    path = posixpath.normpath(nri["socket_path"])
    out["listening"] = any(state == "01" and posixpath.normpath(p) == path for state, p in socks)
    out["plugins_connected"] = sum(1 for state, p in socks if state == "03" and posixpath.normpath(p) == path)
    plugin_dir = nri.get("plugin_path")
    try:
        out["plugins_installed"] = sorted(os.listdir(plugin_dir)) if plugin_dir and os.path.isdir(plugin_dir) else []
    except OSError:
        out["plugins_installed"] = []
    return out


# ---- CRI-O and docker -----------------------------------------------------------------------------------------


def crio_handlers(doc):
    """default handler, handlers, OCI hooks directories and NRI of a ``crio status config`` document (the running
    server's)."""
    runtime = ((doc.get("crio") or {}).get("runtime")) or {}
    handlers = {}
    for name, rt in sorted((runtime.get("runtimes") or {}).items()):
        if isinstance(rt, dict):
            handlers[name] = {"runtime_type": rt.get("runtime_type") or "oci", "binary": rt.get("runtime_path") or None,
                              "runtime_path": rt.get("runtime_path") or None,
                              "container_annotations": list(rt.get("allowed_annotations") or [])}
    nri = (doc.get("crio") or {}).get("nri")
    hooks = runtime.get("hooks_dir")
    return {"default_handler": runtime.get("default_runtime") or None, "handlers": handlers,
            # the OCI hooks directories CRI-O runs hooks from (the toolkit's legacy hook: _runtime.handler.oci_hooks)
            "hooks_dirs": list(hooks) if _str_list(hooks) else None,
            "nri": {"enabled": bool(nri.get("enable_nri")), "socket_path": nri.get("nri_listen") or NRI_DEFAULT_SOCKET,
                    "plugin_path": nri.get("nri_plugin_dir")} if isinstance(nri, dict) else None}


def docker_handlers(info):
    """default runtime and runtimes of ``docker info`` (live)."""
    runtimes = info.get("Runtimes") if isinstance(info.get("Runtimes"), dict) else {}
    return {"default_handler": info.get("DefaultRuntime") or None,
            "handlers": dict((name, {"runtime_type": "oci", "binary": (rt or {}).get("path"), "runtime_path": (rt or {}).get("path"),
                                     "container_annotations": []}) for name, rt in sorted(runtimes.items()))}


def docker_file(doc, source):
    """What a dockerd daemon.json says of CDI and the default runtime (None: not set there, dockerd's default)."""
    features = doc.get("features") if isinstance(doc.get("features"), dict) else {}
    return {"source": source, "enabled": features.get("cdi") if isinstance(features.get("cdi"), bool) else None,
            "spec_dirs": doc.get("cdi-spec-dirs") if _str_list(doc.get("cdi-spec-dirs")) else None,
            "default_handler": doc.get("default-runtime") or None,
            "handlers": dict((n, {"binary": (r or {}).get("path")}) for n, r in sorted((doc.get("runtimes") or {}).items()))
            if isinstance(doc.get("runtimes"), dict) else None,
            "builtin_handlers": list(DOCKER_BUILTIN_RUNTIMES)}


def dockerd_config_file(argv):
    """dockerd's daemon.json from its argv (``--config-file``), else the default path."""
    for i, arg in enumerate(argv or []):
        if arg == "--config-file" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--config-file="):
            return arg.split("=", 1)[1]
    return DOCKER_DAEMON_JSON


# ---- file vs daemon ---------------------------------------------------------------------------------------------


def disagreements(file_cfg, live_cfg):
    """[(what, the file's value, the daemon's value)] where both say something and it differs. ``file_cfg`` and
    ``live_cfg`` are dicts of enabled, spec_dirs, default_handler, handlers ({name: {binary}}); None is 'not said'.
    ``file_cfg['builtin_handlers']``: the handlers the daemon registers without its file (docker's), left out of the
    comparison of the handlers' names."""
    out = []
    if not file_cfg or not live_cfg:
        return out
    for key, what in (("enabled", "CDI enabled"), ("spec_dirs", "CDI spec dirs"), ("default_handler", "default handler")):
        f, d = file_cfg.get(key), live_cfg.get(key)
        if f is not None and d is not None and f != d:
            out.append((what, f, d))
    fh, dh = file_cfg.get("handlers"), live_cfg.get("handlers")
    if isinstance(fh, dict) and isinstance(dh, dict):
        # the handlers the daemon registers itself (docker's runc and its shim) are not the file's to name
        builtin = set(file_cfg.get("builtin_handlers") or []) - set(fh)
        dh = dict((n, h) for n, h in dh.items() if n not in builtin)
        if sorted(fh) != sorted(dh):
            out.append(("handlers", sorted(fh), sorted(dh)))
        for name in sorted(set(fh) & set(dh)):
            fb, db = (fh[name] or {}).get("binary"), (dh[name] or {}).get("binary")
            if fb and db and fb != db:
                out.append(("handler %s's binary" % name, fb, db))
    return out


def value_text(value):
    """A configuration value as the checks write it: on/off, [a, b], the string."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, list):
        return "[%s]" % ", ".join(str(v) for v in value)
    return str(value)


def file_checks(info):
    """The ``cdi.engine.file`` check of one selected engine (its ``cdi_config`` with ``file`` and ``disagreements``):
    PASS when the file agrees with the running daemon, WARN naming each difference with both values and sources,
    NOT_RUN when the file was not read (why). [] for an engine that has no live/file pair (podman: no daemon)."""
    cfg = (info or {}).get("cdi_config") or {}
    if not cfg.get("live") or "file" not in cfg:
        return []
    label = "%s %s" % (info.get("name"), info.get("version") or "")
    file_cfg = cfg.get("file") or {}
    source, fsource = cfg.get("source"), file_cfg.get("source") or "its file"
    if file_cfg.get("reason") and file_cfg.get("enabled") is None:
        return [make_check("cdi.engine.file", NOT_RUN, label.strip(), "the file says what the daemon does",
                           "the file was not read: %s (%s)" % (file_cfg["reason"], fsource))]
    diffs = cfg.get("disagreements") or []
    if not diffs:
        return [make_check("cdi.engine.file", PASS, label.strip(), "the file says what the daemon does",
                           "%s agrees with the running daemon (%s)" % (fsource, source))]
    observed = "; ".join("%s: the file says %s (%s), the running daemon %s (%s)" % (what, value_text(f), fsource, value_text(d), source)
                         for what, f, d in diffs)
    return [make_check("cdi.engine.file", WARN, label.strip(), "the file says what the daemon does",
                       observed + "; the verdict follows the running daemon", CHECKS["cdi.engine.file"]["next"])]


def handler_checks(info):
    """The ``cdi.engine.handler`` check of one selected engine with its ``runtime_handler`` (``_runtime.handler.choose``)."""
    handler = (info or {}).get("runtime_handler")
    if not handler:
        return []
    label = ("%s %s" % (info.get("name"), info.get("version") or "")).strip()
    inj = handler.get("injector")
    text = "handler %s (%s: %s): binary %s; CDI devices injected by %s%s" % (
        handler.get("name") or "(default)", handler.get("source"), handler.get("why"), handler.get("binary") or "unknown",
        inj["what"] if inj else "nothing", "; %s" % "; ".join(handler["notes"]) if handler.get("notes") else "")
    if handler.get("known") is False:
        handlers = sorted(((info.get("cdi_config") or {}).get("handlers") or {}))
        return [make_check("cdi.engine.handler", WARN, label, "a handler the engine has",
                           "the running engine has no handler %s (it has %s); the probe will show the engine's answer; %s" % (
                               handler.get("name"), ", ".join(handlers) or "none", text), CHECKS["cdi.engine.handler"]["next"])]
    if handler.get("known") is None:
        return [make_check("cdi.engine.handler", NOT_RUN, label, "a handler the engine has",
                           "the engine's handlers were not read; %s" % text)]
    return [make_check("cdi.engine.handler", PASS, label, "a handler the engine has", text)]


def read_docker_file(endpoint, procs):
    """dockerd's daemon.json (``docker_file``) of the dockerd serving ``endpoint``, from ``procs`` ([(pid, argv, exe)] of
    the dockerd processes): the one whose ``-H``/``--host`` or daemon.json ``hosts`` names the endpoint, else the only
    one when the endpoint is docker's default socket. A dict with ``reason`` when none is found or the file is unreadable."""
    want = str(endpoint or "unix:///var/run/docker.sock")
    candidates = []
    for _pid, argv, _exe in procs or []:
        path = dockerd_config_file(argv)
        try:
            with open(path) as fh:
                doc = json.load(fh)
        except FileNotFoundError:
            doc, error = {}, None   # no file: dockerd runs with its defaults, which say nothing to compare
        except (OSError, ValueError) as exc:
            doc, error = None, "%s not read: %s" % (path, exc)
        else:
            error = None if isinstance(doc, dict) else "%s is not a JSON object" % path
        doc = doc if isinstance(doc, dict) else None
        hosts = [argv[i + 1] for i, a in enumerate(argv[:-1]) if a in ("-H", "--host")] + [
            a.split("=", 1)[1] for a in argv if a.startswith("--host=")] + list((doc or {}).get("hosts") or [])
        candidates.append((path, doc, error, hosts))
    default = want in ("unix:///var/run/docker.sock", "unix:///run/docker.sock")
    chosen = [c for c in candidates if want in c[3]] or ([c for c in candidates if not c[3]] if default else [])
    if len(chosen) != 1:
        return {"source": "daemon.json", "enabled": None,
                "reason": "no dockerd process serving %s was found (%d dockerd process(es))" % (want, len(candidates))}
    path, doc, error, _hosts = chosen[0]
    if error:
        return {"source": path, "enabled": None, "reason": error}
    return docker_file(doc, path)
