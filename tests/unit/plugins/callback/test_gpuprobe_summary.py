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


def test_final_table_from_the_fleet_report_result():
    cb = make()
    verdicts = {"n2": "FAILED_AT_CDI", "n1": "COMPUTE_VERIFIED", "n3": "INCONCLUSIVE"}
    cb.v2_runner_on_ok(result("n1", {"summary_lines": [], "verdicts": verdicts,
                                     "signatures": {"n2": "cdi.host.mount_source"},
                                     "unverifiable": {"n3": "host unreachable: ssh: no route"},
                                     "files": {"html": "/r/x.html"}}))
    cb.v2_playbook_on_stats(None)
    assert cb._display.lines == [
        "== GPUPROBE SUMMARY",
        "HOST  VERDICT           SIGNATURE",
        "n1    COMPUTE_VERIFIED  -",
        "n2    FAILED_AT_CDI     cdi.host.mount_source",
        "n3    INCONCLUSIVE      -",
        "n3 could not be verified: host unreachable: ssh: no route",
        "html report: /r/x.html",
    ]


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
