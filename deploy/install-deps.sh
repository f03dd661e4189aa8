#!/usr/bin/env bash
# Installs the Debian packages bmad needs, only those missing; silent when all are present.
# Used by ./tests/run.sh and ./deploy/quickstart.sh; safe to run any number of times.
#
#   deploy/install-deps.sh                # everything: build, tests, tools the tests use
#   deploy/install-deps.sh --build-only   # what the Release build (cmake, every target) needs;
#                                         # deploy/Dockerfile uses this
#   deploy/install-deps.sh --list [--build-only]   # print the package names and exit
set -euo pipefail

# What `cmake -S . -B build -DCMAKE_BUILD_TYPE=Release && cmake --build build` needs.
BUILD_PACKAGES=(
  cmake g++ make pkg-config curl ca-certificates
  libzmq3-dev cppzmq-dev capnproto libcapnp-dev libyaml-cpp-dev
  libopenmpi-dev openmpi-bin libcpp-httplib-dev nlohmann-json3-dev libopenblas-dev
  libgtest-dev libgmock-dev libbenchmark-dev prometheus-cpp-dev
)
# What the tests add: a real Prometheus, clang for the sanitizer build, unzip for helm
# (deploy/install-helm.sh).
TEST_PACKAGES=(
  prometheus clang libclang-rt-14-dev unzip
)

build_only=0
list=0
for arg in "$@"; do
  case "$arg" in
    --build-only) build_only=1 ;;
    --list) list=1 ;;
    *) echo "install-deps: unknown argument $arg" >&2; exit 2 ;;
  esac
done
PACKAGES=("${BUILD_PACKAGES[@]}")
[ $build_only -eq 1 ] || PACKAGES+=("${TEST_PACKAGES[@]}")
if [ $list -eq 1 ]; then
  printf '%s\n' "${PACKAGES[@]}"
  exit 0
fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
# npm fetches the tests' tools (the openai client, helm); any npm will do (e.g. NodeSource's
# nodejs carries one), so Debian's is installed only when there is none.
if [ $build_only -eq 0 ] && ! command -v npm >/dev/null 2>&1; then
  missing+=(npm)
fi
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing packages: ${missing[*]}; run as root or install them" >&2
  exit 1
fi
echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
# Debian starts and enables a package's daemon when it installs it: prometheus would be a server
# on :9090 from then on, in the way of the ones the tests and docs start on ports of their own.
# A policy-rc.d that answers 101 forbids the start, for this install only (one already there
# is the machine's own, and left alone); the unit is then disabled, if systemd runs here.
policy=/usr/sbin/policy-rc.d
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' >"$policy"
  chmod +x "$policy"
  trap 'rm -f "$policy"' EXIT
fi
apt-get update -qq >/dev/null
# --no-install-recommends keeps prometheus from pulling in node-exporter (a daemon on :9100).
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
if [[ " ${missing[*]} " == *" prometheus "* ]] && [ -d /run/systemd/system ]; then
  systemctl disable --now prometheus >/dev/null 2>&1 || true
fi
