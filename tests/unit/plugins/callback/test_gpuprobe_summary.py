"""The gpuprobe_summary callback: progress lines and the final table, driven with real TaskResult/Host objects."""
from ansible.executor.task_result import TaskResult
from ansible.inventory.host import Host
from ansible.playbook.task import Task

from ansible_collections.gpuprobe.layers.plugins.callback import gpuprobe_summary as C


class Capture(object):
    def __init__(self):
        self.lines = []

    def display(self, msg, **kwargs):
        self.lines.append(msg)

    def banner(self, msg, **kwargs):
        self.lines.append("== %s" % msg)


def result(host, data):
    task = Task.load({"action": {"module": "ansible.builtin.set_fact"}})
    return TaskResult(Host(host), task, data, {})


def make():
    cb = C.CallbackModule()
    cb._display = Capture()
    return cb


def test_progress_counts_each_host_once():
    cb = make()
    cb.v2_runner_on_ok(result("n1", {"gpuprobe_host_done": {"verdict": "COMPUTE_VERIFIED", "total": "3"}}))
    cb.v2_runner_on_ok(result("n1", {"gpuprobe_host_done": {"verdict": "COMPUTE_VERIFIED", "total": "3"}}))
    cb.v2_runner_on_ok(result("n2", {"ansible_facts": {"other": 1}}))
    cb.v2_runner_on_unreachable(result("n3", {"msg": "ssh: no route"}))
    assert cb._display.lines == ["gpuprobe [1/3] n1: COMPUTE_VERIFIED", "gpuprobe [2/3] n3: UNREACHABLE"]


UNREACHABLE_RESULT = {"unreachable": True, "msg": 'Data could not be sent to remote host "n2". Make sure this host can be '
                      "reached over ssh: ssh: Could not resolve hostname n2: Name or service not known",
                      "verdict": {"verdict": "INCONCLUSIVE", "signature": None},
                      "gpuprobe_host_done": {"verdict": "INCONCLUSIVE", "total": 3}, "records": {"host": {"reason": "x" * 3000}}}


def test_progress_is_one_line_per_node_with_its_cause_and_the_total():
    """issue 22.4: an unreachable node is one line with its cause (never its 3 KB result, never [N/?])."""
    cb = make()
    cb.v2_runner_on_failed(result("n1", {"failed": True, "msg": "the node-side call failed: /usr/bin/python3: not found",
                                         "verdict": {"verdict": "INCONCLUSIVE"},
                                         "gpuprobe_host_done": {"verdict": "INCONCLUSIVE", "total": 3}}))
    cb.v2_runner_on_unreachable(result("n2", UNREACHABLE_RESULT))
    cb.v2_runner_on_ok(result("n3", {"verdict": {"verdict": "FAILED_AT_CDI", "signature": "cdi.spec.version"},
                                     "gpuprobe_host_done": {"verdict": "FAILED_AT_CDI", "total": 3}}))
    assert cb._display.lines == ["gpuprobe [1/3] n1: RUN_FAILED no usable Python on the node",
                                 "gpuprobe [2/3] n2: UNREACHABLE name does not resolve (DNS)",
                                 "gpuprobe [3/3] n3: FAILED_AT_CDI cdi.spec.version"]


def test_final_summary_from_the_fleet_report_result():
    cb = make()
    verdicts = {"n2": "FAILED_AT_CDI", "n1": "COMPUTE_VERIFIED", "n3": "INCONCLUSIVE"}
    lines = ["3 hosts: 1 failed at cdi, 1 unreachable, 1 verified", "  1 host UNREACHABLE: no route to host (e.g. n3)"]
    cb.v2_runner_on_ok(result("n1", {"summary_lines": lines, "verdicts": verdicts,
                                     "signatures": {"n2": "cdi.host.mount_source"},
                                     "unverifiable": {"n3": "host unreachable: ssh: no route"},
                                     "files": {"html": "/r/x.html"}}))
    cb.v2_playbook_on_stats(None)
    # the report's grouped lines, not a line per host again (the progress lines were those)
    assert cb._display.lines == ["== GPUPROBE SUMMARY"] + lines + ["html report: /r/x.html"]


def test_nothing_printed_for_unrelated_playbooks():
    cb = make()
    cb.v2_playbook_on_stats(None)
    assert cb._display.lines == []


def test_final_table_without_report():
    cb = make()
    cb.v2_runner_on_ok(result("n1", {"gpuprobe_host_done": {"verdict": "INCONCLUSIVE", "total": 1}}))
    cb.v2_playbook_on_stats(None)
    assert cb._display.lines[-1] == "(no fleet report was written in this run)"
    assert "n1    INCONCLUSIVE  -" in cb._display.lines
