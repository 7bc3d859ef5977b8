# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: the k8s layer's kubectl: finding kubectl and a kubeconfig, the argv every call starts with, and the reads
(nodes, Pods, events, the DRA objects; the layer reads RuntimeClasses with ``_kubectl_json`` too) as JSON through
the one runner (``_common.run.run``, with a timeout). Not public API.

Every read is ``kubectl [--kubeconfig F] [--context C] --request-timeout Ns get ... -o json``, a shape the command
allowlist (_common/allowlist.py, "kubectl read") admits. A failed read returns kubectl's own error (its last
stderr line: kubectl logs klog lines first) for the record to keep.
"""

from __future__ import annotations

import json
import os
import re

from ansible_collections.gpuprobe.layers.plugins.module_utils._k8s.catalogue import DEFAULT_TIMEOUT, DRA_EVENT_REASONS, SCHEDULING_REASON
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.run import first_line, last_line, run, which


# the admin kubeconfig each distribution writes on its server nodes (k3s pkg/cli/cmds/server.go --write-kubeconfig
# default, RKE2 the same under rke2, MicroK8s snap/microk8s-resources "microk8s config" credentials)
DISTRIBUTION_KUBECONFIGS = {"k3s": "/etc/rancher/k3s/k3s.yaml", "rke2": "/etc/rancher/rke2/rke2.yaml",
                            "microk8s": "/var/snap/microk8s/current/credentials/client.config"}
# RKE2 keeps its kubectl off PATH (docs.rke2.io "Cluster Access")
DISTRIBUTION_KUBECTL = {"rke2": "/var/lib/rancher/rke2/bin/kubectl"}

# kubectl's words when the server does not serve a resource type at all (a cluster without resource.k8s.io)
NOT_SERVED = re.compile(r"doesn't have a resource type|the server could not find the requested resource", re.I)


def _items(doc):
    return list((doc or {}).get("items") or [])


def _kubectl_finds_one(environ, home):
    """Whether kubectl finds a kubeconfig (or a service account) of its own: KUBECONFIG's files, ~/.kube/config, a Pod."""
    paths = [p for p in (environ.get("KUBECONFIG") or "").split(os.pathsep) if p]
    default = os.path.join(home or os.path.expanduser("~"), ".kube", "config")
    return any(os.path.isfile(p) for p in paths) or os.path.isfile(default) or bool(environ.get("KUBERNETES_SERVICE_HOST"))


def distribution_kubeconfig(layout=None, root="/", procs=None):
    """(path or None, why): the admin kubeconfig the node's distribution writes (DISTRIBUTION_KUBECONFIGS), when the
    node is k3s, RKE2 or MicroK8s (``layout``, else ``_runtime.layouts.distribution``) and this user can read it;
    else None and why not (None: not such a node)."""
    if layout is None:
        from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime.select import distribution  # pylint: disable=import-outside-toplevel
        layout = distribution(root, procs)[0]
    path = DISTRIBUTION_KUBECONFIGS.get(layout)
    if not path:
        return None, None
    host = os.path.join(root, path.lstrip("/"))
    if os.access(host, os.R_OK) and os.path.isfile(host):
        return host, "%s's admin kubeconfig %s" % (layout, path)
    return None, "%s's admin kubeconfig %s %s" % (layout, path, "not readable by uid %d" % os.geteuid() if os.path.exists(host) else "absent")


def implicit_kubeconfig(environ=None, home=None, root="/"):
    """The kubeconfig to name on kubectl's command line where none is given and kubectl finds none of its own: the
    distribution's admin kubeconfig (k3s writes /etc/rancher/k3s/k3s.yaml, RKE2 /etc/rancher/rke2/rke2.yaml, MicroK8s
    its credentials/client.config), or None."""
    environ = os.environ if environ is None else environ
    if _kubectl_finds_one(environ, home):
        return None
    return distribution_kubeconfig(root=root)[0]


def kubeconfig_reason(kubeconfig, environ=None, home=None, layout=None, root="/", procs=None):
    """Why there is no cluster to talk to (None when a kubeconfig or an in-cluster service account exists, or the
    node's distribution wrote an admin kubeconfig this user can read: ``distribution_kubeconfig``; ``procs``: the
    node's processes already read, as ``_runtime.select.distribution`` takes them)."""
    environ = os.environ if environ is None else environ
    if kubeconfig:
        return None if os.path.isfile(kubeconfig) else "kubeconfig %s does not exist" % kubeconfig
    if _kubectl_finds_one(environ, home):
        return None
    found, why = distribution_kubeconfig(layout, root, procs)
    if found:
        return None
    paths = [p for p in (environ.get("KUBECONFIG") or "").split(os.pathsep) if p]
    default = os.path.join(home or os.path.expanduser("~"), ".kube", "config")
    return "no kubeconfig: option kubeconfig not given, KUBECONFIG %s, %s absent, %snot running in a Pod" % (
        "lists no existing file (%s)" % environ["KUBECONFIG"] if paths else "unset", default, "%s, " % why if why else "")


def _kubectl_json(base, args, timeout):
    res = run(base + args + ["-o", "json"], timeout=timeout + 5)
    if res["rc"] == 0:
        try:
            return json.loads(res["stdout"]), None
        except ValueError as exc:
            return None, "%s: output is not JSON: %s" % (" ".join(args), exc)
    # kubectl logs klog lines first; its own error message is the last line
    detail = res["error"] or last_line(res["stderr"]) or first_line(res["stdout"]) or "rc %s" % res["rc"]
    return None, "kubectl %s: %s" % (" ".join(args), detail)


def _merge(docs):
    return {"items": [item for doc in docs for item in _items(doc)]}


def kubectl_base(path, kubeconfig=None, context=None, timeout=DEFAULT_TIMEOUT):
    """The argv prefix of every kubectl call: the program, its kubeconfig (given, else the distribution's admin
    kubeconfig where kubectl finds none of its own: ``implicit_kubeconfig``) and context, the request timeout."""
    kubeconfig = kubeconfig or implicit_kubeconfig()
    return [path] + (["--kubeconfig", kubeconfig] if kubeconfig else []) + (["--context", context] if context else []) \
        + ["--request-timeout", "%ds" % timeout]


def resolve_kubectl(kubectl, kubeconfig, procs=None):
    """(path of kubectl or None, why there is no cluster to talk to or None). kubectl is looked for on PATH, else where
    the node's distribution keeps it (RKE2: DISTRIBUTION_KUBECTL). ``procs``: the node's processes already read (else
    /proc is read where the distribution is asked)."""
    path = kubectl if os.path.sep in kubectl else which(kubectl)
    if not path and kubectl == "kubectl":
        from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime.select import distribution  # pylint: disable=import-outside-toplevel
        path = DISTRIBUTION_KUBECTL.get(distribution(procs=procs)[0])
    if not path or not os.path.isfile(path):
        return None, "kubectl not found: %s" % kubectl
    return path, kubeconfig_reason(kubeconfig, procs=procs)


def collect_dra(base, scopes, timeout):
    """The DRA documents for ``analyse``: ResourceSlices and DeviceClasses (cluster-wide), ResourceClaims, their
    templates and the DRA events of the Pods' namespaces. A cluster that serves no resource.k8s.io (or refuses the
    ResourceSlices) stops after the first read; the error is kept for the record."""
    docs = {"errors": {}}
    for kind in ("resourceslices", "deviceclasses"):
        docs[kind], err = _kubectl_json(base, ["get", kind], timeout)
        if err:
            docs["errors"][kind] = err
            if kind == "resourceslices":
                return docs, None
    per_scope = {"resourceclaims": [], "resourceclaimtemplates": []}
    events = []
    for scope in scopes:
        for kind in per_scope:
            if kind in docs["errors"]:
                continue
            doc, err = _kubectl_json(base, ["get", kind] + scope, timeout)
            if err:
                docs["errors"][kind] = err
            else:
                per_scope[kind].append(doc)
        for reason in DRA_EVENT_REASONS:
            doc, err = _kubectl_json(base, ["get", "events", "--field-selector", "reason=%s" % reason] + scope, timeout)
            if err:
                docs["errors"].setdefault("events", []).append(err)
            else:
                events.append(doc)
    for kind, found in per_scope.items():
        docs[kind] = None if kind in docs["errors"] else _merge(found)
    return docs, _merge(events)


def collect_pods(base, scopes, timeout):
    """The Pods of each scope (``-n NS`` or ``--all-namespaces``) and their FailedScheduling events: (Pod documents,
    event documents (None for a scope whose events could not be read), the error that stopped the Pod reads or
    None, the event read errors). The reads stop at the first scope whose Pods cannot be listed."""
    pod_docs, event_docs, pods_error, events_errors = [], [], None, []
    for scope in scopes:
        doc, err = _kubectl_json(base, ["get", "pods"] + scope, timeout)
        if err:
            pods_error = err
            break
        pod_docs.append(doc)
        doc, err = _kubectl_json(base, ["get", "events", "--field-selector", "reason=%s" % SCHEDULING_REASON] + scope, timeout)
        event_docs.append(doc if not err else None)
        if err:
            events_errors.append(err)
    return pod_docs, event_docs, pods_error, events_errors
