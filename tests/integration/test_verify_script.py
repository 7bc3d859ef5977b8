"""scripts/verify.sh over real runs (README and docs/usage.md, "Exit statuses"): ansible-playbook's own status
for what runs no play (--help, --list-hosts, --syntax-check), the inventory Ansible is configured with used
instead of the default inventory/localhost.yml, no false "collections path ... will not be picked up" warning,
and the gate's statuses of real runs (0 passed, 1 not_verified, 2 not_checked, 3 report_not_written, 5
invalid_invocation) over a synthetic node reached through the local connection and a host whose SSH port is closed,
with the retry file of the hosts to run again."""
import glob
import json
import os
import re
import subprocess
import sys

import pytest
import yaml

from hostfixture import build_node
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report.compact import expand as _expand_report

pytestmark = pytest.mark.integration

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VERIFY = os.path.join(ROOT, "scripts", "verify.sh")
FALSE_WARNING = "will not be picked up"
NO_HOST_MESSAGE = "no host was verified"


def _env(**extra):
    env = dict((k, v) for k, v in os.environ.items() if k not in ("ANSIBLE_CONFIG", "ANSIBLE_INVENTORY"))
    env.update(ANSIBLE_HOST_KEY_CHECKING="False", ANSIBLE_RETRY_FILES_ENABLED="False")
    env.update(extra)
    return env


def _verify(args, cwd, **env):
    r = subprocess.run(["bash", VERIFY] + args, cwd=str(cwd), env=_env(**env), capture_output=True, text=True,
                       timeout=300, check=False)
    output = r.stdout + r.stderr
    # issue 22.2: every run printed this (bootstrap's ansible-galaxy install -p without the collections path)
    assert FALSE_WARNING not in output, output[-3000:]
    return r.returncode, output


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    base = tmp_path_factory.mktemp("verify-script")
    build_node(str(base / "node"))
    inventory = {"all": {
        "vars": {"verify_root": str(base / "node"), "verify_nvml": False, "verify_k8s": False,
                 "verify_cdi_spec_dirs": ["/etc/cdi"]},
        "hosts": {"cfgnode": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable},
                  "other": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}},
        "children": {"closed": {"hosts": {"gone": {
            "ansible_connection": "ssh", "ansible_host": "127.0.0.1", "ansible_port": 1,
            "ansible_ssh_common_args": "-o ConnectTimeout=3 -o BatchMode=yes"}}}}}}
    (base / "hosts.yml").write_text(yaml.safe_dump(inventory))
    return base


@pytest.mark.parametrize("args,shows", [
    (["--help"], "usage: ansible-playbook"),
    (["--version"], "ansible-playbook [core"),
    (["--syntax-check"], "playbook: "),
    (["--list-hosts"], "hosts (1):"),
    (["--list-tasks"], "Preflight | the host pattern selects"),
    (["--list-tags"], "TASK TAGS"),
], ids=lambda a: a[0] if isinstance(a, list) else None)
def test_what_runs_no_play_passes_through(tmp_path, args, shows):
    """issue 22.2: these ended with exit 2 and "no host was verified"."""
    rc, output = _verify(args, tmp_path)
    assert (rc, shows in output, NO_HOST_MESSAGE in output) == (0, True, False), output[-3000:]


def _cfg(directory, inventory):
    directory.mkdir(exist_ok=True)
    (directory / "ansible.cfg").write_text("[defaults]\ninventory = %s\n" % inventory)
    return directory / "ansible.cfg"


@pytest.mark.parametrize("source", ["ANSIBLE_CONFIG", "ANSIBLE_CONFIG-relative", "./ansible.cfg", "ANSIBLE_INVENTORY",
                                    "-i", "--inventory=", "--inventory-file", "none"])
def test_the_configured_inventory_is_used(lab, tmp_path, source):
    """The default -i inventory/localhost.yml only when no inventory is set anywhere (issue 22.2: an ansible.cfg's
    inventory, named by ANSIBLE_CONFIG, was overridden by it)."""
    hosts = str(lab / "hosts.yml")
    args, env, cwd = ["--list-hosts"], {}, tmp_path
    if source == "ANSIBLE_CONFIG":
        env["ANSIBLE_CONFIG"] = str(_cfg(tmp_path / "cfg", hosts))
    elif source == "ANSIBLE_CONFIG-relative":
        _cfg(tmp_path / "cfg", hosts)
        env["ANSIBLE_CONFIG"] = "cfg/ansible.cfg"
    elif source == "./ansible.cfg":
        cwd = tmp_path / "project"
        _cfg(cwd, hosts)
        os.chmod(str(cwd), 0o755)  # Ansible ignores an ansible.cfg in a world-writable directory
    elif source == "ANSIBLE_INVENTORY":
        env["ANSIBLE_INVENTORY"] = hosts
    elif source == "-i":
        args += ["-i", hosts]
    elif source == "--inventory=":
        args += ["--inventory=" + hosts]
    elif source == "--inventory-file":
        args += ["--inventory-file", hosts]
    rc, output = _verify(args, cwd, **env)
    # the hosts of the verify play (the first play, the selection check, also lists localhost)
    verify_play = output.split("Verify GPU-in-container readiness", 1)[1].split("hosts (", 1)[1].split("play #", 1)[0]
    listed = sorted(line.strip() for line in verify_play.splitlines()[1:] if line.strip())
    want = ["localhost"] if source == "none" else ["cfgnode", "gone", "other"]
    assert (rc, listed) == (0, want), output[-3000:]


INVALID = "verify.sh: gate invalid_invocation (exit 5)"
RUNS = [
    # id, arguments after -i <lab>, status, text the output must hold, the retry file's hosts (None: not written)
    ("passed", ["-e", "gpuprobe_mode=audit", "--limit", "cfgnode"], 0, "1 host: ", []),
    ("not-verified", ["-e", "gpuprobe_mode=postcheck", "--limit", "cfgnode"], 1,
     "verify.sh: gate not_verified (exit 1)", ["cfgnode"]),
    ("not-checked", ["-e", "gpuprobe_mode=audit", "--limit", "cfgnode,gone"], 2, "verify.sh: gate not_checked (exit 2)", ["gone"]),
    # a post-check with a broken node and an unreachable one: the proven failure is the status, both are to run again
    ("not-verified-and-not-checked", ["-e", "gpuprobe_mode=postcheck", "--limit", "cfgnode,gone"], 1,
     "verify.sh: gate not_verified (exit 1)", ["cfgnode", "gone"]),
    ("limit-matches-nothing", ["-e", "gpuprobe_mode=postcheck", "--limit", "nosuch"], 5, "leaves us with no hosts to target", None),
    ("pattern-and-limit-disjoint", ["-e", "gpuprobe_mode=postcheck", "-e", "gpuprobe_hosts=other", "--limit", "cfgnode"], 5,
     "gpuprobe_hosts 'other' and --limit 'cfgnode' have no host in common: no node would be verified", None),
    ("misspelt-option", ["-e", "gpuprobe_mdoe=audit", "--limit", "cfgnode"], 5,
     "unknown variable gpuprobe_mdoe: did you mean gpuprobe_mode?", None),
    ("unknown-command-line-option", ["--no-such-option"], 5, "usage: ansible-playbook", None),
    ("report-not-written", ["-e", "gpuprobe_mode=audit", "--limit", "cfgnode", "-e", "gpuprobe_report_dir={file}/reports"], 3,
     "verify.sh: the report could not be written (exit 3)", []),
]


@pytest.mark.parametrize("name,args,status,text,retry", RUNS, ids=[r[0] for r in RUNS])
def test_exit_status(lab, tmp_path, name, args, status, text, retry):
    (tmp_path / "file").write_text("")  # a report dir whose parent is a regular file cannot be created (even by root)
    args = [a.format(reports=tmp_path / "reports", file=tmp_path / "file") for a in args]
    if "{file}" not in " ".join(RUNS[[r[0] for r in RUNS].index(name)][1]):
        args += ["-e", "gpuprobe_report_dir=%s" % (tmp_path / "reports")]
    retry_file = tmp_path / "retry.txt"
    rc, output = _verify(["-i", str(lab / "hosts.yml")] + args + ["-e", "gpuprobe_retry_file=%s" % retry_file], tmp_path)
    assert (rc, text in output, NO_HOST_MESSAGE in output) == (status, True, False), output[-3000:]
    if status == 5:
        assert INVALID in output and "Verify the GPU layers of this node" not in output
    if retry is None:
        assert not retry_file.exists()
    else:
        assert retry_file.read_text().split() == retry


@pytest.mark.skipif(bool(glob.glob("/dev/nvidia[0-9]*")), reason="README's localhost run is the one of a machine without a GPU")
def test_a_run_on_this_machine_says_what_the_readme_says(tmp_path):
    """README.md: on a machine without a GPU, `bash scripts/verify.sh` exits 0 with no warning (issue 46: Ansible's
    "Could not match supplied host pattern" of the gate's empty group, cryptography's DSA deprecation warnings), and
    its report says the reasons the README quotes (the cdi reason quoted was not the one printed)."""
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        readme = " ".join(f.read().split())
    host = re.search(r'host `FAIL` "([^"]+?) …"', readme).group(1)
    cdi = re.search(r'cdi `FAIL` "([^"]+)"', readme).group(1)
    blocked = re.search(r'runtime and compute `NOT_RUN` "([^"]+)", verdict `(\w+)`', readme)
    rc, output = _verify(["-e", "gpuprobe_report_dir=%s" % (tmp_path / "reports")], tmp_path)
    assert rc == 0, output[-3000:]
    assert [line for line in output.splitlines() if "WARNING" in line or "Warning" in line] == []
    with open(str(tmp_path / "reports" / "gpuprobe-report-latest.json"), encoding="utf-8") as f:
        entry = _expand_report(json.load(f))["hosts"]["localhost"]
    layers = entry["layers"]
    assert layers["host"]["status"] == "FAIL" and layers["host"]["reason"].startswith(host + " ")
    assert (layers["cdi"]["status"], layers["cdi"]["reason"]) == ("FAIL", cdi)
    assert [(layers[k]["status"], layers[k]["reason"]) for k in ("runtime", "compute")] == [("NOT_RUN", blocked.group(1))] * 2
    assert entry["verdict"] == blocked.group(2)


def test_a_python_that_cannot_run_is_named_and_nothing_is_said_left(lab, tmp_path):
    """Issue 46: a node whose Python cannot run a module: the message names that interpreter and what it wrote, and
    does not say the probe container may be left on the node (no module ran there: nothing was started)."""
    python = tmp_path / "broken-python"
    python.write_text("#!/bin/sh\necho 'this python is broken' >&2\nexit 1\n")
    python.chmod(0o755)
    # the node's own interpreter, as an inventory sets it for that node (an extra var would be the controller's too:
    # the preflight's file task on localhost runs with the controller's Python)
    broken = tmp_path / "broken.yml"
    broken.write_text("all:\n  hosts:\n    cfgnode:\n      ansible_python_interpreter: %s\n" % python)
    rc, output = _verify(["-i", str(lab / "hosts.yml"), "-i", str(broken), "--limit", "cfgnode",
                          "-e", "gpuprobe_report_dir=%s" % (tmp_path / "reports")], tmp_path)
    assert rc == 2, output[-3000:]
    with open(str(tmp_path / "reports" / "gpuprobe-report-latest.json"), encoding="utf-8") as f:
        error = _expand_report(json.load(f))["hosts"]["cfgnode"]["error"]
    assert "the node's Python interpreter (%s) did not run it" % python in error and "this python is broken" in error, error
    assert "may be left" not in error
