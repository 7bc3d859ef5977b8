"""k8s layer, Dynamic Resource Allocation: the GPU path of each node, the DRA evidence, why a DRA Pod is Pending,
the node's DRA devices against its host record, and the verdict cross-check. Fixtures: tests/unit/fixtures/k8s/dra
(README.md there cites the source of every shape and message); the same cluster in resource.k8s.io v1, v1beta2
and v1beta1 must give the same record. record() runs through a stand-in kubectl executable (no kube-apiserver
can exist here)."""
import json
import os
import sys

import pytest
from kubectlfixture import argv_log as kubectl_calls
from kubectlfixture import checks, one, stand_in

from ansible_collections.gpuprobe.layers.plugins.module_utils._k8s import layer as _k8s
from ansible_collections.gpuprobe.layers.plugins.module_utils._k8s import nodes as _k8s_nodes
from ansible_collections.gpuprobe.layers.plugins.module_utils._k8s import pods as _k8s_pods
from ansible_collections.gpuprobe.layers.plugins.module_utils._k8s import dra as _k8s_dra
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import FAIL, NOT_RUN, PASS, WARN, validate_record
from ansible_collections.gpuprobe.layers.plugins.module_utils._common import args as _args

FIXTURES = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "k8s", "dra"))
VERSIONS = ("v1", "v1beta2", "v1beta1")
KINDS = ("resourceslices", "deviceclasses", "resourceclaims", "resourceclaimtemplates")
GPU0 = "GPU-4d5a1f0e-0c6b-7a2e-9f1d-3b8c2a7e5d10"
GPU1 = "GPU-9e2b7c44-51d3-4f0a-8c6e-2a1d7b9f3e21"


def load(rel):
    with open(os.path.join(FIXTURES, rel)) as f:
        return json.load(f)


def dra_docs(version="v1"):
    docs = dict((kind, load("%s/%s.json" % (version, kind))) for kind in KINDS)
    docs["errors"] = {}
    return docs


def host_record(gpus=None, driver="580.159.04", status=PASS):
    """A host layer record's fields the k8s layer reads (evidence.gpus rows as _host builds them, versions.driver)."""
    if gpus is None:
        gpus = [{"index": 0, "uuid": GPU0, "minor": 0, "pci_bus_id": "0000:1b:00.0"},
                {"index": 1, "uuid": GPU1, "minor": 1, "pci_bus_id": "0000:43:00.0"}]
    return {"layer": "host", "status": status, "reason": None if status == PASS else "x", "versions": {"driver": driver},
            "evidence": {"gpus": gpus}}


def analyse(version="v1", **kw):
    record = _k8s.analyse(load("nodes.json"), load("pods.json"), load("events.json"), dra_docs=dra_docs(version), **kw)
    assert validate_record(record) == []
    return record


def nodes(record):
    return dict((n["name"], n) for n in record["evidence"]["nodes"])


def test_fixtures_are_what_the_generator_writes():
    sys.path.insert(0, FIXTURES)
    try:
        import generate  # pylint: disable=import-outside-toplevel,import-error
    finally:
        sys.path.remove(FIXTURES)
    for rel, doc in generate.documents().items():
        with open(os.path.join(FIXTURES, rel)) as f:
            assert f.read() == generate.render(doc), rel


@pytest.mark.parametrize("version", VERSIONS)
def test_every_served_shape_gives_the_same_record(version):
    """v1beta1 wraps device fields in "basic" and puts deviceClassName on the request; v1/v1beta2 do not: the
    record must not depend on which one the cluster served."""
    def comparable(record):
        return [(c["id"], c["status"], c["subject"], c["observed"].replace(version, "V")) for c in record["checks"]]
    assert comparable(analyse(version)) == [
        (i, s, subj, obs.replace("v1", "V", 1) if i == "k8s.dra.api" else obs) for i, s, subj, obs in comparable(analyse("v1"))]
    assert nodes(analyse(version))["dra-0"]["dra"]["devices"] == nodes(analyse("v1"))["dra-0"]["dra"]["devices"]
    assert one(analyse(version), "k8s.dra.api")["observed"] == "5 ResourceSlice(s) (resource.k8s.io/%s)" % version


@pytest.mark.parametrize("name,path", [("dra-0", "dra"), ("dra-1", "dra"), ("both-0", "both"), ("plain-0", "device_plugin"),
                                       ("bare-0", "neither"), ("cpu-0", None)])
def test_gpu_path_of_each_node(name, path):
    record = analyse()
    assert nodes(record)[name]["path"] == path
    found = checks(record, "k8s.node.gpu_path", name)
    if path is None:
        assert found == []  # not a GPU node
    else:
        assert found[0]["status"] == {"dra": PASS, "device_plugin": PASS, "both": FAIL, "neither": FAIL}[path]


def test_both_paths_is_a_fail_naming_both():
    c = one(analyse(), "k8s.node.gpu_path", "both-0")
    assert c["observed"] == "both: device plugin allocatable nvidia.com/gpu=4 and 1 DRA device(s) of gpu.nvidia.com"


def test_dra_node_is_not_judged_by_allocatable():
    record = analyse()
    assert checks(record, "k8s.node.allocatable", "dra-0") == []
    assert one(record, "k8s.node.gpu_path", "dra-0")["observed"] == \
        "DRA: 2 device(s) of gpu.nvidia.com in 1 slice(s); no device plugin resource"
    # labelled, nothing on either path: the device plugin FAIL as before, and the path FAIL
    assert one(record, "k8s.node.allocatable", "bare-0")["status"] == FAIL
    assert one(record, "k8s.node.gpu_path", "bare-0")["observed"] == \
        "neither: no device plugin resource and no ResourceSlice of gpu.nvidia.com"


def test_dra_evidence_of_a_node():
    node = nodes(analyse("v1beta1"))["dra-0"]
    assert [(d["name"], d["uuid"], d["pci_bus_id"], d["driver_version"], d["cuda_driver_version"], d["product_name"], d["type"])
            for d in node["dra"]["devices"]] == [
        ("gpu-0", GPU0, "0000:1b:00.0", "580.159.4", "13.0.0", "NVIDIA H200", "gpu"),
        ("gpu-1", GPU1, "0000:43:00.0", "580.159.4", "13.0.0", "NVIDIA H200", "gpu")]
    assert node["dra"]["devices"][1]["taints"] == [
        {"key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoSchedule", "time_added": "2026-12-02T17:40:00Z"}]
    assert node["dra"]["pools"] == [{"pool": "dra-0", "generation": 3, "slices": 1, "resource_slice_count": 1,
                                     "older_slices": 0, "complete": True, "devices": 2}]
    assert [(c["name"], c["devices"], c["reserved_for"]) for c in node["dra"]["claims"]] == [
        ("dra-prep-0-gpu-7x2kq", ["dra-0/gpu-0"], ["pods/dra-prep-0"]), ("shared-gpu", ["dra-0/gpu-1"], ["pods/dra-run-0"])]
    # the NIC driver's slice on the same node is not a GPU slice
    assert [s["name"] for s in node["dra"]["slices"]] == ["dra-0-gpu.nvidia.com-7kq2x"]


def test_device_checks():
    record = analyse()
    assert one(record, "k8s.dra.devices", "dra-1")["status"] == FAIL
    assert one(record, "k8s.dra.devices", "dra-1")["observed"] == "DRA driver publishes no device: 2 slice(s) of gpu.nvidia.com, 0 devices"
    pool = one(record, "k8s.dra.pool", "dra-1 pool dra-1")
    assert (pool["status"], pool["observed"]) == (WARN, "generation 2: 1 of 2 slice(s), 1 slice(s) of older generations")
    taint = one(record, "k8s.dra.device_taints", "dra-0")
    assert (taint["status"], taint["observed"]) == (WARN, "gpu-1: gpu.nvidia.com/xid=79:NoSchedule")
    stale = one(record, "k8s.dra.claims", "ml/stale-claim")
    assert (stale["status"], stale["observed"]) == (WARN, "holds dra-1/gpu-3 on dra-1, no longer published; reserved for pods/dra-prep-1")
    assert one(record, "k8s.dra.device_classes")["observed"] == "gpu.nvidia.com, mig.nvidia.com, vfio.gpu.nvidia.com"


PENDING = [
    ("dra-train-0", "cannot_allocate", "FailedScheduling: 0/6 nodes are available: 6 cannot allocate all claims."),
    ("dra-firstavail-0", "cannot_allocate", "PodScheduled False: 0/6 nodes are available: 6 cannot allocate all claims."),
    ("dra-notyet-0", "claim_not_created", 'FailedResourceClaimCreation: PodResourceClaim gpu: resource claim template "missing-template"'),
    ("dra-notyet-1", "claim_not_created", "claim gpu: ResourceClaim not created yet (from template single-gpu)"),
    ("dra-noclass-0", "device_class_missing", "FailedScheduling: 0/6 nodes are available: request gpu: device class gpu.nvidia.con does not exist."),
    ("dra-elsewhere-0", "claim_elsewhere", "FailedScheduling: 0/6 nodes are available: 6 resourceclaim not available on the node."),
    ("dp-0", "insufficient_resource", "FailedScheduling: 0/6 nodes are available: 2 Insufficient nvidia.com/gpu"),
]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("pod,cause,message", PENDING, ids=[p[0] for p in PENDING])
def test_pending_pods_are_mapped_to_a_cause(version, pod, cause, message):
    c = one(analyse(version), "k8s.pod.pending", "ml/%s" % pod)
    assert c["status"] == FAIL
    assert c["observed"].startswith("Pending: " + message), c["observed"]
    assert "-> cause (%s): " % cause in c["observed"]
    entry = next(e for e in _k8s_pods.PENDING_CAUSES if e["id"] == cause)
    assert c["hint"] == entry["next"]


def test_pending_pod_names_its_claims():
    c = one(analyse("v1beta1"), "k8s.pod.pending", "ml/dra-train-0")
    assert c["expected"] == "scheduled (claim gpu (dra-train-0-gpu-p4m8z): pending gpu.nvidia.com)"
    first = one(analyse(), "k8s.pod.pending", "ml/dra-firstavail-0")
    assert first["expected"] == "scheduled (claim gpu (mig-or-gpu): pending gpu.nvidia.com, mig.nvidia.com)"


def test_which_pods_are_gpu_pods():
    names = [p["name"] for p in analyse()["evidence"]["gpu_pods"]]
    # nic-0 holds a claim of the dranet class only: not a GPU Pod; a claim naming a class that does not exist, or not
    # created yet, cannot be told apart and is kept
    assert "nic-0" not in names
    assert {"dra-noclass-0", "dra-notyet-0", "dra-notyet-1", "dra-run-0", "dp-0"} <= set(names)


@pytest.mark.parametrize("pod,cause", [("dra-prep-0", "prepare_timeout"), ("dra-prep-1", "plugin_not_registered")])
def test_failed_prepare_is_mapped_to_a_cause(pod, cause):
    record = analyse()
    c = one(record, "k8s.pod.prepare", "ml/%s" % pod)
    assert c["status"] == FAIL and c["observed"].startswith("FailedPrepareDynamicResources on dra-")
    assert "-> cause (%s): " % cause in c["observed"]
    # the scheduled Pod itself stays a WARN of k8s.pod.pending (containers not started), as on the device plugin path
    assert one(record, "k8s.pod.pending", "ml/%s" % pod)["status"] == WARN


@pytest.mark.parametrize("message,cause", [
    ("Failed to prepare dynamic resources: prepare dynamic resources: NodePrepareResources failed for claim ml/c: "
     "error preparing devices for claim 1234: bad config", "prepare_failed"),
    ("Failed to prepare dynamic resources: plugin gpu.nvidia.com not found in the list of registered DRA plugins or not connected",
     "plugin_not_registered"),
    ("Failed to prepare dynamic resources: something new", None),
])
def test_prepare_causes(message, cause):
    assert _k8s_pods.explain(message, _k8s_pods.PREPARE_CAUSES)[0] == cause


# ---- the node's DRA devices against its host record ----

def test_host_match_passes_when_slice_and_host_agree():
    record = analyse(host_record=host_record(), hostname="dra-0")
    rows = checks(record, "k8s.dra.host_match")
    assert [(c["status"], c["subject"]) for c in rows] == [(PASS, "dra-0 gpu-0"), (PASS, "dra-0 gpu-1")]
    # the slice says 580.159.4 (semver), NVML 580.159.04: the same driver
    assert rows[0]["observed"] == "%s: minor 0, bus 0000:1b:00.0, driver 580.159.04" % GPU0
    assert record["evidence"]["self_node"] == {"name": "dra-0", "matched_by": "node name", "hostname": "dra-0"}


@pytest.mark.parametrize("gpus,driver,subject,observed", [
    ([{"uuid": GPU0, "minor": 0, "pci_bus_id": "0000:1b:00.0"}], "580.159.04", "dra-0 gpu-1",
     "advertises GPU %s, which this node does not have (host GPUs: %s)" % (GPU1, GPU0)),
    ([{"uuid": GPU0, "minor": 0, "pci_bus_id": "0000:1c:00.0"}, {"uuid": GPU1, "minor": 1, "pci_bus_id": "0000:43:00.0"}],
     "580.159.04", "dra-0 gpu-0", "pciBusID 0000:1b:00.0, host 0000:1c:00.0"),
    (None, "580.95.05", "dra-0 gpu-0", "driverVersion 580.159.4, loaded driver 580.95.05"),
])
def test_host_match_fails_on_a_gpu_or_driver_the_node_does_not_have(gpus, driver, subject, observed):
    record = analyse(host_record=host_record(gpus, driver), hostname="dra-0")
    c = one(record, "k8s.dra.host_match", subject)
    assert (c["status"], c["observed"]) == (FAIL, observed)
    assert record["evidence"]["self_node"]["matched_by"] == "node name"


@pytest.mark.parametrize("names,labels,hostname,name,how", [
    (["gpu-a", "gpu-b"], {}, "GPU-A", "gpu-a", "node name"),
    (["ip-10-0-0-1"], {"ip-10-0-0-1": "gpu-a.lab"}, "gpu-a.lab", "ip-10-0-0-1", "kubernetes.io/hostname label"),
    # never a short name (issue 43): neither the Node's nor its label's
    (["gpu-a.lab", "gpu-b.lab"], {}, "gpu-a", None, None),
    (["ip-10-0-0-1"], {"ip-10-0-0-1": "gpu-a"}, "gpu-a.lab", None, None),
    (["gpu-a.dc1"], {"gpu-a.dc1": "gpu-a.dc1"}, "gpu-a.dc2", None, None),
    # ambiguous: a label beside a Node with the host's short name, a label that is another Node's name, two labels
    (["gpu-a.dc1", "rogue"], {"rogue": "gpu-a"}, "gpu-a", None, None),
    (["gpu-a", "rogue"], {"gpu-a": "gpu-a", "rogue": "gpu-a"}, "gpu-a", None, None),
    (["n1", "n2"], {"n1": "gpu-a", "n2": "gpu-a"}, "gpu-a", None, None),
    # a name match stands beside Nodes that only share its short name
    (["gpu-a", "gpu-a.dc1"], {"gpu-a": "gpu-a"}, "gpu-a", "gpu-a", "node name"),
    (["gpu-a.lab", "gpu-a.other"], {}, "gpu-a", None, None),
    (["gpu-a"], {}, "", None, None),
])
def test_match_node(names, labels, hostname, name, how):
    found = _k8s_nodes.match_node(names, hostname, labels)
    assert found.get("name") == name and found.get("matched_by") == how
    if name is None:
        assert found["reason"]


def _gpu_device(name, attributes, api="resource.k8s.io/v1beta1"):
    """One full GPU of a ResourceSlice as each driver publishes it; returns the device_summary host_match reads."""
    attrs = dict({"type": {"string": "gpu"}, "uuid": {"string": GPU0}, "driverVersion": {"version": "580.159.4"}}, **attributes)
    dev = {"name": name, "basic": {"attributes": attrs}} if api.endswith("v1beta1") else {"name": name, "attributes": attrs}
    sl = {"apiVersion": api, "metadata": {"name": "s"}, "spec": {
        "driver": "gpu.nvidia.com", "nodeName": "n1", "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
        "devices": [dev]}}
    return [_k8s_nodes.device_summary(d) for d in _k8s_dra.current_devices([_k8s_dra.slice_summary(sl)])]


# NVIDIA/k8s-dra-driver (cmd/nvidia-dra-plugin/deviceinfo.go): gpu-<index>, int attributes minor and index;
# kubernetes-sigs/dra-driver-nvidia-gpu (cmd/gpu-kubelet-plugin/deviceinfo.go): gpu-<minor>, neither attribute.
@pytest.mark.parametrize("name,attributes,host,status,observed", [
    # index-named driver on a healthy node whose index is not its minor
    ("gpu-0", {"minor": {"int": 3}, "index": {"int": 0}}, {"index": 0, "minor": 3}, PASS,
     "%s: minor 3, index 0, name gpu-0 = its index attribute, driver 580.159.04" % GPU0),
    # minor-named driver (no attributes), name = minor
    ("gpu-3", {}, {"index": 0, "minor": 3}, PASS, "%s: minor 3, driver 580.159.04" % GPU0),
    # the published minor attribute is wrong: a wrong device node would be handed out
    ("gpu-0", {"minor": {"int": 5}, "index": {"int": 0}}, {"index": 0, "minor": 3}, FAIL,
     "minor attribute 5, but the GPU's minor is 3"),
    # a name that is neither the minor nor a published index, nothing published to decide: WARN, not FAIL
    ("gpu-1", {}, {"index": 1, "minor": 3}, WARN,
     "%s: name gpu-1 is neither the GPU's minor (3) nor an index the driver publishes; matched driver 580.159.04" % GPU0),
    # an index attribute other than NVML's index: index order is not identity (the uuid matched): WARN
    ("gpu-2", {"minor": {"int": 3}, "index": {"int": 2}}, {"index": 0, "minor": 3}, WARN,
     "%s: index attribute 2, but NVML's index of the GPU is 0; agrees: minor 3, name gpu-2 = its index attribute; "
     "matched driver 580.159.04" % GPU0),
])
def test_host_match_names_gpus_by_minor_or_index(name, attributes, host, status, observed):
    for api in ("resource.k8s.io/v1beta1", "resource.k8s.io/v1"):
        devices = _gpu_device(name, attributes, api)
        gpu = dict(host, uuid=GPU0, pci_bus_id="0000:1b:00.0")
        rows = _k8s_nodes.host_match({"name": "n1", "dra": {"devices": devices}}, host_record([gpu]))
        assert [(r[0], r[3]) for r in rows] == [(status, observed)]


def _dev(name, kind, uuid=None, parent=None, driver="580.159.4", bus=None):
    return {"name": name, "pool": "n1", "type": kind, "uuid": uuid, "parent_uuid": parent, "driver_version": driver,
            "pci_bus_id": bus, "minor": None, "index": None, "taints": []}


MIG_HOST = [{"index": 0, "uuid": GPU0, "minor": 0, "pci_bus_id": "0000:1b:00.0",
             "mig": {"instances": [{"uuid": "MIG-1", "gi": 1, "ci": 0}]}}]
BARE_MIG_HOST = [{"index": 0, "uuid": GPU0, "minor": 0, "pci_bus_id": "0000:1b:00.0", "mig": {"instances": [{"uuid": None}]}}]


@pytest.mark.parametrize("dev,gpus,status,observed", [
    # nothing compared: NOT_RUN with why, never PASS
    (_dev("gpu-vfio-0", "vfio", bus="0000:99:00.0"), MIG_HOST, NOT_RUN,
     "vfio device (bound to vfio-pci, not visible to NVML): not compared with the host record"),
    (_dev("gpu-0-mig-9-4-4", "mig", uuid="MIG-deadbeef"), BARE_MIG_HOST, NOT_RUN,
     "not compared: the device publishes no parentUUID; the host record lists no MIG instance UUID"),
    (_dev("gpu-0", "gpu"), MIG_HOST, NOT_RUN, "not compared: the device publishes no uuid"),
    # what was compared, and only that
    (_dev("gpu-0-mig-1", "mig", uuid="MIG-1", parent=GPU0), MIG_HOST, PASS,
     "MIG-1: parent %s, MIG instance MIG-1, driver 580.159.04" % GPU0),
    (_dev("gpu-0-mig-1", "mig", uuid="MIG-x", parent=GPU0), BARE_MIG_HOST, PASS, "MIG-x: parent %s, driver 580.159.04" % GPU0),
    # a MIG device's driverVersion is its parent's driver (both NVIDIA DRA drivers publish it): compared too
    (_dev("gpu-0-mig-1", "mig", uuid="MIG-1", parent=GPU0, driver="570.1.0"), MIG_HOST, FAIL,
     "driverVersion 570.1.0, loaded driver 580.159.04"),
    (_dev("gpu-0-mig-1", "mig", uuid="MIG-2", parent=GPU0), MIG_HOST, FAIL, "MIG device MIG-2 is not a MIG instance of this host"),
    # a version that is not numbers is not compared (never "equal" to another such version)
    (_dev("gpu-0", "gpu", uuid=GPU0, driver="580.159.4-rc.1"), MIG_HOST, PASS,
     "%s: minor 0; driverVersion 580.159.4-rc.1 against loaded driver 580.159.04 not compared (not numeric)" % GPU0),
    (_dev("gpu-0-mig-1", "mig", uuid="MIG-x", driver="garbage"), BARE_MIG_HOST, NOT_RUN,
     "not compared: the device publishes no parentUUID; the host record lists no MIG instance UUID"),
])
def test_host_match_says_what_was_compared(dev, gpus, status, observed):
    rows = _k8s_nodes.host_match({"name": "n1", "dra": {"devices": [dev]}}, host_record(gpus))
    assert (rows[0][0], rows[0][3]) == (status, observed)


def test_version_keys_that_are_not_numbers_are_never_equal():
    assert _k8s_dra.version_key("580.159.4-rc.1") is None and _k8s_dra.version_key("garbage") is None
    rows = _k8s_nodes.host_match({"name": "n1", "dra": {"devices": [_dev("gpu-0", "gpu", uuid=GPU0, driver="garbage")]}},
                                 host_record(MIG_HOST, driver="also garbage"))
    assert rows[0][0] == PASS and "driverVersion garbage against loaded driver also garbage not compared" in rows[0][3]
    assert "driver also garbage," not in rows[0][3]


def test_host_gpu_not_published_warns():
    gpus = host_record()["evidence"]["gpus"] + [{"uuid": "GPU-ffff", "minor": 2, "pci_bus_id": "0000:50:00.0"}]
    c = one(analyse(host_record=host_record(gpus), hostname="dra-0"), "k8s.dra.host_match", "dra-0 GPU-ffff")
    assert (c["status"], c["observed"]) == (WARN, "host GPU GPU-ffff (minor 2, bus 0000:50:00.0) is not published")


@pytest.mark.parametrize("hostname,host,observed", [
    ("gpu-9", host_record(), "no Node is named gpu-9 or labelled kubernetes.io/hostname=gpu-9"),
    ("dra-0", host_record(gpus=[], status=NOT_RUN), "the host record lists no GPU (x)"),
])
def test_host_match_not_run(hostname, host, observed):
    c = one(analyse(host_record=host, hostname=hostname), "k8s.dra.host_match")
    assert (c["status"], c["observed"]) == (NOT_RUN, observed)


def test_no_host_record_no_host_match():
    assert checks(analyse(), "k8s.dra.host_match") == []
    # a device plugin node is not compared (nothing published through DRA)
    assert checks(analyse(host_record=host_record(), hostname="plain-0"), "k8s.dra.host_match") == []


# ---- a cluster without DRA, or that refuses it ----

NOT_SERVED = 'kubectl get resourceslices: error: the server doesn\'t have a resource type "resourceslices"'
FORBIDDEN = ('kubectl get resourceslices: Error from server (Forbidden): resourceslices.resource.k8s.io is forbidden: '
             'User "probe" cannot list resource "resourceslices" in API group "resource.k8s.io" at the cluster scope')


def test_cluster_without_dra():
    record = _k8s.analyse(load("nodes.json"), load("pods.json"), load("events.json"),
                          dra_docs={"errors": {"resourceslices": NOT_SERVED}})
    assert validate_record(record) == []
    api = one(record, "k8s.dra.api")
    assert (api["status"], api["observed"]) == (NOT_RUN, NOT_SERVED)
    assert one(record, "k8s.node.gpu_path", "plain-0")["observed"] == \
        "device plugin: allocatable nvidia.com/gpu=8; the cluster serves no resource.k8s.io (no DRA)"
    assert one(record, "k8s.node.gpu_path", "bare-0")["observed"] == \
        "neither: no device plugin resource and the cluster serves no resource.k8s.io"
    # DRA Pods cannot be told apart without the API: only device plugin requests count
    assert [p["name"] for p in record["evidence"]["gpu_pods"]] == ["dp-0"]
    assert record["evidence"]["dra"]["state"] == "not_served"


def test_slices_refused_never_infers_a_path():
    record = _k8s.analyse(load("nodes.json"), load("pods.json"), load("events.json"),
                          dra_docs={"errors": {"resourceslices": FORBIDDEN}})
    assert one(record, "k8s.dra.api")["status"] == NOT_RUN
    # dra-0 has GPU labels but no device plugin resource: its path is unknown, never "neither"
    c = one(record, "k8s.node.gpu_path", "dra-0")
    assert (c["status"], c["observed"]) == (NOT_RUN, "no device plugin resource; DRA unknown: ResourceSlices not read: %s" % FORBIDDEN)
    assert nodes(record)["dra-0"]["path"] == "unknown"
    # a device plugin node: its path is known, but whether DRA serves it too is not
    plain = one(record, "k8s.node.gpu_path", "plain-0")
    assert (plain["status"], nodes(record)["plain-0"]["path"]) == (NOT_RUN, "device_plugin")
    assert plain["observed"] == "device plugin: allocatable nvidia.com/gpu=8; DRA unknown: ResourceSlices not read: %s" % FORBIDDEN


# ---- the verdict cross-check (for the fleet report) ----

@pytest.mark.parametrize("node,verdict,found", [
    ("dra-0", "FAILED_AT_CDI", [("dra_devices_on_unverified_node", FAIL)]),
    ("dra-0", "INCONCLUSIVE", [("dra_devices_on_unverified_node", WARN)]),
    ("dra-0", "COMPUTE_VERIFIED", []),
    ("dra-0", {"verdict": "FAILED_AT_COMPUTE", "gpus": [{"uuid": GPU1, "status": FAIL, "signature": "compute.cuda.CUDA_ERROR_UNKNOWN"},
                                                        {"uuid": GPU0, "status": PASS}]},
     [("dra_device_compute_failed", FAIL)]),
    ("dra-1", "COMPUTE_VERIFIED", [("nothing_advertised", WARN)]),
    ("plain-0", "FAILED_AT_HOST", [("allocatable_on_unverified_node", FAIL)]),
    ("plain-0", "COMPUTE_VERIFIED", []),
    ("bare-0", "COMPUTE_VERIFIED", [("nothing_advertised", WARN)]),
    ("both-0", "FAILED_AT_RUNTIME", [("allocatable_on_unverified_node", FAIL), ("dra_devices_on_unverified_node", FAIL)]),
])
def test_advertising_findings(node, verdict, found):
    findings = _k8s_nodes.advertising_findings("h1", verdict, nodes(analyse())[node])
    assert [(f["finding"], f["severity"]) for f in findings] == found
    for f in findings:
        assert f["host"] == "h1" and f["k8s_node"] == node and f["observed"] and f["message"]
    if found and found[0][0] == "dra_device_compute_failed":
        assert findings[0]["observed"] == "dra-0 gpu-1 (%s): compute FAIL, compute.cuda.CUDA_ERROR_UNKNOWN" % GPU1


# ---- pure helpers ----

@pytest.mark.parametrize("a,b,same", [("580.159.04", "580.159.4", True), ("580.159.04", "580.159.4.0", True),
                                      ("580.95.05", "580.159.4", False), ("580", "580.0.0", True), ("", "1", False)])
def test_version_key(a, b, same):
    assert (_k8s_dra.version_key(a) == _k8s_dra.version_key(b) and _k8s_dra.version_key(a) is not None) == same


@pytest.mark.parametrize("a,b,same", [("0000:1b:00.0", "00000000:1B:00.0", True), ("0000:1b:00.0", "1b:00.0", True),
                                      ("0000:1b:00.0", "0000:1b:00.1", False), ("junk", "junk", False)])
def test_bus_id_key(a, b, same):
    assert (_k8s_dra.bus_id_key(a) == _k8s_dra.bus_id_key(b) and _k8s_dra.bus_id_key(a) is not None) == same


@pytest.mark.parametrize("value,plain", [({"string": "x"}, "x"), ({"version": "1.2.3"}, "1.2.3"), ({"int": 0}, 0),
                                         ({"bool": False}, False), ({"ints": [1, 2]}, [1, 2]), ({}, None), ("x", None)])
def test_attribute_value(value, plain):
    assert _k8s_dra.attribute_value(value) == plain


def test_fully_qualified_attribute_names_are_the_drivers_own():
    s = _k8s_dra.slice_summary({"apiVersion": "resource.k8s.io/v1", "spec": {
        "driver": "gpu.nvidia.com", "nodeName": "n", "pool": {"name": "n", "generation": 1, "resourceSliceCount": 1},
        "devices": [{"name": "gpu-0", "attributes": {"gpu.nvidia.com/uuid": {"string": "GPU-1"}}}]}})
    assert s["devices"][0]["attributes"] == {"uuid": "GPU-1"}


# ---- record() through a stand-in kubectl ----

FAKE_KUBECTL = r'''if args[:2] == ["version", "--client"]:
    print(json.dumps({"clientVersion": {"gitVersion": "v1.34.1"}})); sys.exit(0)
what = args[args.index("get") + 1]
served = os.environ.get("FAKE_DRA_VERSION", "v1")
if what in ("resourceslices", "deviceclasses", "resourceclaims", "resourceclaimtemplates"):
    if served == "none":
        sys.stderr.write('error: the server doesn\'t have a resource type "%%s"\n' %% what); sys.exit(1)
    path = os.path.join(%(fixtures)r, served, what + ".json")
else:
    path = os.path.join(%(fixtures)r, what + ".json")
doc = json.load(open(path))
if "--field-selector" in args:
    reason = args[args.index("--field-selector") + 1].split("=", 1)[1]
    doc["items"] = [e for e in doc["items"] if e["reason"] == reason]
print(json.dumps(doc))
'''


@pytest.fixture
def fake_kubectl(tmp_path):
    return stand_in(tmp_path, FAKE_KUBECTL, fixtures=FIXTURES) + (tmp_path,)


def argv_log(tmp_path):
    return [argv[4:] for argv in kubectl_calls(tmp_path) if argv[:1] != ["version"]]


@pytest.mark.parametrize("version", VERSIONS)
def test_collect_reads_the_dra_objects(fake_kubectl, monkeypatch, version):
    path, kubeconfig, tmp = fake_kubectl
    monkeypatch.setenv("FAKE_DRA_VERSION", version)
    record = _k8s.record(kubectl=path, kubeconfig=kubeconfig, host_record=host_record(), hostname="dra-0")
    assert validate_record(record) == []
    assert argv_log(tmp) == [
        ["get", "nodes", "-o", "json"],
        ["get", "pods", "--all-namespaces", "-o", "json"],
        ["get", "events", "--field-selector", "reason=FailedScheduling", "--all-namespaces", "-o", "json"],
        ["get", "resourceslices", "-o", "json"],
        ["get", "deviceclasses", "-o", "json"],
        ["get", "resourceclaims", "--all-namespaces", "-o", "json"],
        ["get", "resourceclaimtemplates", "--all-namespaces", "-o", "json"],
        ["get", "events", "--field-selector", "reason=FailedPrepareDynamicResources", "--all-namespaces", "-o", "json"],
        ["get", "events", "--field-selector", "reason=FailedResourceClaimCreation", "--all-namespaces", "-o", "json"],
        ["get", "runtimeclasses", "-o", "json"],   # the GPU Pods' runtime handlers (_k8s/handlers.py), after the DRA reads
    ]
    # one code path: what record() gives is what analyse gives on the same documents
    direct = analyse(version, host_record=host_record(), hostname="dra-0")
    assert [(c["id"], c["status"], c["subject"], c["observed"]) for c in record["checks"]] == \
        [(c["id"], c["status"], c["subject"], c["observed"]) for c in direct["checks"]]
    assert one(record, "k8s.pod.prepare", "ml/dra-prep-1")["status"] == FAIL


def test_collect_on_a_cluster_without_dra_stops_after_the_first_read(fake_kubectl, monkeypatch):
    path, kubeconfig, tmp = fake_kubectl
    monkeypatch.setenv("FAKE_DRA_VERSION", "none")
    record = _k8s.record(kubectl=path, kubeconfig=kubeconfig)
    assert [a[:2] for a in argv_log(tmp) if a[1] != "runtimeclasses"][-1] == ["get", "resourceslices"]
    assert one(record, "k8s.dra.api")["observed"] == NOT_SERVED
    assert one(record, "k8s.dra.api")["status"] == NOT_RUN


def test_k8s_facts_module_compares_with_a_host_record(fake_kubectl, capsys):
    from ansible.module_utils.testing import patch_module_args  # pylint: disable=import-outside-toplevel
    from ansible_collections.gpuprobe.layers.plugins.modules import k8s_facts  # pylint: disable=import-outside-toplevel
    path, kubeconfig, _tmp = fake_kubectl
    bad = host_record(driver="575.57.08")
    with patch_module_args({"kubectl": path, "kubeconfig": kubeconfig, "host_record": bad, "node": "dra-0"}):
        with pytest.raises(SystemExit):
            k8s_facts.main()
    record = json.loads(capsys.readouterr().out)["ansible_facts"]["gpuprobe_k8s"]
    c = one(record, "k8s.dra.host_match", "dra-0 gpu-0")
    assert (c["status"], c["observed"]) == (FAIL, "driverVersion 580.159.4, loaded driver 575.57.08")


# ---- a node's inspect stage: its real host record (synthetic node tree) reaches the k8s layer ----

NODE_KUBECTL = r'''#!%(python)s
import json, sys
args = sys.argv[1:]
if args[:2] == ["version", "--client"]:
    print(json.dumps({"clientVersion": {"gitVersion": "v1.34.1"}})); sys.exit(0)
what = args[args.index("get") + 1]
docs = json.load(open(%(docs)r))
print(json.dumps(docs.get(what, {"apiVersion": "v1", "kind": "List", "items": []})))
'''


def test_inspect_gives_the_k8s_layer_this_nodes_host_record(tmp_path, monkeypatch):
    import socket  # pylint: disable=import-outside-toplevel
    from hostfixture import build_node  # pylint: disable=import-outside-toplevel,import-error
    from ansible_collections.gpuprobe.layers.plugins.module_utils._node import inspect as _inspect  # pylint: disable=import-outside-toplevel

    build_node(str(tmp_path / "node"), gpus=2, procfs=True)  # GPUs ...-000000000000 (minor 0, 0000:06:00.0) and ...-01
    me = socket.gethostname()
    slices = load("v1/resourceslices.json")
    published = slices["items"][0]
    published["spec"]["nodeName"] = published["spec"]["pool"]["name"] = me
    devices = published["spec"]["devices"]
    devices[0]["attributes"]["uuid"]["string"] = "GPU-6b1d2c3e-0000-4000-8000-000000000000"
    devices[0]["attributes"]["resource.kubernetes.io/pciBusID"]["string"] = "0000:06:00.0"
    slices["items"] = [published]  # gpu-1 keeps a UUID this node does not have
    node = load("nodes.json")["items"][0]
    node["metadata"]["name"] = node["metadata"]["labels"]["kubernetes.io/hostname"] = me
    docs = {"nodes": {"items": [node]}, "resourceslices": slices, "deviceclasses": load("v1/deviceclasses.json")}
    (tmp_path / "docs.json").write_text(json.dumps(docs))
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "kubectl").write_text(NODE_KUBECTL % {"python": sys.executable, "docs": str(tmp_path / "docs.json")})
    (bindir / "kubectl").chmod(0o755)
    (tmp_path / "kubeconfig").write_text("apiVersion: v1\nkind: Config\n")
    monkeypatch.setenv("PATH", "%s%s%s" % (bindir, os.pathsep, os.environ["PATH"]))
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "kubeconfig"))
    p = dict((name, spec.get("default")) for name, spec in _args.NODE_LAYERS_ARGSPEC.items())
    p.update(nvml=False, root=str(tmp_path / "node"), layers=["host", "k8s"])
    record = _inspect.inspect(p)["records"]["k8s"]
    assert validate_record(record) == []
    rows = [(c["status"], c["subject"], c["observed"]) for c in checks(record, "k8s.dra.host_match")]
    assert rows == [
        (PASS, "%s gpu-0" % me, "GPU-6b1d2c3e-0000-4000-8000-000000000000: minor 0, bus 0000:06:00.0, driver 580.159.04"),
        (FAIL, "%s gpu-1" % me, "advertises GPU %s, which this node does not have (host GPUs: GPU-6b1d2c3e-0000-4000-8000-000000000000, "
         "GPU-6b1d2c3e-0000-4000-8000-000000000001)" % GPU1),
        (WARN, "%s GPU-6b1d2c3e-0000-4000-8000-000000000001" % me,
         "host GPU GPU-6b1d2c3e-0000-4000-8000-000000000001 (minor 1, bus 0000:07:00.0) is not published")]
