#!/usr/bin/env bash
# Unpacks the prebuilt binaries in .gpu-bin/ (scripts/prebuild_gpu_bin.sh)
# on the GPU machine: binaries.tar.xz, every binary of one build in one xz
# stream (they share the library's kernels, so one stream with xz's 64 MiB
# dictionary holds them in under a third of the bytes of separate files), and
# any single <name>.xz beside it (an A/B's other side: --rev REV --as L).
# Each is unpacked once: again only when the packed file is newer. xz, or
# Python's lzma and tarfile where the machine has no xz.
set -euo pipefail
cd "$(dirname "$0")/.."
for packed in .gpu-bin/*.xz; do
  [ -e "$packed" ] || continue
  case "$packed" in
    *.tar.xz)
      stamp=".gpu-bin/.unpacked-$(basename "$packed")"
      [ -e "$stamp" ] && [ "$stamp" -nt "$packed" ] && continue
      if command -v xz >/dev/null; then xz -dc "$packed" | tar -C .gpu-bin -xf -
      else python3 -c "import sys, tarfile; tarfile.open(sys.argv[1], 'r:xz').extractall(sys.argv[2])" "$packed" .gpu-bin; fi
      touch "$stamp" ;;
    *)
      exe=${packed%.xz}
      [ -x "$exe" ] && [ "$exe" -nt "$packed" ] && continue
      if command -v xz >/dev/null; then xz -dc "$packed" > "$exe"
      else python3 -c "import lzma, sys; open(sys.argv[2], 'wb').write(lzma.open(sys.argv[1]).read())" "$packed" "$exe"; fi
      chmod +x "$exe" ;;
  esac
done
