#!/usr/bin/env bash
# Installs the Debian packages bmad needs, only those missing; silent when all are present.
# Used by ./tests/run.sh and ./deploy/quickstart.sh; safe to run any number of times.
set -euo pipefail

PACKAGES=(
  cmake g++ make pkg-config curl ca-certificates
  libzmq3-dev cppzmq-dev capnproto libcapnp-dev libyaml-cpp-dev
  libopenmpi-dev openmpi-bin libcpp-httplib-dev nlohmann-json3-dev libopenblas-dev
  libgtest-dev libgmock-dev libbenchmark-dev prometheus prometheus-cpp-dev
  clang libclang-rt-14-dev
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing packages: ${missing[*]}; run as root or install them" >&2
  exit 1
fi
echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
# --no-install-recommends keeps prometheus from pulling in node-exporter (a daemon on :9100).
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
