"""The probe sandbox placed as the kubelet places a BestEffort Pod, and its image through the kubelet's image service
endpoint (issue 44), through a REAL containerd 1.7.24 (the engines lab's binary, started privately by
containerd_lab.py: cgroupfs, SystemdCgroup = false; the lab has no systemd).

Placement: a kubelet configuration of the test's own (cgroupDriver cgroupfs, a cgroupRoot of the test's own so that
nothing of a real kubelet's is touched) is read as the kubelet's settings (``_runtime.kubelet.pod_settings``); the
test makes the QoS cgroup ``<cgroupRoot>/kubepods/besteffort`` in every cgroup hierarchy of this machine, as the
kubelet's QoS manager does, and removes it at the end. The probe runs through the node's own code
(``_runtime.layer.record``); just before its cleanup, the test reads containerd's PodSandboxStatus (verbose: the
sandbox's config and pid) and the real cgroup filesystem: the sandbox's and the container's cgroups are children of
that QoS cgroup, the pause process is in the sandbox's. After the run, none of them is left.

Image service: the kubelet's ``imageServiceEndpoint`` is a second socket, a byte-for-byte unix-socket relay in front
of the same containerd (as a separate image service would be reached): the relay counts the connections it serves, and
the runtime client dials containerd's own socket, so every connection the relay sees is the image service's. With the
image service endpoint a second containerd that does not hold the probe image (pull never), the probe fails with that
endpoint named, although the runtime's containerd holds it: the image was asked of the image endpoint only."""
import json
import os
import shutil
import socket
import threading
import uuid

import pytest

import containerd_lab as lab
from test_handlers_containerd import _skip_unless_lab as _lab_or_skip, synthetic  # noqa: F401 pylint: disable=unused-import
from test_runtime_podman import IMAGE

from ansible_collections.gpuprobe.layers.plugins.module_utils._node import inspect as _node
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import cri as _cri_adapter
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import cri_client as _cri
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import kubelet as _kubelet
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import layer as _runtime
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import pod_cgroup
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import validate_record

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    _lab_or_skip()
    if not pod_cgroup.cgroup_mounts():
        pytest.skip("no cgroup filesystem mounted here")
    d = lab.Containerd(tmp_path_factory.mktemp("ctd-placement"), enable_cdi=True)
    d.start(images=(lab.PAUSE_TAR, lab.PROBE_TAR))
    yield d
    d.stop()


@pytest.fixture
def qos_root():
    """A cgroupRoot of the test's own with the BestEffort QoS cgroup in every hierarchy (as the kubelet makes it)."""
    root = "/gpuprobe-test-%s" % uuid.uuid4().hex[:8]
    made = []
    for m in pod_cgroup.cgroup_mounts():
        path = m.rstrip("/") + root + "/kubepods/besteffort"
        try:
            os.makedirs(path)
        except OSError:
            continue
        made.append(m.rstrip("/") + root)
    if not made:
        pytest.skip("no cgroup hierarchy here lets the test make a QoS cgroup")
    yield root
    for top in made:
        for sub, _dirs, _files in sorted(os.walk(top), key=lambda w: -w[0].count("/")):
            os.rmdir(sub)


def _kubelet_settings(tmp_path, text):
    path = str(tmp_path / "kubelet-config.yaml")
    with open(path, "w") as f:
        f.write("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n" + text)
    pod = _kubelet.pod_settings("/", ["--config=%s" % path], "the test's kubelet", "its arguments")
    assert pod["unknown"] is None, pod
    return pod


def _engine(d, pod):
    p = {"root": "/", "runtime": ["containerd"], "runtime_endpoint": d.endpoint, "cri_descriptor": lab.DESCRIPTOR,
         "runtime_timeout": 30}
    [engine] = _node.selected_engines(p)
    assert engine["usable"], engine
    # what the selection attaches where the engine serves the kubelet's endpoint (_runtime.select)
    engine["kubelet_pod"] = pod
    return engine


def _probe(one, engine):
    params = {"run_id": one.run_id, "image": IMAGE, "cdi_devices": [one.device], "expected_edits": one.full_edits(),
              "compute": False, "timeout": 60, "runtime": "containerd", "engine": engine, "pull": "never"}
    record, _out = _runtime.record(params)
    assert validate_record(record) == []
    return record


def _cgroup_dirs(parent, ident):
    return [m.rstrip("/") + parent + "/" + ident for m in pod_cgroup.cgroup_mounts()
            if os.path.isdir(m.rstrip("/") + parent + "/" + ident)]


def test_the_sandbox_lands_in_the_besteffort_qos_cgroup_and_cleanup_leaves_nothing(daemon, synthetic, qos_root, tmp_path,
                                                                                   monkeypatch):
    pod = _kubelet_settings(tmp_path, "cgroupDriver: cgroupfs\ncgroupRoot: %s\n" % qos_root)
    parent = qos_root + "/kubepods/besteffort"
    seen = {}
    real_remove = _cri_adapter.CriAdapter.remove

    def look_then_remove(self, name, timeout=30):
        # the sandbox as containerd and the kernel have it, just before the probe's own cleanup
        with _cri.CRIClient(daemon.endpoint, lab.DESCRIPTOR) as client:
            [item] = client.list_pod_sandboxes({"gpuprobe.run": synthetic.run_id})
            status = client.call("PodSandboxStatus", {"pod_sandbox_id": item["id"], "verbose": True})
            containers = client.list_containers(sandbox_id=item["id"])
            specs = [json.loads(client.call("ContainerStatus", {"container_id": c["id"], "verbose": True})["info"]["info"])
                     for c in containers]
        seen.update(sandbox=item["id"], info=json.loads(status["info"]["info"]), containers=[c["id"] for c in containers],
                    cgroups_paths=[i["runtimeSpec"]["linux"]["cgroupsPath"] for i in specs])
        seen["dirs"] = dict((i, _cgroup_dirs(parent, i)) for i in [item["id"]] + seen["containers"])
        seen["procs"] = []
        for d in seen["dirs"][item["id"]]:
            if os.path.exists(d + "/cgroup.procs"):
                with open(d + "/cgroup.procs") as f:
                    seen["procs"] += [int(p) for p in f.read().split()]
        seen["result"] = real_remove(self, name, timeout)
        return seen["result"]

    monkeypatch.setattr(_cri_adapter.CriAdapter, "remove", look_then_remove)
    record = _probe(synthetic, _engine(daemon, pod))
    assert record["status"] == "PASS", record["reason"]
    cri = record["evidence"]["container"]["cri"]
    assert (cri["cgroup_parent"]["parent"], cri["cgroup_parent"]["driver"], cri["cgroup_parent"]["qos"]) == (parent, "cgroupfs", "besteffort")
    assert "cgroupDriver in %s" % (tmp_path / "kubelet-config.yaml") in cri["cgroup_parent"]["because"]
    # containerd got the parent (its own record of the sandbox's config) and made the cgroups there
    assert seen["info"]["config"]["linux"]["cgroup_parent"] == parent
    assert seen["info"]["pid"] in seen["procs"], (seen["info"]["pid"], seen["procs"])
    assert seen["dirs"][seen["sandbox"]], seen["dirs"]
    # the probe container has exited (its task deleted, its cgroup with it): its OCI spec says where it ran
    assert seen["cgroups_paths"] == [parent + "/" + seen["containers"][0]]
    # the kubelet's orphan sweep never takes them for a Pod's
    assert not any(pod_cgroup.is_pod_name(os.path.basename(d), "cgroupfs") for dirs in seen["dirs"].values() for d in dirs)
    # cleanup: the sandbox and every cgroup of its ids are gone, the QoS cgroup (the kubelet's) stays
    assert seen["result"]["rc"] == 0 and seen["result"]["cgroups"]["parent"] == parent, seen["result"]
    assert record["evidence"]["container"]["cleanup"]["cgroups"]["kept"] == []
    assert [_cgroup_dirs(parent, i) for i in [seen["sandbox"]] + seen["containers"]] == [[]] * 2
    assert any(os.path.isdir(m.rstrip("/") + parent) for m in pod_cgroup.cgroup_mounts())
    with _cri.CRIClient(daemon.endpoint, lab.DESCRIPTOR) as client:
        assert client.list_pod_sandboxes({"gpuprobe.run": synthetic.run_id}) == []


def test_no_qos_cgroup_no_parent(daemon, synthetic, tmp_path):
    """The kubelet's settings name a QoS cgroup that is not there (no kubelet made it): no parent, the reason said, the
    probe runs where the runtime puts it."""
    pod = _kubelet_settings(tmp_path, "cgroupDriver: cgroupfs\ncgroupRoot: /gpuprobe-absent-%s\n" % uuid.uuid4().hex[:8])
    record = _probe(synthetic, _engine(daemon, pod))
    assert record["status"] == "PASS", record["reason"]
    placement = record["evidence"]["container"]["cri"]["cgroup_parent"]
    assert placement["parent"] is None and "is not in this node's cgroup filesystem" in placement["unknown"]


class Relay(object):
    """A unix socket at ``path`` relaying each connection byte for byte to ``target``; ``connections`` counts them."""

    def __init__(self, path, target):
        self.path, self.target, self.connections, self.closed = path, target, 0, False
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(path)
        self.sock.listen(16)
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while not self.closed:
            try:
                conn, _addr = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            upstream.connect(self.target)
            for a, b in ((conn, upstream), (upstream, conn)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src, dst):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self):
        self.closed = True
        self.sock.close()


def test_the_image_goes_through_the_kubelets_image_service_endpoint(daemon, synthetic, tmp_path):
    relay = Relay(str(tmp_path / "images.sock"), daemon.socket)
    try:
        pod = _kubelet_settings(tmp_path, "cgroupDriver: cgroupfs\nimageServiceEndpoint: unix://%s\n" % relay.path)
        record = _probe(synthetic, _engine(daemon, pod))
    finally:
        relay.close()
    assert record["status"] == "PASS", record["reason"]
    cri = record["evidence"]["container"]["cri"]
    assert cri["image_service"]["endpoint"] == "unix://" + relay.path
    assert cri["image_service"]["source"].startswith("the kubelet's image service endpoint unix://%s (imageServiceEndpoint in " % relay.path)
    image_calls = [c for c in cri["calls"] if c["call"] in ("image_present", "pull_image")]
    assert image_calls and all(c.get("endpoint") == "unix://" + relay.path for c in image_calls), cri["calls"]
    assert all("endpoint" not in c for c in cri["calls"] if c not in image_calls)
    # the runtime client dials containerd's own socket: the relay's connections are the image service's
    assert relay.connections >= 1


def test_an_image_endpoint_without_the_image_is_the_one_asked(daemon, synthetic, tmp_path):
    other = lab.Containerd(tmp_path / "ctd-images", enable_cdi=True)
    os.makedirs(other.base)
    other.start(images=())
    try:
        pod = _kubelet_settings(tmp_path, "cgroupDriver: cgroupfs\nimageServiceEndpoint: %s\n" % other.endpoint)
        record = _probe(synthetic, _engine(daemon, pod))
    finally:
        other.stop()
        shutil.rmtree(other.base, ignore_errors=True)
    # the runtime's containerd holds the image (the tests above ran it); the image endpoint does not, pull is never
    assert record["status"] == "FAIL", record
    assert "is not present in %s and pull is never" % other.endpoint in record["evidence"]["container"]["stderr"]
