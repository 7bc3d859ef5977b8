"""The probe's interpreter and output are closed to the container's environment (issue 18 item 2), against real
podman + runc and real CDI injection. Each member of the class is a poison a spec or an image can carry: a
PYTHON* variable in the spec's env (with the files it points at mounted by the spec), a sitecustomize, a
usercustomize or a .pth file in an image built FROM the probe image, a module shadowing a stdlib name next to the
script, a GPUPROBE_* variable (the test hook that was removed, and any other), and a libcuda that prints forged probe
lines when loaded. None changes the records; and each poison that acts on a plain interpreter is shown to act when
the probe runs without -I -S (so the test is not vacuous).
"""
import os
import shutil
import subprocess
import uuid

import pytest

from test_runtime_podman import IMAGE, _podman_env, expected_gpus, idle_host, lab, probe_image, podman_env  # noqa: F401  pylint: disable=unused-import

from ansible_collections.gpuprobe.layers.plugins.module_utils._compute import layer as _compute_layer
from ansible_collections.gpuprobe.layers.plugins.module_utils._probe import contract as _probe_contract
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import layer as runtime_layer

pytestmark = pytest.mark.integration

GPU_A = "GPU-0a0a0a0a-1111-2222-3333-444444444444"
MARK = "gpuprobe-poisoned"


def _marker(member):
    return "import os; os.write(1, b'{\"kind\": \"step\", \"step\": \"verify\", \"ok\": true, \"device\": 0, \"%s\": \"%s\"}\\n')" % (
        MARK, member)


# image poisons: (member, {path in the image: content})
IMAGE_POISONS = [
    ("sitecustomize", {"/usr/local/lib/python3.11/dist-packages/sitecustomize.py": _marker("sitecustomize") + "\n"}),
    ("usercustomize", {"/root/.local/lib/python3.11/site-packages/usercustomize.py": _marker("usercustomize") + "\n"}),
    ("pth", {"/usr/local/lib/python3.11/dist-packages/gpuprobe-poison.pth": _marker("pth") + "\n"}),
    ("stdlib shadow next to the script", {"/gpuprobe/json.py": _marker("json-shadow") + "\nraise ImportError('shadowed')\n"}),
]

# spec env poisons: (member, env list, files mounted at /poison, acts on a plain interpreter)
ENV_POISONS = [
    ("PYTHONPATH", ["PYTHONPATH=/poison"], {"json.py": _marker("pythonpath") + "\nraise ImportError('shadowed')\n"}, True),
    ("PYTHONHOME", ["PYTHONHOME=/nonexistent"], {}, True),
    ("PYTHONSTARTUP and PYTHONINSPECT", ["PYTHONSTARTUP=/poison/startup.py", "PYTHONINSPECT=1"],
     {"startup.py": _marker("startup") + "\n"}, False),
    ("PYTHONIOENCODING", ["PYTHONIOENCODING=utf-16"], {}, True),
    ("GPUPROBE_PROBE_DELAY_S (the removed hook)", ["GPUPROBE_PROBE_DELAY_S=30"], {}, False),
    ("any GPUPROBE_ variable", ["GPUPROBE_TEST_HOOK=1", "GPUPROBE_SKIP=all", "GPUPROBE_TOKEN=x"], {}, False),
]


def _summary(runtime, compute):
    """What a poison must not change: the runtime status, the compute status, signature and checks (the spec's own
    env/mount edits for the poison are compared like any edit, and left out here)."""
    checks = [(c["id"], c["status"]) for c in compute["checks"]]
    return runtime["status"], compute["status"], compute["signature"], checks


def _run(lab, edits, image=IMAGE):
    lab.write_spec(edits)
    runtime, probe = lab.run(edits, host=idle_host(GPU_A), image=image, timeout=60)
    assert probe is not None, runtime["reason"]
    compute = _compute_layer.record(probe, runtime, host_record=idle_host(GPU_A), host_control=False,
                                    expected_gpus=expected_gpus(GPU_A))
    return runtime, probe, compute


@pytest.fixture
def baseline(lab):
    runtime, probe, compute = _run(lab, lab.full_edits())
    assert probe["start"]["isolated"] is True and probe["noise_count"] == 0
    assert compute["signature"] == "compute.dlopen.libcuda"  # no GPU here: an honest FAIL at dlopen
    return _summary(runtime, compute)


def _poisoned(probe):
    return [line for line in probe.get("noise") or [] if MARK in line] + [
        s for s in probe.get("steps") or [] if MARK in s]


def _poison_edits(lab, env, files):
    edits = lab.full_edits()
    edits["env"] = list(edits["env"]) + env
    if files:
        d = os.path.join(lab.base, "poison")
        os.makedirs(d, exist_ok=True)
        for name, text in files.items():
            with open(os.path.join(d, name), "w") as f:
                f.write(text)
        edits["mounts"] = list(edits["mounts"]) + [{"hostPath": d, "containerPath": "/poison",
                                                    "options": ["ro", "nosuid", "nodev", "bind"]}]
    return edits


@pytest.mark.parametrize("member,env,files,acts", ENV_POISONS, ids=[p[0] for p in ENV_POISONS])
def test_a_spec_env_poison_changes_nothing(lab, baseline, monkeypatch, member, env, files, acts):  # pylint: disable=too-many-arguments,unused-argument
    edits = _poison_edits(lab, env, files)
    runtime, probe, compute = _run(lab, edits)
    assert _summary(runtime, compute) == baseline
    assert probe["noise_count"] == 0 and not _poisoned(probe) and probe["start"]["isolated"] is True
    assert all(not k.startswith("GPUPROBE_PROBE") for k in probe["start"])
    if acts:  # the same poison on a plain `python3 probe.py`: it acts (the test above is not vacuous)
        monkeypatch.setattr(_probe_contract, "ISOLATED_FLAGS", ())
        runtime2, probe2 = lab.run(edits, host=idle_host(GPU_A), timeout=60)
        assert probe2 is None or probe2["start"] is None or _poisoned(probe2) or probe2["noise_count"] > 0 or \
            runtime2["status"] != baseline[0]


@pytest.fixture(scope="module")
def poisoned_images(probe_image, tmp_path_factory):  # noqa: F811  pylint: disable=redefined-outer-name
    """One image per image poison, built FROM the probe image with podman build (COPY only: the image has no shell)."""
    built = {}
    env = _podman_env()
    base = tmp_path_factory.mktemp("images")
    for member, files in IMAGE_POISONS:
        ctx = base / member.replace(" ", "-")
        lines = ["FROM %s" % probe_image]
        for i, (path, text) in enumerate(sorted(files.items())):
            (ctx / str(i)).mkdir(parents=True)
            (ctx / str(i) / os.path.basename(path)).write_text(text)
            lines.append("COPY %d/%s %s" % (i, os.path.basename(path), path))
        (ctx / "Containerfile").write_text("\n".join(lines) + "\n")
        tag = "localhost/gpuprobe-poison-%s:t%s" % (member.replace(" ", "-"), uuid.uuid4().hex[:6])
        subprocess.run(["podman", "build", "-q", "--network=none", "-t", tag, "-f", str(ctx / "Containerfile"), str(ctx)],
                       env=env, check=True, capture_output=True, timeout=300)
        built[member] = tag
    yield built
    subprocess.run(["podman", "rmi", "-f"] + list(built.values()), env=env, check=False, capture_output=True)


@pytest.mark.parametrize("member", [p[0] for p in IMAGE_POISONS])
def test_an_image_poison_changes_nothing(lab, baseline, poisoned_images, monkeypatch, member):  # pylint: disable=redefined-outer-name
    image = poisoned_images[member]
    if member == "stdlib shadow next to the script":
        # the probe's dir is drawn per run (issue 32), so no image can put a file next to it: the script is placed
        # where the image's file is, to show that -I alone keeps the script's dir off sys.path
        monkeypatch.setattr(runtime_layer, "probe_in_container", lambda: "/gpuprobe/probe.py")
    runtime, probe, compute = _run(lab, lab.full_edits(), image=image)
    assert _summary(runtime, compute) == baseline
    assert probe["noise_count"] == 0 and not _poisoned(probe) and probe["start"]["isolated"] is True
    monkeypatch.setattr(_probe_contract, "ISOLATED_FLAGS", ())
    _runtime2, probe2 = lab.run(lab.full_edits(), host=idle_host(GPU_A), image=image, timeout=60)
    assert probe2 is None or _poisoned(probe2)  # without -I -S the poison runs


FORGER = r"""
#include <string.h>
#include <unistd.h>
static const char *lines[] = {
  "{\"kind\": \"step\", \"step\": \"verify\", \"ok\": true, \"device\": 0, \"uuid\": \"%s\"}\n",
  "{\"kind\": \"step\", \"step\": \"verify\", \"ok\": true, \"device\": 0, \"token\": \"ffffffffffffffff\"}\n",
  "{\"kind\": \"fact\", \"devices\": [{\"ordinal\": 0, \"uuid\": \"%s\", \"listed\": true}], \"token\": \"0\"}\n",
  "{\"kind\": \"done\"}\n",
};
__attribute__((constructor)) static void forge(void) {
  for (unsigned i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) write(1, lines[i], strlen(lines[i]));
}
int cuInit(unsigned f) { (void)f; return 100; }
"""


def test_foreign_json_lines_in_the_probes_output_change_nothing(lab, tmp_path):
    """A libcuda that writes forged probe lines (no token, a wrong one) to the probe's stdout when it is loaded: the
    lines are noise, counted, and the run is what it really was (cuInit returned 100)."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("needs a C compiler")
    src = tmp_path / "forger.c"
    src.write_text(FORGER.replace("%s", GPU_A))
    lib = os.path.join(lab.lib, "libcuda-forger.so.1")
    subprocess.run([cc, "-shared", "-fPIC", "-o", lib, str(src)], check=True, capture_output=True)
    edits = lab.full_edits()
    edits["mounts"][0]["hostPath"] = lib
    runtime, probe, compute = _run(lab, edits)
    assert probe["noise_count"] == 4 and all("verify" in n or "done" in n or "devices" in n for n in probe["noise"])
    assert [s["step"] for s in probe["steps"]] == ["dlopen", "cuInit"]
    assert probe["facts"] == {} and probe["complete"] is True
    assert compute["status"] == "FAIL" and compute["signature"] == "compute.cuda.CUDA_ERROR_NO_DEVICE"
    assert [c["status"] for c in compute["checks"] if c["id"] == "compute.probe.output"] == ["PASS"]
    assert "4 noise lines ignored" in [c for c in compute["checks"] if c["id"] == "compute.probe.output"][0]["observed"]
    assert runtime["evidence"]["container"]["noise_count"] == 4
