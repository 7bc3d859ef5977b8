"""CDI identity map: real spec files loaded and merged by the cdi layer's own loader, real node trees (mknod char
devices), host records from the host layer with NVML faked at the pynvml boundary (MIG instances hand-built per I1)."""
import os

import pytest
import yaml

import hostfixture as hf  # tests/conftest.py puts tests/unit/fixtures/host on sys.path

from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import identity as _cdi_identity
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import files as _cdi_files
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import resolve as _cdi_resolve
from ansible_collections.gpuprobe.layers.plugins.module_utils._host import layer as _host
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import FAIL, NOT_RUN, PASS, WARN, LayerBuilder

KIND = "nvidia.com/gpu"
CONTROL = [{"path": "/dev/nvidiactl"}, {"path": "/dev/nvidia-uvm"}]
MIG_A = "MIG-0b1d2c3e-0000-4000-8000-00000000000a"
MIG_B = "MIG-0b1d2c3e-0000-4000-8000-00000000000b"


def uuid(i):
    return hf.gpu(i)["uuid"]


def node(tmp_path, gpus, caps=()):
    root = hf.build_node(tmp_path / "node", gpus=gpus)
    for minor in caps:
        hf.mknod_under(root, "/dev/nvidia-caps/nvidia-cap%d" % minor, hf.CAPS_MAJOR, minor, 0o400)
    return root


def host(root, gpus, nvml=True):
    fake = hf.fake_pynvml([hf.gpu(i) for i in range(gpus)]) if nvml else None
    return _host.record(root=root, pynvml_module=fake, use_nvml=nvml)


def dev(name, *paths):
    return {"name": name, "containerEdits": {"deviceNodes": [{"path": p} for p in paths]}}


def devices_of(tmp_path, root, spec_devices, version="0.5.0"):
    """The identity map's input, built with the cdi layer's own loader, registry and merge_edits."""
    spec = {"cdiVersion": version, "kind": KIND, "devices": spec_devices, "containerEdits": {"deviceNodes": CONTROL}}
    d = tmp_path / "cdi"
    d.mkdir(exist_ok=True)
    path = d / ("spec%d.yaml" % len(os.listdir(str(d))))
    path.write_text(yaml.safe_dump(spec))
    rec = _cdi_files.load_spec_file(str(path))
    assert rec["ok"], rec["errors"]
    rec["priority"] = 0
    registry, conflicts, _unused = _cdi_resolve.build_registry([rec])
    assert not conflicts
    out = []
    for q in sorted(registry):
        edits, _sources = _cdi_resolve.merge_edits(registry, [q], root)
        out.append({"name": q, "deviceNodes": edits["deviceNodes"]})
    return out


def run(devices, requested, host_record):
    checks, identity = _cdi_identity.identity_map(devices, requested, host_record, [KIND])
    b = LayerBuilder("cdi", _cdi_identity.CHECKS)
    for c in checks:  # every id is in the catalogue, and the wiring the lead uses accepts them
        b.add(c["id"], c["status"], c["subject"], c["expected"], c["observed"], c["hint"])
    return checks, identity


def of(checks, check_id, subject=None):
    return [c for c in checks if c["id"] == check_id and (subject is None or c["subject"] == subject)]


def status(checks, check_id, subject):
    found = of(checks, check_id, subject)
    assert len(found) == 1, (check_id, subject, checks)
    return found[0]["status"]


def nvidia_ctk_like(n):
    """Index names, UUID names (aliases of the same GPUs) and 'all', as nvidia-ctk writes them."""
    devs = [dev(str(i), "/dev/nvidia%d" % i) for i in range(n)]
    devs += [dev(uuid(i), "/dev/nvidia%d" % i) for i in range(n)]
    devs.append(dev("all", *["/dev/nvidia%d" % i for i in range(n)]))
    return devs


@pytest.mark.parametrize("n", [4, 8])
def test_index_and_uuid_aliases_pass_without_conflict(tmp_path, n):
    root = node(tmp_path, n)
    devices = devices_of(tmp_path, root, nvidia_ctk_like(n))
    requested = ["%s=0" % KIND, "%s=%s" % (KIND, uuid(0)), "%s=%d" % (KIND, n - 1)]
    checks, identity = run(devices, requested, host(root, n))
    assert [c for c in checks if c["status"] != PASS] == []
    assert status(checks, "cdi.identity.host_gpus", "host") == PASS
    for i in range(n):
        assert status(checks, "cdi.identity.index", "%s=%d" % (KIND, i)) == PASS
        assert status(checks, "cdi.identity.uuid", "%s=%s" % (KIND, uuid(i))) == PASS
    assert status(checks, "cdi.identity.all", KIND + "=all") == PASS
    by_name = dict((d["name"], d) for d in identity["devices"])
    assert by_name[KIND + "=3"]["naming"] == "index"
    assert by_name[KIND + "=3"]["gives"] == [{"uuid": uuid(3), "index": 3, "minor": 3, "mig_uuid": None}]
    assert by_name["%s=%s" % (KIND, uuid(3))]["naming"] == "uuid"
    assert by_name[KIND + "=all"]["naming"] == "all" and len(by_name[KIND + "=all"]["gives"]) == n
    # the index and the UUID alias of GPU 0 are one expected GPU
    assert identity["expected_gpus"] == [
        {"uuid": uuid(0), "index": 0, "minor": 0, "name": "NVIDIA H200", "mig_uuid": None},
        {"uuid": uuid(n - 1), "index": n - 1, "minor": n - 1, "name": "NVIDIA H200", "mig_uuid": None}]


@pytest.mark.parametrize("wanted, expect", [(True, FAIL), (False, FAIL)])  # a lying name FAILs, requested or not
def test_device_one_whose_node_is_nvidia0_on_a_one_gpu_host_fails(tmp_path, wanted, expect):
    root = node(tmp_path, 1)
    devices = devices_of(tmp_path, root, [dev("0", "/dev/nvidia0"), dev("1", "/dev/nvidia0")])
    checks, identity = run(devices, [KIND + "=1"] if wanted else [KIND + "=0"], host(root, 1))
    c = of(checks, "cdi.identity.index", KIND + "=1")[0]
    assert c["status"] == expect and "has no GPU 1" in c["observed"] and c["hint"]
    assert status(checks, "cdi.identity.index", KIND + "=0") == PASS
    # it does give a real GPU (GPU 0), so gives_gpu passes; only the name lies
    assert status(checks, "cdi.identity.gives_gpu", KIND + "=1") == PASS
    if wanted:
        assert identity["expected_gpus"] == [{"uuid": uuid(0), "index": 0, "minor": 0, "name": "NVIDIA H200", "mig_uuid": None}]


def test_index_name_of_another_existing_gpu_fails(tmp_path):
    root = node(tmp_path, 2)
    devices = devices_of(tmp_path, root, [dev("0", "/dev/nvidia1"), dev("1", "/dev/nvidia0")])
    checks, _unused = run(devices, [KIND + "=0", KIND + "=1"], host(root, 2))
    for i in (0, 1):
        c = of(checks, "cdi.identity.index", "%s=%d" % (KIND, i))[0]
        assert c["status"] == FAIL and "gives GPU %d" % (1 - i) in c["observed"]


@pytest.mark.parametrize("declared", [False, True])
def test_requesting_gpu_1_when_the_node_has_no_gpu_1_fails(tmp_path, declared):
    root = node(tmp_path, 1)
    nodes = [{"path": "/dev/nvidia1", "type": "c", "major": 195, "minor": 1}] if declared else [{"path": "/dev/nvidia1"}]
    spec_devices = [dev("0", "/dev/nvidia0"), {"name": "1", "containerEdits": {"deviceNodes": nodes}}]
    devices = devices_of(tmp_path, root, spec_devices)
    checks, identity = run(devices, [KIND + "=1"], host(root, 1))
    assert status(checks, "cdi.identity.gives_gpu", KIND + "=1") == FAIL
    c = of(checks, "cdi.identity.index", KIND + "=1")[0]
    assert c["status"] == FAIL
    assert ("195:1 is no GPU of this host" if declared else "/dev/nvidia1: no major:minor") in c["observed"]
    assert identity["expected_gpus"] == []


def test_uuid_name_of_another_gpu_fails(tmp_path):
    root = node(tmp_path, 2)
    devices = devices_of(tmp_path, root, [dev(uuid(1), "/dev/nvidia0"), dev(uuid(0), "/dev/nvidia1")])
    checks, _unused = run(devices, ["%s=%s" % (KIND, uuid(1))], host(root, 2))
    c = of(checks, "cdi.identity.uuid", "%s=%s" % (KIND, uuid(1)))[0]
    assert c["status"] == FAIL and uuid(0) in c["observed"]
    assert status(checks, "cdi.identity.uuid", "%s=%s" % (KIND, uuid(0))) == FAIL  # not requested, still a lie


def test_uuid_name_of_no_gpu_of_this_host_fails(tmp_path):
    root = node(tmp_path, 1)
    stranger = "GPU-ffffffff-0000-4000-8000-000000000000"
    devices = devices_of(tmp_path, root, [dev(stranger, "/dev/nvidia0")])
    checks, _unused = run(devices, ["%s=%s" % (KIND, stranger)], host(root, 1))
    c = of(checks, "cdi.identity.uuid")[0]
    assert c["status"] == FAIL and "no GPU of this host has UUID" in c["observed"]


def test_gpu_kind_device_with_no_gpu_node_fails(tmp_path):
    root = node(tmp_path, 1)
    devices = devices_of(tmp_path, root, [dev("0", "/dev/nvidia0"), dev("ctl", "/dev/nvidiactl")])
    checks, _unused = run(devices, [KIND + "=ctl"], host(root, 1))
    c = of(checks, "cdi.identity.gives_gpu", KIND + "=ctl")[0]
    assert c["status"] == FAIL and "/dev/nvidiactl c 195:255" in c["observed"]
    assert status(checks, "cdi.identity.naming", KIND + "=ctl") == NOT_RUN


@pytest.mark.parametrize("wanted, expect", [(True, FAIL), (False, FAIL)])  # a lying name FAILs, requested or not
def test_all_that_misses_a_gpu(tmp_path, wanted, expect):
    root = node(tmp_path, 4)
    spec_devices = [dev(str(i), "/dev/nvidia%d" % i) for i in range(4)] + [dev("all", "/dev/nvidia0", "/dev/nvidia1")]
    devices = devices_of(tmp_path, root, spec_devices)
    checks, _unused = run(devices, [KIND + "=all"] if wanted else [KIND + "=0"], host(root, 4))
    c = of(checks, "cdi.identity.all")[0]
    assert c["status"] == expect and "misses GPU 2" in c["observed"] and "GPU 3" in c["observed"]


def test_host_gpu_no_device_gives_warns(tmp_path):
    root = node(tmp_path, 4)
    devices = devices_of(tmp_path, root, [dev(str(i), "/dev/nvidia%d" % i) for i in range(3)])
    checks, _unused = run(devices, [KIND + "=0"], host(root, 4))
    warned = of(checks, "cdi.identity.host_gpu_unclaimed")
    assert [(c["status"], c["subject"]) for c in warned] == [(WARN, "GPU 3 (%s, minor 3)" % uuid(3))]


def test_nvml_absent_identity_from_minors_only(tmp_path):
    root = node(tmp_path, 2)
    devices = devices_of(tmp_path, root, [dev("0", "/dev/nvidia0"), dev(uuid(1), "/dev/nvidia1"), dev("all", "/dev/nvidia0")])
    checks, identity = run(devices, [KIND + "=0", "%s=%s" % (KIND, uuid(1))], host(root, 2, nvml=False))
    assert status(checks, "cdi.identity.host_gpus", "host") == NOT_RUN
    assert status(checks, "cdi.identity.index", KIND + "=0") == NOT_RUN
    assert status(checks, "cdi.identity.uuid", "%s=%s" % (KIND, uuid(1))) == NOT_RUN
    assert "UUIDs unknown" in of(checks, "cdi.identity.uuid")[0]["observed"]
    assert status(checks, "cdi.identity.gives_gpu", KIND + "=0") == PASS  # 195:0 is a GPU node of this host
    assert status(checks, "cdi.identity.all", KIND + "=all") == FAIL  # misses minor 1, known from /dev/nvidia1
    assert not [c for c in checks if c["id"] in ("cdi.identity.index", "cdi.identity.uuid") and c["status"] == PASS]
    assert identity["expected_gpus"] == [{"uuid": None, "index": None, "minor": 0, "name": None, "mig_uuid": None},
                                         {"uuid": None, "index": None, "minor": 1, "name": None, "mig_uuid": None}]


def test_gpu_whose_minor_nvml_could_not_read_is_not_run_never_fail_or_pass(tmp_path):
    root = node(tmp_path, 2)
    fake = hf.fake_pynvml([hf.gpu(0), hf.gpu(1)], fail={(1, "nvmlDeviceGetMinorNumber"): hf.real_pynvml.NVML_ERROR_UNKNOWN})
    record = _host.record(root=root, pynvml_module=fake)
    devices = devices_of(tmp_path, root, [dev("0", "/dev/nvidia0"), dev("1", "/dev/nvidia1"), dev("all", "/dev/nvidia0")])
    checks, _unused = run(devices, [KIND + "=1", KIND + "=all"], record)
    assert status(checks, "cdi.identity.index", KIND + "=0") == PASS
    assert status(checks, "cdi.identity.gives_gpu", KIND + "=1") == NOT_RUN
    assert status(checks, "cdi.identity.index", KIND + "=1") == NOT_RUN
    assert status(checks, "cdi.identity.all", KIND + "=all") == NOT_RUN
    assert of(checks, "cdi.identity.host_gpu_unclaimed") == []


def test_no_host_record_is_not_run_never_pass(tmp_path):
    root = node(tmp_path, 1)
    devices = devices_of(tmp_path, root, [dev("0", "/dev/nvidia0"), dev(uuid(0), "/dev/nvidia0"), dev("all", "/dev/nvidia0")])
    checks, identity = run(devices, [KIND + "=0"], None)
    assert set(c["status"] for c in checks) == set([NOT_RUN])
    assert identity["expected_gpus"] == [{"uuid": None, "index": None, "minor": 0, "name": None, "mig_uuid": None}]


# --- MIG ------------------------------------------------------------------------------------------------------------

def mig_host(root, caps_known=True):
    record = host(root, 1)
    g = hf.gpu(0)
    minors = [(12, 13), (21, 22)] if caps_known else [(None, None), (None, None)]
    record["evidence"]["gpus"] = [{  # I1 row, as the host helper's evidence.gpus gives it
        "index": 0, "uuid": g["uuid"], "minor": 0, "pci_bus_id": g["pci"], "name": g["name"],
        "memory_total_bytes": g["memory"], "device_node": "/dev/nvidia0", "source": "nvml", "compute_processes": [],
        "mig": {"mode_current": "enabled", "mode_pending": "enabled", "instances": [
            {"uuid": MIG_A, "gi": 1, "ci": 0, "profile": "1g.18gb", "caps_minors": {"gi": minors[0][0], "ci": minors[0][1]}},
            {"uuid": MIG_B, "gi": 2, "ci": 0, "profile": "1g.18gb", "caps_minors": {"gi": minors[1][0], "ci": minors[1][1]}}]}}]
    return record


def mig_devices(tmp_path, root, swapped=False):
    a = ["/dev/nvidia0", "/dev/nvidia-caps/nvidia-cap12", "/dev/nvidia-caps/nvidia-cap13"]
    b = ["/dev/nvidia0", "/dev/nvidia-caps/nvidia-cap21", "/dev/nvidia-caps/nvidia-cap22"]
    if swapped:
        a, b = b, a
    return devices_of(tmp_path, root, [dev("0:0", *a), dev("0:1", *b), dev("mig0:1", *b), dev(MIG_B, *b), dev(MIG_A, *a),
                                       dev("0", "/dev/nvidia0"), dev("all", *sorted(set(a + b)))])


@pytest.mark.parametrize("name", ["0:1", "mig0:1", MIG_B])
def test_mig_names_resolve_to_their_instance_through_caps_nodes(tmp_path, name):
    root = node(tmp_path, 1, caps=(12, 13, 21, 22))
    devices = mig_devices(tmp_path, root)
    checks, identity = run(devices, ["%s=%s" % (KIND, name)], mig_host(root))
    assert [c for c in checks if c["status"] != PASS] == [], [c for c in checks if c["status"] != PASS]
    assert status(checks, "cdi.identity.mig", "%s=%s" % (KIND, name)) == PASS
    assert identity["expected_gpus"] == [{"uuid": uuid(0), "index": 0, "minor": 0, "name": "NVIDIA H200", "mig_uuid": MIG_B}]
    naming = dict((d["device"], d["naming"]) for d in identity["devices"])
    assert (naming["0:1"], naming["mig0:1"], naming[MIG_B], naming["0"]) == ("mig-index", "type-index", "mig-uuid", "index")
    all_gives = [d["gives"] for d in identity["devices"] if d["device"] == "all"][0]
    assert sorted(g["mig_uuid"] for g in all_gives) == [MIG_A, MIG_B]


@pytest.mark.parametrize("name", ["0:1", MIG_B])
def test_mig_name_whose_caps_give_another_instance_fails(tmp_path, name):
    root = node(tmp_path, 1, caps=(12, 13, 21, 22))
    checks, _unused = run(mig_devices(tmp_path, root, swapped=True), ["%s=%s" % (KIND, name)], mig_host(root))
    c = of(checks, "cdi.identity.mig", "%s=%s" % (KIND, name))[0]
    assert c["status"] == FAIL and "expected %s" % MIG_B in c["observed"] and MIG_A in c["observed"]


def test_mig_name_of_missing_instance_fails(tmp_path):
    root = node(tmp_path, 1, caps=(12, 13))
    devices = devices_of(tmp_path, root, [dev("0:5", "/dev/nvidia0", "/dev/nvidia-caps/nvidia-cap12")])
    checks, _unused = run(devices, [KIND + "=0:5"], mig_host(root))
    c = of(checks, "cdi.identity.mig")[0]
    assert c["status"] == FAIL and "GPU 0 has no MIG device 5 (it has 2)" in c["observed"]


def test_mig_not_resolvable_is_not_run(tmp_path):
    root = node(tmp_path, 1, caps=(12, 13, 21, 22))
    checks, _unused = run(mig_devices(tmp_path, root), [KIND + "=0:1", "%s=%s" % (KIND, MIG_B)], mig_host(root, caps_known=False))
    migs = of(checks, "cdi.identity.mig")
    assert migs and set(c["status"] for c in migs) == set([NOT_RUN])


def test_mig_name_on_a_gpu_the_host_says_has_no_mig_fails(tmp_path):
    # the host inventory (evidence.gpus) says MIG is not enabled on GPU 0: a MIG name there is a claim no GPU backs
    root = node(tmp_path, 1, caps=(12, 13, 21, 22))
    checks, _unused = run(mig_devices(tmp_path, root), [KIND + "=0:1", "%s=%s" % (KIND, MIG_B)], host(root, 1))
    migs = of(checks, "cdi.identity.mig")
    assert migs and FAIL in set(c["status"] for c in migs) and NOT_RUN not in set(c["status"] for c in migs)


@pytest.mark.parametrize("name, naming", [
    ("0", "index"), ("17", "index"), (uuid(2), "uuid"), ("0:1", "mig-index"), (MIG_A, "mig-uuid"), ("gpu3", "type-index"),
    ("mig1:2", "type-index"), ("all", "all"), ("GPU-nope", "other"), ("h200-a", "other"), ("mig1", "other")])
def test_classify_name(name, naming):
    assert _cdi_identity.classify_name(name)[0] == naming


def test_mig_uuid_name_on_a_procfs_inventory_without_instance_uuids_is_not_run(tmp_path):
    # procfs lists MIG instances without UUIDs: a MIG-<uuid> name can be neither confirmed nor refuted
    root = node(tmp_path, 1, caps=(12, 13, 21, 22))
    record = mig_host(root)
    for inst in record["evidence"]["gpus"][0]["mig"]["instances"]:
        inst["uuid"] = None
    checks, _unused = run(mig_devices(tmp_path, root), ["%s=%s" % (KIND, MIG_B)], record)
    assert status(checks, "cdi.identity.mig", "%s=%s" % (KIND, MIG_B)) == NOT_RUN
