#!/usr/bin/env bash
# Installs what is needed (scripts/bootstrap.sh) and runs the whole test suite:
#   pytest (unit + integration with real podman/runc), ansible-test sanity (under the current ansible-core and 2.17,
#   the oldest meta/runtime.yml claims), ansible-lint (production profile), galaxy-importer on the built tarball (what
#   Galaxy and Automation Hub run on an upload), molecule scenarios, the execution
#   environment's build context, and a smoke run of the README's verify-gpu.yml under both ansible-cores.
#   Exit status: 0 when every stage passed, 1 otherwise.
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

# images the tests build in the system's podman storage (the probe image and its variants, layers of rebuilds): the
# ones this run created are removed at its end; what was there before stays (docs/usage.md, "What the tests leave")
images_before=$(podman images -q --no-trunc 2>/dev/null | sort -u)
remove_new_images() {
  local id
  for id in $(podman images -q --no-trunc --filter reference='localhost/gpuprobe-*' 2>/dev/null; \
              podman images -q --no-trunc --filter dangling=true 2>/dev/null); do
    grep -qx "$id" <<< "$images_before" || podman rmi -f "$id" >/dev/null 2>&1 || true
  done
}
trap remove_new_images EXIT

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
# ansible-lint as README.md documents it: the plain command at the root of the checkout, without the collections path
# of .build/env.sh (it links the checkout as the collection itself, .ansible-lint)
stage ansible-lint env -u ANSIBLE_COLLECTIONS_PATH -u PYTHONPATH ansible-lint
stage galaxy-importer bash scripts/galaxy-importer.sh
stage molecule bash scripts/molecule.sh
stage ee-check bash scripts/ee-check.sh
stage smoke bash scripts/smoke.sh
# tests/gpu is collected too: without a GPU its tests are skipped, and pytest's summary says how many
# ("SKIPPED [N] tests/gpu/...: needs a real NVIDIA GPU"); scripts/gpu-e2e.sh runs them on a GPU host
# the 25 slowest tests are listed at the end: where the suite's time goes (the whole script: 15 minutes at most on a
# 2-core machine). Two workers (pytest-xdist): the tests of real engines (tests/integration, tests/gpu) on one, in
# order, as a serial run has them; the unit tests on the other (tests/conftest.py)
stage pytest python -m pytest -p no:cacheprovider -n 2 --dist loadgroup --durations=25 tests/unit tests/integration tests/gpu
if [ ${#failed[@]} -gt 0 ]; then
  echo "FAILED stages: ${failed[*]}" >&2
  exit 1
fi
echo "all test stages passed" >&2
