#!/usr/bin/env bash
# Installs what is needed (scripts/bootstrap.sh) and runs the whole test suite:
#   pytest (unit + integration with real podman/runc), ansible-test sanity, ansible-lint (production
#   profile), molecule scenarios. Exit status: 0 when every stage passed, 1 otherwise.
# With arguments, runs only pytest with those arguments (after the rebuild), e.g.
#   bash scripts/test.sh tests/unit -k cdi
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root" || exit 1
bash scripts/bootstrap.sh --test || exit 1
# shellcheck source=/dev/null
source .build/env.sh

if [ $# -gt 0 ]; then
  exec python -m pytest "$@"
fi

failed=()
stage() {
  local name=$1; shift
  echo "=== test stage: $name" >&2
  local t0=$SECONDS
  if "$@"; then
    echo "=== test stage $name: ok ($((SECONDS - t0)) s)" >&2
  else
    echo "=== test stage $name: FAILED ($((SECONDS - t0)) s)" >&2
    failed+=("$name")
  fi
}
stage sanity bash scripts/sanity.sh
stage ansible-lint ansible-lint --profile production --offline
stage molecule bash scripts/molecule.sh
stage ee-check bash scripts/ee-check.sh
# tests/gpu is collected too: without a GPU its tests are skipped, and pytest's summary says how many
# ("SKIPPED [N] tests/gpu/...: needs a real NVIDIA GPU"); scripts/gpu-e2e.sh runs them on a GPU host
stage pytest python -m pytest -p no:cacheprovider tests/unit tests/integration tests/gpu
if [ ${#failed[@]} -gt 0 ]; then
  echo "FAILED stages: ${failed[*]}" >&2
  exit 1
fi
echo "all test stages passed" >&2
