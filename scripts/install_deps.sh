#!/usr/bin/env bash
# Installs the Debian packages the build and tests need (run as root, or with
# sudo available). The CUDA toolkit (nvcc) is not a Debian package here: it is
# expected at /usr/local/cuda; without it the CPU paths build alone.
set -euo pipefail
SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
  cmake ninja-build g++ ccache pkg-config \
  libgtest-dev googletest nlohmann-json3-dev libcli11-dev \
  libpcre2-dev libutf8proc-dev \
  clang libclang-rt-14-dev \
  gnuplot-nox
