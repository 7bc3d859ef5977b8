"""The compute_probe role end to end through ansible-playbook: real podman, a real CDI spec, synthetic
devices; the role returns both records and removes its container."""
import json
import subprocess
import sys

import pytest

from test_runtime_podman import (  # noqa: F401  pylint: disable=unused-import
    GPU_A, IMAGE, Lab, _podman_env, expected_gpus, idle_host, probe_image, podman_env,
)

pytestmark = pytest.mark.integration

PLAYBOOK = """
- hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - name: Run the role
      ansible.builtin.include_role:
        name: gpuprobe.layers.compute_probe
      vars:
        compute_probe_image: {image}
        compute_probe_cdi_devices: [{device}]
        compute_probe_expected_edits: {edits}
        compute_probe_run_id: {run_id}
        compute_probe_runtime: podman
        compute_probe_timeout: 60
        compute_probe_environment: {environment}
        compute_probe_host_record: {host}
        compute_probe_expected_gpus: {expected}
        compute_probe_isolation: per_device
    - name: Write the records
      ansible.builtin.copy:
        content: "{{{{ {{'runtime': compute_probe_runtime_record, 'compute': compute_probe_compute_record}} | to_json }}}}"
        dest: {out}
        mode: "0644"
"""


def test_role_returns_both_records_and_cleans_up(tmp_path, probe_image):  # noqa: F811
    lab = Lab(tmp_path / "lab")
    try:
        edits = lab.full_edits()
        lab.write_spec(edits)
        out = tmp_path / "records.json"
        env = _podman_env()
        playbook = tmp_path / "play.yml"
        playbook.write_text(PLAYBOOK.format(image=IMAGE, device=lab.device, edits=json.dumps(edits), run_id=lab.run_id,
                                            environment=json.dumps({"CONTAINERS_CONF": env.get("CONTAINERS_CONF", "")}),
                                            out=out, host=json.dumps(idle_host(GPU_A)),
                                            expected=json.dumps(expected_gpus(GPU_A))))
        env["ANSIBLE_PYTHON_INTERPRETER"] = sys.executable
        r = subprocess.run(["ansible-playbook", "-i", "localhost,", str(playbook)], env=env, capture_output=True,
                           text=True, timeout=300, check=False)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        records = json.loads(out.read_text())
        assert records["runtime"]["status"] == "PASS"
        assert records["compute"]["status"] == "FAIL"
        assert records["compute"]["signature"] == "compute.dlopen.libcuda"
        assert records["compute"]["evidence"]["container"]["executed"] is True
        assert records["compute"]["evidence"]["container"]["cdi_devices"] == [lab.device]
        assert [(r["uuid"], r["status"], r["signature"]) for r in records["compute"]["evidence"]["gpus"]] == [
            (GPU_A, "FAIL", "compute.dlopen.libcuda")]
        assert lab.leftovers() == []
    finally:
        lab.cleanup()
