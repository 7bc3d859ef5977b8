"""The spec did it, the runtime is blamed (issue 32): one rule over (edit, observed object, where the failure sits).

When the runtime applied an edit as asked (its checks of that edit PASSed; for a device node, the outcome is the one
the edit's cgroup permissions or numbers ask for) and the failure sits at what that edit made, the verdict points at
the spec (cdi), naming the edit and quoting the runtime's or the loader's words. An edit not applied, or applied
differently, stays the runtime's. Members: nodes whose permissions lack r or w (EPERM/EACCES), a node with numbers
other than the host's (ENXIO), a libcuda the loader cannot find where the spec put it, a library it cannot map (a
noexec mount), the PTX JIT compiler CUDA cannot use as the spec mounted it.
"""
import pytest

from test__verdict_truth import JIT, records_of  # noqa: F401 pylint: disable=unused-import
from verdictlab import PTX_IN_CONTAINER, node  # noqa: F401 pylint: disable=unused-import

from ansible_collections.gpuprobe.layers.plugins.module_utils._verdict import faithful as _faithful
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import FAIL, PASS, WARN, LayerBuilder
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime.catalogue import CHECKS as RUNTIME_CHECKS
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime.compare import compare_mounts
from ansible_collections.gpuprobe.layers.plugins.module_utils._verdict.verdict import node_verdict

GPU = "/dev/nvidia0"
LIB = "/opt/gpu/libcuda.so.1"


def _edits(permissions=None, major=195, minor=0, libcuda=LIB, options=("ro", "nosuid", "nodev", "bind")):
    node_ = {"path": GPU, "type": "c", "major": major, "minor": minor}
    if permissions is not None:
        node_["permissions"] = permissions
    return {"env": [], "hooks": [], "deviceNodes": [node_, {"path": "/dev/nvidiactl", "permissions": "rwm"}],
            "mounts": [{"hostPath": "/usr/local/nvidia/lib64/libcuda.so.580.159.04", "containerPath": libcuda,
                        "options": list(options)}]}


def _runtime(edits, fails, present=PASS, type_=PASS, mount=PASS, source=PASS, library=None):
    """A runtime record of a container that ran: the edit checks as given, then the failing checks ``fails``
    ([(check id, subject, observed)]); ``library``: the loader's result for libcuda.so.1."""
    b = LayerBuilder("runtime", RUNTIME_CHECKS)
    b.evidence = {"requested_devices": ["nvidia.com/gpu=0"], "expected_edits": edits,
                  "observed": {"libraries": {"libcuda.so.1": library or {"ok": True}}}}
    b.add("runtime.container.started", PASS, "gpuprobe-x", observed="started")
    for n in edits["deviceNodes"]:
        b.add("runtime.device_node.present", present if n["path"] == GPU else PASS, n["path"], observed="char 195:0")
        b.add("runtime.device_node.type", type_ if n["path"] == GPU else PASS, n["path"], observed="char 195:0")
    for m in edits["mounts"]:
        b.add("runtime.mount.present", mount, m["containerPath"], observed="overlay")
        if mount == PASS:
            b.add("runtime.mount.source", source, m["containerPath"], observed="libcuda.so.580.159.04 (ro)")
    for check_id, subject, observed in fails:
        b.add(check_id, FAIL, subject, observed=observed)
    first = next(c for c in b.checks if c["status"] == FAIL)
    signature = first["id"]
    if first["id"] == "runtime.device_node.open":
        signature = "runtime.device_node.open.%s" % observed.split(" ")[0]
    return b.build(signature=signature, points_to="runtime")


def _open(errno):
    return [("runtime.device_node.open", GPU, "%s (Operation not permitted) as uid 0, mode 0666, cgroup permissions x" % errno)]


# ---------------------------------------------------------------------------------------------------
# device nodes: the driver opens them O_RDWR; the outcome the permissions ask for is the spec's

@pytest.mark.parametrize("permissions,errno,points_to", [
    ("r", "EPERM", "cdi"),       # no w (the rule of the last pass, still)
    ("rm", "EPERM", "cdi"),
    ("w", "EPERM", "cdi"),       # no r: the member the last pass missed
    ("wm", "EPERM", "cdi"),
    ("m", "EPERM", "cdi"),
    ("", "EPERM", "cdi"),        # permissions "none"
    ("w", "EACCES", "cdi"),
    ("rw", "EPERM", "runtime"),  # the spec granted what open() needs: a denial is the runtime's
    ("rwm", "EPERM", "runtime"),
    (None, "EPERM", "runtime"),  # no permissions field: rwm
    ("w", "ENODEV", "runtime"),  # not a denial: the permissions do not explain it
])
def test_a_node_whose_permissions_deny_open_is_the_spec_s(permissions, errno, points_to):
    edits = _edits(permissions)
    v = node_verdict({"runtime": _runtime(edits, _open(errno))})
    assert (v["verdict"], v["points_to"]) == ("FAILED_AT_RUNTIME", points_to), v["reason"]
    if points_to == "cdi":
        assert "the runtime did what the spec said: deviceNode %s%s; the runtime said: open(O_RDWR) %s" % (
            GPU, " permissions %s" % permissions if permissions else "", errno) in v["reason"]


@pytest.mark.parametrize("present,type_", [(FAIL, PASS), (PASS, FAIL)])
def test_a_node_not_made_as_asked_stays_the_runtime_s(present, type_):
    v = node_verdict({"runtime": _runtime(_edits("w"), _open("EPERM"), present=present, type_=type_)})
    assert v["points_to"] == "runtime", v["reason"]


@pytest.mark.parametrize("declared,points_to", [((195, 7), "cdi"), ((195, 0), "runtime")])
def test_a_node_the_spec_numbers_otherwise_than_the_host_s_is_the_spec_s(declared, points_to):
    """The runtime made the node with the spec's numbers (its type check compares them and PASSes): another device
    than the host node's, which the driver does not have (ENXIO); the same numbers and ENXIO say nothing of the spec."""
    edits = _edits("rwm", *declared)
    cdi = LayerBuilder("cdi")
    cdi.add("cdi.host.device_node", PASS, GPU)
    cdi.evidence = {"expected_edits": edits, "device_nodes_host": {GPU: {"type": "c", "major": 195, "minor": 0}}}
    runtime = _runtime(edits, [("runtime.device_node.open", GPU, "ENXIO (No such device or address) as uid 0")])
    v = node_verdict({"cdi": cdi.build(), "runtime": runtime})
    assert v["points_to"] == points_to, v["reason"]
    if points_to == "cdi":
        assert "deviceNode %s permissions rwm; the runtime said: open(O_RDWR) ENXIO" % GPU in v["reason"]


# ---------------------------------------------------------------------------------------------------
# libraries: the loader's words name what the mount made, or the name it gives

NOT_FOUND = "libcuda.so.1: cannot open shared object file: No such file or directory"
NOEXEC = "%s: failed to map segment from shared object"


def _loader(error):
    return [("runtime.loader.libcuda", "libcuda.so.1", "not resolved to the mounted file; the loader said: %s" % error)]


@pytest.mark.parametrize("libcuda,error", [
    (LIB, NOT_FOUND),                                                           # mounted where the loader does not look
    ("/usr/local/nvidia/lib64/libcuda.so.1", NOT_FOUND),
    ("/lib/x86_64-linux-gnu/libcuda.so.1", NOEXEC % "/usr/lib/x86_64-linux-gnu/libcuda.so.1"),  # noexec, merged /usr
    (LIB, NOEXEC % LIB),
    (LIB, NOEXEC % "libcuda.so.1"),                                             # podman 4.3.1 + runc: the name alone
])
def test_a_library_the_loader_cannot_use_where_or_as_the_spec_mounted_it_is_the_spec_s(libcuda, error):
    edits = _edits(libcuda=libcuda, options=("ro", "nosuid", "nodev", "bind", "noexec") if "map" in error else ("ro", "bind"))
    runtime = _runtime(edits, _loader(error), library={"ok": False, "error": error})
    v = node_verdict({"runtime": runtime})
    assert (v["verdict"], v["signature"], v["points_to"]) == ("FAILED_AT_RUNTIME", "runtime.loader.libcuda", "cdi"), v["reason"]
    assert "the runtime did what the spec said: mount /usr/local/nvidia/lib64/libcuda.so.580.159.04 -> %s; the runtime " \
           "said: %s" % (libcuda, error) in v["reason"]


@pytest.mark.parametrize("mount,source", [(FAIL, None), (PASS, WARN)])
def test_a_library_mount_not_made_as_asked_stays_the_runtime_s(mount, source):
    """Not mounted, or mounted otherwise (a runtime that made it noexec against the spec: runtime.mount.source WARN)."""
    runtime = _runtime(_edits(), _loader(NOT_FOUND), mount=mount, source=source or PASS, library={"ok": False, "error": NOT_FOUND})
    assert node_verdict({"runtime": runtime})["points_to"] == "runtime"


def test_the_rule_reads_sites_edits_and_outcomes_not_messages():
    edits = _edits("w")
    records = {"runtime": _runtime(edits, _open("EPERM"))}
    sites = _faithful.failure_sites(records)
    assert [(s["kind"], s["at"], s["how"]) for s in sites] == [("node", GPU, "EPERM")]
    assert [e["path"] for _k, e in _faithful.edits_at(sites[0], edits)] == [GPU]
    assert _faithful.as_asked(records, "deviceNodes", edits["deviceNodes"][0], sites[0]).startswith("cgroup permissions w")


# ---------------------------------------------------------------------------------------------------
# compute failures that sit at a library the spec mounted (records from the layers' own code, verdictlab)

def test_a_jit_failure_with_the_spec_s_jit_mount_applied_names_that_mount(node):  # noqa: F811 pylint: disable=redefined-outer-name
    """CUDA loads the PTX JIT compiler by the name the spec's mount gives it: the mount was applied as asked and the
    JIT compiler is what failed, so the spec is the cause (before: "no spec edit explains it", compute)."""
    records = records_of(node, fail=JIT)
    v = node_verdict(records)
    assert (v["verdict"], v["points_to"]) == ("FAILED_AT_COMPUTE", "cdi"), v["reason"]
    assert "-> %s explains compute.cuda.CUDA_ERROR_JIT_COMPILER_NOT_FOUND at cuModuleLoadData" % (
        node.inside(PTX_IN_CONTAINER)) in v["reason"]
    assert "CUDA loads libnvidia-ptxjitcompiler.so.1 by that name" in v["reason"]


def test_a_jit_failure_whose_jit_mount_was_applied_otherwise_is_the_runtime_s(node):  # noqa: F811 pylint: disable=redefined-outer-name
    """The runtime mounted the JIT compiler otherwise than asked (runtime.mount.source WARN: noexec against the spec)."""
    records = records_of(node, fail=JIT)
    for c in records["runtime"]["checks"]:
        if c["id"] == "runtime.mount.source" and c["subject"].endswith("libnvidia-ptxjitcompiler.so.1"):
            c.update(status=WARN, observed="mounted noexec, spec asks exec")
    records["runtime"].update(status=WARN, reason="runtime.mount.source: mounted noexec, spec asks exec")
    v = node_verdict(records)
    assert (v["verdict"], v["points_to"]) == ("FAILED_AT_COMPUTE", "runtime"), v["reason"]
    assert "the runtime did not apply runtime.mount.source" in v["reason"]


@pytest.mark.parametrize("asked,observed,status", [
    (["ro", "bind", "noexec"], ["ro", "nosuid", "noexec"], PASS),    # noexec as asked: the rule may name the spec
    (["ro", "bind"], ["ro", "nosuid", "noexec"], WARN),             # the runtime made it noexec: not as asked
    (["ro", "bind", "noexec"], ["ro", "nosuid"], WARN),             # asked noexec, got exec: applied differently
    (["ro", "bind"], ["ro", "nosuid"], PASS),
])
def test_the_runtime_layer_compares_a_mount_s_noexec_with_the_spec(asked, observed, status):
    """Whether a library can be mapped is decided by noexec: a mount made otherwise than asked is not the spec's."""
    b = LayerBuilder("runtime", RUNTIME_CHECKS)
    compare_mounts(b, [{"hostPath": "/nonexistent/x/libcuda.so.1", "containerPath": "/usr/lib/libcuda.so.1", "options": asked}],
                   [{"mount_point": "/usr/lib/libcuda.so.1", "root": "/usr/local/nvidia/lib64/libcuda.so.1",
                     "fstype": "ext4", "options": observed}])
    assert [c["status"] for c in b.checks if c["id"] == "runtime.mount.source"] == [status]
