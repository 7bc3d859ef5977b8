"""Issue 43.3: GPUs counted as seen. A GPU is verified only when the host layer lists it and the probe proved it: a
PASS row for a GPU the host does not list never counts (nor in the total), and the report's counts, its GPU tile, the
summary line and both metrics files (the fleet's and the node's own) say the same."""
import re

from actionlab import make_action
from test_fleet_report import HOSTVARS, record

from ansible_collections.gpuprobe.layers.plugins.action import fleet_report as A
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import NOT_RUN, PASS
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report import metrics as M
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report import model

UUID = "GPU-%s-3adf-2f39-7708-ea4742cf7baf"
A_, B_, C_, ROGUE = UUID % "aaaaaaaa", UUID % "bbbbbbbb", UUID % "cccccccc", UUID % "deadbeef"


def _row(index, uuid, status):
    return {"index": index, "uuid": uuid, "model": "H200", "expected": True, "seen_in_container": status == PASS,
            "ordinal": index, "status": status, "signature": None, "reason": None if status == PASS else "GPU in use"}


def _records():
    """A 3-GPU node (the host lists a, b, c) whose compute record proves a, not b (busy), and a GPU the host never saw."""
    records = dict(HOSTVARS["ok"]["verify_result"]["records"])
    records["host"] = record("host", PASS, gpus=[{"index": i, "uuid": u, "name": "H200"} for i, u in enumerate((A_, B_, C_))])
    records["compute"] = record("compute", PASS, container={"executed": True, "cdi_devices": ["a=0"]},
                                gpus=[_row(0, A_, PASS), _row(1, B_, NOT_RUN), _row(3, ROGUE, PASS)])
    return records


def _verified(text):
    return dict((m.group(1), m.group(2)) for m in re.finditer(r'gpuprobe_gpu_verified\{[^}]*uuid="([^"]+)"[^}]*\} (\S+)', text))


def test_a_gpu_the_host_layer_does_not_list_is_never_verified_nor_counted(tmp_path):
    hostvars = {"three": {"verify_result": {"records": _records()}}}
    metrics_file = tmp_path / "fleet.prom"
    action = make_action(A, "gpuprobe.layers.fleet_report", {"hosts": ["three"], "report_dir": str(tmp_path / "r"),
                                                             "metrics_file": str(metrics_file)})
    result = action.run(task_vars={"hostvars": hostvars})
    assert result["verdicts"]["three"] == "INCONCLUSIVE"
    gpus = result["summary"]["gpus"]
    assert (gpus["total"], gpus["verified"], gpus["failed"], gpus["not_run"], gpus["unlisted"]) == (3, 1, 0, 2, 1)
    line = next(x for x in result["summary_lines"] if "verified in a container" in x)
    assert "1 of 3 GPUs verified in a container" in line and "1 GPU seen by the probe that no host layer lists" in line
    html = open(result["files"]["html"]).read()
    assert re.search(r'id="gpu-tile"><div class="num">1 / 3</div>', html)
    assert _verified(metrics_file.read_text()) == {A_: "1", B_: "0", ROGUE: "0"}
    # the node's own file, as verify_node renders it from the same records
    entry = model.host_entry("three", _records())
    assert _verified(M.node_text(entry, "full", 1700000000)) == {A_: "1", B_: "0", ROGUE: "0"}


def test_a_host_without_uuids_lists_its_gpus_by_index():
    records = _records()
    records["host"] = record("host", PASS, gpus=[{"index": i, "uuid": None} for i in range(3)])
    entry = model.host_entry("three", records)
    # a, b by index; the rogue row's index 3 is not listed
    assert _verified(M.node_text(entry, "full", 1700000000)) == {A_: "1", B_: "0", ROGUE: "0"}
