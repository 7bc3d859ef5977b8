"""What Ansible's default stdout callback (AWX's, and most users') prints of a fleet run whose nodes cannot be reached
(issue 45.5): a real ansible-playbook run of playbooks/verify-gpu.yml against nodes whose SSH port is closed
(connection refused), under each ansible-core this tree supports that is installed here (the venv's 2.19,
.build/core-2.17's 2.17). Deterministic: it counts bytes, it times nothing. No GPU, no podman (audit mode)."""
import json
import os
import re
import subprocess
import sys

import pytest
import yaml
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report.compact import expand as _expand_report

pytestmark = pytest.mark.integration

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLAYBOOK = os.path.join(ROOT, "playbooks", "verify-gpu.yml")
CORE_217 = os.path.join(ROOT, ".build", "core-2.17", "bin")
HOSTS = 100
BUDGET = 600   # bytes of the screen per unreachable host, everything of the run included
CAUSE = "connection refused (no SSH server listening)"
CORES = {"venv": None, "core-2.17": CORE_217}


@pytest.fixture(scope="module")
def inventory(tmp_path_factory):
    base = tmp_path_factory.mktemp("screen")
    ssh = {"ansible_connection": "ssh", "ansible_host": "127.0.0.1", "ansible_port": 1,
           "ansible_ssh_common_args": "-o ConnectTimeout=3 -o BatchMode=yes"}
    hosts = dict(("unreachable-%03d" % i, dict(ssh)) for i in range(HOSTS))
    inventory = {"all": {"vars": {"verify_root": str(base / "no-node"), "verify_nvml": False, "verify_k8s": False},
                         "hosts": hosts}}
    (base / "hosts.yml").write_text(yaml.safe_dump(inventory))
    return base


@pytest.mark.parametrize("core", sorted(CORES), ids=sorted(CORES))
def test_unreachable_hosts_cost_the_screen_at_most_600_bytes_each(inventory, tmp_path, core):
    bindir = CORES[core]
    if bindir and not os.path.isfile(os.path.join(bindir, "ansible-playbook")):
        pytest.skip("%s is not installed here (scripts/bootstrap.sh --test makes it)" % core)
    env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="default", ANSIBLE_HOST_KEY_CHECKING="False",
               ANSIBLE_RETRY_FILES_ENABLED="False", ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
    env.pop("ANSIBLE_CALLBACKS_ENABLED", None)
    if bindir:
        env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    reports = tmp_path / "reports"
    status_file = tmp_path / "status.json"
    r = subprocess.run(["ansible-playbook", "-i", str(inventory / "hosts.yml"), PLAYBOOK, "-e", "gpuprobe_mode=audit",
                        "-e", "gpuprobe_report_dir=%s" % reports, "-e", "gpuprobe_status_file=%s" % status_file,
                        "--forks", "20"], env=env, capture_output=True, text=True, timeout=600, check=False)
    screen = r.stdout + r.stderr
    assert r.returncode == 2, screen[-4000:]
    version = subprocess.run(["ansible-playbook", "--version"], env=env, capture_output=True, text=True, check=True).stdout
    assert ("core 2.17." in version) == (core == "core-2.17"), version

    # the budget, for the whole screen of the run
    per_host = len(screen.encode("utf-8")) / float(HOSTS)
    sys.stderr.write("%s: %d bytes, %.0f per host\n" % (core, len(screen.encode("utf-8")), per_host))
    assert per_host <= BUDGET, screen[-6000:]

    # the gate still fails each host that could not be checked, and the recap counts it failed
    names = sorted("unreachable-%03d" % i for i in range(HOSTS))
    gate = re.findall(r'^fatal: \[([^\]]+)\]: FAILED! => \{"changed": false, "msg": "not checked: UNREACHABLE"\}$', r.stdout, re.M)
    assert sorted(gate) == names, screen[-4000:]
    recap = re.findall(r"^(unreachable-\d{3}) +: ok=\d+ +changed=\d+ +unreachable=\d+ +failed=1 ", r.stdout, re.M)
    assert sorted(recap) == names
    # and says why once: the summary's group, not a line per host; ansible-core 2.19 prints the gate's error with its
    # origin once (one message for every host)
    assert r.stdout.count(CAUSE) == 1, screen[-4000:]
    assert r.stdout.count("Origin: ") <= 1
    # each node's own message is in its UNREACHABLE result (Ansible's own line) and in the report, every layer NOT_RUN
    assert len(re.findall(r"^fatal: \[unreachable-\d{3}\]: UNREACHABLE! => .*Connection refused", r.stdout, re.M)) == HOSTS
    report = _expand_report(json.loads((reports / "gpuprobe-report-latest.json").read_text()))
    assert report["summary"]["unreachable"] == HOSTS and sorted(report["hosts"]) == names
    for entry in report["hosts"].values():
        assert entry["state"] == "UNREACHABLE" and entry["cause"] == CAUSE
        assert entry["unverifiable"].startswith("host unreachable: Failed to connect to the host via ssh: ")
        assert [entry["layers"][layer]["reason"] for layer in ("host", "cdi", "runtime", "compute")] == ["host unreachable"] * 4
        assert entry["layers"]["k8s"]["status"] == "NOT_RUN" and "verify_k8s" in entry["layers"]["k8s"]["reason"]
    status = json.loads(status_file.read_text())
    assert (status["status"], sorted(status["unreachable"])) == ("not_checked", names)
    assert all(status["failing"][name].startswith("%s could not be verified: host unreachable: " % name) for name in names)
