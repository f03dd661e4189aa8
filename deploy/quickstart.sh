#!/usr/bin/env bash
# The main job: builds bmad and runs the most complete thing it can do today.
# (It grows with the project: a local cluster serving a model once the serving path exists.)
set -euo pipefail
cd "$(dirname "$0")/.."
./deploy/install-deps.sh
if [ ! -x build/bin/bmad ] || [ "${BMAD_REBUILD:-1}" = "1" ]; then
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build build -j"$(nproc)" --target bmad >/dev/null
fi
echo "== bmad config check deploy/config/local.yaml"
build/bin/bmad config check deploy/config/local.yaml
echo
echo "== bmad --help"
build/bin/bmad --help
