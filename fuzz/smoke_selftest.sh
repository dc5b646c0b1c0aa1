#!/usr/bin/env bash
# fuzz/smoke.sh's self-test (ctest model.fuzz_smoke_selftest_<kind>), on
# fuzz/fuzz_selftest.cpp seeded with one input of the kind:
#   crash: a finding that reproduces; smoke.sh must exit 1 and say so;
#   once:  a finding that does not; smoke.sh must exit 0 with its warning.
#   fuzz/smoke_selftest.sh crash|once FUZZ_SELFTEST_BINARY DIR
set -uo pipefail
kind=$1 fuzzer=$2 dir=$3
case $kind in
  crash) want_rc=1 want='FAIL: a finding that reproduces' ;;
  once) want_rc=0 want='PASS with a warning' ;;
  *) echo "unknown kind $kind" >&2; exit 2 ;;
esac
rm -rf "$dir" && mkdir -p "$dir/seeds" || exit 2
printf '%s' "$kind" >"$dir/seeds/seed"
export WD_FUZZ_SELFTEST_MARKER=$dir/marker
"$(dirname "$0")/smoke.sh" "$fuzzer" 5 "$dir/work" "$dir/seeds" >"$dir/smoke.log" 2>&1
rc=$?
cat "$dir/smoke.log"
if [ $rc -ne $want_rc ] || ! grep -qF "$want" "$dir/smoke.log"; then
  echo "SELFTEST FAILED: smoke.sh exited $rc (want $want_rc) and must print '$want'"
  exit 1
fi
echo "selftest $kind: smoke.sh exited $rc and printed '$want'"
