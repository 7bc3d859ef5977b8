# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE (cdi layer): the template a distribution regenerates containerd's configuration from at every start. Not
public API.

k3s and RKE2 write ``<data-dir>/agent/etc/containerd/config.toml`` at each start, from ``config-v3.toml.tmpl`` (or
``config.toml.tmpl``) beside it where the user put one (a Go template; ``{{ template "base" . }}`` includes k3s's own),
else from their built-in template (k3s pkg/agent/containerd/config.go, pkg/agent/templates). MicroK8s' containerd
wrapper writes ``$SNAP_DATA/args/containerd.toml`` from ``args/containerd-template.toml`` before each start, replacing
``${SNAP}``, ``${SNAP_DATA}`` and ``${RUNTIME}`` (``nvidia-container-runtime`` where ``$SNAP_DATA/var/lock/gpu``
exists, else ``runc``) (canonical/microk8s microk8s-resources/wrappers/run-containerd-with-args); its GPU addon points
the GPU Operator's toolkit at that template (canonical/microk8s-core-addons addons/nvidia/enable ``CONTAINERD_CONFIG``).

So the file says what the daemon read at its start, and the template what the next start will read. ``compare`` reads
the template's CDI and handler settings (the keys it sets; Go template actions are not evaluated, and a template that
includes k3s's base is compared on what it adds or sets) and compares each with the running daemon (its CRI Status
configuration), else with the generated file: each difference is what the next start changes (``cdi.engine.template``).
"""

from __future__ import annotations

import os
import posixpath
import re

from ansible_collections.gpuprobe.layers.plugins.module_utils._common import toml as _toml
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi.engine_live import value_text
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import NOT_RUN, PASS, WARN, make_check

CHECKS = {
    "cdi.engine.template": {
        "title": "the template the distribution regenerates containerd's configuration from at every start (k3s/RKE2 "
                 "config.toml.tmpl, MicroK8s containerd-template.toml) says what the running daemon does (CDI on/off, "
                 "spec dirs, default handler, handlers and their binaries)",
        "fail": "WARN: the next start will run what the template says, not what runs now (a template edited, or the GPU "
                "Operator's toolkit writing into it, since the daemon started); NOT_RUN: the template could not be read",
        "next": "restart k3s/RKE2/MicroK8s to apply the template, or put the template back; the generated file is "
                "overwritten at every start: edit the template, never the file",
    },
}

# the generated file's name -> the templates it is generated from, in the order the distribution prefers them
TEMPLATES = {"config.toml": ("config-v3.toml.tmpl", "config.toml.tmpl"), "containerd.toml": ("containerd-template.toml",)}
BASE_RE = re.compile(r"\{\{-?\s*template\s+\"base\"\s+\.\s*-?\}\}")
ACTION_RE = re.compile(r"\{\{.*?\}\}", re.S)
VAR_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
SECTIONS = {3: "io.containerd.cri.v1.runtime"}   # the CRI plugin's runtime section by config version (else v1/v2's)


def find(config):
    """(template path, 'go' or 'snap') beside the generated containerd config ``config`` (a path on this machine),
    or (None, None)."""
    d, base = posixpath.split(config or "")
    for name in TEMPLATES.get(base, ()):
        path = posixpath.join(d, name)
        if os.path.isfile(path):
            return path, "snap" if name == "containerd-template.toml" else "go"
    return None, None


def _snap_vars(template):
    """The values MicroK8s' wrapper substitutes, from the template's own place ($SNAP_DATA/args/...)."""
    snap_data = posixpath.dirname(posixpath.dirname(template))
    runtime = "nvidia-container-runtime" if os.path.exists(posixpath.join(snap_data, "var", "lock", "gpu")) else "runc"
    return {"SNAP_DATA": snap_data, "SNAP": "/snap/microk8s/%s" % posixpath.basename(snap_data), "RUNTIME": runtime}


def settings(doc):
    """{what: value} of the CDI and handler keys a containerd configuration document SETS (none filled in)."""
    try:
        version = int(doc.get("version", 1))
    except (TypeError, ValueError):
        version = None
    cri = ((doc.get("plugins") or {}).get(SECTIONS.get(version, "io.containerd.grpc.v1.cri"))) or {}
    out = {}
    if "enable_cdi" in cri:
        out["CDI enabled"] = cri["enable_cdi"]
    if "cdi_spec_dirs" in cri:
        out["CDI spec dirs"] = cri["cdi_spec_dirs"]
    ctd = cri.get("containerd") or {}
    if ctd.get("default_runtime_name"):
        out["default handler"] = ctd["default_runtime_name"]
    for name, rt in sorted((ctd.get("runtimes") or {}).items()):
        if isinstance(rt, dict):
            out["handler %s" % name] = (rt.get("options") or {}).get("BinaryName") or rt.get("runtime_type") or "present"
    return out


def live_settings(cfg):
    """The same keys from the running daemon's configuration (``_cdi.engine_live.containerd_live``)."""
    out = {}
    for key, what in (("enabled", "CDI enabled"), ("spec_dirs", "CDI spec dirs"), ("default_handler", "default handler")):
        if cfg.get(key) is not None:
            out[what] = cfg[key]
    for name, h in sorted((cfg.get("handlers") or {}).items()):
        out["handler %s" % name] = (h or {}).get("binary") or (h or {}).get("runtime_type") or "present"
    return out


def read(path, kind):
    """(settings, base, error): what the template at ``path`` sets, whether it includes k3s's base, or an error."""
    try:
        with open(path) as fh:
            text = fh.read(1024 * 1024)
    except (OSError, UnicodeDecodeError) as exc:
        return None, False, "not read: %s" % exc
    base = bool(BASE_RE.search(text)) if kind == "go" else False
    if kind == "go":
        text = ACTION_RE.sub("", text)
    else:
        known = _snap_vars(path)
        text = VAR_RE.sub(lambda m: known.get(m.group(1), m.group(0)), text)
    try:
        return settings(_toml.loads(text)), base, None
    except _toml.TomlError as exc:
        return None, base, "not understood as TOML once its template actions are left out: %s" % str(exc).splitlines()[0]


def _same(template_value, value):
    """A template value (strings may keep a ${VAR} the wrapper substitutes and this reading does not know) equals
    ``value``."""
    if isinstance(template_value, str) and VAR_RE.search(template_value) and isinstance(value, str):
        pattern = "".join(".*" if i % 2 else re.escape(part) for i, part in enumerate(VAR_RE.split(template_value)))
        return re.match("^%s$" % pattern, value) is not None
    return template_value == value


def compare(config, live_cfg, generated):
    """The template of the generated containerd config ``config`` against the running daemon (``live_cfg``: its live
    configuration dict, None when the daemon gave none) and the generated file (``generated``: its parsed document):
    dict template, kind, base, differences [(what, template value, running value, file value)], against (what the
    differences are taken against), error; None where no template is beside the file."""
    path, kind = find(config)
    if not path:
        return None
    tmpl, base, error = read(path, kind)
    out = {"template": path, "kind": kind, "base": base, "differences": [], "error": error, "config": config,
           "against": "the running daemon" if live_cfg else "the generated file"}
    if error:
        return out
    filed = settings(generated or {})
    running = live_settings(live_cfg) if live_cfg else None
    ref = running if running is not None else filed
    # a full template (no base) drops at the next start what the generated file sets and it does not say
    names = set(tmpl) if base else set(tmpl) | set(filed)
    for what in sorted(names):
        if what not in tmpl:
            out["differences"].append((what, None, (running or {}).get(what), filed.get(what)))
        elif what not in ref or not _same(tmpl[what], ref[what]):
            out["differences"].append((what, tmpl[what], (running or {}).get(what), filed.get(what)))
    return out


def _text(value, what=""):
    if value is None:
        return "no such handler" if what.startswith("handler ") else "nothing (containerd's default)"
    return value_text(value)


def checks(info):
    """The ``cdi.engine.template`` check of one selected engine whose ``cdi_config`` carries ``template`` (``compare``'s
    dict); [] where there is no template."""
    cfg = (info or {}).get("cdi_config") or {}
    t = cfg.get("template")
    if not t:
        return []
    label = ("%s %s" % (info.get("name"), info.get("version") or "")).strip()
    expected = "the template the next start regenerates %s from says what %s does" % (t["config"], t["against"])
    if t.get("error"):
        return [make_check("cdi.engine.template", NOT_RUN, label, expected, "%s %s" % (t["template"], t["error"]))]
    if not t["differences"]:
        return [make_check("cdi.engine.template", PASS, label, expected, "%s%s agrees with %s on CDI and handlers" % (
            t["template"], " (k3s's base and what it adds)" if t["base"] else "", t["against"]))]
    said = "; ".join("%s: the template says %s, the running daemon %s, the generated file %s" % (
        what, _text(tv, what), _text(rv, what) if t["against"] == "the running daemon" else "unknown", _text(fv, what))
        for what, tv, rv, fv in t["differences"])
    return [make_check("cdi.engine.template", WARN, label, expected, "%s: %s; the next start regenerates %s from it and runs "
                       "what the template says" % (t["template"], said, t["config"]), CHECKS["cdi.engine.template"]["next"])]
