"""Issue 43.7: every path of the run on the controller as the run means it (gpuprobe.layers.run_path), and a status file
the report task cannot write never leaves an earlier run's "passed" behind."""
import json
import os

import pytest

from actionlab import make_action
from test_fleet_report import HOSTVARS

from ansible_collections.gpuprobe.layers.plugins.action import fleet_report as A
from ansible_collections.gpuprobe.layers.plugins.filter.run_path import run_path


def test_a_relative_path_is_under_the_directory_the_run_was_started_in(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PWD", "/somewhere/else")   # a parent process's, not this one's
    assert run_path("status.json") == str(tmp_path / "status.json")
    assert run_path("./out/../reports") == str(tmp_path / "reports")
    assert run_path("/abs/status.json") == "/abs/status.json"
    assert run_path("~/s.json") == os.path.join(os.path.expanduser("~"), "s.json")
    with pytest.raises(Exception, match="non-empty path"):
        run_path("")


def test_a_status_file_that_cannot_be_written_removes_the_earlier_runs(tmp_path, monkeypatch):
    status = tmp_path / "status.json"
    status.write_text(json.dumps({"status": "passed", "exit_status": 0}))

    def refuse(path, _status):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(A, "write_status", refuse)
    action = make_action(A, "gpuprobe.layers.fleet_report", {"hosts": ["ok"], "report_dir": str(tmp_path / "r"),
                                                             "status_file": str(status)})
    with pytest.raises(Exception, match="cannot write the status file .*No space left on device; the status file there, "
                                        "an earlier run's, was removed"):
        action.run(task_vars={"hostvars": {"ok": HOSTVARS["ok"]}})
    assert not status.exists()
