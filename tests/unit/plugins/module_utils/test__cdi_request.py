"""The cdi layer judges a spec file by what it provides for this request, as the runtime's CDI library does
(issue 18.7, 18.8, 20.4).

pkg/cdi/cache.go ``refresh`` drops an invalid file whole and records its error against that path only;
``InjectDevices`` ignores those errors and fails only for a requested device no valid file provides. So an invalid
file, a risky file or mount that none of the requested devices uses is a WARN naming it; what the requested devices
use (or a file that is the reason a requested device does not resolve) FAILs.
"""
import os

import pytest

from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import layer as _cdi_layer
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import FAIL, PASS, WARN, validate_record

# a valid spec whose one edit is accounted for (an env NVIDIA's generators write: cdi.trust.accounted PASSes), so that
# what these tests judge is the request alone
GOOD = "cdiVersion: 0.5.0\nkind: v.com/cc\ndevices:\n- name: x\n  containerEdits:\n    env: [NVIDIA_VISIBLE_DEVICES=void]\n"
DEVICE = "- name: %s\n  containerEdits:\n    env: [%s=1]\n"

# one member per way the library rejects a whole file: (rule check, the bad file's text; its device is 'other')
INVALID = [
    ("cdi.spec.parse", "cdiVersion: 0.5.0\nkind: v.com/cc\ndevices: [\n"),
    ("cdi.spec.schema", "cdiVersion: 0.5.0\nkind: v.com/cc\nbogus: 1\ndevices:\n" + DEVICE % ("other", "O")),
    ("cdi.spec.schema", "cdiVersion: 0.5.0\nkind: v.com/cc\ndevices:\n- name: other\n  containerEdits:\n    deviceNodes: [{path: /d, major: x}]\n"),
    ("cdi.spec.version", "cdiVersion: 9.9.9\nkind: v.com/cc\ndevices:\n" + DEVICE % ("other", "O")),
    ("cdi.spec.version", "cdiVersion: 0.3.0\nkind: v.com/cc\ndevices:\n" + DEVICE % ("other", "O") + DEVICE % ("0", "Z")),
    ("cdi.spec.devices", "cdiVersion: 0.5.0\nkind: v.com/cc\ndevices:\n" + DEVICE % ("other", "O") + DEVICE % ("other", "P")),
    ("cdi.spec.devices", "cdiVersion: 0.5.0\nkind: v.com/cc\ndevices:\n" + DEVICE % ("other", "O") + DEVICE % ("-bad", "B")),
    ("cdi.spec.devices", "cdiVersion: 0.5.0\nkind: v.com/cc\ndevices:\n" + DEVICE % ("other", "O") + "- name: empty\n"),
    ("cdi.spec.edits", "cdiVersion: 0.5.0\nkind: v.com/cc\ndevices:\n- name: other\n  containerEdits:\n    env: [NOEQUALS]\n"),
    ("cdi.spec.annotations", "cdiVersion: 0.6.0\nkind: v.com/cc\nannotations: {'bad key!': v}\ndevices:\n" + DEVICE % ("other", "O")),
]


def _write(d, name, text, mode=0o644, uid=0):
    d.mkdir(parents=True, exist_ok=True)
    p = d / name
    p.write_text(text)
    os.chmod(str(p), mode)
    os.chown(str(p), uid, 0)
    return str(p)


def _checks(rec, check_id):
    return [c for c in rec["checks"] if c["id"] == check_id]


def _layer(dirs, devices, kinds=("v.com/cc",)):
    return _cdi_layer.record(spec_dirs=[str(d) for d in dirs], discover_runtime_dirs_=False, devices=devices, kinds=list(kinds))


@pytest.mark.parametrize("check, text", INVALID)
def test_an_invalid_file_of_the_requested_kind_that_provides_none_of_the_requested_devices_is_a_warning(tmp_path, check, text):
    _write(tmp_path / "cdi", "a-good.yaml", GOOD)
    bad = _write(tmp_path / "cdi", "b-bad.yaml", text)
    rec = _layer([tmp_path / "cdi"], ["v.com/cc=x"])
    (got,) = [c for c in _checks(rec, check) if c["subject"] == bad]
    assert got["status"] == WARN and "drops this file" in got["observed"], got
    assert rec["status"] == WARN and bad in rec["reason"], rec["reason"]
    assert rec["evidence"]["requested_devices"] == ["v.com/cc=x"]
    assert validate_record(rec) == []


@pytest.mark.parametrize("check, text", INVALID)
def test_an_invalid_file_that_is_why_a_requested_device_does_not_resolve_fails(tmp_path, check, text):
    _write(tmp_path / "cdi", "a-good.yaml", GOOD)
    bad = _write(tmp_path / "cdi", "b-bad.yaml", text)
    rec = _layer([tmp_path / "cdi"], ["v.com/cc=x", "v.com/cc=other"])
    (got,) = [c for c in _checks(rec, check) if c["subject"] == bad]
    assert got["status"] == FAIL and "v.com/cc=other does not resolve" in got["observed"], got
    assert rec["status"] == FAIL


@pytest.mark.parametrize("check, text", INVALID[1:])  # the parse error has no device list to compare
def test_an_invalid_file_naming_a_device_that_resolves_elsewhere_says_where_from(tmp_path, check, text):
    good = _write(tmp_path / "etc", "good.yaml", GOOD.replace("name: x", "name: other"))
    bad = _write(tmp_path / "run", "bad.yaml", text)
    rec = _layer([tmp_path / "etc", tmp_path / "run"], ["v.com/cc=other"])
    (got,) = [c for c in _checks(rec, check) if c["subject"] == bad]
    assert got["status"] == WARN and "v.com/cc=other (taken from %s)" % good in got["observed"], got
    assert rec["evidence"]["device_sources"] == {"v.com/cc=other": good}


def test_with_no_explicit_request_an_invalid_file_fails_only_when_nothing_of_its_kind_resolves(tmp_path):
    bad = _write(tmp_path / "cdi", "b-bad.yaml", INVALID[3][1])
    rec = _layer([tmp_path / "cdi"], [])
    assert [c["status"] for c in _checks(rec, "cdi.spec.version") if c["subject"] == bad] == [FAIL]
    _write(tmp_path / "cdi", "a-good.yaml", GOOD)
    rec = _layer([tmp_path / "cdi"], [])
    (got,) = [c for c in _checks(rec, "cdi.spec.version") if c["subject"] == bad]
    assert got["status"] == WARN and "its devices other do not exist for the runtime" in got["observed"]
    assert rec["status"] == WARN


@pytest.mark.parametrize("text", [
    "cdiVersion: 0.6.0\nkind: a.com/b\ndevices:\n" + DEVICE % ("z", "Z"),  # one-character class: validateVendorOrClassName panics
    "cdiVersion: 0.5.0\nkind: w.com/cc\ndevices:\n- name: z\n  containerEdits:\n    deviceNodes: [null]\n",
])
def test_a_file_that_makes_the_library_panic_fails_whatever_is_requested(tmp_path, text):
    _write(tmp_path / "cdi", "a-good.yaml", GOOD)
    bad = _write(tmp_path / "cdi", "z.yaml", text)
    rec = _layer([tmp_path / "cdi"], ["v.com/cc=x"])
    assert [c["status"] for c in _checks(rec, "cdi.spec.library_panic") if c["subject"] == bad] == [FAIL]


# ---------------------------------------------------------------------------------------------------
# Security audit: what the requested devices use FAILs, the rest is a WARN (issue 18.8)

NIC = "cdiVersion: 0.5.0\nkind: nic.example.com/net\ndevices:\n- name: eth\n  containerEdits:\n    env: [N=1]\n"
FOREIGN_MOUNT = ("cdiVersion: 0.5.0\nkind: foreign.example.com/xx\ndevices:\n- name: yy\n  containerEdits:\n"
                 "    mounts: [{hostPath: %s, containerPath: /m}]\n")


@pytest.mark.parametrize("mode, uid", [(0o666, 0), (0o644, 1000), (0o664, 0)])
def test_a_writable_spec_file_fails_only_when_it_provides_a_requested_device(tmp_path, mode, uid):
    d = tmp_path / "cdi"
    gid_writable = mode == 0o664
    used = _write(d, "a-good.yaml", GOOD, mode=mode, uid=uid)
    other = _write(d, "nic.yaml", NIC, mode=mode, uid=uid)
    if gid_writable:
        os.chown(used, 0, 1000)
        os.chown(other, 0, 1000)
    rec = _layer([d], ["v.com/cc=x"])
    by_subject = dict((c["subject"], c) for c in _checks(rec, "cdi.security.spec_file_writable"))
    assert by_subject[used]["status"] == FAIL
    assert by_subject[other]["status"] == WARN and "provides none of the requested devices" in by_subject[other]["observed"]


@pytest.mark.parametrize("mode, uid", [(0o666, 0), (0o644, 1000)])
def test_a_writable_unrequested_spec_alone_does_not_fail_the_node(tmp_path, mode, uid):
    d = tmp_path / "cdi"
    _write(d, "a-good.yaml", GOOD)
    nic = _write(d, "nic.yaml", NIC, mode=mode, uid=uid)
    rec = _layer([d], ["v.com/cc=x"])
    assert rec["status"] == WARN and nic in rec["reason"]


@pytest.mark.parametrize("host_path", ["/var/run/docker.sock", "/", "/etc/kubernetes/pki", "/proc"])
def test_a_sensitive_mount_fails_only_in_the_requested_devices_edits(tmp_path, host_path):
    d = tmp_path / "cdi"
    _write(d, "a-good.yaml", GOOD)
    foreign = _write(d, "foreign.yaml", FOREIGN_MOUNT % host_path)
    rec = _layer([d], ["v.com/cc=x"])
    (c,) = _checks(rec, "cdi.security.sensitive_mount")
    assert c["status"] == WARN and foreign in c["subject"] and rec["status"] != FAIL
    rec = _cdi_layer.record(spec_dirs=[str(d)], discover_runtime_dirs_=False, devices=["v.com/cc=x", "foreign.example.com/xx=yy"],
                            kinds=["v.com/cc"])
    (c,) = _checks(rec, "cdi.security.sensitive_mount")
    assert c["status"] == FAIL and rec["status"] == FAIL


def test_a_writable_spec_dir_fails_only_where_a_requested_device_can_be_placed_or_overridden(tmp_path):
    low, mid, high = tmp_path / "low", tmp_path / "mid", tmp_path / "high"
    for d in (low, mid, high):
        d.mkdir()
        os.chmod(str(d), 0o777)
    _write(mid, "a-good.yaml", GOOD)
    rec = _layer([low, mid, high], ["v.com/cc=x"])
    statuses = dict((c["subject"], c["status"]) for c in _checks(rec, "cdi.security.spec_dir_writable"))
    assert statuses == {str(low): WARN, str(mid): FAIL, str(high): FAIL}


def test_a_requested_device_s_edit_no_generator_writes_fails_the_layer_whatever_else_is_right(tmp_path):
    """The new truth beside the request's (issue 42): the same valid file with an env of its own (X=1) for the
    requested device is a cdi FAIL by cdi.trust.accounted, naming the edit; an unrequested file's edits are not judged."""
    d = tmp_path / "cdi"
    _write(d, "a-good.yaml", GOOD.replace("NVIDIA_VISIBLE_DEVICES=void", "X=1"))
    _write(d, "nic.yaml", NIC)
    rec = _layer([d], ["v.com/cc=x"])
    assert rec["status"] == FAIL and rec["signature"] == "cdi.trust.accounted", rec["reason"]
    assert [(c["status"], c["subject"]) for c in _checks(rec, "cdi.trust.accounted")] == [(FAIL, "v.com/cc=x")]
    assert "env X=1: not accounted for" in _checks(rec, "cdi.trust.accounted")[0]["observed"]
    rec = _layer([d], ["nic.example.com/net=eth"], kinds=["nic.example.com/net"])
    assert [c["subject"] for c in _checks(rec, "cdi.trust.accounted") if c["status"] == FAIL] == ["nic.example.com/net=eth"]


def test_a_clean_node_passes_the_audit(tmp_path):
    d = tmp_path / "cdi"
    _write(d, "a-good.yaml", GOOD)
    _write(d, "nic.yaml", NIC)
    rec = _layer([d], ["v.com/cc=x"])
    assert set(c["status"] for c in rec["checks"] if c["id"].startswith("cdi.security")) == {PASS}


# ---------------------------------------------------------------------------------------------------
# NVIDIA's DRA driver's per-claim specs (issue 20.4): evidence, never a failure of the node

UID = "dab5ab50-d59a-42a6-af16-cfd4628c0f7a"
# as cmd/gpu-kubelet-plugin/cdi.go writes one (kubernetes-sigs/dra-driver-nvidia-gpu @ 22407113): kind
# k8s.gpu.nvidia.com/claim, file k8s.gpu.nvidia.com-claim_<claim UID>.yaml, devices <claim UID>-gpu-<minor>
CLAIM = """cdiVersion: 0.5.0
kind: k8s.gpu.nvidia.com/claim
devices:
- name: %(uid)s-gpu-0
  containerEdits:
    env: [NVIDIA_VISIBLE_DEVICES=void]
    deviceNodes: [{path: /dev/nvidia0, type: c, major: 195, minor: 0}]
containerEdits:
  env: [NVIDIA_CTK_LIBCUDA_DIR=/usr/lib64]
  mounts:
  - {hostPath: /usr/lib64/libcuda.so.535.54.03, containerPath: /usr/lib64/libcuda.so.535.54.03, options: [ro, nosuid, nodev, bind]}
  - {hostPath: /run/nvidia-persistenced/socket, containerPath: /run/nvidia-persistenced/socket, options: [ro, nosuid, nodev, bind]}
  hooks:
  - {hookName: createContainer, path: /usr/bin/nvidia-cdi-hook, args: [nvidia-cdi-hook, update-ldcache, --folder, /usr/lib64]}
"""


@pytest.mark.parametrize("mode, uid, text", [
    (0o644, 0, CLAIM),                              # what the kubelet plugin writes
    (0o600, 0, CLAIM),
    (0o666, 1000, CLAIM),                            # a claim spec someone else can write: a WARN, never a node FAIL
    (0o644, 0, CLAIM.replace("cdiVersion: 0.5.0", "cdiVersion: 0.5.0\nbogus: 1")),  # one the runtime would drop
    (0o644, 0, "cdiVersion: 0.5.0\nkind: [\n"),      # half-written: unparsable
])
def test_dra_claim_specs_are_evidence_never_a_failure_of_the_node(tmp_path, mode, uid, text):
    run = tmp_path / "run-cdi"
    _write(tmp_path / "etc-cdi", "a-good.yaml", GOOD)
    claim = _write(run, "k8s.gpu.nvidia.com-claim_%s.yaml" % UID, text % {"uid": UID} if "%(uid)s" in text else text, mode=mode, uid=uid)
    rec = _layer([tmp_path / "etc-cdi", run], ["v.com/cc=x"])
    assert rec["status"] != FAIL, rec["reason"]
    assert [c for c in rec["checks"] if c["status"] == FAIL] == []
    (dra,) = rec["evidence"]["dra_claims"]
    assert dra["path"] == claim and dra["claim_uid"] == UID and dra["kind"] == "k8s.gpu.nvidia.com/claim"
    assert dra["driver"] == "gpu.nvidia.com"
    if "bogus" not in text and "kind: [" not in text:
        assert dra["ok"] and dra["devices"] == [{"name": UID + "-gpu-0", "claim_uid": UID, "device": "gpu-0"}]
    else:
        assert not dra["ok"] and dra["error"]


def test_a_dra_claim_spec_is_judged_as_requested_when_its_device_is_requested(tmp_path):
    run = tmp_path / "run-cdi"
    _write(run, "k8s.gpu.nvidia.com-claim_%s.yaml" % UID, CLAIM.replace("cdiVersion: 0.5.0", "cdiVersion: 0.5.0\nbogus: 1") % {"uid": UID})
    rec = _layer([run], ["k8s.gpu.nvidia.com/claim=%s-gpu-0" % UID], kinds=["k8s.gpu.nvidia.com/claim"])
    assert [c["status"] for c in rec["checks"] if c["id"] == "cdi.spec.schema"] == [FAIL]


def test_a_malformed_request_is_not_blamed_on_an_unparsable_file(tmp_path):
    _write(tmp_path / "cdi", "a-good.yaml", GOOD)
    bad = _write(tmp_path / "cdi", "b-bad.yaml", INVALID[0][1])
    rec = _layer([tmp_path / "cdi"], ["v.com/cc=x", "not-a-qualified-name"])
    assert [c["status"] for c in _checks(rec, "cdi.spec.parse") if c["subject"] == bad] == [WARN]
