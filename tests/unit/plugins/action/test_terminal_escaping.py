"""Issue 34.3: a node's text never acts on the terminal. Control characters (ESC/CSI/OSC sequences, CR, backspace,
newline, BEL, C1 controls, bidi overrides) from a node reach the screen as visible escapes, one line per node, in every
line the callbacks print (progress, summary, the hosts table, the report's files) and in the lines the playbook prints
(fleet_report's summary_lines and failing, verify_node's message)."""
import types

import pytest

from ansible.executor.task_result import TaskResult
from ansible.inventory.host import Host
from ansible.playbook.task import Task

from actionlab import make_action
from hostilefixture import HOSTILE, assert_terminal_safe

from ansible_collections.gpuprobe.layers.plugins.action import fleet_report as A
from ansible_collections.gpuprobe.layers.plugins.callback import fleet as F
from ansible_collections.gpuprobe.layers.plugins.callback import gpuprobe_summary as C

from test_fleet_report import HOSTVARS
from test_fleet_report_escaping import hostile_records


def _screen():
    """A display that keeps every line it is given (a banner too)."""
    lines = []
    return types.SimpleNamespace(lines=lines, display=lambda msg, **kw: lines.append(msg),
                                 banner=lambda msg, **kw: lines.append(msg))


def _result(host, data, action="gpuprobe.layers.verify_node"):
    return TaskResult(Host(host), Task.load({"action": {"module": action}}), data, {})


def _drive(cb, text):
    cb._display = _screen()
    done = {"verdict": "FAILED_AT_CDI", "total": 4}
    cb.v2_runner_on_ok(_result("ok-node", {"gpuprobe_host_done": done, "verdict": {"verdict": "FAILED_AT_CDI", "signature": text}}))
    cb.v2_runner_on_failed(_result("run-failed", {"failed": True, "msg": text, "gpuprobe_host_done": {"verdict": "INCONCLUSIVE"},
                                                  "verdict": {"verdict": "INCONCLUSIVE"}}))
    cb.v2_runner_on_unreachable(_result("gone", {"unreachable": True, "msg": text, "gpuprobe_host_done": {"total": 4}}))
    cb.v2_runner_on_ok(_result("odd", {"gpuprobe_host_done": {"verdict": text}}))
    return cb


@pytest.mark.parametrize("text", HOSTILE, ids=range(len(HOSTILE)))
@pytest.mark.parametrize("callback", ["summary", "fleet"])
def test_every_callback_line_is_one_line_that_acts_on_nothing(text, callback):
    cb = _drive(C.CallbackModule() if callback == "summary" else F.CallbackModule(), text)
    progress = cb.progress
    assert len(cb._display.lines) == 4, cb._display.lines
    # the end of the run: the report's lines and files, or (no report) the table of the nodes
    progress.report = {"summary_lines": ["4 hosts: %s" % text, text], "files": {"html": "/r/%s.html" % text}, "verdicts": {}}
    progress.summary()
    progress.report = None
    progress.summary()
    for line in cb._display.lines:
        assert_terminal_safe(line)
    assert any("\\x1b" in line or "\\n" in line or "\\r" in line or "\\x9b" in line or "\\u202e" in line
               for line in cb._display.lines) or not any(ch in text for ch in "\x1b\n\r\x9b\u202e")


@pytest.mark.parametrize("text", HOSTILE, ids=range(len(HOSTILE)))
def test_the_lines_the_playbook_prints_act_on_nothing(tmp_path, text):
    hostvars = {"ok": HOSTVARS["ok"], "evil": {"verify_result": {"records": hostile_records(text)}},
                "evil-run": {"verify_result": {"failed": True, "msg": text}}}
    action = make_action(A, "gpuprobe.layers.fleet_report", {"hosts": sorted(hostvars), "report_dir": str(tmp_path),
                                                             "require_verified": True})
    result = action.run(task_vars={"hostvars": hostvars})
    assert sorted(result["failing"]) == ["evil", "evil-run"]
    for line in result["summary_lines"] + list(result["failing"].values()):
        assert_terminal_safe(line)


def test_the_one_helper_writes_each_control_visibly():
    from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report.escape import controls, display_text  # pylint: disable=import-outside-toplevel
    assert display_text("a\x1b[2Jb\rc\bd\ne\x07f\x9bg\u202eh\x00") == "a\\x1b[2Jb\\rc\\bd\\ne\\af\\x9bg\\u202eh\\x00"
    assert controls("a\nb\tc\x1b", keep="\n\t") == "a\nb\tc\\x1b"
    assert display_text("plain text, /path, ü, 漢字") == "plain text, /path, ü, 漢字"
