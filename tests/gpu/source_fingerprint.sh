#!/usr/bin/env bash
# Prints one hash of the project's source files (C++, CUDA, CMake) as they are in the working
# tree, without git: package.sh stamps it into the GPU bundle and run.sh compares it with the
# checkout it runs in (the device machine gets a copy of the tree, not the repository), so a
# bundle built from other code is refused instead of being measured as if it were this code.
set -euo pipefail
cd "$(dirname "$0")/../.."
find CMakeLists.txt cmake common coordinator kernels worker tests -type f \
    \( -name '*.cc' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' -o -name 'CMakeLists.txt' \
       -o -name '*.cmake' -o -name '*.capnp' \) -print0 |
  LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16
