#!/usr/bin/env bash
# ThreadSanitizer over the programs where our threads meet (the completion engine, SPM workers and the
# reaper, the emulator's rings, the hooks' callbacks). Fails on any reported race.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
builddir=build-ci-tsan
[ -d "$builddir" ] || meson setup "$builddir" -Dtests=true -Db_sanitize=thread -Db_lundef=false \
  -Dbuildtype=debugoptimized
targets=(tests/unit_tests tests/context_tests tests/robustness_tests tests/alloc_sweep_tests tests/spm_tests
         tests/emu/emu_tests tests/hooks/hooks_api_tests tests/hooks/hooks_profiles
         tests/hooks/hooks_limits_test tests/hooks/hooks_alloc_sweep tests/guest/guest_tests)
ninja -C "$builddir" "${targets[@]}"
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
for t in unit context-gfx1100 context-gfx1100-no-eventfd robustness robustness-no-eventfd \
         robustness-entity-errors alloc-sweep \
         spm-gfx1100 emu-gfx1100 hooks-api hooks-profile-qemu-10.0 hooks-profile-crosvm \
         hooks-profile-qemu-11-drm \
         hooks-profile-qemu-10.1-async hooks-profile-global-1000-async hooks-limits hooks-alloc-sweep guest; do
  meson test -C "$builddir" --no-rebuild --print-errorlogs "$t"
done
