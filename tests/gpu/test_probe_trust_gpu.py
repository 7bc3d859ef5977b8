"""A spec cannot get its own code running in the probe (issue 42), on a real GPU (the lead runs this on the GPU host:
GPUPROBE_GPU=1, scripts/gpu-e2e.sh; through containerd over the CRI and docker too under scripts/gpu-engines.sh).

The mirror of tests/integration/test_probe_trust_engines.py with the real driver instead of the lab's stand-in: the
honest self-built spec (variant full, every edit accounted for as the generators' shapes) plus, one at a time, each
of the six ways in that issue 42 saw turn a broken node into COMPUTE_VERIFIED on a GPU:

1. a ``/usr/bin/python3._pth`` naming a directory the spec also mounts;
2. an empty ``/usr/bin/Modules/Setup.local`` and a directory at ``/usr/Lib`` (a build tree's landmark and stdlib);
3. a script mounted at ``/usr/bin/python`` (the image's link to python3);
4. ``OPENSSL_CONF`` in the spec's env, or a mount over ``/usr/lib/ssl/openssl.cnf``;
5. a libnvidia-ml.so.1 that is not the driver's (the spec's NVML mount from a file of its own);
6. a ``createRuntime`` hook of its own (it would rewrite the probe's file on the host).

None is an edit NVIDIA's generators make or the site declared: cdi.trust.accounted FAILs once per added edit, naming
it; the node's gate starts no container (run_variant(gate=True)) through any engine; the verdict is FAILED_AT_CDI,
pointing at cdi. The hook's control: declared trusted by the site, it runs (podman) and rewrites the probe file, which
the runtime layer sees changed after the run: FAILED_AT_CDI cdi.inject.probe_integrity, never COMPUTE_VERIFIED.
Records and verdicts go untouched to $GPUPROBE_EVIDENCE_DIR/<engine>-trust-<row>.json (through run_variant). No
compiler needed; skips cleanly without a GPU.
"""
import os
import shutil

import pytest

from replaced_probe import REWRITE_HOOK  # tests/conftest.py puts tests/unit/fixtures/host on sys.path
from test_engines_gpu import engine  # noqa: F401 pylint: disable=unused-import
from test_runtime_compute_gpu import host_record, run_variant, trust_checks  # noqa: F401 pylint: disable=unused-import

from ansible_collections.gpuprobe.layers.plugins.module_utils._verdict.verdict import PROBE_INTEGRITY

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(os.environ.get("GPUPROBE_GPU") != "1", reason="needs a real NVIDIA GPU (GPUPROBE_GPU=1)"),
]

WORK = "/tmp/gpuprobe-trust-gpu"
RO = ["ro", "nosuid", "nodev", "bind"]
HOOK_PYTHON = "/usr/bin/python3"


def _evil(name, text="print('a verified kernel')\n", mode=0o644):
    """A file of the spec's own under WORK (outside the driver root)."""
    path = os.path.join(WORK, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, mode)
    return path


def _ro(host_path, container_path):
    return {"hostPath": host_path, "containerPath": container_path, "options": list(RO)}


def _library_dir():
    """A directory standing for a standard library of the spec's own (an encodings package that runs code)."""
    return os.path.dirname(os.path.dirname(_evil("lib/encodings/__init__.py", "import runpy\n")))


def _impostor_nvml(spec):
    """The driver's NVML, copied out of the driver root and changed (a byte appended): a file that is not the driver's,
    named as the driver names it."""
    [mount] = [m for m in spec["containerEdits"]["mounts"] if os.path.basename(m["containerPath"]) == "libnvidia-ml.so.1"]
    target = os.path.join(WORK, "nvml", os.path.basename(os.path.realpath(mount["hostPath"])))
    os.makedirs(os.path.dirname(target), exist_ok=True)
    shutil.copyfile(mount["hostPath"], target)
    with open(target, "ab") as f:
        f.write(b"\0")
    mount["hostPath"] = target
    return mount


def _hook():
    if not os.path.exists(HOOK_PYTHON):
        pytest.skip("no %s on this host for the hook" % HOOK_PYTHON)
    return {"hookName": "createRuntime", "path": HOOK_PYTHON, "args": ["python3", "-c", REWRITE_HOOK]}


# row -> what it adds to the honest spec's containerEdits: {"mounts": [...], "env": [...], "hooks": [...]}, or a
# function that changes the spec in place and returns the edits it changed
ROWS = {
    "1-python3-pth": lambda: {"mounts": [_ro(_evil("python3._pth", "/opt/evil-lib\n"), "/usr/bin/python3._pth"),
                                         _ro(_library_dir(), "/opt/evil-lib")]},
    "2-setup-local-usr-Lib": lambda: {"mounts": [_ro(_evil("Setup.local", ""), "/usr/bin/Modules/Setup.local"),
                                                 _ro(_library_dir(), "/usr/Lib")]},
    "3-script-over-usr-bin-python": lambda: {"mounts": [_ro(_evil("python", "#!/opt/evil/python3\n", 0o755), "/usr/bin/python")]},
    "4a-openssl-conf-env": lambda: {"env": ["OPENSSL_CONF=/opt/evil/openssl.cnf"]},
    "4b-openssl-cnf-mount": lambda: {"mounts": [_ro(_evil("openssl.cnf", "openssl_conf = openssl_init\n[openssl_init]\n"),
                                                    "/usr/lib/ssl/openssl.cnf")]},
    "5-nvml-not-the-drivers": lambda: _impostor_nvml,
    "6-createruntime-hook": lambda: {"hooks": [_hook()]},
}


def _named(edit, kind):
    """What a cdi.trust.accounted FAIL's observed says for ``edit`` (``_cdi.trust._describe``)."""
    if kind == "mounts":
        return "mount %s -> %s: not accounted for" % (edit["hostPath"], edit["containerPath"])
    if kind == "env":
        return "env %s: not accounted for" % edit
    return "hook %s %s " % (edit["hookName"], edit["path"])


def _apply(row):
    """(the spec edit for run_variant, [(kind, edit)] it adds) for one row."""
    made = ROWS[row]()
    added = []

    def edit(spec):
        edits = spec.setdefault("containerEdits", {})
        if callable(made):
            added.append(("mounts", made(spec)))
            return
        for kind, items in made.items():
            edits[kind] = list(edits.get(kind) or []) + items
            added.extend((kind, item) for item in items)
    return edit, added


@pytest.mark.parametrize("row", sorted(ROWS))
def test_an_edit_no_gpu_spec_makes_fails_at_cdi_and_no_container_starts(host_record, engine, row):  # noqa: F811 pylint: disable=redefined-outer-name
    edit, added = _apply(row)
    records, probe, verdict = run_variant("full", host_record, edit=edit, engine=engine, gate=True,
                                          name="%s-trust-%s" % (engine["runtime"], row))
    device = records["cdi"]["evidence"]["requested_devices"][0]
    checks = trust_checks(records["cdi"])
    fails = [c for c in checks if c["status"] == "FAIL"]
    assert added and len(fails) == len(added) and "PASS" not in [c["status"] for c in checks], checks
    assert all(c["subject"] == device for c in fails), fails
    for kind, item in added:  # each added edit named by its own FAIL
        assert any(_named(item, kind) in c["observed"] for c in fails), (_named(item, kind), fails)
    assert verdict["verdict"] != "COMPUTE_VERIFIED", verdict
    assert (verdict["verdict"], verdict["layer"], verdict["points_to"]) == ("FAILED_AT_CDI", "cdi", "cdi"), verdict
    # the gate: nothing of the spec ran, no container was created through the engine (run_variant's cleanup found none)
    assert probe is None
    for layer in ("runtime", "compute"):
        assert (records[layer]["status"], records[layer]["reason"]) == ("NOT_RUN", "blocked by cdi FAIL"), records[layer]


def test_a_declared_hook_that_rewrites_the_probe_file_is_failed_at_cdi(host_record):  # noqa: F811 pylint: disable=redefined-outer-name
    """Row 6 past the allowlist: the site declared the hook (trusted_edits), so the probe runs (podman) and the hook
    rewrites its file on the host; the runtime layer looks at the file again after the container: it changed, so
    the node is FAILED_AT_CDI cdi.inject.probe_integrity, whatever the probe said."""
    hook = _hook()

    def edit(spec):
        spec["containerEdits"]["hooks"] = [hook]

    records, probe, verdict = run_variant("full", host_record, edit=edit, name="trust-hook-declared-rewrites-probe",
                                          trusted_edits=[{"hook": HOOK_PYTHON, "why": "test: a hook the site added"}])
    trust = trust_checks(records["cdi"])
    assert [c["status"] for c in trust] == ["PASS"] and "declared trusted by the site" in trust[0]["observed"], trust
    assert probe is not None and probe["executed"], records["runtime"]["reason"]
    unchanged = [c for c in records["runtime"]["checks"] if c["id"] == "runtime.probe.unchanged"]
    assert [c["status"] for c in unchanged] == ["FAIL"] and "sha256" in unchanged[0]["observed"], unchanged
    change = records["runtime"]["evidence"]["probe_file"][0]
    assert change["written"]["sha256"] != change["after"]["sha256"], change
    assert (verdict["verdict"], verdict["layer"], verdict["signature"], verdict["points_to"]) == (
        "FAILED_AT_CDI", "cdi", PROBE_INTEGRITY, "cdi"), verdict
