"""Diff mode where a module writes (issue 33): cdi_spec (the spec file it writes or removes, the specs of runs that
are over it sweeps) and k8s_publish (the Node condition and label it patches) return Ansible's ``diff`` with before
and after when run with ``--diff``, in check mode too, and nothing without it; every other module documents
``diff_mode: none`` and never looks at diff mode. Run through each module's main(), against a synthetic host tree
(real files) and a stand-in kubectl (tests/unit/fixtures/k8s) that records what it is asked to write."""
import re
import json
import os

import pytest

import hostfixture  # tests/conftest.py puts tests/unit/fixtures/host on sys.path
from kubectlfixture import argv_log, stand_in
from moduledocs import module_names, own_doc  # tests/conftest.py: fixtures/docs

from ansible.module_utils.testing import patch_module_args

from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import spec as _cdi_spec
from ansible_collections.gpuprobe.layers.plugins.modules import cdi_spec, k8s_publish

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
MODULES = os.path.join(ROOT, "plugins", "modules")
K8S_FIXTURES = os.path.join(ROOT, "tests", "unit", "fixtures", "k8s", "dra")
DRIVER = "580.159.04"
NOW = "2026-12-03T10:00:00Z"


def _main(module, args, capsys):
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            module.main()
    return json.loads(capsys.readouterr().out)


# ---- which modules support diff mode ----

def _diff_support(name):
    """The module's diff_mode support: its own attribute, else the doc fragment's (gpuprobe.layers._attributes and its
    FACTS and ACTION, which are it and more: none)."""
    with open(os.path.join(MODULES, name + ".py")) as f:
        text = f.read()
    doc = own_doc(name)
    own = ((doc.get("attributes") or {}).get("diff_mode") or {}).get("support")
    fragments = doc.get("extends_documentation_fragment", [])
    assert own or set(fragments) & {"gpuprobe.layers._attributes", "gpuprobe.layers._attributes.facts",
                                    "gpuprobe.layers._attributes.action"}, name
    # a module reads diff mode through run_layer_module(..., diff=True) (_common.module), which hands fn module._diff
    return own or "none", "module._diff" in text or re.search(r"run_layer_module\([^#]*diff=True\)", text, re.S) is not None


@pytest.mark.parametrize("name", module_names())
def test_diff_mode_is_documented_as_the_module_does_it(name):
    support, reads_diff = _diff_support(name)
    expected = "full" if name in ("cdi_spec", "k8s_publish") else "none"
    assert (support, reads_diff) == (expected, expected == "full")


# ---- cdi_spec ----

@pytest.fixture
def host_root(tmp_path):
    return hostfixture.spec_host_tree(tmp_path / "host", (("/dev/nvidia0", 195, 0), ("/dev/nvidiactl", 195, 255),
                                                          ("/dev/nvidia-uvm", 238, 0)), smi=False, version=DRIVER)


def _spec_args(host_root, spec_dir, **extra):
    return dict({"run_id": "d1", "spec_dir": str(spec_dir), "root": str(host_root), "driver_root": "/usr/local/nvidia"}, **extra)


def test_cdi_spec_diff_of_a_write_check_mode_rewrite_and_removal(host_root, tmp_path, capsys):
    d = tmp_path / "cdi"
    path = str(d / "gpuprobe-d1.yaml")
    # check mode: the file that would be written, nothing written
    out = _main(cdi_spec, dict(_spec_args(host_root, d), _ansible_diff=True, _ansible_check_mode=True), capsys)
    assert out["changed"] is True and not d.exists()
    (entry,) = out["diff"]
    assert (entry["before_header"], entry["after_header"], entry["before"]) == (path, path, "")
    assert entry["after"] == _cdi_spec.render(out["spec"]) and "kind: gpuprobe.local/gpu-d1" in entry["after"]
    # the write: after is the file as written
    out = _main(cdi_spec, dict(_spec_args(host_root, d), _ansible_diff=True), capsys)
    with open(path) as f:
        assert [e["after"] for e in out["diff"]] == [f.read()]
    # the same spec again: no change, an empty diff
    out = _main(cdi_spec, dict(_spec_args(host_root, d), _ansible_diff=True), capsys)
    assert out["changed"] is False and out["diff"] == []
    # another variant over it: before is the old file, after the new one
    with open(path) as f:
        old = f.read()
    out = _main(cdi_spec, dict(_spec_args(host_root, d, variant="no_uvm_node"), _ansible_diff=True), capsys)
    (entry,) = out["diff"]
    assert entry["before"] == old and entry["after"] == _cdi_spec.render(out["spec"]) != old
    with open(path) as f:
        assert entry["after"] == f.read()
    # removal: before is the file, after empty; then nothing left to diff
    with open(path) as f:
        old = f.read()
    out = _main(cdi_spec, dict(_spec_args(host_root, d, state="absent"), _ansible_diff=True), capsys)
    assert out["changed"] is True and not os.path.exists(path)
    assert [(e["before_header"], e["before"], e["after"]) for e in out["diff"]] == [(path, old, "")]
    out = _main(cdi_spec, dict(_spec_args(host_root, d, state="absent"), _ansible_diff=True), capsys)
    assert out["changed"] is False and out["diff"] == []


def test_cdi_spec_diff_lists_the_specs_of_runs_that_are_over_as_removed(host_root, tmp_path, capsys):
    """A spec of another run whose owner is gone is swept before the write: the diff says so, and that is a change."""
    d = tmp_path / "cdi"
    gone = {"host": os.uname()[1], "pid": 2 ** 22 + 12345, "started": 1}   # no such process here
    _main(cdi_spec, dict(_spec_args(host_root, d, run_id="old"), owner=gone), capsys)
    old_path = str(d / "gpuprobe-old.yaml")
    assert os.path.exists(old_path)
    out = _main(cdi_spec, dict(_spec_args(host_root, d), _ansible_diff=True, _ansible_check_mode=True), capsys)
    assert out["swept"] == [old_path] and os.path.exists(old_path)
    swept, written = out["diff"]
    assert swept == {"before_header": old_path, "after_header": old_path,
                     "before": {"path": old_path, "state": "file", "why": "the spec of a run that is over"},
                     "after": {"path": old_path, "state": "absent"}}
    assert written["before_header"] == str(d / "gpuprobe-d1.yaml")


def test_cdi_spec_without_diff_mode_returns_no_diff(host_root, tmp_path, capsys):
    out = _main(cdi_spec, _spec_args(host_root, tmp_path / "cdi"), capsys)
    assert out["changed"] is True and "diff" not in out


# ---- k8s_publish ----

FAKE_KUBECTL = r'''if "get" in args:
    sys.stdout.write(open(%(nodes)r).read()); sys.exit(0)
print(json.dumps({"kind": "Node", "metadata": {"name": args[args.index("node") + 1]}}))
'''
PREVIOUS = {"type": "GPUComputeVerified", "status": "True", "reason": "COMPUTE_VERIFIED",
            "message": "gpuprobe.layers verdict COMPUTE_VERIFIED; run r0", "lastHeartbeatTime": "2026-12-01T00:00:00Z",
            "lastTransitionTime": "2026-12-01T00:00:00Z"}


@pytest.fixture
def kubectl(tmp_path):
    """A stand-in kubectl over the fixture Nodes, where dra-0 already has the condition (COMPUTE_VERIFIED, run r0)
    and the label gpuprobe.layers/verdict=COMPUTE_VERIFIED."""
    with open(os.path.join(K8S_FIXTURES, "nodes.json")) as f:
        doc = json.load(f)
    for node in doc["items"]:
        if node["metadata"]["name"] == "dra-0":
            node["status"]["conditions"].append(PREVIOUS)
            node["metadata"]["labels"]["gpuprobe.layers/verdict"] = "COMPUTE_VERIFIED"
    nodes = tmp_path / "nodes.json"
    nodes.write_text(json.dumps(doc))
    path, kubeconfig = stand_in(tmp_path, FAKE_KUBECTL, nodes=str(nodes))
    return {"kubectl": path, "kubeconfig": kubeconfig, "label": "gpuprobe.layers/verdict"}, tmp_path


def _written(tmp_path):
    return [argv[4:7] for argv in argv_log(tmp_path) if "patch" in argv]


def test_k8s_publish_diff_is_the_condition_and_label_before_and_after(kubectl, capsys):
    args, tmp = kubectl
    out = _main(k8s_publish, dict(args, verdicts={"dra-0": "FAILED_AT_CDI", "plain-0": "COMPUTE_VERIFIED"}, run_id="r1",
                                  _ansible_diff=True), capsys)
    assert out["changed"] is True and [p["written"] for p in out["published"]] == [True, True]
    by_node = dict((e["before_header"].split()[1], e) for e in out["diff"])
    assert sorted(by_node) == ["dra-0", "plain-0"]
    dra = by_node["dra-0"]
    assert dra["before_header"] == dra["after_header"] == "Node dra-0 (condition GPUComputeVerified, label gpuprobe.layers/verdict)"
    assert dra["before"] == {"condition": PREVIOUS, "label": {"gpuprobe.layers/verdict": "COMPUTE_VERIFIED"}}
    written = out["published"][0]
    assert dra["after"] == {"condition": written["condition"], "label": {"gpuprobe.layers/verdict": "FAILED_AT_CDI"}}
    assert (dra["after"]["condition"]["status"], dra["after"]["condition"]["reason"]) == ("False", "FAILED_AT_CDI")
    # a Node without the condition or the label: null before
    assert by_node["plain-0"]["before"] == {"condition": None, "label": {"gpuprobe.layers/verdict": None}}
    assert len(_written(tmp)) == 4


def test_k8s_publish_diff_in_check_mode_writes_nothing(kubectl, capsys):
    args, tmp = kubectl
    out = _main(k8s_publish, dict(args, verdicts={"plain-0": "FAILED_AT_COMPUTE", "dra-0": "INCONCLUSIVE"}, _ansible_diff=True,
                                  _ansible_check_mode=True), capsys)
    assert out["changed"] is True and _written(tmp) == []
    (entry,) = out["diff"]   # the INCONCLUSIVE node is not written: nothing to show
    assert entry["after"]["condition"]["status"] == "False" and entry["before"]["condition"] is None


def test_k8s_publish_diff_leaves_out_a_node_whose_verdict_holds(kubectl, capsys):
    """Same status, reason, message and label: not a change (only the heartbeat is written again), so not in the diff."""
    args, _tmp = kubectl
    out = _main(k8s_publish, dict(args, verdicts={"dra-0": "COMPUTE_VERIFIED"}, run_id="r0", _ansible_diff=True), capsys)
    assert out["changed"] is False and out["diff"] == [] and out["published"][0]["written"] is True


def test_k8s_publish_diff_without_a_label(kubectl, capsys):
    args, _tmp = kubectl
    out = _main(k8s_publish, dict(args, label=None, verdicts={"dra-0": "FAILED_AT_HOST"}, run_id="r1", _ansible_diff=True), capsys)
    (entry,) = out["diff"]
    assert entry["before"] == {"condition": PREVIOUS} and set(entry["after"]) == {"condition"}
    assert entry["before_header"] == "Node dra-0 (condition GPUComputeVerified)"


def test_k8s_publish_without_diff_mode_returns_no_diff(kubectl, capsys):
    args, _tmp = kubectl
    out = _main(k8s_publish, dict(args, verdicts={"dra-0": "FAILED_AT_HOST"}), capsys)
    assert out["changed"] is True and "diff" not in out
