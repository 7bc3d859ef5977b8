#!/usr/bin/env bash
# Installs what is needed (scripts/bootstrap.sh) and runs playbooks/verify-gpu.yml, by default against
# this machine (inventory/localhost.yml). Extra arguments go to ansible-playbook, e.g.
#   bash scripts/verify.sh -i my-inventory.yml -e gpuprobe_mode=postcheck
# Exit status (docs/usage.md, "Exit statuses"): ansible-playbook's, except that a report that could not be
# written exits 3 (ansible-playbook says 2 there, as for a failed node):
#   0  every node was verified (reached a verdict) and the report was written; in audit/full a node that is
#      not COMPUTE_VERIFIED is a finding in the report, not an error
#   2  invalid options (nothing ran), a node that could not be verified (unreachable, no usable Python),
#      or, in postcheck mode, a node that is not COMPUTE_VERIFIED
#   3  the report could not be written (no file of this run kept; reports/*-latest.* are the previous run's)
#   4  a node became unreachable in the middle of the run; other values: Ansible itself failed
# The report lands in ./reports/ (gpuprobe_report_dir).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
bash scripts/bootstrap.sh
# shellcheck source=/dev/null
source .build/env.sh
# progress (nodes done / total) and the verdict table at the end
export ANSIBLE_CALLBACKS_ENABLED=${ANSIBLE_CALLBACKS_ENABLED:-gpuprobe.layers.gpuprobe_summary}
inventory=(-i inventory/localhost.yml)
for a in "$@"; do
  case $a in -i|--inventory|--inventory=*|-i*) inventory=() ;; esac
done
status_dir=$(mktemp -d)
trap 'rm -rf "$status_dir"' EXIT
rc=0
ansible-playbook "${inventory[@]}" playbooks/verify-gpu.yml -e "gpuprobe_report_dir=$root/reports" \
  -e "gpuprobe_status_file=$status_dir/status.json" "$@" || rc=$?
if [ -f "$status_dir/status.json" ] && grep -q '"report": "failed"' "$status_dir/status.json"; then
  echo "verify.sh: the report could not be written (exit 3): $(grep '"error"' "$status_dir/status.json")" >&2
  exit 3
fi
if [ "$rc" = 0 ] && [ ! -f "$status_dir/status.json" ]; then
  # no report play ran: the host pattern and --limit selected no host at all (ansible-playbook says 0 for that)
  echo "verify.sh: no host was verified and no report written: the host pattern (gpuprobe_hosts) and --limit" \
       "select no host (exit 2)" >&2
  exit 2
fi
exit "$rc"
