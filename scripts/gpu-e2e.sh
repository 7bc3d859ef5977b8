#!/usr/bin/env bash
# The project's GPU end-to-end command, for the offline GPU host described in docs/lab.md, once the bundle of
# podman/runc and wheels built on a connected machine is set up there:  bash scripts/gpu-e2e.sh OUTDIR
# Builds and installs the collection from this tree, then runs, each step continuing after a failure:
#   1. host_facts through ansible (local connection)           -> OUTDIR/evidence/h200-host.json
#   2. cdi: self-built spec + cdi_facts, and the stale variant -> OUTDIR/evidence/h200-cdi.json
#      (both by tests/gpu/evidence-host-cdi.yml)
#   3. pytest tests/gpu (host, cdi, runtime+compute over the self-built spec variants; records as JSON)
#   4. playbooks/verify-gpu.yml (full, self-built spec)       -> OUTDIR/evidence/reports/
#   5. playbooks/fault-drills.yml                              -> OUTDIR/evidence/drills/
#   6. benchmarks/bench_gpu.py                                 -> OUTDIR/evidence/bench-gpu.json
#   7. benchmarks/bench_node.py --gpu --cold --timings: verify-gpu full/audit against the bare probe + one no-op module
#      (after a warm-up round, not counted: the payload cache built; each round's pair ratios, their spread, the load),
#      warm and cold controller cache, per-task times, and against an earlier commit's collection when
#      .build/baseline holds one (git archive)                -> OUTDIR/evidence/bench-node.json
#   8. benchmarks/bench_payload.py: what each node-side module ships and what building its payload costs, against
#      .build/baseline too                                    -> OUTDIR/evidence/bench-payload.json
#   9. benchmarks/bench_node_call.py --mode full: the node_verify call alone, with and without its bytecode and the
#      host control, next to ping's; import times and a profile     -> OUTDIR/evidence/node-call/
# and packs OUTDIR/evidence into OUTDIR/evidence.tgz. Exit status: the number of failed steps.
# Options after OUTDIR: --bench-only runs the set-up and steps 7-9 only; --no-bench skips steps 6-9 (a run that
# verifies behaviour on the GPU and leaves the figures to another); --compile-controller first byte-compiles the
# controller's Python packages (ansible-core, the installed collection) as a pip install does by default: the lab
# bundle installs its wheels with --no-compile into a directory where no bytecode is written, so without it every
# ansible command there compiles ansible-core from source (about a second) and Ansible's floor (ping) is inflated.
# Everything it creates (specs under /var/run/cdi, probe containers) is removed by the steps themselves.
set -uo pipefail
out=${1:?usage: gpu-e2e.sh OUTDIR [--bench-only] [--compile-controller]}
shift
bench_only=false; compile_controller=false; no_bench=false
for opt in "$@"; do
  case $opt in --bench-only) bench_only=true ;; --compile-controller) compile_controller=true ;; --no-bench) no_bench=true ;;
    *) echo "gpu-e2e.sh: unknown option $opt" >&2; exit 64 ;; esac
done
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo" || exit 1
mkdir -p "$out/evidence"
ev=$out/evidence
log=$out/gpu-e2e.log
failed=0
# shellcheck source=scripts/step.sh
. "$repo/scripts/step.sh"

col=/tmp/gpuprobe-e2e/collections
rm -rf /tmp/gpuprobe-e2e && mkdir -p /tmp/gpuprobe-e2e/dist "$col"
step build ansible-galaxy collection build --force --output-path /tmp/gpuprobe-e2e/dist .
export ANSIBLE_COLLECTIONS_PATH=$col
step install bash -c "ansible-galaxy collection install --force -p $col /tmp/gpuprobe-e2e/dist/gpuprobe-layers-*.tar.gz"
export ANSIBLE_CALLBACKS_ENABLED=gpuprobe.layers.gpuprobe_summary
export PYTHONPATH=$col${PYTHONPATH:+:$PYTHONPATH}
py=$(command -v python3)
# the project's own probe image, built here from the host's python3 (no registry)
export GPUPROBE_PROBE_IMAGE=localhost/gpuprobe-probe:local
step probe-image bash scripts/build-probe-image.sh "$GPUPROBE_PROBE_IMAGE" --force
stub=""
for c in /usr/local/cuda*/lib64/stubs/libcuda.so /usr/local/cuda*/targets/x86_64-linux/lib/stubs/libcuda.so; do
  [ -e "$c" ] && { stub=$c; break; }
done
{ echo "host: $(uname -r)"; ls -la /usr/lib/libcuda* /lib/libcuda* 2>&1; echo "stub: $stub"; podman --version; runc --version | head -1; } >>"$log" 2>&1
if $compile_controller; then
  site=$("$py" -c 'import ansible, os; print(os.path.dirname(os.path.dirname(ansible.__file__)))')
  step compile-controller "$py" -m compileall -q -j 0 "$site" "$col"
fi
if ! $bench_only; then

# 1-2. the host layer (driver root detected), then the cdi layer on a self-built spec and its stale variant;
#      the playbook writes the modules' results as returned to h200-host.json and h200-cdi.json
step host-cdi ansible-playbook -i "localhost," -c local -e ansible_python_interpreter="$py" \
  tests/gpu/evidence-host-cdi.yml -e evidence_dir="$ev"

# 3. the GPU tests (host, cdi, runtime + compute over the self-built spec variants)
#    (GPUPROBE_DCGM_DIAG=1: dcgmi diag -r 1 where DCGM is installed and the GPU idle, else NOT_RUN saying why)
step pytest-gpu env GPUPROBE_GPU=1 GPUPROBE_EVIDENCE_DIR="$ev/variants" GPUPROBE_STUB_LIBCUDA="$stub" GPUPROBE_DCGM_DIAG=1 \
  "$py" -m pytest -p no:cacheprovider -v -m gpu tests/gpu -o addopts="" --junitxml="$ev/pytest-gpu.xml"

# 4. the fleet playbook against this node (full, self-built spec)
step verify-gpu ansible-playbook -i "localhost," -c local -e ansible_python_interpreter="$py" \
  playbooks/verify-gpu.yml -e gpuprobe_mode=full -e gpuprobe_cdi_source=self-built \
  -e verify_probe_image="$GPUPROBE_PROBE_IMAGE" -e gpuprobe_report_dir="$ev/reports"

# 4b. the node's own spec (kind nvidia.com/gpu, nvidia-ctk's shape: devices "0", the GPU's UUID, "all") as the
#     node source, every device of the kind requested: identity map, per-GPU rows, post-check exit status
node_spec=/var/run/cdi/nvidia-gpuprobe-e2e-nodestyle.yaml
step node-spec-write "$py" - "$node_spec" <<'PY'
import os, sys
sys.path.insert(0, os.path.join(os.getcwd(), "tests", "gpu"))
import test_node_specs_gpu as t
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import spec as _cdi_spec
from ansible_collections.gpuprobe.layers.plugins.module_utils._host import layer as _host
host = _host.record(driver_root=t.DRIVER_ROOT)
spec, _request = t.node_style_spec(host, "full")
with open(sys.argv[1], "w") as f:
    f.write(_cdi_spec.render(spec))
print(open(sys.argv[1]).read())
PY
step verify-gpu-node-postcheck ansible-playbook -i "localhost," -c local -e ansible_python_interpreter="$py" \
  playbooks/verify-gpu.yml -e gpuprobe_mode=postcheck -e verify_probe_image="$GPUPROBE_PROBE_IMAGE" \
  -e '{"verify_cdi_devices": ["nvidia.com/gpu=all"]}' -e gpuprobe_report_dir="$ev/reports-node"
rm -f "$node_spec"

# 4c. interrupts: Ctrl-C in the middle of a probe, SIGTERM during the host control and during the report writing;
#     then what probe_cleanup removes (scripts/interrupt-drill.sh)
step interrupt bash scripts/interrupt-drill.sh "$ev/interrupt.txt" "$out/interrupted-run.log" \
  -e ansible_python_interpreter="$py" -e verify_probe_image="$GPUPROBE_PROBE_IMAGE" -e gpuprobe_report_dir="$out/interrupted"
step interrupt-host-control bash scripts/interrupt-drill.sh --at host-control --signal TERM "$ev/interrupt-host-control.txt" \
  "$out/interrupted-host-control.log" -e ansible_python_interpreter="$py" -e verify_probe_image="$GPUPROBE_PROBE_IMAGE" \
  -e gpuprobe_report_dir="$out/interrupted-host-control"
# a report set from a finished run first, so that the interrupted one has an old set to keep
step report-before-interrupt ansible-playbook -i "localhost," -c local -e ansible_python_interpreter="$py" \
  playbooks/verify-gpu.yml -e gpuprobe_mode=audit -e gpuprobe_report_dir="$out/interrupted-report"
step interrupt-report bash scripts/interrupt-drill.sh --at report --signal TERM "$ev/interrupt-report.txt" \
  "$out/interrupted-report.log" -e ansible_python_interpreter="$py" -e verify_probe_image="$GPUPROBE_PROBE_IMAGE" \
  -e gpuprobe_report_dir="$out/interrupted-report"

# 5. the fault drills
step fault-drills ansible-playbook -i "localhost," -c local -e ansible_python_interpreter="$py" \
  playbooks/fault-drills.yml -e gpuprobe_dedicated_node=true -e verify_probe_image="$GPUPROBE_PROBE_IMAGE" \
  -e verify_stub_libcuda="$stub" -e gpuprobe_report_dir="$ev/drills"

# 6. what a verification costs next to nvidia-smi (ratios measured side by side in this one run)
$no_bench || step benchmark "$py" benchmarks/bench_gpu.py "$ev/bench-gpu.json" 5

fi  # --bench-only

if ! $no_bench; then
# 7. what the playbook costs on one node next to Ansible's floor (one no-op module) and the bare probe container
baseline=()
[ -d .build/baseline/playbooks ] && baseline=(--baseline .build/baseline)
step benchmark-node "$py" benchmarks/bench_node.py "$ev/bench-node.json" --rounds 5 --gpu --cold --timings "${baseline[@]}" \
  -e verify_probe_image="$GPUPROBE_PROBE_IMAGE"

# 8. what each node-side module ships, and what building its payload costs on this controller
step benchmark-payload "$py" benchmarks/bench_payload.py "$ev/bench-payload.json" --rounds 5 "${baseline[@]}"

# 9. the node-side call alone: where its time goes (bytecode, the host control beside the container, imports)
step benchmark-node-call "$py" benchmarks/bench_node_call.py "$ev/node-call" --mode full --rounds 5 \
  -e verify_probe_image="$GPUPROBE_PROBE_IMAGE" -e gpuprobe_cdi_source=self-built
fi  # --no-bench

# nothing may be left behind: list what is (an empty listing is the expected result)
{ echo "left in /var/run/cdi:"; ls -la /var/run/cdi; echo "probe containers left:"; podman ps -a --filter label=gpuprobe.run; } >>"$log" 2>&1
tar -C "$out" -czf "$out/evidence.tgz" evidence
echo "failed steps: $failed" | tee -a "$log"
exit "$failed"
