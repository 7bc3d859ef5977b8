# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE (runtime layer): containerd and CRI-O through the Container Runtime Interface, the way the kubelet runs a
Pod: one sandbox (host network, the runtime's configured sandbox image) and one container in it whose CDI devices
come as the CRI CDIDevices field and as cdi.k8s.io/ annotations, so the runtime's own CDI code injects them.

``cri_info`` is the detection (the same dict shape as podman's and docker's); ``CriAdapter`` is the adapter
(``adapters.CliAdapter``'s interface: run_probe, remove, list_ours), registered for both ``containerd`` and ``crio``.

Where the CRI is and how it is read: the endpoint is the option given (``runtime_endpoint``), else
``CONTAINER_RUNTIME_ENDPOINT`` (crictl's variable), else the runtime's default socket; the CRI API descriptor set
(built on the controller by ``scripts/engines.sh stubs``, copied to the node) is ``cri_descriptor``, else
``GPUPROBE_CRI_DESCRIPTOR``. grpcio and protobuf are optional: without them, or without the descriptor, the
runtime is not usable and the record NOT_RUN says why (``missing_required_lib``'s words), never a traceback.
"""

from __future__ import annotations

import json
import os
import time
import uuid as uuidlib

from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import cri_client as _cri
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import pod_cgroup as _pod_cgroup
from ansible_collections.gpuprobe.layers.plugins.module_utils._common import owner as _owner
from ansible_collections.gpuprobe.layers.plugins.module_utils._probe import contract as _probe_contract
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.options import check_device, check_image
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.run import capture_pieces
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime.catalogue import (
    CREATED_LABEL, LABEL, OWNER_LABEL, probe_in_container,
)
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.vocab import RUN_ID_RE
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime.adapters import register
# the detection lives beside the CLI engines' (an inspect stage loads neither this package nor grpc)
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime.select import endpoint_of


NAMESPACE = "gpuprobe"                # the sandbox's metadata namespace (a Pod's namespace)
CONTAINER = "probe"                   # the container's metadata name in its sandbox
LOG_NAME = "probe.log"                # the container's CRI log file, in the sandbox's log directory
MIN_CALL_S = 2.0                      # every call gets at least this much, even when the probe's budget is spent
LOG_LIMIT = 64 * 1024 * 1024          # bytes of the CRI log read (the probe prints kilobytes; a flood is cut here)
STATES = {"SANDBOX_READY": "running", "SANDBOX_NOTREADY": "exited"}
# the sandbox's annotations that carry its cgroup parent, for a cleanup in another process (``remove``)
PARENT_ANNOTATION = "gpuprobe.cgroup_parent"
DRIVER_ANNOTATION = "gpuprobe.cgroup_driver"


def _user(user):
    """'uid[:gid]' -> (uid, gid or None); the CRI runs a Pod's container as numbers only here."""
    if user in (None, ""):
        return None
    uid, _sep, gid = str(user).partition(":")
    if not uid.isdigit() or (gid and not gid.isdigit()):
        raise ValueError("user %r: a CRI runtime runs the probe as a numeric uid[:gid]" % (user,))
    return (int(uid), int(gid) if gid else None)


class _Calls(object):
    """The CRI calls of one probe, for the record: method, milliseconds, and the error when one failed."""

    def __init__(self, client, deadline, done=None, endpoint=None):
        self.client, self.deadline, self.done, self.endpoint = client, deadline, [] if done is None else done, endpoint

    def left(self):
        return max(MIN_CALL_S, self.deadline - time.monotonic())

    def __call__(self, method, *args, **kwargs):
        t0 = time.monotonic()
        entry = {"call": method}
        if self.endpoint:
            entry["endpoint"] = self.endpoint
        self.done.append(entry)
        try:
            return getattr(self.client, method)(*args, timeout=self.left(), **kwargs)
        except _cri.CRIError as exc:
            entry["error"] = str(exc)
            raise
        finally:
            entry["ms"] = round((time.monotonic() - t0) * 1000.0, 1)


class CriAdapter(object):
    """The runtime interface (see ``adapters.CliAdapter``) for a CRI runtime: the probe runs as a Pod would."""

    def __init__(self, info):
        self.info = info
        self.name = info["name"]
        self._sandboxes = {}   # probe name -> sandbox id, of this process's probes
        self._placements = {}  # probe name -> its cgroup placement (_pod_cgroup.choose)

    def _client(self, timeout=_cri.DEFAULT_TIMEOUT, endpoint=None):
        return _cri.CRIClient(endpoint or self.info.get("endpoint") or endpoint_of(self.name), self.info.get("descriptor"),
                              timeout=timeout)

    def image_service(self):
        """The endpoint whose ImageService the probe's image goes through, as the kubelet's: dict endpoint (None: the
        runtime endpoint's own), source (a sentence). The kubelet pulls through its imageServiceEndpoint when set
        (``--image-service-endpoint``, KubeletConfiguration ``imageServiceEndpoint``), else through its runtime endpoint
        (pkg/kubelet/kubelet.go)."""
        pod = self.info.get("kubelet_pod")
        runtime = self.info.get("endpoint") or endpoint_of(self.name)
        if not pod:
            return {"endpoint": None, "source": "the runtime endpoint %s (no kubelet's settings to follow)" % runtime}
        image = pod.get("image_endpoint") or {}
        if image.get("value") is None:
            return {"endpoint": None, "source": "the runtime endpoint %s: the kubelet's imageServiceEndpoint is %s" % (
                runtime, image.get("source") or pod.get("unknown"))}
        if not image["value"] or image["value"] == runtime:
            return {"endpoint": None, "source": "the runtime endpoint %s, as the kubelet's (imageServiceEndpoint: %s)" % (
                runtime, image.get("source"))}
        return {"endpoint": image["value"], "source": "the kubelet's image service endpoint %s (%s), not the runtime "
                "endpoint %s" % (image["value"], image.get("source"), runtime)}

    def placement(self, calls):
        """The sandbox's cgroup parent as the kubelet places a BestEffort Pod (``_pod_cgroup.choose``), with the driver
        the runtime reports where it does (CRI RuntimeConfig)."""
        pod = self.info.get("kubelet_pod")
        if not pod or pod.get("unknown"):
            return _pod_cgroup.choose(pod)
        try:
            reported = calls("cgroup_driver")
        except _cri.CRIError as exc:
            return _pod_cgroup.no_parent("the runtime's cgroup driver could not be asked (%s): no cgroup parent is "
                                         "given" % exc)
        return _pod_cgroup.choose(pod, runtime_driver=reported)

    def run_probe(self, request):
        devices = [check_device(d) for d in request["devices"]]
        check_image(request["image"])
        user = _user(request.get("user"))
        timeout = float(request["timeout"])
        labels = {LABEL: request["run_id"], OWNER_LABEL: _owner.format_owner(request.get("owner")),
                  CREATED_LABEL: str(int(time.time()))}
        in_container = request.get("in_container") or probe_in_container()  # per run: a spec cannot take its place
        command = ["python3"] + list(_probe_contract.ISOLATED_FLAGS) + [
            in_container, json.dumps(request["config"], sort_keys=True)]
        log_dir = os.path.join(os.path.dirname(request["probe_path"]), "cri-log")
        os.makedirs(log_dir, mode=0o700, exist_ok=True)
        # the runtime handler the GPU Pods use (_runtime.handler.choose): "" is the engine's default, as the kubelet sends
        # it for a Pod without runtimeClassName
        handler = request.get("runtime_handler") or ""
        summary = {"endpoint": self.info.get("endpoint"), "sandbox": {"name": request["name"], "namespace": NAMESPACE,
                                                                      "network": "NODE", "labels": labels,
                                                                      "runtime_handler": handler},
                   "container": {"image": request["image"], "command": command, "cdi_devices_field": devices,
                                 "annotations": _cri.cdi_annotations(devices),
                                 "mounts": [{"host_path": request["probe_path"], "container_path": in_container,
                                             "readonly": True}], "user": request.get("user") or None}}
        result = {"rc": None, "stdout": "", "stderr": "", "duration_ms": 0.0, "timed_out": False, "error": None,
                  "stdout_bytes": 0, "stderr_bytes": 0, "truncated": False, "request": {"cri": summary}}
        t0 = time.monotonic()
        client = self._client()
        calls = _Calls(client, time.monotonic() + timeout)
        summary["calls"] = calls.done
        summary["image_service"] = images = self.image_service()
        image_client = None
        try:
            if images["endpoint"]:
                image_client = self._client(endpoint=images["endpoint"])
            image_calls = _Calls(image_client, calls.deadline, calls.done, images["endpoint"]) if image_client else calls
            if not image_calls("image_present", request["image"]):
                if (request.get("pull") or "never") == "never":
                    raise _cri.CRIError("ImageStatus", "NOT_FOUND", "image not found: %s is not present in %s and pull "
                                        "is never (ErrImageNeverPull)" % (request["image"], images["endpoint"] or self.name))
                image_calls("pull_image", request["image"])
            summary["cgroup_parent"] = placement = self.placement(calls)
            annotations = {PARENT_ANNOTATION: placement["parent"], DRIVER_ANNOTATION: placement["driver"]} \
                if placement["parent"] else {}
            config = client.sandbox_config(request["name"], str(uuidlib.uuid4()), namespace=NAMESPACE, labels=labels,
                                           annotations=annotations, log_directory=log_dir, cgroup_parent=placement["parent"])
            self._placements[request["name"]] = placement
            sandbox = calls("run_pod_sandbox", config, runtime_handler=handler)
            self._sandboxes[request["name"]] = summary["sandbox_id"] = sandbox
            cid = calls("create_container", sandbox, config, CONTAINER, request["image"], command, cdi_devices=devices,
                        labels=labels, log_path=LOG_NAME, mounts=[(request["probe_path"], in_container)], user=user)
            summary["container_id"] = cid
            calls("start_container", cid)
            status = client.wait_container(cid, max(0.0, calls.deadline - time.monotonic()), timeout=MIN_CALL_S * 5)
            if status.get("state") != _cri.STATE_EXITED:
                result["timed_out"] = True
                result["error"] = "timeout after %gs" % timeout
                calls("stop_container", cid, 0)
                status = client.container_status(cid, timeout=MIN_CALL_S * 5)
            summary["status"] = dict((k, status.get(k)) for k in ("state", "exit_code", "reason", "message"))
            if status.get("state") == _cri.STATE_EXITED and not result["timed_out"]:
                result["rc"] = status.get("exit_code")
            result.update(self._read_log(status.get("log_path") or os.path.join(log_dir, LOG_NAME)))
        except _cri.CRIError as exc:
            result["timed_out"] = result["timed_out"] or exc.timeout
            result["error"] = "timeout after %gs" % timeout if exc.timeout else str(exc)
            result["stderr"] = (result["stderr"] or "") + "Error: %s\n" % exc
        except _cri.CRIUnavailable as exc:
            result["error"] = "the image service endpoint %s: %s" % (images["endpoint"], exc)
            result["stderr"] = (result["stderr"] or "") + "Error: %s\n" % result["error"]
        finally:
            client.close()
            if image_client is not None:
                image_client.close()
            result["duration_ms"] = round((time.monotonic() - t0) * 1000.0, 1)
        return result

    @staticmethod
    def _read_log(path):
        """The container's CRI log read into stdout/stderr with ``_common.run.run``'s bounds and probe-line keeping."""
        try:
            with open(path, "rb") as f:
                lines = iter(lambda: f.readline(LOG_LIMIT), b"")
                return capture_pieces(_cri.iter_cri_log(_bounded(lines, LOG_LIMIT)), keep_prefix=_probe_contract.LINE_PREFIX)
        except OSError as exc:
            return {"stderr": "Error: the CRI log %s cannot be read: %s\n" % (path, exc)}

    def _ours(self, client, run_id=None, timeout=None):
        """Our sandboxes: (row, sandbox) pairs, the row in ``engines.probe_containers``' shape. Ours is what this
        collection creates and nothing else: a sandbox in its own namespace (NAMESPACE), named gpuprobe-..., with
        its run label; a Pod of another namespace is never ours, whatever its name and labels say."""
        items = client.list_pod_sandboxes({LABEL: run_id} if run_id else None, timeout=timeout)
        out = []
        for item in items:
            labels = item.get("labels") or {}
            metadata = item.get("metadata") or {}
            name = metadata.get("name") or ""
            rid = labels.get(LABEL)
            if metadata.get("namespace") != NAMESPACE:
                continue
            if not rid or not RUN_ID_RE.match(rid) or not name.startswith("gpuprobe-") or (run_id and rid != run_id):
                continue
            created = labels.get(CREATED_LABEL)
            out.append(({"name": name, "run_id": rid, "owner": _owner.parse_owner(labels.get(OWNER_LABEL)),
                         "created": int(created) if str(created or "").isdigit() else None,
                         "state": STATES.get(item.get("state"), item.get("state")), "id": item.get("id")}, item))
        return out

    def remove(self, name, timeout=30):
        """Remove the probe's sandbox tree (its containers, then the sandbox), found by the id this process got or by
        its name among our labelled sandboxes (a sandbox whose RunPodSandbox call an interrupt cut short)."""
        removed, error, cgroups = False, None, None
        placement = self._placements.pop(name, None)
        try:
            with self._client(timeout) as client:
                ids = set([self._sandboxes.pop(name)]) if name in self._sandboxes else set()
                for row, item in self._ours(client, timeout=timeout):
                    if row["name"] == name:
                        ids.add(row["id"])
                        placement = placement or _annotated_placement(item)
                parent = bool(placement and placement.get("parent"))
                for sandbox in sorted(ids):
                    # the ids whose cgroups the runtime makes in the parent: the sandbox's and its containers'
                    owned = [sandbox] + [c["id"] for c in client.list_containers(sandbox_id=sandbox, timeout=timeout)] if parent else []
                    client.remove_sandbox_tree(sandbox, timeout=timeout)
                    removed = True
                    if parent:
                        cgroups = _pod_cgroup.remove(placement, owned)
                        error = cgroups["error"]
        except (_cri.CRIError, _cri.CRIUnavailable) as exc:
            error = str(exc)
        out = {"rc": 1 if error else 0, "removed": removed, "error": error}
        if cgroups is not None:
            out["cgroups"] = cgroups
        return out

    def list_ours(self, run_id=None, timeout=30):
        try:
            with self._client(timeout) as client:
                return [row for row, _item in self._ours(client, run_id, timeout)]
        except (_cri.CRIError, _cri.CRIUnavailable) as exc:
            raise RuntimeError("%s: our sandboxes cannot be listed: %s" % (self.name, exc))


def _annotated_placement(item):
    """The cgroup placement a sandbox of ours was given, from its annotations (a cleanup in another process)."""
    ann = item.get("annotations") or {}
    if ann.get(PARENT_ANNOTATION):
        return {"parent": ann[PARENT_ANNOTATION], "driver": ann.get(DRIVER_ANNOTATION)}
    return None


def _bounded(lines, limit):
    seen = 0
    for line in lines:
        seen += len(line)
        if seen > limit:
            return
        yield line


register("containerd", CriAdapter)
register("crio", CriAdapter)
