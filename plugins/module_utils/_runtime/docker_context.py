# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: the daemon the docker CLI will really talk to. Not public API.

As the docker CLI resolves it (docker/cli cli/command/cli.go ``resolveContextName``, ``resolveDockerEndpoint``,
``resolveDefaultDockerEndpoint``):

1. ``DOCKER_HOST`` (non-empty): the "default" context with that host;
2. else ``DOCKER_CONTEXT``, else ``currentContext`` of the CLI's ``config.json`` (in ``DOCKER_CONFIG``, else
   ``~/.docker``), else the "default" context;
3. a named context's endpoint is ``Endpoints.docker.Host`` of ``<config dir>/contexts/meta/<sha256 of the name>/
   meta.json`` (cli/context/store: ``contextdirOf`` is the digest of the name, ``metaFile`` is ``meta.json``; the
   JSON keys are ``Name``, ``Metadata``, ``Endpoints``; the docker endpoint's ``Host`` and ``SkipTLSVerify``,
   cli/context/endpoint.go);
4. the "default" context without ``DOCKER_HOST`` is ``unix:///var/run/docker.sock``.

Only a local unix socket is taken: an ``ssh://``, ``tcp://`` (or any other) endpoint is another machine's daemon,
and the node's verdict must be about this node, so it is refused with that reason (``refused``).
"""

from __future__ import annotations

import hashlib
import json
import os
import posixpath

from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import nodefs

DEFAULT_HOST = "unix:///var/run/docker.sock"
DEFAULT_CONTEXT = "default"


def config_dir(environ, root="/"):
    """The docker CLI's configuration directory (a node path): ``DOCKER_CONFIG``, else ``$HOME/.docker``."""
    if environ.get("DOCKER_CONFIG"):
        return environ["DOCKER_CONFIG"]
    home = environ.get("HOME") or (os.path.expanduser("~") if root in ("", "/") else "/root")
    return posixpath.join(home, ".docker")


def context_meta_path(directory, name):
    """``<config dir>/contexts/meta/<sha256(name)>/meta.json`` (docker/cli cli/context/store)."""
    return posixpath.join(directory, "contexts", "meta", hashlib.sha256(name.encode("utf-8")).hexdigest(), "meta.json")


def _load_json(root, path):
    text = nodefs.read_text(root, path, 1024 * 1024)
    if text is None:
        return None, "%s not readable" % path
    try:
        doc = json.loads(text)
    except ValueError as exc:
        return None, "%s is not JSON: %s" % (path, exc)
    if not isinstance(doc, dict):
        return None, "%s is not a JSON object" % path
    return doc, None


def _get(doc, key):
    """A key of a context's JSON, as Go's encoding/json matches it (case-insensitively)."""
    for k, v in (doc or {}).items():
        if str(k).lower() == key.lower():
            return v
    return None


def resolve(environ=None, root="/"):
    """dict endpoint (or None), context (the context name), source (a sentence: where it came from), local (True for
    a unix socket), refused (None, or why it is not taken), errors."""
    environ = os.environ if environ is None else environ
    out = {"endpoint": None, "context": DEFAULT_CONTEXT, "source": None, "local": False, "refused": None, "errors": []}
    if environ.get("DOCKER_HOST"):
        out.update(endpoint=environ["DOCKER_HOST"], source="DOCKER_HOST=%s" % environ["DOCKER_HOST"])
        return _judge(out)
    directory = config_dir(environ, root)
    name, where = None, None
    if environ.get("DOCKER_CONTEXT"):
        name, where = environ["DOCKER_CONTEXT"], "DOCKER_CONTEXT=%s" % environ["DOCKER_CONTEXT"]
    else:
        config_path = posixpath.join(directory, "config.json")
        if nodefs.is_file(root, config_path):
            doc, err = _load_json(root, config_path)
            if err:
                out["errors"].append(err)
            elif doc.get("currentContext"):
                name, where = str(doc["currentContext"]), "currentContext %s in %s" % (doc["currentContext"], config_path)
    if not name or name == DEFAULT_CONTEXT:
        out.update(endpoint=DEFAULT_HOST, source="the default context (%s; no DOCKER_HOST)" % (
            where or "no DOCKER_HOST, no DOCKER_CONTEXT, no currentContext in %s" % posixpath.join(directory, "config.json")))
        return _judge(out)
    out["context"] = name
    meta_path = context_meta_path(directory, name)
    doc, err = _load_json(root, meta_path)
    if err:
        out.update(source="context %s: %s" % (name, where),
                   refused="the docker CLI's context %s (%s) cannot be read: %s; docker itself would fail with "
                           "'context not found'" % (name, where, err))
        return out
    endpoints = _get(doc, "Endpoints") or {}
    host = _get(_get(endpoints, "docker") or {}, "Host")
    out["source"] = "context %s: %s, Endpoints.docker.Host in %s" % (name, where, meta_path)
    if not host:
        out["refused"] = "the docker CLI's context %s has no docker endpoint Host in %s" % (name, meta_path)
        return out
    out["endpoint"] = str(host)
    return _judge(out)


def _judge(out):
    host = out["endpoint"] or ""
    if host.startswith("unix://") and host[len("unix://"):].startswith("/"):
        out["local"] = True
        return out
    out["refused"] = "the docker CLI would talk to %s (%s), not a local unix socket: that daemon may be another machine's " \
                     "and the node's verdict must be about this node (set DOCKER_HOST=unix:///... or runtime_endpoint to " \
                     "this node's docker socket)" % (host, out["source"])
    return out
