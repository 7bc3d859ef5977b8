"""The cdi layer on the real reference GPU host (H200, driver 580.159.04 in /usr/local/nvidia).

Run there with GPUPROBE_GPU=1; skipped everywhere else. Nothing is faked: the self-built spec is written
to /var/run/cdi with a per-run name, resolved and host-checked against the real device nodes and driver
libraries, and removed again. With GPUPROBE_EVIDENCE_DIR set, the untouched records are written there
(h200-cdi.json) for docs/evidence/.
"""
import json
import os
import uuid

import pytest

from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import layer as _cdi_layer
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import spec as _cdi_spec
from ansible_collections.gpuprobe.layers.plugins.module_utils._host.layer import record as host_record
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import FAIL, NOT_RUN, PASS, validate_record

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(os.environ.get("GPUPROBE_GPU") != "1", reason="needs the GPU host (GPUPROBE_GPU=1)")]
DRIVER = os.environ.get("GPUPROBE_EXPECT_DRIVER", "580.159.04")
DRIVER_ROOT = os.environ.get("GPUPROBE_DRIVER_ROOT", "/usr/local/nvidia")
SPEC_DIR = "/var/run/cdi"
RUN = "gpu-test-%s" % uuid.uuid4().hex[:10]
RECORDS = {}


@pytest.fixture(scope="module")
def host():
    return host_record(root="/", driver_root=DRIVER_ROOT)


@pytest.fixture(scope="module", autouse=True)
def cleanup():
    yield
    for variant in ("full", "stale"):
        _cdi_spec.remove_spec(SPEC_DIR, "%s-%s" % (RUN, variant))
    left = [n for n in os.listdir(SPEC_DIR) if n.startswith("gpuprobe-%s" % RUN)] if os.path.isdir(SPEC_DIR) else []
    assert left == [], "specs left behind: %s" % left
    evidence_dir = os.environ.get("GPUPROBE_EVIDENCE_DIR")
    if evidence_dir and RECORDS:
        os.makedirs(evidence_dir, exist_ok=True)
        with open(os.path.join(evidence_dir, "h200-cdi.json"), "w") as f:
            json.dump(RECORDS, f, indent=2, sort_keys=True)
            f.write("\n")


def _layer(host, variant):
    run_id = "%s-%s" % (RUN, variant)
    spec = _cdi_spec.build_spec(run_id, variant="stale_library" if variant == "stale" else "full", host=host,
                                driver_root=DRIVER_ROOT)
    path = _cdi_spec.write_spec(spec, SPEC_DIR, run_id)
    try:
        devices = [q for q in _cdi_spec.qualified_devices(spec) if not q.endswith("=all")][:1]
        # only this run's spec: other gpuprobe specs in /var/run/cdi must not conflict with it
        record = _cdi_layer.record(spec_dirs=[SPEC_DIR], discover_runtime_dirs_=False, devices=devices, host=host)
    finally:
        _cdi_spec.remove_spec(SPEC_DIR, run_id)
    assert not os.path.exists(path)
    RECORDS[variant] = {"spec": spec, "record": record}
    return record


def test_self_built_full_spec_resolves_and_every_host_check_passes(host):
    record = _layer(host, "full")
    assert validate_record(record) == []
    assert record["status"] == PASS, (record["reason"], [c for c in record["checks"] if c["status"] != PASS])
    host_checks = [c for c in record["checks"] if c["id"].startswith("cdi.host.")]
    assert all(c["status"] == PASS for c in host_checks), [c for c in host_checks if c["status"] != PASS]
    ids = set(c["id"] for c in host_checks)
    assert {"cdi.host.device_node", "cdi.host.host_layer_match", "cdi.host.mount_source", "cdi.host.library_version"} <= ids
    assert record["versions"]["driver"] == DRIVER
    nodes = dict((n["path"], n) for n in record["evidence"]["expected_edits"]["deviceNodes"])
    assert nodes["/dev/nvidiactl"]["major"] == 195 and nodes["/dev/nvidiactl"]["minor"] == 255
    assert all(n["type"] == "c" for n in nodes.values())
    assert all(c["status"] != NOT_RUN for c in host_checks)
    # every edit accounted for as NVIDIA's generators write it (the self-built spec's shapes), none on the site's word
    trust = [c for c in record["checks"] if c["id"] == "cdi.trust.accounted"]
    assert [c["status"] for c in trust] == [PASS] and "declared" not in trust[0]["observed"], trust
    rows = [r for rows in record["evidence"]["trust"]["devices"].values() for r in rows]
    assert rows and all(r["by"] == "generators" for r in rows), [r for r in rows if r["by"] != "generators"]


def test_stale_library_variant_fails_as_stale(host):
    record = _layer(host, "stale")
    assert record["status"] == FAIL and record["signature"] == "cdi.host.library_version", record["reason"]
    stale = [c for c in record["checks"] if c["id"] == "cdi.host.library_version" and c["status"] == FAIL]
    assert stale and "stale spec" in stale[0]["hint"] and DRIVER in stale[0]["expected"]
    # the stale file does not exist: no file of the driver either, a FAIL of the allowlist after the host check
    unaccounted = [c for c in record["checks"] if c["id"] == "cdi.trust.accounted" and c["status"] == FAIL]
    assert len(unaccounted) == 1 and "cannot be read" in unaccounted[0]["observed"], unaccounted
