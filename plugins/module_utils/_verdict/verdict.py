# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: the single node-verdict function of gpuprobe.layers (docs/contract.md, "Node verdict").

Not public API. Modules, the role, the filter plugin and the fleet report all call ``node_verdict``;
nothing else decides a verdict.
"""

from __future__ import annotations

from ansible_collections.gpuprobe.layers.plugins.module_utils._verdict.attribution import (
    because_text, container_failure, contradictions, edits_compared, edits_not_applied, explain,
    host_explains, host_outcome, image_env, image_setting, spec_edit_named, where_text,
)
from ansible_collections.gpuprobe.layers.plugins.module_utils._verdict.faithful import faithful_edits
# the verdict names live with the record contract in _result (the node side names them without this module)
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import (  # noqa: F401  # pylint: disable=unused-import
    COMPUTE_VERIFIED, FAIL, INCONCLUSIVE, LAYERS, NOT_RUN, ORDERED_LAYERS, PASS, STATUSES, VERDICTS, WARN, cdi_for_runtime,
    validate_record,
)


def compute_points_to(container_status, host_control_status):
    """Where a compute result points, from the same probe run in the container and on the host.

    container FAIL + host PASS -> "runtime" (the injection lost something the host has);
    container FAIL + host FAIL -> "host" (driver/host problem, the container is not to blame);
    container FAIL + host not run -> "compute" (cannot tell which side).
    This is what the compute record alone can say; ``node_verdict`` (``attribute``) refines it with the runtime
    and cdi records: edits applied and a cdi check explaining the signature -> "cdi".
    """
    if container_status != FAIL:
        return None
    if host_control_status == PASS:
        return "runtime"
    if host_control_status == FAIL:
        return "host"
    return "compute"


def _layer_status(records, layer):
    record = records.get(layer)
    return record["status"] if record else NOT_RUN


def _cdi_injected(compute_record):
    evidence = (compute_record or {}).get("evidence") or {}
    container = evidence.get("container") or {}
    return bool(container.get("cdi_devices")) and bool(container.get("executed"))


def _describe_gpu(row):
    parts = []
    if row.get("index") is not None:
        parts.append("GPU %s" % row["index"])
    if row.get("uuid"):
        parts.append(str(row["uuid"]))
    return " ".join(parts) or "a GPU without index or uuid"


def _gpu_rows_errors(compute_record):
    """I3 shape errors of compute.evidence.gpus (absent is not an error here; the verified gate says so)."""
    rows = ((compute_record or {}).get("evidence") or {}).get("gpus")
    if rows is None:
        return []
    if not isinstance(rows, list):
        return ["evidence.gpus is not a list"]
    errors = []
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            errors.append("evidence.gpus[%d] is not a mapping" % i)
        elif row.get("status") not in STATUSES:
            errors.append("evidence.gpus[%d] has unknown status %r" % (i, row.get("status")))
        elif not isinstance(row.get("expected"), bool):
            errors.append("evidence.gpus[%d] has no boolean 'expected'" % i)
    return errors


def record_errors(layer, record):
    """Contract violations of the record given for ``layer`` (``_result.validate_record`` plus the checks
    the verdict relies on)."""
    errors = validate_record(record)
    if errors:
        return errors
    if record["layer"] != layer:
        errors.append("given as the %s record but its layer is %r" % (layer, record["layer"]))
    if layer == "compute":
        errors += _gpu_rows_errors(record)
    if layer == "runtime" and record["status"] == PASS and not edits_compared(record):
        errors.append("runtime PASS without any CDI edit compared")
    return errors


def malformed_records(records):
    """{layer: [errors]} for every record of ``records`` that breaks the contract."""
    out = {}
    for layer in sorted(records, key=lambda name: (LAYERS.index(name) if name in LAYERS else len(LAYERS), str(name))):
        if layer not in LAYERS:
            out[str(layer)] = ["unknown layer name %r" % (layer,)]
            continue
        errors = record_errors(layer, records[layer])
        if errors:
            out[layer] = errors
    return out


def _verdict(verdict, reason, layer=None, signature=None, points_to=None, because=None, gpus=None):
    return {"verdict": verdict, "layer": layer, "signature": signature, "points_to": points_to, "reason": reason,
            "because": list(because or []), "gpus": list(gpus or [])}


def _short(reason):
    # the compute record's reason carries the signature's generic hint; the verdict gives the cause instead
    return (reason or "").split("; hint: ")[0]


def _runtime_cause(records, signature, own):
    """Where a runtime FAIL points: a cdi check explaining its signature, else a spec edit the runtime executed as
    written (``faithful_edits``: the runtime did its job, the spec is the cause), else the record's own."""
    because = explain(signature, records.get("cdi"))
    if because:
        return "cdi", because, "a cdi check explains %s" % signature
    faithful = faithful_edits(records)
    if faithful:
        return "cdi", [], "the runtime did what the spec said: %s; the runtime said: %s" % (
            ", ".join(sorted(set(f["edit"] for f in faithful))), faithful[0]["words"])
    if own == "image":
        settings = image_env(records)
        return own, [], "the image, not the spec, put that file first%s" % (
            " (the image sets %s)" % ", ".join(settings) if settings else "")
    return own, [], None


def attribute(records, layer):  # pylint: disable=too-many-return-statements
    """Where the FAIL of ``layer`` points, from the cause (docs/contract.md, "Node verdict": points_to).

    Returns (points_to, because, why). ``because`` lists the cdi checks that explain the signature
    (``_attribution.explain``; a check whose predicted step PASSed in the container is left out); ``why`` is a
    sentence for the reason (None when the record's own ``points_to`` stands).
    - runtime FAIL: a cdi check explains the signature, or the failure is the faithful execution of a spec edit
      (``faithful_edits``) -> cdi; else the record's own points_to;
    - compute FAIL: the host control (for the GPU that failed, when it reports per GPU) failed the same way at
      the same step or earlier -> host; host control PASS and an edit not applied -> runtime; edits applied and
      a cdi check explains the signature, or one spec edit does (``spec_edit_named``) -> cdi; a setting of the
      image does (``image_setting``) -> image; a host control that failed differently -> compute (neither side
      is shown); edits applied, host control PASS and nothing explains it -> compute (never the spec by
      elimination); else the record's own points_to.
    """
    record = records[layer]
    signature = record.get("signature")
    own = record.get("points_to") or layer
    if layer == "runtime":
        return _runtime_cause(records, signature, own)
    if layer != "compute":
        return own, [], None
    failure = container_failure(record)
    host = host_outcome(record, failure["uuid"])
    if host_explains(failure, host):
        return "host", [], "the same probe fails on the host too (%s)" % where_text(host)
    contradicted = set(c["check"] for c in contradictions(records.get("cdi"), record))
    because = [b for b in explain(signature, records.get("cdi")) if b["check"] not in contradicted]
    runtime = records.get("runtime")
    compared = edits_compared(runtime) if runtime and runtime.get("status") in (PASS, WARN) else []
    missing = edits_not_applied(runtime, signature) if compared else []
    if not compared:
        # no edit was compared in a container (no runtime record, or the runtime did not run the probe): nothing
        # shows that the runtime lost an edit, so it is never named by default
        if because:
            return "cdi", because, "no runtime evidence compares the spec's edits, and a cdi check explains %s" % signature
        if own == "runtime":
            return "compute", [], "no runtime evidence compares the spec's edits with the container: neither the " \
                                  "runtime nor the spec is shown to be the cause of %s" % where_text(failure)
    if host["status"] == PASS and missing:
        if because and all(c["status"] == WARN for c in missing):
            # an edit the runtime applied differently (a WARN) does not outweigh a cdi check that explains the failure
            return "cdi", because, "a cdi check explains %s (the runtime's %s is a WARN, not the cause)" % (
                signature, ", ".join("%s %s" % (c["id"], c.get("subject") or "") for c in missing))
        return "runtime", [], "the runtime did not apply %s" % ", ".join(
            "%s %s" % (c["id"], c.get("subject") or "") for c in missing)
    if compared and not missing:
        applied = "the runtime applied every spec edit (%d compared)" % len(compared)
        if because:
            return "cdi", because, "%s%s, so the spec is the cause" % (
                applied, " and the host control passes" if host["status"] == PASS else "")
        edit = spec_edit_named(records, failure)
        if edit:
            return "cdi", [], "%s and the spec's %s explains %s (%s)" % (
                applied, edit["edit"], where_text(failure), edit["words"])
        image = image_setting(records, failure)
        if image:
            return "image", [], "%s; %s" % (applied, image)
    if host["status"] == FAIL:
        return "compute", [], "the host control failed differently (%s) than the container (%s): neither side is " \
                              "shown to be the cause" % (where_text(host), where_text(failure))
    if compared and not missing and host["status"] == PASS:
        # not the runtime (it applied every edit), not the spec nor the image (nothing of theirs explains it)
        return "compute", [], "the runtime applied every spec edit (%d compared) and the host control passes, but no " \
                              "spec edit or image setting explains %s" % (len(compared), where_text(failure))
    return own, [], None


def _failed(records, layer):
    record = records[layer]
    signature = record.get("signature") or "%s.failed" % layer
    points_to, because, why = attribute(records, layer)
    reason = record.get("reason")
    if why:
        base = _short(reason)
        head, _sep, tail = base.partition(": ")
        if tail and tail in why:  # the runtime's words, quoted by the why: once is enough
            base = head
        reason = "%s; points to %s: %s" % (base, points_to, why)
        if because:
            reason += "; because %s" % "; ".join(because_text(b) for b in because)
    return _verdict("FAILED_AT_" + layer.upper(), reason, layer, signature, points_to, because, _gpu_rows(records))


def _gpu_rows(records):
    rows = ((records.get("compute") or {}).get("evidence") or {}).get("gpus")
    return rows if isinstance(rows, list) else []


def _unverified_gpus(rows):
    """Why per-GPU rows do not prove the node (None when they do)."""
    if not rows:
        return "compute record has no per-GPU rows"
    expected = [r for r in rows if r.get("expected")]
    not_run = [r for r in expected if r.get("status") == NOT_RUN]
    if not_run:
        return "; ".join("%s not run: %s" % (_describe_gpu(r), r.get("reason") or "no reason") for r in not_run)
    other = [r for r in expected if r.get("status") != PASS]
    if other:
        return "; ".join("%s %s: %s" % (_describe_gpu(r), r.get("status"), r.get("reason") or r.get("signature"))
                         for r in other)
    if not any(r.get("status") == PASS for r in rows):
        return "no GPU row PASSed"
    return None


def _uncovered_identity(records, rows):
    """The GPUs the cdi layer's identity map expects (evidence.identity.expected_gpus) that no PASS row proves:
    the compute record may have been built without them (expected_gpus empty: 'every GPU seen is expected')."""
    identity = (((records.get("cdi") or {}).get("evidence") or {}).get("identity") or {})
    proven = set(str(r.get("uuid") or "").lower() for r in rows or [] if r.get("status") == PASS and r.get("uuid"))
    missing = []
    for gpu in identity.get("expected_gpus") or []:
        key = gpu.get("mig_uuid") or gpu.get("uuid")
        if not key:
            missing.append("GPU minor %s (its UUID is unknown, so no row can prove it)" % gpu.get("minor"))
        elif str(key).lower() not in proven:
            missing.append("%s (index %s)" % (key, gpu.get("index")))
    return "the cdi layer expects GPUs no compute row proved: %s" % ", ".join(missing) if missing else None


def _runtime_unproven(records):
    """Why the runtime record does not prove the injection (no CDI edit compared), or None."""
    runtime = records.get("runtime")
    if runtime and not edits_compared(runtime):
        return "runtime: no CDI edit was compared in the container (only its start is proven)"
    return None


BINDING_CHECK = "compute.driver.binding"
# the runtime layer's look at the probe file after the container (_runtime.probe_file), and the verdict's signature
# when it changed
PROBE_FILE_CHECK = "runtime.probe.unchanged"
PROBE_INTEGRITY = "cdi.inject.probe_integrity"


def _cdi_unproven(records):
    """Why the cdi layer does not back a verification (no record, or it did not run), or None: without it
    nothing says which GPUs the requested devices give, nor what the spec asked the runtime to do."""
    cdi = records.get("cdi")
    if cdi is None:
        return "cdi: no record (the spec the container got was not checked: no identity map, no edits to compare)"
    if cdi.get("status") == NOT_RUN:
        return "cdi: not run (%s)" % (cdi.get("reason") or "no reason")
    return None


TRUST_CHECK = "cdi.trust.accounted"


def _trust_unproven(records):
    """Why the spec's edits are not all accounted for (``_cdi.trust``), or None: every requested device of the cdi
    record needs its cdi.trust.accounted PASS; a record without it (an older collection, a record made by hand) is
    not taken on its word."""
    cdi = records.get("cdi") or {}
    requested = ((cdi.get("evidence") or {}).get("requested_devices")) or []
    passed = set(c.get("subject") for c in cdi.get("checks") or [] if c.get("id") == TRUST_CHECK and c.get("status") == PASS)
    missing = [d for d in requested if d not in passed]
    if not requested or missing:
        return "cdi: %s did not PASS for %s: the spec's edits are not all accounted for, so the probe cannot vouch" % (
            TRUST_CHECK, ", ".join(missing) or "any requested device")
    return None


def declared_trust(records):
    """The edits a verification rests on because the site declared them trusted (cdi evidence.trust), [] when none."""
    trust = (((records.get("cdi") or {}).get("evidence") or {}).get("trust")) or {}
    devices = trust.get("devices") if isinstance(trust, dict) else None
    out = []
    for rows in devices.values() if isinstance(devices, dict) else []:
        for row in rows if isinstance(rows, list) else []:
            if isinstance(row, dict) and row.get("by") == "declared" and row.get("edit") not in out:
                out.append(row.get("edit"))
    return out


def _container_runs(compute):
    containers = ((compute or {}).get("evidence") or {}).get("containers")
    if isinstance(containers, list):
        return max(1, len([c for c in containers if isinstance(c, dict) and c.get("executed")]))
    return 1


def _binding_unproven(compute):
    """Why the container's CUDA driver is not shown to be the host's (compute.driver.binding absent, not PASS,
    or not run for every container), or None."""
    checks = [c for c in (compute or {}).get("checks") or [] if c.get("id") == BINDING_CHECK]
    if not checks:
        return "%s absent: the container's CUDA driver was not shown to be the host's" % BINDING_CHECK
    bad = [c for c in checks if c.get("status") != PASS]
    if bad:
        return "; ".join("%s %s%s: %s" % (BINDING_CHECK, c["status"], " %s" % c["subject"] if c.get("subject") else "",
                                          c.get("observed") or "no observation") for c in bad)
    runs = _container_runs(compute)
    if len(checks) < runs:
        return "%s PASSed for %d of %d container runs" % (BINDING_CHECK, len(checks), runs)
    return None


def _binding_evidence_unproven(records):
    """Why the binding evidence behind the checks (compute evidence.driver_binding) does not bind every container run
    to the driver of the host record given here, or None. The checks are not taken on their word: each run proven
    carries the digest of the driver root's libcuda and NVML's CUDA driver version, one run per executed container,
    and the host facts the binding was computed against are the host record's (driver and CUDA driver version)."""
    compute = records.get("compute") or {}
    binding = (compute.get("evidence") or {}).get("driver_binding")
    if not isinstance(binding, dict):
        return "%s: no evidence.driver_binding behind the check" % BINDING_CHECK
    host = binding.get("host") if isinstance(binding.get("host"), dict) else {}
    sha = (host.get("libcuda") or {}).get("sha256") if isinstance(host.get("libcuda"), dict) else None
    api = host.get("cuda_driver_api")
    if not sha or api is None:
        return "%s: the host side of the binding (driver root libcuda digest, CUDA driver version) is unknown" % BINDING_CHECK
    proven = set()
    for run in binding.get("runs") or []:
        if not isinstance(run, dict) or run.get("status") != PASS:
            continue
        lib = run.get("libcuda") if isinstance(run.get("libcuda"), dict) else {}
        if lib.get("sha256") != sha or run.get("cuda_driver_api") != api:
            return "%s: the run %s does not carry the host's libcuda digest and CUDA driver version" % (
                BINDING_CHECK, run.get("where"))
        foreign = _libraries_unproven(run, host, sha)
        if foreign:
            return "%s: the run %s %s" % (BINDING_CHECK, run.get("where"), foreign)
        proven.add(run.get("where"))
    needed = _container_runs(compute)
    if len(proven) < needed:
        return "%s: the evidence proves %d of %d container runs" % (BINDING_CHECK, len(proven), needed)
    nvml = (((records.get("host") or {}).get("evidence") or {}).get("nvml")) or {}
    given = (nvml.get("driver_version"), nvml.get("cuda_driver_version_int"))
    bound = (host.get("driver_version"), api)
    if given != bound:
        return "%s: the host record given (driver %s, CUDA driver %s) is not the host the binding was computed " \
               "against (driver %s, CUDA driver %s)" % ((BINDING_CHECK,) + given + bound)
    return None


def _libraries_unproven(run, host, libcuda_sha):
    """Why a binding run does not show every driver library its probe mapped to be the driver root's file (the digest
    of each equal to the host side's digest of that file, kept in the binding's host.libraries, libcuda's among them),
    or None."""
    rows = run.get("libraries")
    if not isinstance(rows, list) or not rows:
        return "carries no report of the driver libraries mapped in the probe (mapped_libraries)"
    known = host.get("libraries") if isinstance(host.get("libraries"), dict) else {}
    for row in rows:
        row = row if isinstance(row, dict) else {}
        want = (known.get(row.get("host_name")) or {}).get("sha256") if isinstance(known.get(row.get("host_name")), dict) else None
        if row.get("status") != PASS or not want or row.get("sha256") != want:
            return "does not show the mapped library %s to be the driver root's %s" % (row.get("path"), row.get("host_name"))
    if libcuda_sha not in [row.get("sha256") for row in rows]:
        return "does not list the loaded libcuda among the mapped driver libraries"
    return None


def _probe_file(records):
    """The runtime record's probe-file checks (``runtime.probe.unchanged``): (those that FAILed, why the rest do not
    show the probe unchanged or None)."""
    checks = [c for c in ((records.get("runtime") or {}).get("checks") or []) if c.get("id") == PROBE_FILE_CHECK]
    failed = [c for c in checks if c.get("status") == FAIL]
    if not checks:
        return failed, "%s absent: the probe file was not shown unchanged after the container ran" % PROBE_FILE_CHECK
    other = [c for c in checks if c.get("status") not in (PASS, FAIL)]
    return failed, "; ".join("%s %s %s: %s" % (PROBE_FILE_CHECK, c.get("status"), c.get("subject"), c.get("observed"))
                             for c in other) or None


def _probe_changed(records):
    """FAILED_AT_CDI ``cdi.inject.probe_integrity`` when the runtime layer saw the probe file (or its directory) changed
    while the container ran: what ran is not shown to be the probe, and what changes it then (a createRuntime or
    createContainer hook, run on the host) is an edit of the spec's; None otherwise."""
    failed, _why = _probe_file(records)
    if not failed:
        return None
    because = [{"check": c["id"], "status": c["status"], "subject": c.get("subject"), "observed": c.get("observed"),
                "hint": c.get("hint")} for c in failed]
    return _verdict("FAILED_AT_CDI", "%s: the probe file changed while the container ran (%s); points to cdi: a hook "
                    "run on the host while the container is created can rewrite it; because %s" % (
                        PROBE_INTEGRITY, failed[0].get("observed"), "; ".join(because_text(b) for b in because)),
                    "cdi", PROBE_INTEGRITY, "cdi", because, _gpu_rows(records))


def _host_control_fails(compute):
    host = host_outcome(compute)
    if host["status"] == FAIL:
        return "the host control FAILs (%s) beside the container's PASS: the same probe cannot run on the host, so " \
               "what answered in the container is not shown to be the host's driver" % where_text(host)
    return None


def _contradicted(records):
    found = contradictions(records.get("cdi"), records.get("compute"))
    return "; ".join("%s %s%s predicts that %s fails, yet %s PASSed in the container (what answered is not what "
                     "the spec gives)" % (c["check"], c["status"],
                                          " (%s: %s)" % (c["subject"], c["observed"]) if c["subject"] else "",
                                          c["step"], c["step"]) for c in found) or None


ENGINE_KEYS = ("name", "version", "endpoint", "path", "label", "cdi_library", "selected_because")


def runtime_identity(records):
    """The runtime a set of records speaks for: the runtime record's engine (evidence.engine), else the first engine
    the cdi layer selected (evidence.engines); dict name, version, endpoint or path, label, cdi_library,
    selected_because, handler (the runtime handler: name, source, binary, injector) (the keys known), or None when no
    record names one."""
    engine = (((records.get("runtime") or {}).get("evidence") or {}).get("engine")) or {}
    if not engine.get("name"):
        engines = (((records.get("cdi") or {}).get("evidence") or {}).get("engines")) or []
        engine = engines[0] if engines and isinstance(engines[0], dict) else {}
    if not engine.get("name"):
        return None
    out = dict((k, engine.get(k)) for k in ENGINE_KEYS if engine.get(k) is not None)
    handler = engine.get("runtime_handler")
    if isinstance(handler, dict):
        # the handler the probe ran with, its OCI runtime binary and who injected the CDI devices (_runtime.handler)
        injector = handler.get("injector")
        out["handler"] = {"name": handler.get("name"), "source": handler.get("source"), "binary": handler.get("binary"),
                          "injector": injector.get("what") if isinstance(injector, dict) else None}
    if "label" not in out:
        where = out.get("endpoint") or out.get("path")
        out["label"] = ("%s %s" % (out["name"], out.get("version") or "")).strip() + (" (%s)" % where if where else "")
    return out


def _runtime_row(name, identity, verdict):
    return {"runtime": name, "engine": identity, "verdict": verdict["verdict"], "layer": verdict["layer"],
            "signature": verdict["signature"], "points_to": verdict["points_to"], "reason": verdict["reason"]}


def node_verdict(records, runtimes=None):
    """Verdict of one node from its layer records, through one or several runtimes.

    ``runtimes`` (None: one runtime, the records' own): the per-runtime results of a run that verified through several
    runtimes, in order: [{"runtime": name, "records": {"runtime": record, "compute": record}}]; ``records`` then holds
    the node's host, cdi and k8s records (its runtime and compute records are not used). Each runtime's verdict is
    this function's one-runtime verdict (``_one_runtime``) of host, the cdi record as it speaks for that runtime
    (``cdi_for_runtime``), that runtime's runtime and compute records, and k8s. The node is COMPUTE_VERIFIED only when
    every runtime is; else the verdict is the first runtime's that is not, its reason naming the runtimes proven and
    those not. Every verdict carries ``runtime`` (the identity of the runtime it speaks for: name, version, endpoint or
    path, label, cdi_library, selected_because; None when no record names one) and ``runtimes`` (one row per runtime:
    runtime, engine, verdict, layer, signature, points_to, reason) besides the keys ``_one_runtime`` documents.
    """
    records = dict((k, v) for k, v in (records or {}).items() if v is not None)
    if not runtimes:
        verdict = _one_runtime(records)
        identity = runtime_identity(records)
        verdict["runtime"] = identity
        verdict["runtimes"] = [_runtime_row(identity["name"], identity, verdict)] if identity else []
        return verdict
    rows, verdicts = [], []
    for item in runtimes:
        name = item.get("runtime")
        own = dict(records)
        own.pop("runtime", None)
        own.pop("compute", None)
        own["cdi"] = cdi_for_runtime(records.get("cdi"), name)
        own.update(dict((k, v) for k, v in (item.get("records") or {}).items() if v is not None))
        verdict = _one_runtime(own)
        identity = runtime_identity(own) or {"name": name, "label": name}
        verdicts.append((identity, verdict))
        rows.append(_runtime_row(name, identity, verdict))
    proven = [i["label"] for i, v in verdicts if v["verdict"] == COMPUTE_VERIFIED]
    unproven = [(i, v) for i, v in verdicts if v["verdict"] != COMPUTE_VERIFIED]
    if not unproven:
        out = _verdict(COMPUTE_VERIFIED, "proven through every runtime asked for: %s" % "; ".join(
            "%s: %s" % (i["label"], v["reason"]) for i, v in verdicts), gpus=verdicts[0][1]["gpus"])
        out.update(runtime=verdicts[0][0], runtimes=rows)
        return out
    identity, first = unproven[0]
    out = dict(first)
    out["reason"] = "%s: %s; proven through: %s; not proven through: %s" % (
        identity["label"], first["reason"], ", ".join(proven) or "none",
        ", ".join("%s (%s)" % (i["label"], v["verdict"]) for i, v in unproven))
    out.update(runtime=identity, runtimes=rows)
    return out


def _one_runtime(records):
    """Verdict of one node through one runtime, from its layer records (a mapping layer -> record; a missing layer is
    NOT_RUN).

    Returns a dict: verdict, layer (the failing one or None), signature, points_to, reason, because (the
    cdi checks that explain a failure attributed to the spec: check, status, subject, observed, hint) and
    gpus (the compute record's per-GPU rows).
    - every record is validated first (``record_errors``): a malformed one makes the node INCONCLUSIVE;
    - FAILED_AT_<LAYER> for the first FAIL in order host -> cdi -> runtime -> compute, attributed from the
      cause (``attribute``); a probe file the runtime layer saw changed after the container ran
      (``runtime.probe.unchanged`` FAIL) is FAILED_AT_CDI ``cdi.inject.probe_integrity`` in the cdi's place
      (``_probe_changed``);
    - COMPUTE_VERIFIED only when compute PASSed (or WARNed) inside a container that received the GPU through
      the runtime's CDI injection, the runtime layer did not fail, every expected GPU row PASSed, the cdi layer
      ran and accounted for every edit of each requested device (cdi.trust.accounted PASS), the runtime layer saw the
      probe file unchanged after the container (``runtime.probe.unchanged`` PASS), compute.driver.binding PASSed for
      every container run (the container's driver and every driver library its probe mapped are the host's,
      ``_binding_evidence_unproven``), the host control did not FAIL, and no cdi check predicts a step to fail that
      PASSed (``PREDICTS``);
    - INCONCLUSIVE otherwise, with the reason naming what did not run or was not proven.
    """
    malformed = malformed_records(records)
    if malformed:
        return _verdict(INCONCLUSIVE, "malformed record: %s" % "; ".join(
            "%s: %s" % (layer, ", ".join(errors)) for layer, errors in malformed.items()))
    for layer in ORDERED_LAYERS:
        record = records.get(layer)
        if record and record.get("status") == FAIL:
            return _failed(records, layer)
        changed = _probe_changed(records) if layer == "cdi" else None
        if changed:
            return changed
    compute = records.get("compute")
    rows = _gpu_rows(records)
    # compute WARN still computed (a named risk: an unexpected GPU seen, the host control failing alone); the
    # per-GPU rows decide whether every expected GPU was proven
    ran = all(_layer_status(records, layer) in (PASS, WARN) for layer in ("compute", "runtime"))
    if ran and _cdi_injected(compute):
        unproven = _unverified_gpus(rows) or "; ".join(
            why for why in (_cdi_unproven(records) or _trust_unproven(records), _uncovered_identity(records, rows),
                            _runtime_unproven(records), _probe_file(records)[1],
                            _binding_unproven(compute) or _binding_evidence_unproven(records), _host_control_fails(compute),
                            _contradicted(records)) if why)
        if not unproven:
            declared = declared_trust(records)
            return _verdict(COMPUTE_VERIFIED, "a CUDA kernel ran and was verified inside a container that got the GPU "
                            "through CDI, on every expected GPU, by the host's driver (compute.driver.binding)%s" % (
                                "; rests on edits the site declared trusted (trusted_edits): %s" % "; ".join(declared)
                                if declared else ""), gpus=rows)
        return _verdict(INCONCLUSIVE, unproven, gpus=rows)
    missing = []
    for layer in ORDERED_LAYERS:
        record = records.get(layer)
        if record is None:
            missing.append("%s: no record" % layer)
        elif record.get("status") == NOT_RUN:
            missing.append("%s: %s" % (layer, record.get("reason") or "not run"))
    if not missing and not _cdi_injected(compute):
        missing.append("compute: did not run inside a CDI-injected container")
    return _verdict(INCONCLUSIVE, "; ".join(missing) or "no layer failed, but compute was not verified", gpus=rows)
