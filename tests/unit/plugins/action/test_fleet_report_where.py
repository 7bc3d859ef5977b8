"""The fleet_report action places each host (issue 36.2): its inventory groups (group_names) and the values of the
variables named in group_by, in the JSON report's hosts and where."""
import json

from actionlab import make_action
from test_fleet_report import HOSTVARS

from ansible_collections.gpuprobe.layers.plugins.action import fleet_report as A
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report.compact import expand as _expand_report


def test_the_action_reads_each_host_s_groups_and_group_by_variables(tmp_path):
    hostvars = {"ok": dict(HOSTVARS["ok"], group_names=["gpu", "rack_r1"], rack="r1", zone=None),
                "gone": dict(HOSTVARS["gone"], group_names=["gpu"], rack="r2")}
    action = make_action(A, "gpuprobe.layers.fleet_report", {"hosts": ["ok", "gone"], "report_dir": str(tmp_path),
                                                             "group_by": ["rack", "zone"]})
    result = action.run(task_vars={"hostvars": hostvars})
    data = _expand_report(json.loads(open(result["files"]["json"]).read()))
    assert data["hosts"]["ok"]["where"] == {"groups": ["gpu", "rack_r1"], "vars": {"rack": "r1"}}
    assert data["hosts"]["gone"]["where"] == {"groups": ["gpu"], "vars": {"rack": "r2"}}
    assert data["where"]["by"] == ["group", "rack", "zone"]
    assert data["where"]["places"]["rack"] == {"r2": {"hosts": 1, "states": {"UNREACHABLE": 1}},
                                               "r1": {"hosts": 1, "states": {"COMPUTE_VERIFIED": 1}}}
