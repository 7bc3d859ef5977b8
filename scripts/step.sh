# shellcheck shell=bash
# Sourced by the GPU scripts (gpu-e2e.sh, gpu-engines.sh): `step NAME CMD...` runs CMD with its output appended to
# $log, says "=== NAME: ok (N s)" or "=== NAME: FAILED rc=R (N s)", and counts failures in $failed (the scripts exit
# with that count: every step goes on after a failure).
# shellcheck disable=SC2154  # $log and $failed are the sourcing script's
step() {
  local name=$1; shift
  echo "=== $name" | tee -a "$log"
  local t0=$SECONDS
  if "$@" >>"$log" 2>&1; then echo "=== $name: ok ($((SECONDS - t0)) s)" | tee -a "$log"
  else echo "=== $name: FAILED rc=$? ($((SECONDS - t0)) s)" | tee -a "$log"; failed=$((failed + 1)); fi
}
