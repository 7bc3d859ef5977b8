"""Issue 43.5: one node cannot speak for another in the report's k8s cross-check. Every node's k8s record lists the
Nodes of the cluster; a host's own record speaks for its Node, the records of other hosts only where they all agree,
and where two records disagree about a Node the report says so, naming both, instead of taking the first. Through
the fleet_report action (the real ActionBase), its JSON report as written."""
import copy
import json

from actionlab import make_action
from hypothesis import given, settings, strategies as st
from test_fleet_report import HOSTVARS, record

from ansible_collections.gpuprobe.layers.plugins.action import fleet_report as A
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import FAIL, PASS, WARN
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report import crosscheck as K
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report.compact import expand as _expand_report


def _node(name, gpus):
    return {"name": name, "hostname_label": name, "capacity": {"nvidia.com/gpu": gpus}, "allocatable": {"nvidia.com/gpu": gpus},
            "gpu_labels": {"nvidia.com/gpu.present": "true"}, "ready": True, "unschedulable": False,
            "path": "device_plugin" if gpus else "neither", "dra": None}


def _k8s(*nodes):
    return record("k8s", PASS, nodes=list(nodes))


def _host(records, k8s):
    return {"verify_result": {"records": dict(copy.deepcopy(records), k8s=k8s)}}


OK = HOSTVARS["ok"]["verify_result"]["records"]
BROKEN = HOSTVARS["broken"]["verify_result"]["records"]
# gpu-a cannot compute and its Node offers 8 GPUs; gpu-b is verified and its Node offers 8. a-rogue (first in name
# order: the record that used to win) lists both Nodes with nothing allocatable.
FLEET = {
    "a-rogue": _host(OK, _k8s(_node("a-rogue", 8), _node("gpu-a", 0), _node("gpu-b", 0))),
    "gpu-a": _host(BROKEN, _k8s(_node("a-rogue", 8), _node("gpu-a", 8), _node("gpu-b", 8))),
    "gpu-b": _host(OK, _k8s(_node("a-rogue", 8), _node("gpu-a", 8), _node("gpu-b", 8))),
}


def _report(tmp_path, hostvars):
    args = {"hosts": sorted(hostvars), "report_dir": str(tmp_path), "run": {"mode": "full"}, "formats": ["json"]}
    action = make_action(A, "gpuprobe.layers.fleet_report", args, False)
    result = action.run(task_vars={"hostvars": hostvars})
    with open(result["files"]["json"]) as f:
        return _expand_report(json.load(f))


def _findings(report):
    return dict(((f["host"], f["finding"]), f) for f in report["k8s_crosscheck"])


def test_a_node_cannot_erase_anothers_fail_or_add_a_warning(tmp_path):
    found = _findings(_report(tmp_path, FLEET))
    # gpu-a's own record: its FAIL stands
    fail = found[("gpu-a", "allocatable_on_unverified_node")]
    assert (fail["severity"], fail["source"], fail["observed"]) == (FAIL, "gpu-a", "allocatable nvidia.com/gpu=8; verdict FAILED_AT_HOST")
    # gpu-b's own record: verified and advertised, no warning from a-rogue's
    assert ("gpu-b", "nothing_advertised") not in found
    # the disagreement is said, naming both records
    for host in ("gpu-a", "gpu-b"):
        d = found[(host, "k8s_records_disagree")]
        assert d["severity"] == WARN and d["k8s_node"] == host
        assert d["observed"] == ("record of %s: allocatable nvidia.com/gpu=8, path device_plugin, 0 DRA device(s); "
                                 "record of a-rogue: allocatable none, path neither, 0 DRA device(s)" % host)
        assert d["message"].endswith("the cross-check rests on %s's own record" % host)
    assert sorted(found) == [("gpu-a", "allocatable_on_unverified_node"), ("gpu-a", "k8s_records_disagree"),
                             ("gpu-b", "k8s_records_disagree")]


def test_without_its_own_record_a_host_rests_on_records_that_agree_or_on_none():
    """A host whose own k8s record lists no Node (k8s NOT_RUN there): the others' records speak for it only where they
    agree; where they disagree, the report says so and does not cross-check the Node."""
    agree = {"x": _k8s(_node("gpu-a", 8)), "y": _k8s(_node("gpu-a", 8))}
    findings = K.k8s_crosscheck({"gpu-a": "FAILED_AT_CDI"}, agree)
    assert [(f["finding"], f["severity"], f["source"]) for f in findings] == [("allocatable_on_unverified_node", FAIL, "x, y")]
    disagree = {"x": _k8s(_node("gpu-a", 8)), "y": _k8s(_node("gpu-a", 0))}
    findings = K.k8s_crosscheck({"gpu-a": "FAILED_AT_CDI"}, disagree)
    assert [(f["finding"], f["severity"]) for f in findings] == [("k8s_records_disagree", WARN)]
    assert findings[0]["observed"] == ("record of x: allocatable nvidia.com/gpu=8, path device_plugin, 0 DRA device(s); "
                                       "record of y: allocatable none, path neither, 0 DRA device(s)")
    assert findings[0]["message"].endswith("no record is this host's own, so the Node is not cross-checked")


def test_a_host_is_cross_checked_only_against_its_node_exactly():
    """gpu-a.dc2 has no Node; Node gpu-a.dc1 only shares its short name (the cross-check matched it before)."""
    k8s = _k8s(_node("gpu-a.dc1", 8))
    assert K.k8s_crosscheck({"gpu-a.dc2": "FAILED_AT_HOST"}, [k8s]) == []
    assert [f["finding"] for f in K.k8s_crosscheck({"gpu-a.dc1": "FAILED_AT_HOST"}, [k8s])] == ["allocatable_on_unverified_node"]


# ---- whatever other nodes claim about a host's Node, that host's findings are those of its own record ----

NAMES = ("gpu-a", "gpu-b", "gpu-c")
CLAIM = st.builds(lambda name, gpus, path, label: dict(_node(name, gpus), path=path, gpu_labels={
    "nvidia.com/cuda.driver-version.full": label} if label else {}),
    st.sampled_from(NAMES), st.sampled_from([0, 1, 8]), st.sampled_from(["device_plugin", "neither", "dra"]),
    st.sampled_from([None, "580.159.04", "1.2.3"]))


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(own=st.dictionaries(st.sampled_from(NAMES), st.sampled_from([0, 8])),
       hostile=st.dictionaries(st.sampled_from(("x-1", "x-2")), st.lists(CLAIM, max_size=4), max_size=2),
       verdicts=st.fixed_dictionaries(dict((n, st.sampled_from(["COMPUTE_VERIFIED", "FAILED_AT_CDI", "INCONCLUSIVE"]))
                                           for n in NAMES)))
def test_other_nodes_claims_never_change_a_hosts_own_findings(own, hostile, verdicts):
    records = dict((host, _k8s(_node(host, gpus))) for host, gpus in own.items())
    records.update((host, _k8s(*claims)) for host, claims in hostile.items())
    drivers = dict((n, "580.159.04") for n in NAMES)
    findings = K.k8s_crosscheck(verdicts, records, drivers)
    for host in own:
        alone = K.k8s_crosscheck({host: verdicts[host]}, {host: records[host]}, drivers)
        mine = [f for f in findings if f["host"] == host and f["finding"] != "k8s_records_disagree"]
        assert mine == alone
        # a claim that differs from the host's own record is said, naming a record of each side
        differs = any(c["name"] == host and K._claims(c) != K._claims(_node(host, own[host]))  # pylint: disable=protected-access
                      for claims in hostile.values() for c in claims)
        said = [f for f in findings if f["host"] == host and f["finding"] == "k8s_records_disagree"]
        assert bool(said) == differs
        assert all(f["observed"].startswith("record of %s: " % host) for f in said)
