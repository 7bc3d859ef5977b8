#!/usr/bin/env bash
# Installs what is needed (scripts/bootstrap.sh) and runs playbooks/verify-gpu.yml, by default against
# this machine (inventory/localhost.yml). Extra arguments go to ansible-playbook, e.g.
#   bash scripts/verify.sh -i my-inventory.yml -e gpuprobe_mode=postcheck
# Exit status: ansible-playbook's. In the audit and full modes a node that is not COMPUTE_VERIFIED is a
# finding in the report, not an error (exit 0); in postcheck mode every such node fails the run (exit 2).
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
exec ansible-playbook "${inventory[@]}" playbooks/verify-gpu.yml -e "gpuprobe_report_dir=$root/reports" "$@"
