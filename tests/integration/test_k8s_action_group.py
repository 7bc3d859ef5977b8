"""module_defaults through the action group gpuprobe.layers.k8s (meta/runtime.yml, docs/k8s.md) reach both k8s
modules in a real ansible-playbook run, and an option given on the task wins. The kubectl the group names does not
exist, so each module says which one it looked for: k8s_facts in its NOT_RUN record, k8s_publish (check mode) in
its errors. No cluster is needed, and nothing is written."""
import json
import os
import shutil
import subprocess
import sys

import pytest

pytestmark = pytest.mark.integration
GROUP_KUBECTL = "/nonexistent/kubectl-of-the-group"
TASK_KUBECTL = "/nonexistent/kubectl-of-the-task"


def _ansible_playbook():
    return shutil.which("ansible-playbook", path=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    if _ansible_playbook() is None:
        pytest.skip("ansible-playbook not installed")
    tmp = tmp_path_factory.mktemp("k8s-group")
    out = tmp / "out.json"
    play = [{
        "hosts": "localhost", "gather_facts": False,
        "module_defaults": {"group/gpuprobe.layers.k8s": {"kubectl": GROUP_KUBECTL, "timeout": 7}},
        "tasks": [
            {"name": "facts with the group's kubectl", "gpuprobe.layers.k8s_facts": {}, "register": "facts"},
            {"name": "facts with the task's own kubectl", "gpuprobe.layers.k8s_facts": {"kubectl": TASK_KUBECTL},
             "register": "facts_task"},
            {"name": "publish with the group's kubectl", "gpuprobe.layers.k8s_publish": {"verdicts": {"localhost": "COMPUTE_VERIFIED"}},
             "check_mode": True, "ignore_errors": True, "register": "published"},
            {"name": "dump", "ansible.builtin.copy": {
                "dest": str(out), "mode": "0600",
                "content": "{{ {'facts': facts.ansible_facts.gpuprobe_k8s, 'facts_task': facts_task.ansible_facts.gpuprobe_k8s, "
                           "'published': published} | to_json }}"}},
        ]}]
    path = tmp / "play.json"
    path.write_text(json.dumps(play))
    env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="default", ANSIBLE_LOCALHOST_WARNING="false",
               ANSIBLE_INVENTORY_UNPARSED_WARNING="false")
    r = subprocess.run([_ansible_playbook(), "-i", "localhost,", "-c", "local",
                        "-e", "ansible_python_interpreter=%s" % sys.executable, str(path)],
                       capture_output=True, text=True, env=env, timeout=300, check=False)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return json.loads(out.read_text())


def test_k8s_facts_takes_the_kubectl_option_from_the_group(run):
    assert run["facts"]["status"] == "NOT_RUN"
    assert run["facts"]["reason"] == "kubectl not found: %s" % GROUP_KUBECTL


def test_an_option_on_the_task_wins_over_the_group(run):
    assert run["facts_task"]["reason"] == "kubectl not found: %s" % TASK_KUBECTL


def test_k8s_publish_takes_the_kubectl_option_from_the_group(run):
    published = run["published"]
    assert published["failed"] is True and published["changed"] is False
    assert [e["error"] for e in published["errors"]] == ["kubectl not found: %s" % GROUP_KUBECTL]
