#!/usr/bin/env bash
# CI stage: galaxy-importer, what Galaxy and Automation Hub run on an uploaded collection, on the built tarball
# (.build/dist, from scripts/bootstrap.sh), with the settings of tests/galaxy-importer.cfg: ansible-doc, the READMEs,
# ansible-lint, flake8 on the plugins, the changelog and the 1.0.0 rule on; its container-based ansible-test off.
# The importer fails an upload only on some errors and logs the rest as WARNING lines: this stage fails on a
# non-zero exit and on any ERROR or WARNING line. Its output is in .build/galaxy-importer/importer.log.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
venv=${VIRTUAL_ENV:-$root/.venv}
version=$(sed -n 's/^version: *//p' galaxy.yml)
tarball=$root/.build/dist/gpuprobe-layers-$version.tar.gz
[ -f "$tarball" ] || { echo "galaxy-importer: no $tarball (run scripts/bootstrap.sh)" >&2; exit 1; }
work=$root/.build/galaxy-importer
rm -rf "$work"
mkdir -p "$work/tmp" "$work/ansible-tmp"
cd "$work"
# the importer puts the tool it runs (ansible-doc, ansible-lint, flake8) from PATH: the venv's
rc=0
PATH="$venv/bin:$PATH" GALAXY_IMPORTER_CONFIG=$root/tests/galaxy-importer.cfg \
  GALAXY_IMPORTER_TMP_ROOT_DIR=$work/tmp GALAXY_IMPORTER_ANSIBLE_LOCAL_TMP=$work/ansible-tmp \
  "$venv/bin/python" -m galaxy_importer.main "$tarball" > importer.log 2>&1 || rc=$?
problems=$(grep -E '^(ERROR|WARNING):' importer.log || true)
if [ "$rc" -ne 0 ] || [ -n "$problems" ]; then
  tail -n 40 importer.log >&2
  echo "galaxy-importer: $(grep -cE '^(ERROR|WARNING):' importer.log || true) ERROR/WARNING line(s), exit $rc" \
       "(whole log: .build/galaxy-importer/importer.log)" >&2
  exit 1
fi
echo "galaxy-importer: $(basename "$tarball") imported with no error or warning" >&2
