#!/usr/bin/env bash
# Packs the build dependencies (GoogleTest, nlohmann-json, CLI11) from Debian
# packages into .deps/ (git-ignored), so that an air-gapped GPU machine can
# build from them: scripts/gpu_check.sh uses .deps/usr as a CMake prefix when
# the machine lacks a package. Run here, where apt works; carry .deps along.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .deps/pkgs
(cd .deps/pkgs && apt-get download googletest libgtest-dev nlohmann-json3-dev libcli11-dev)
for deb in .deps/pkgs/*.deb; do dpkg -x "$deb" .deps; done
echo "dependencies unpacked under .deps/usr"
