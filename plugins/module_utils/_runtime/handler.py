# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: the runtime handler a probe runs with, its OCI runtime binary, and who injects the CDI devices. Not public API.

Which handler (``choose``), in order:

1. ``verify_probe_runtime_handler`` (the option ``runtime_handler``) when it is given: the operator names the handler
   their GPU Pods use; where the k8s layer saw GPU Pods on this node use another one, the sentence says so;
2. else the handler the GPU Pods on this node use, where the k8s layer read them (``evidence.runtime_handlers``: each
   GPU Pod's ``runtimeClassName`` -> its RuntimeClass's ``handler``; a Pod without one runs with the engine's default);
   the one most of them use, the others named;
3. else, on k3s, RKE2 and MicroK8s (the selection's layout), the distribution's own rule (``distribution_choice``):
   k3s and RKE2 keep runc the default and add a handler per NVIDIA runtime they find (``nvidia``,
   ``nvidia-experimental``, ``nvidia-cdi``), with RuntimeClasses of the same names (k3s manifests/runtimes.yaml,
   pkg/agent/containerd/nvidia.go): GPU Pods name ``runtimeClassName: nvidia`` unless k3s runs with
   ``--default-runtime`` (then the live default is that handler); MicroK8s' containerd template has the handler
   ``nvidia-container-runtime`` and its GPU addon's operator adds ``nvidia`` (default when set as default runtime);
4. else the engine's default handler: what a Pod without ``runtimeClassName`` gets (containerd's
   ``defaultRuntimeName`` and CRI-O's ``default_runtime`` from the running engine's configuration, docker's
   ``DefaultRuntime``). The CRI request then carries ``runtime_handler: ""`` as the kubelet's does.

Only the CRI engines take a handler in the request (``RunPodSandboxRequest.runtime_handler``); docker and podman run
the probe with their default runtime, which is what the record names.

Who injects the CDI devices the probe asks for (the CRI ``CDIDevices`` field and a ``cdi.k8s.io/`` annotation), each
read from the running engine's configuration (``_cdi.engine_live``) and, for the NVIDIA runtime, its config.toml:

- ``engine``: the engine's own CDI (containerd ``enableCDI``, CRI-O always, docker ``CDISpecDirs`` not empty);
- ``nvidia-runtime``: the handler's binary is NVIDIA's ``nvidia-container-runtime`` in ``cdi`` mode (the ``.cdi``
  binary forces it; otherwise ``mode`` of its config.toml, ``auto`` resolving to cdi for a request made of fully
  qualified CDI names only, nvidia-container-toolkit internal/info/auto.go), and the annotation reaches it: the
  handler's ``container_annotations`` pass ``cdi.k8s.io/*`` into the OCI spec and the runtime's
  ``modes.cdi.annotation-prefixes`` accept it. Its config is ``NVIDIA_CTK_CONFIG_FILE_PATH`` (GPU Operator's wrapper
  scripts set it), else ``$XDG_CONFIG_HOME/nvidia-container-runtime/config.toml``, else
  ``/etc/nvidia-container-runtime/config.toml`` (nvidia-container-toolkit api/config/v1/config.go GetConfigFilePath);
- ``nri``: NRI on in the engine with plugins connected; a plugin injects for the Pods annotated for it (NVIDIA's reads
  ``nvidia.cdi.k8s.io/``), which the probe is not: it is named, never counted as the probe's injector;
- CRI-O's OCI hooks (``hooks_dir`` of its running configuration, CRI-O's default
  ``/usr/share/containers/oci/hooks.d``): the toolkit's ``oci-nvidia-hook.json`` (nvidia-container-toolkit, its
  legacy mode: ``nvidia-container-toolkit prestart``, ``when: always``) injects into every container the GPUs its
  ``NVIDIA_VISIBLE_DEVICES`` names, as GPU Pods get it from the device plugin's envvar strategy. The probe asks through
  CDI (NVIDIA's specs set ``NVIDIA_VISIBLE_DEVICES=void``): the hook is named, not counted as the probe's injector.
"""

from __future__ import annotations

import json
import os
import posixpath
import re

from ansible_collections.gpuprobe.layers.plugins.module_utils._common import toml as _toml
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import why as _why
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.fs import under_root
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.vocab import CRI_ENGINES, SPEC_DIRS

NVIDIA_RUNTIMES = {"nvidia-container-runtime": None, "nvidia-container-runtime.cdi": "cdi",
                   "nvidia-container-runtime.legacy": "legacy"}
NVIDIA_CONFIG = "/etc/nvidia-container-runtime/config.toml"
NVIDIA_CONFIG_ENV = "NVIDIA_CTK_CONFIG_FILE_PATH"
CDI_ANNOTATION = "cdi.k8s.io/gpuprobe"      # the annotation the CRI probe sets (_cri.cdi_annotations)
WRAPPER_LIMIT = 64 * 1024
CRI_RUNTIME_KEYS = ("runtimeType", "runtimePath", "ContainerAnnotations", "PodAnnotations")


def trim_cri_config(config):
    """The keys of containerd's live CRI config (``Status`` verbose ``info.config``, parsed) that this collection reads:
    small enough to travel in a record. Anything that is not a dict gives {}."""
    if not isinstance(config, dict):
        return {}
    out = dict((k, config[k]) for k in ("enableCDI", "cdiSpecDirs", "sandboxImage") if k in config)
    ctd = config.get("containerd")
    if isinstance(ctd, dict):
        runtimes = {}
        for name, rt in (ctd.get("runtimes") or {}).items():
            if not isinstance(rt, dict):
                continue
            entry = dict((k, rt.get(k)) for k in CRI_RUNTIME_KEYS if rt.get(k) not in (None, "", []))
            opts = rt.get("options") if isinstance(rt.get("options"), dict) else {}
            entry["options"] = dict((k, opts[k]) for k in ("BinaryName", "Root", "SystemdCgroup") if k in opts)
            runtimes[name] = entry
        out["containerd"] = {"defaultRuntimeName": ctd.get("defaultRuntimeName"), "runtimes": runtimes}
    return out


HANDLER_RE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


def check_handler(name):
    """None or '' (no handler named), or a runtime handler name: a DNS label as a RuntimeClass's ``handler`` must be
    (k8s.io/api node/v1 RuntimeClass: lowercase letters, digits and '-', at most 63). ValueError otherwise."""
    if name in (None, ""):
        return None
    if not isinstance(name, str) or not HANDLER_RE.match(name):
        raise ValueError("runtime_handler %r: a runtime handler is a DNS label (lowercase letters, digits and '-', at most "
                         "63 characters), as a RuntimeClass's handler" % (name,))
    return name


def _pattern_matches(pattern, key):
    """containerd's container_annotations entry (a key, or a prefix ending in '*') matches ``key``."""
    return key.startswith(pattern[:-1]) if pattern.endswith("*") else key == pattern


def _wrapper_env(binary):
    """{var: value} of the shell wrapper ``binary`` (GPU Operator's: ``NVIDIA_CTK_CONFIG_FILE_PATH=... \\``), {} for a
    binary that is not a script or cannot be read."""
    try:
        with open(binary, "rb") as fh:
            head = fh.read(WRAPPER_LIMIT)
    except OSError:
        return {}
    if not head.startswith(b"#!"):
        return {}
    text = head.decode("utf-8", "replace")
    return dict(re.findall(r"(?m)^\s*(%s|XDG_CONFIG_HOME)=(\S+?)\s*\\?$" % NVIDIA_CONFIG_ENV, text))


def nvidia_config_path(binary, engine_env=None):
    """(path, where it comes from) of the config.toml the NVIDIA runtime ``binary`` reads."""
    for env, where in ((_wrapper_env(binary), "the wrapper script %s" % binary), (engine_env or {}, "the engine's environment")):
        if env.get(NVIDIA_CONFIG_ENV):
            return env[NVIDIA_CONFIG_ENV], "%s in %s" % (NVIDIA_CONFIG_ENV, where)
        if env.get("XDG_CONFIG_HOME"):
            return posixpath.join(env["XDG_CONFIG_HOME"], "nvidia-container-runtime", "config.toml"), "XDG_CONFIG_HOME in %s" % where
    return NVIDIA_CONFIG, "the default path"


def nvidia_runtime(binary, engine_env=None, root="/"):
    """The NVIDIA runtime behind a handler's ``binary`` (None when it is not one): its mode and where the mode comes
    from, its config file, the CDI mode's spec dirs and annotation prefixes."""
    if not binary:
        return None
    base = posixpath.basename(binary)
    base = base[:-len(".real")] if base.endswith(".real") else base
    if base not in NVIDIA_RUNTIMES:
        return None
    path, where = nvidia_config_path(under_root(root, binary), engine_env)
    out = {"binary": binary, "config": path, "config_from": where, "mode": "auto", "mode_from": "default (no config file)",
           "spec_dirs": list(SPEC_DIRS), "annotation_prefixes": ["cdi.k8s.io/"], "error": None}
    host = under_root(root, path)
    if os.path.isfile(host):
        try:
            with open(host) as fh:
                doc = _toml.loads(fh.read(1024 * 1024))
            section = doc.get("nvidia-container-runtime") or {}
            cdi = (section.get("modes") or {}).get("cdi") or {}
            out["mode"], out["mode_from"] = section.get("mode") or "auto", "mode in %s" % path
            out["spec_dirs"] = list(cdi.get("spec-dirs") or out["spec_dirs"])
            out["annotation_prefixes"] = list(cdi.get("annotation-prefixes") or out["annotation_prefixes"])
        except (OSError, UnicodeDecodeError, _toml.TomlError) as exc:
            out["error"] = "%s not read: %s" % (path, exc)
            out["mode"], out["mode_from"] = None, "unknown: %s" % out["error"]
    if NVIDIA_RUNTIMES[base]:
        out["mode"], out["mode_from"] = NVIDIA_RUNTIMES[base], "the binary %s forces it" % base
    return out


def _engine_injects(engine, cfg):
    name = engine.get("name")
    if not cfg.get("enabled"):
        return None
    what = {"containerd": "containerd's CDI (enableCDI true in the running daemon)", "crio": "CRI-O's CDI (always on)",
            "docker": "docker's CDI (CDISpecDirs %s)" % ", ".join(cfg.get("spec_dirs") or []),
            "podman": "podman's CDI (--device)"}.get(name, "%s's CDI" % name)
    return {"by": "engine", "what": what, "spec_dirs": cfg.get("spec_dirs"), "source": cfg.get("source")}


HOOK_BINARIES = ("nvidia-container-toolkit", "nvidia-container-runtime-hook")
HOOK_LIMIT = 64 * 1024


def oci_hooks(dirs, root="/"):
    """NVIDIA's OCI hooks in the hooks directories ``dirs`` (the files CRI-O and podman read: ``*.json``, the 1.0.0
    schema ``hook.path``, or 0.1.0's ``hook`` string): [{file, binary, when, stages}], in the directories' order."""
    out = []
    for d in dirs or []:
        host = under_root(root, d)
        try:
            names = sorted(n for n in os.listdir(host) if n.endswith(".json"))
        except OSError:
            continue
        for name in names:
            try:
                with open(os.path.join(host, name)) as fh:
                    doc = json.loads(fh.read(HOOK_LIMIT))
            except (OSError, ValueError, UnicodeDecodeError):
                continue
            hook = doc.get("hook") if isinstance(doc, dict) else None
            binary = hook.get("path") if isinstance(hook, dict) else hook if isinstance(hook, str) else None
            if not isinstance(binary, str) or posixpath.basename(binary) not in HOOK_BINARIES:
                continue
            when = doc.get("when") if isinstance(doc.get("when"), dict) else {}
            out.append({"file": posixpath.join(d, name), "binary": binary,
                        "when": "always" if when.get("always") else ", ".join(sorted(when)) or "unspecified",
                        "stages": doc.get("stages") or doc.get("stage") or []})
    return out


def injectors(engine, handler, engine_env=None, root="/"):
    """Who injects the probe's CDI devices through ``engine`` with ``handler`` (its dict from ``choose``): a list of
    {by, what, spec_dirs, source}, the first the one that acts first (the engine edits the OCI spec before the OCI
    runtime runs), and notes [text] for what is there but does not inject the probe's devices."""
    cfg = engine.get("cdi_config") or {}
    out, notes = [], []
    own = _engine_injects(engine, cfg)
    if own:
        out.append(own)
    nv = nvidia_runtime(handler.get("binary"), engine_env, root)
    if nv:
        handler["nvidia_runtime"] = nv
        passes = engine.get("name") != "containerd" or any(_pattern_matches(p, CDI_ANNOTATION) for p in handler.get("container_annotations") or [])
        accepted = any(CDI_ANNOTATION.startswith(p) for p in nv.get("annotation_prefixes") or [])
        mode = nv.get("mode")
        if mode in ("cdi", "auto") and passes and accepted:
            out.append({"by": "nvidia-runtime", "what": "the NVIDIA runtime %s in %s mode (%s%s)" % (
                nv["binary"], mode, nv["mode_from"], "; auto is cdi for a request of fully qualified CDI names only" if mode == "auto" else ""),
                "spec_dirs": nv.get("spec_dirs"), "source": nv.get("config")})
        elif mode in ("cdi", "auto"):
            notes.append("the NVIDIA runtime %s (%s mode) does not see the probe's %s annotation: %s" % (
                nv["binary"], mode, CDI_ANNOTATION, "the handler's container_annotations do not pass it" if not passes
                else "its annotation-prefixes %s do not accept it" % nv.get("annotation_prefixes")))
        else:
            notes.append("the NVIDIA runtime %s is in %s mode (%s): it injects through its legacy hook, not CDI" % (
                nv["binary"], mode or "an unknown", nv["mode_from"]))
    for hook in oci_hooks(cfg.get("hooks_dirs"), root):
        notes.append("NVIDIA's OCI hook %s (%s: when %s, %s; the toolkit's legacy mode) injects the GPUs a container's "
                     "NVIDIA_VISIBLE_DEVICES names, as GPU Pods get it from the device plugin's envvar strategy; the probe "
                     "asks through CDI (NVIDIA's specs set NVIDIA_VISIBLE_DEVICES=void), so the hook is not its injector" % (
                         hook["binary"], hook["file"], hook["when"], ", ".join(hook["stages"]) or "no stage"))
    nri = cfg.get("nri") or {}
    if nri.get("enabled"):
        notes.append("NRI is on (%s; %s; %d plugin(s) connected, installed: %s): a plugin injects CDI devices for the Pods "
                     "annotated for it (NVIDIA's reads nvidia.cdi.k8s.io/), which the probe is not" % (
                         nri.get("socket_path"), "listening" if nri.get("listening") else "no listening socket seen",
                         nri.get("plugins_connected") or 0, ", ".join(nri.get("plugins_installed") or []) or "none"))
    return out, notes


def _k8s_choice(k8s):
    """(handler name or '' for the default, why) from the k8s layer's evidence.runtime_handlers, or (None, why not)."""
    if not isinstance(k8s, dict):
        return None, "the k8s layer did not read the GPU Pods' RuntimeClasses"
    if k8s.get("error"):
        return None, "the k8s layer could not read them (%s)" % k8s["error"]
    pods = [p for p in k8s.get("gpu_pods") or [] if p.get("on_this_node") and p.get("handler") is not None]
    if not pods:
        return None, "the k8s layer saw no GPU Pod on this node%s" % (
            " (node %s)" % k8s.get("node") if k8s.get("node") else "")
    counts = {}
    for p in pods:
        counts[p["handler"]] = counts.get(p["handler"], 0) + 1
    best = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    name = best[0][0]
    others = ", ".join("%s (%d)" % (h or "the default", n) for h, n in best[1:])
    why = "%d of the %d GPU Pod(s) on this node run with %s" % (
        best[0][1], len(pods), "runtimeClassName -> handler %s" % name if name else "no runtimeClassName (the default handler)")
    return name, why + ("; others use %s, not verified by this probe" % others if others else "")


# the handlers, in order, that GPU Pods use by each distribution's rule (its sources: docs/runtimes.md)
DISTRIBUTION_HANDLERS = {
    "k3s": ("nvidia", "k3s: GPU Pods name runtimeClassName nvidia (k3s ships the RuntimeClasses nvidia, nvidia-experimental, "
                      "nvidia-cdi; its containerd's default stays runc unless k3s runs with --default-runtime)"),
    "rke2": ("nvidia", "RKE2: GPU Pods name runtimeClassName nvidia (as k3s: RuntimeClasses nvidia, nvidia-experimental, "
                       "nvidia-cdi; the default stays runc unless --default-runtime)"),
    "microk8s": ("nvidia", "MicroK8s: its GPU addon's operator adds the handler nvidia; its containerd template has "
                           "nvidia-container-runtime"),
}
NVIDIA_HANDLERS = ("nvidia", "nvidia-cdi", "nvidia-experimental", "nvidia-legacy", "nvidia-container-runtime")


def distribution_choice(engine, handlers, default):
    """(handler name or '' for the default, why) by the distribution's rule on k3s, RKE2 and MicroK8s (the selection's
    layout), or (None, None) elsewhere or where the engine has none of its GPU handlers."""
    layout = (engine.get("selection") or {}).get("layout")
    if layout not in DISTRIBUTION_HANDLERS or handlers is None:
        return None, None
    first, rule = DISTRIBUTION_HANDLERS[layout]
    if default in NVIDIA_HANDLERS:
        return "", "%s; the running engine's default handler is %s (as --default-runtime sets it), which Pods without " \
                   "runtimeClassName get" % (rule, default)
    for name in (first,) + tuple(h for h in NVIDIA_HANDLERS if h != first):
        if name in handlers:
            return name, "%s; the running engine has the handler %s%s" % (
                rule, name, "" if name == first else " (not %s)" % first)
    return None, "%s; but the running engine has none of the GPU handlers %s" % (rule, ", ".join(NVIDIA_HANDLERS))


def choose(engine, option=None, k8s=None, engine_env=None, root="/"):
    """The handler the probe runs with through ``engine`` (a selected engine's dict with ``cdi_config`` from
    ``_cdi.engine.read_engine_config``): dict name (the handler), request (what RunPodSandbox carries: '' for the
    default, as the kubelet sends for a Pod without runtimeClassName), source (option, k8s, distribution, default), why (one
    sentence), known (the engine has it, None unknown), binary, runtime_type, container_annotations, injector (the first
    of ``injectors``, None when none injects), injectors, notes."""
    cfg = engine.get("cdi_config") or {}
    handlers, default = cfg.get("handlers"), cfg.get("default_handler")
    cri = engine.get("name") in CRI_ENGINES
    picked, why_k8s = _k8s_choice(k8s)
    dist_pick, dist_why = distribution_choice(engine, handlers, default) if cri else (None, None)
    request = ""
    if option and cri:
        name, source, request = option, "option", option
        why = "verify_probe_runtime_handler names %s" % option
        if picked is not None and (picked or default) != option:
            why += "; the k8s layer saw another on this node: %s" % why_k8s
    elif option:
        name, source = default, "default"
        why = "verify_probe_runtime_handler (%s) applies to the CRI engines only: %s runs the probe with its default " \
              "runtime %s" % (option, engine.get("name"), default or "(unknown)")
    elif picked is not None and cri:
        name, source, why, request = picked or default, "k8s", why_k8s, picked
    elif dist_pick is not None:
        name, source, request = dist_pick or default, "distribution", dist_pick
        why = "%s (%s)" % (dist_why, why_k8s)
    else:
        name, source = default, "default"
        why = "the engine's default handler %s (%s), what a Pod without runtimeClassName gets; %s%s" % (
            default or "(unknown)", cfg.get("source") or "its configuration", why_k8s, "; %s" % dist_why if dist_why else "")
    out = {"name": name, "request": request, "source": source,
           "why": why, "known": None if handlers is None else name in handlers}
    entry = (handlers or {}).get(name) or {}
    out.update(binary=entry.get("binary") or entry.get("runtime_path"), runtime_type=entry.get("runtime_type"),
               container_annotations=list(entry.get("container_annotations") or []))
    if out["binary"] is None and entry.get("runtime_type") == "io.containerd.runc.v2":
        out["binary"] = "runc (no BinaryName: the runc shim's default, from PATH)"
    if option and cri and out["known"] is False:
        out["why"] += "; the engine has no handler %s (it has %s)" % (option, ", ".join(sorted(handlers)) or "none")
    found, notes = injectors(engine, out, engine_env, root)
    out.update(injectors=found, injector=found[0] if found else None, notes=notes)
    return out


def summary(handler):
    """One line for a record: 'handler nvidia-cdi (option): binary ..., injector ...'."""
    if not handler:
        return "no handler"
    inj = handler.get("injector")
    return "handler %s (%s): binary %s; CDI devices injected by %s%s" % (
        handler.get("name") or "(default)", handler.get("source"), handler.get("binary") or "unknown",
        inj["what"] if inj else "nothing (no injector for this request)",
        " and %s" % "; ".join(i["what"] for i in handler["injectors"][1:]) if len(handler.get("injectors") or []) > 1 else "")


SOURCES = {"option": "verify_probe_runtime_handler", "k8s": "the GPU Pods' RuntimeClass on this node",
           "distribution": "the distribution's rule", "default": "the engine's default"}
HANDLER_CLAUSE = "; the probe's handler: "


def attach(info, option=None, k8s=None, engine_env=None, root="/"):
    """``choose`` for the selected engine ``info``, kept as ``info['runtime_handler']``, and named in the selection's
    one sentence (``_runtime.why``: '<engine> <version> at <endpoint>, handler <name> (<why this one>), ...'; an engine
    selected otherwise than through the kubelet gets the clause at the end of ``selected_because``). CRI engines only:
    docker and podman take no handler in the request. Called again (the k8s record arrived), it replaces the clause."""
    handler = choose(info, option, k8s, engine_env, root)
    info["runtime_handler"] = handler
    if info.get("name") not in CRI_ENGINES:
        return handler
    if handler.get("name"):
        clause = "%s (%s)" % (handler["name"], SOURCES.get(handler.get("source"), handler.get("source")))
    else:   # the engine's configuration was not read (a stale socket, no CRI config): its default, unnamed
        clause = "the engine's default (its name unknown: the engine's configuration was not read)"
    selection = info.get("selection")
    if isinstance(selection, dict) and selection.get("runtime"):
        selection["handler"] = clause
        selection["sentence"] = _why.sentence(selection)
        info["selected_because"] = selection["sentence"]
    elif info.get("selected_because"):
        info["selected_because"] = info["selected_because"].split(HANDLER_CLAUSE)[0] + HANDLER_CLAUSE + clause
    return handler
