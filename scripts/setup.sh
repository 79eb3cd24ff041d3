#!/usr/bin/env bash
# setup.sh: installs the Debian packages the build needs (only those missing), then configures and builds
# Domino into build/ with all cores. Idempotent: a second run installs nothing and rebuilds only what changed.
#
#   bash scripts/setup.sh [--with-browser] [--no-build]
#     --with-browser  also install chromium (the HTML report's screenshot test uses it)
#     --no-build      install packages only
# Environment: DOMINO_CMAKE_ARGS adds configure arguments (e.g. "-DDOMINO_CUDA=ON"); BUILD_DIR (default build).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
with_browser=0
build=1
for arg in "$@"; do
  case "$arg" in
    --with-browser) with_browser=1 ;;
    --no-build) build=0 ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "setup.sh: unknown argument '$arg' (try --help)" >&2; exit 2 ;;
  esac
done

# Exactly what the build and the tests need (Debian 12 names). clang and its runtime libraries (libFuzzer,
# ASan, UBSan: libclang-rt-14-dev, only recommended by clang) build the fuzz targets (scripts/fuzz).
packages=(cmake g++ make libeigen3-dev libyaml-cpp-dev libfmt-dev nlohmann-json3-dev libcli11-dev libgloo-dev
          libgtest-dev libgmock-dev libbenchmark-dev iproute2 clang libclang-rt-14-dev)
if [[ $with_browser == 1 ]]; then packages+=(chromium); fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "setup: all ${#packages[@]} required Debian packages are installed"
elif [[ $(id -u) -ne 0 ]]; then
  echo "setup: missing Debian packages: ${missing[*]}" >&2
  echo "setup: run as root (or: sudo apt-get install -y ${missing[*]}) and try again" >&2
  exit 1
else
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update
  apt-get install -y --no-install-recommends "${missing[@]}"
fi

[[ $build == 1 ]] || exit 0

jobs="$(nproc 2>/dev/null || echo 2)"
# shellcheck disable=SC2206  # DOMINO_CMAKE_ARGS is a list of words on purpose
extra=(${DOMINO_CMAKE_ARGS:-})
if [[ "$BUILD_DIR" == "$ROOT/build" ]]; then
  echo "setup: configuring (cmake --preset release ${extra[*]})"
  (cd "$ROOT" && cmake --preset release "${extra[@]}")
else
  echo "setup: configuring (cmake -S $ROOT -B $BUILD_DIR ${extra[*]})"
  cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release "${extra[@]}"
fi
echo "setup: building with $jobs jobs"
cmake --build "$BUILD_DIR" -j "$jobs"
echo "setup: done; tools in $BUILD_DIR/bin: $(cd "$BUILD_DIR/bin" && ls -d domino-* 2>/dev/null | tr '\n' ' ')"
