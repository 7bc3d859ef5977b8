#!/usr/bin/env bash
# Smoke run of the installed collection under each ansible-core it claims (meta/runtime.yml requires_ansible
# >=2.17): the README's verification of this machine, playbooks/verify-gpu.yml against inventory/localhost.yml with
# the collection's callbacks, under the current ansible-core (the venv's) and 2.17 (.build/core-2.17, built by
# scripts/bootstrap.sh --test). It passes when ansible-playbook exits 0, the report was written and it holds a
# verdict for localhost (on a machine without a GPU: FAILED_AT_HOST, "No GPU was seen"). Reports and Ansible's
# temporary files stay under .build/smoke. Expects .build/env.sh (scripts/test.sh sources it).
# GPUPROBE_SMOKE_CORES="current 2.17" (the default) picks the ansible-cores.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root" || exit 1
cores=${GPUPROBE_SMOKE_CORES:-current 2.17}
failed=()
for core in $cores; do
  case $core in
    current) bin=$(dirname "$(command -v python)") ;;
    2.17) bin=$root/.build/core-2.17/bin ;;
    *) echo "smoke: unknown ansible-core '$core' (current, 2.17)" >&2; exit 1 ;;
  esac
  if [ ! -x "$bin/ansible-playbook" ]; then
    echo "smoke: no ansible-playbook for ansible-core $core in $bin (scripts/bootstrap.sh --test builds .build/core-2.17)" >&2
    failed+=("$core"); continue
  fi
  out=$root/.build/smoke/$core
  rm -rf "$out"; mkdir -p "$out/reports" "$out/local" "$out/remote"
  version=$("$bin/python" -c 'from ansible.release import __version__; print(__version__)')
  t0=$SECONDS
  rc=0
  # the inventory's interpreter is ansible_playbook_python: the node side runs in the same venv (its pinned libraries)
  PATH=$bin:$PATH ANSIBLE_LOCAL_TEMP=$out/local ANSIBLE_REMOTE_TMP=$out/remote \
    ANSIBLE_STDOUT_CALLBACK=gpuprobe.layers.fleet ANSIBLE_CALLBACKS_ENABLED=gpuprobe.layers.gpuprobe_summary \
    "$bin/ansible-playbook" -i inventory/localhost.yml playbooks/verify-gpu.yml \
    -e "gpuprobe_report_dir=$out/reports" -e "gpuprobe_status_file=$out/status.json" > "$out/run.log" 2>&1 || rc=$?
  verdict=$("$bin/python" - "$out/status.json" <<'PY' 2>&1
import json, sys
try:
    status = json.load(open(sys.argv[1]))
except (OSError, ValueError) as exc:
    sys.exit("no status file: %s" % exc)
if status.get("report") != "written":
    sys.exit("report not written: %s" % status)
verdict = (status.get("verdicts") or {}).get("localhost")
if not verdict:
    sys.exit("no verdict for localhost: %s" % status)
print(verdict)
PY
) || { [ "$rc" != 0 ] || rc=1; }
  if [ "$rc" = 0 ]; then
    echo "smoke: ansible-core $version: verify-gpu.yml exit 0, report written, localhost $verdict ($((SECONDS - t0)) s)" >&2
  else
    echo "smoke: ansible-core $version: FAILED (exit $rc; $verdict); the run's output:" >&2
    tail -40 "$out/run.log" >&2
    failed+=("$core")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "smoke: FAILED under ansible-core ${failed[*]}" >&2
  exit 1
fi
