# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: a small client of the Kubernetes Container Runtime Interface (CRI), the kubelet's own path.

Not public API. It does what the kubelet does to run one container: ``RunPodSandbox`` (host network, so no CNI
is needed; the sandbox image is the runtime's configured one), ``CreateContainer`` with CDI devices given both as
the CRI ``CDIDevices`` field and as ``cdi.k8s.io/`` annotations (containerd 1.7 reads the annotations, newer
releases the field), ``StartContainer``, waiting on ``ContainerStatus``, reading the CRI log file, and stopping
and removing the container and the sandbox; it lists sandboxes and containers by label. Every call has a timeout.

The CRI messages are not generated Python: the client reads a protobuf descriptor set of the CRI API
(``runtime.v1``), built at build time by grpcio-tools' protoc from the api.proto of Debian's
golang-github-kubernetes-cri-api-dev (``scripts/engines.sh stubs`` writes ``.build/engines/cri/api.desc``), and
makes the message classes from it at run time. So no generated or copied code is committed, and no generated
module can refuse the node's protobuf runtime for a version mismatch. The descriptor is found at the path given
to ``CRIClient`` or in the environment variable ``GPUPROBE_CRI_DESCRIPTOR``.

grpcio and protobuf are optional and imported on first use (``load_libs``): without them ``load_libs()`` and then
``HAS_CRI_LIBS`` are False and ``CRI_IMPORT_ERROR`` holds the import error, for ``missing_required_lib(CRI_LIBS,
exception=...)``; ``CRIClient`` then raises CRIUnavailable.
"""

from __future__ import annotations

import os
import time

# grpcio and protobuf, imported the first time the CRI is used (``load_libs``): a probe through a CLI engine imports
# this module with the runtime package and never pays for them (~40 ms of a node-side call)
grpc = descriptor_pb2 = descriptor_pool = json_format = message = message_factory = None
HAS_CRI_LIBS = None                       # None until load_libs() has tried
CRI_IMPORT_ERROR = None

CRI_LIBS = "grpcio and protobuf"          # the name for missing_required_lib
DESCRIPTOR_ENV = "GPUPROBE_CRI_DESCRIPTOR"
SERVICE = "runtime.v1.RuntimeService"
IMAGE_SERVICE = "runtime.v1.ImageService"
CDI_ANNOTATION_PREFIX = "cdi.k8s.io/"
DEFAULT_TIMEOUT = 10.0                    # seconds, every call
# CRI container states (runtime.v1.ContainerState) as ContainerStatus returns them in JSON
STATE_EXITED = "CONTAINER_EXITED"
STATE_RUNNING = "CONTAINER_RUNNING"
STATE_CREATED = "CONTAINER_CREATED"


def load_libs():
    """Import grpcio and protobuf once (the first CRI use); True when they are there (``HAS_CRI_LIBS``)."""
    global grpc, descriptor_pb2, descriptor_pool, json_format, message, message_factory  # pylint: disable=global-statement
    global HAS_CRI_LIBS, CRI_IMPORT_ERROR  # pylint: disable=global-statement
    if HAS_CRI_LIBS is None:
        try:
            import grpc as grpc_  # pylint: disable=import-outside-toplevel
            from google.protobuf import descriptor_pb2 as d_pb2, descriptor_pool as d_pool  # pylint: disable=import-outside-toplevel
            from google.protobuf import json_format as j_format, message as msg, message_factory as m_factory  # pylint: disable=import-outside-toplevel
        except ImportError as exc:  # pragma: no cover - depends on the target host
            CRI_IMPORT_ERROR = exc
            HAS_CRI_LIBS = False
        else:
            grpc, descriptor_pb2, descriptor_pool, json_format, message, message_factory = grpc_, d_pb2, d_pool, j_format, msg, m_factory
            HAS_CRI_LIBS = True
    return HAS_CRI_LIBS


class CRIUnavailable(Exception):
    """The client cannot be made here: grpcio/protobuf missing, or no CRI API descriptor."""


class CRIError(Exception):
    """A CRI call failed: ``method``, ``code`` (the gRPC status name) and ``details``; ``timeout`` is True when the
    call's deadline expired."""

    def __init__(self, method, code, details):
        self.method, self.code, self.details = method, code, details
        self.timeout = code == "DEADLINE_EXCEEDED"
        super().__init__("%s: %s: %s" % (method, code, details))


def endpoint_target(endpoint):
    """The gRPC target of a CRI endpoint: ``unix:///run/containerd/containerd.sock`` or a bare socket path."""
    if endpoint.startswith("unix://"):
        return "unix://" + endpoint[len("unix://"):] if endpoint.startswith("unix:///") else endpoint
    if endpoint.startswith("/"):
        return "unix://" + endpoint
    raise ValueError("a CRI endpoint is unix:///path or /path, not %r" % endpoint)


def cdi_annotations(devices, key="gpuprobe"):
    """The ``cdi.k8s.io/<key>`` annotation that carries fully qualified CDI device names (comma separated), as the
    CDI library's UpdateAnnotations writes it for containerd 1.7."""
    return {CDI_ANNOTATION_PREFIX + key: ",".join(devices)} if devices else {}


def iter_cri_log(lines):
    """(stream, bytes) pieces of a CRI log (``<RFC3339 time> <stream> <P|F> <text>`` per line, as bytes lines): the
    text of an ``F`` line ends with a newline, a ``P`` line is the first part of a longer line, continued by the next
    piece of the same stream. Lines that are not CRI log lines are skipped."""
    for raw in lines:
        parts = raw.rstrip(b"\n").split(b" ", 3)
        if len(parts) < 3 or parts[1] not in (b"stdout", b"stderr"):
            continue
        text = parts[3] if len(parts) == 4 else b""
        yield parts[1].decode("ascii"), text if parts[2] == b"P" else text + b"\n"


def parse_cri_log(data):
    """(stdout, stderr) of a CRI log's text, whole (``iter_cri_log``)."""
    out = {"stdout": [], "stderr": []}
    for stream, text in iter_cri_log(data.encode("utf-8").splitlines(True)):
        out[stream].append(text.decode("utf-8", "replace"))
    return "".join(out["stdout"]), "".join(out["stderr"])


def _to_dict(msg):
    """The message as a dict with every field, zero values included (an exit code 0 is a value, not an absence)."""
    try:
        return json_format.MessageToDict(msg, preserving_proto_field_name=True, always_print_fields_with_no_presence=True)
    except TypeError:  # pragma: no cover - protobuf < 5.26 names it including_default_value_fields
        return json_format.MessageToDict(msg, preserving_proto_field_name=True, including_default_value_fields=True)


def _message_class(pool, name):
    desc = pool.FindMessageTypeByName(name)
    if hasattr(message_factory, "GetMessageClass"):   # protobuf >= 4.22
        return message_factory.GetMessageClass(desc)
    return message_factory.MessageFactory(pool).GetPrototype(desc)  # pragma: no cover - older protobuf


class CRIClient:
    """One CRI endpoint. Every method takes ``timeout`` (seconds, default the client's) and returns plain dicts
    (protobuf JSON with the .proto's field names); a failed call raises CRIError."""

    def __init__(self, endpoint, descriptor=None, timeout=DEFAULT_TIMEOUT):
        if not load_libs():
            raise CRIUnavailable("%s are not installed: %s" % (CRI_LIBS, CRI_IMPORT_ERROR))
        path = descriptor or os.environ.get(DESCRIPTOR_ENV)
        if not path:
            raise CRIUnavailable("no CRI API descriptor: give its path or set %s (scripts/engines.sh stubs builds it)"
                                 % DESCRIPTOR_ENV)
        try:
            with open(path, "rb") as f:
                fds = descriptor_pb2.FileDescriptorSet.FromString(f.read())
        except (OSError, message.DecodeError) as exc:
            raise CRIUnavailable("cannot read the CRI API descriptor %s: %s" % (path, exc)) from None
        self.endpoint = endpoint
        self.timeout = timeout
        self._pool = descriptor_pool.DescriptorPool()
        self._calls = {}
        try:
            for fd in fds.file:
                self._pool.Add(fd)
            services = [self._pool.FindServiceByName(name) for name in (SERVICE, IMAGE_SERVICE)]
        except (KeyError, TypeError) as exc:
            raise CRIUnavailable("the descriptor %s is not the CRI API (%s, %s): %s" % (path, SERVICE, IMAGE_SERVICE, exc)) from None
        self._channel = grpc.insecure_channel(endpoint_target(endpoint))
        for service in services:
            for m in service.methods:
                req, resp = _message_class(self._pool, m.input_type.full_name), _message_class(self._pool, m.output_type.full_name)
                call = self._channel.unary_unary("/%s/%s" % (service.full_name, m.name), request_serializer=req.SerializeToString,
                                                 response_deserializer=resp.FromString)
                self._calls[m.name] = (req, call)

    def close(self):
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def call(self, method, request=None, timeout=None):
        """Call ``method`` of the RuntimeService or ImageService with ``request`` (a dict in the protobuf JSON
        shape, .proto field names); the response as a dict."""
        req_class, call = self._calls[method]
        msg = json_format.ParseDict(request or {}, req_class())
        try:
            resp = call(msg, timeout=self.timeout if timeout is None else timeout)
        except grpc.RpcError as exc:
            code = exc.code() if hasattr(exc, "code") else None
            raise CRIError(method, code.name if code is not None else "UNKNOWN",
                           exc.details() if hasattr(exc, "details") else str(exc)) from None
        return _to_dict(resp)

    # ---- what the kubelet does -----------------------------------------------------------------------------

    def version(self, timeout=None):
        """runtime_name, runtime_version, runtime_api_version of the endpoint."""
        return self.call("Version", {"version": "v1"}, timeout)

    @staticmethod
    def sandbox_config(name, uid, namespace="gpuprobe", labels=None, annotations=None, log_directory=None,
                       cgroup_parent=None):
        """A PodSandboxConfig with the host's network (no CNI) as the kubelet builds it for a hostNetwork Pod (no
        hostname: the host's UTS namespace is kept, so runc refuses one)."""
        config = {"metadata": {"name": name, "uid": uid, "namespace": namespace, "attempt": 0},
                  "labels": dict(labels or {}), "annotations": dict(annotations or {}),
                  "linux": {"security_context": {"namespace_options": {"network": "NODE", "pid": "CONTAINER"}}}}
        if log_directory:
            config["log_directory"] = log_directory
        if cgroup_parent:
            config["linux"]["cgroup_parent"] = cgroup_parent
        return config

    def run_pod_sandbox(self, config, runtime_handler="", timeout=None):
        """Start the sandbox (the runtime's configured sandbox image); its id."""
        return self.call("RunPodSandbox", {"config": config, "runtime_handler": runtime_handler}, timeout)["pod_sandbox_id"]

    def create_container(self, sandbox_id, sandbox_config, name, image, command, args=(), env=None, cdi_devices=(),
                         cdi_via=("field", "annotations"), labels=None, annotations=None, log_path=None, mounts=(),
                         user=None, timeout=None):
        """Create a container in the sandbox; its id. ``cdi_devices`` are fully qualified CDI names given as the
        CRI CDIDevices field ("field") and/or as a cdi.k8s.io/ annotation ("annotations"), per ``cdi_via``.
        ``mounts``: (host_path, container_path) pairs, bound read-only; ``user``: (uid, gid) or (uid,) to run as."""
        ann = dict(annotations or {})
        if "annotations" in cdi_via:
            ann.update(cdi_annotations(list(cdi_devices)))
        config = {"metadata": {"name": name, "attempt": 0}, "image": {"image": image},
                  "command": list(command), "args": list(args),
                  "envs": [{"key": k, "value": v} for k, v in sorted((env or {}).items())],
                  "labels": dict(labels or {}), "annotations": ann,
                  "linux": {"security_context": {"namespace_options": {"network": "NODE", "pid": "CONTAINER"}}}}
        if mounts:
            config["mounts"] = [{"host_path": h, "container_path": c, "readonly": True} for h, c in mounts]
        if user is not None:
            ctx = config["linux"]["security_context"]
            ctx["run_as_user"] = {"value": int(user[0])}
            if len(user) > 1 and user[1] is not None:
                ctx["run_as_group"] = {"value": int(user[1])}
        if "field" in cdi_via and cdi_devices:
            config["CDI_devices"] = [{"name": d} for d in cdi_devices]
        if log_path:
            config["log_path"] = log_path
        req = {"pod_sandbox_id": sandbox_id, "config": config, "sandbox_config": sandbox_config}
        return self.call("CreateContainer", req, timeout)["container_id"]

    def start_container(self, container_id, timeout=None):
        self.call("StartContainer", {"container_id": container_id}, timeout)

    def container_status(self, container_id, timeout=None):
        """The status dict: state, exit_code, reason, message, log_path, mounts, ..."""
        return self.call("ContainerStatus", {"container_id": container_id}, timeout)["status"]

    def wait_container(self, container_id, deadline_s, poll_s=0.05, timeout=None):
        """Poll ContainerStatus until the container has exited or ``deadline_s`` seconds passed; the last status
        (state CONTAINER_EXITED when it exited; the caller sees any other state as a timeout)."""
        end = time.monotonic() + deadline_s
        while True:
            status = self.container_status(container_id, timeout)
            if status.get("state") == STATE_EXITED or time.monotonic() >= end:
                return status
            time.sleep(poll_s)

    @staticmethod
    def read_log(path, limit=4 * 1024 * 1024):
        """(stdout, stderr) of the container's CRI log file, at most ``limit`` bytes of it."""
        with open(path, "rb") as f:
            data = f.read(limit).decode("utf-8", "replace")
        return parse_cri_log(data)

    def stop_container(self, container_id, grace_s=0, timeout=None):
        self.call("StopContainer", {"container_id": container_id, "timeout": int(grace_s)}, timeout)

    def remove_container(self, container_id, timeout=None):
        self.call("RemoveContainer", {"container_id": container_id}, timeout)

    def stop_pod_sandbox(self, sandbox_id, timeout=None):
        self.call("StopPodSandbox", {"pod_sandbox_id": sandbox_id}, timeout)

    def remove_pod_sandbox(self, sandbox_id, timeout=None):
        self.call("RemovePodSandbox", {"pod_sandbox_id": sandbox_id}, timeout)

    def list_pod_sandboxes(self, labels=None, timeout=None):
        """The sandboxes whose labels include ``labels`` (id, metadata, state, labels, ...)."""
        req = {"filter": {"label_selector": dict(labels)}} if labels else {}
        return self.call("ListPodSandbox", req, timeout).get("items", [])

    def list_containers(self, labels=None, sandbox_id=None, timeout=None):
        """The containers whose labels include ``labels`` (and in ``sandbox_id`` when given)."""
        flt = {}
        if labels:
            flt["label_selector"] = dict(labels)
        if sandbox_id:
            flt["pod_sandbox_id"] = sandbox_id
        return self.call("ListContainers", {"filter": flt} if flt else {}, timeout).get("containers", [])

    def cgroup_driver(self, timeout=None):
        """The cgroup driver the runtime reports (CRI ``RuntimeConfig``: 'systemd', 'cgroupfs'), None where the
        runtime does not implement the call (containerd 1.7) or reports none."""
        if "RuntimeConfig" not in self._calls:   # a descriptor of a CRI API older than the call
            return None
        try:
            linux = self.call("RuntimeConfig", {}, timeout).get("linux") or {}
        except CRIError as exc:
            if exc.code == "UNIMPLEMENTED":
                return None
            raise
        return {"SYSTEMD": "systemd", "CGROUPFS": "cgroupfs"}.get(str(linux.get("cgroup_driver") or "").upper())

    def image_present(self, image, timeout=None):
        """True when the runtime holds ``image`` (ImageStatus; no pull)."""
        return bool(self.call("ImageStatus", {"image": {"image": image}}, timeout).get("image"))

    def pull_image(self, image, timeout=None):
        """Pull ``image`` through the runtime (its configured registries and credentials); the image ref."""
        return self.call("PullImage", {"image": {"image": image}}, timeout).get("image_ref")

    def remove_sandbox_tree(self, sandbox_id, timeout=None):
        """Stop and remove every container of the sandbox, then the sandbox (what the kubelet does when a Pod
        goes); a CRIError of NOT_FOUND counts as removed."""
        for c in self.list_containers(sandbox_id=sandbox_id, timeout=timeout):
            _ignore_not_found(self.stop_container, c["id"], timeout=timeout)
            _ignore_not_found(self.remove_container, c["id"], timeout=timeout)
        _ignore_not_found(self.stop_pod_sandbox, sandbox_id, timeout=timeout)
        _ignore_not_found(self.remove_pod_sandbox, sandbox_id, timeout=timeout)


def _ignore_not_found(fn, *args, **kwargs):
    try:
        fn(*args, **kwargs)
    except CRIError as exc:
        if exc.code != "NOT_FOUND":
            raise
