# Shell functions shared by scripts/qemu/run-guest-tests.sh and run-guest-tests-dkms.sh (sourced,
# not run). Each returns non-zero with the reason on stderr; the caller decides how to fail.

# build_guest_binaries TARGET_DIR [CARGO_ARGS...]: release builds for the guest, static when the
# caller exports RUSTFLAGS="-C target-feature=+crt-static" (as both scripts do), under
# TARGET_DIR: the real-kernel test binaries (kfd: kfd_kernel; lv3: mechanism_kernel,
# preempt_ioctl_kernel, conformance_kernel, exit_kernel) and preempt-lat with the host device's
# worker, host-device's preempt-host-worker (preempt-lat finds it beside itself). CARGO_ARGS: e.g.
# the patched flavours' `-p kfd-sys --features kfd-sys/bindgen`. Sets GUEST_TEST_BINS (the test
# executables) and GUEST_BIN_DIR (where preempt-lat and preempt-host-worker are); 1 if no test
# binary was built or one of them is not statically linked.
build_guest_binaries() {
  local dir=$1 target=x86_64-unknown-linux-gnu json b
  shift
  # --target keeps RUSTFLAGS off build scripts and proc macros.
  json=$(nice -n 10 cargo test --release -q -p kfd -p lv3 "$@" --target "$target" --target-dir "$dir" \
    --test kfd_kernel --test mechanism_kernel --test preempt_ioctl_kernel --test conformance_kernel --test exit_kernel \
    --no-run --message-format=json 2>/dev/null) || { echo "cargo test --no-run of the guest tests failed" >&2; return 1; }
  nice -n 10 cargo build --release -q -p kfd-sys -p preempt-lat --bin preempt-lat -p host-device --bin preempt-host-worker \
    "$@" --target "$target" --target-dir "$dir" || return 1
  mapfile -t GUEST_TEST_BINS < <(printf '%s\n' "$json" | python3 -c '
import json, sys
for line in sys.stdin:
    try: m = json.loads(line)
    except ValueError: continue
    if m.get("reason") == "compiler-artifact" and m.get("profile", {}).get("test") and m.get("executable"):
        print(m["executable"])')
  [ "${#GUEST_TEST_BINS[@]}" -gt 0 ] || { echo "no test binary was built" >&2; return 1; }
  GUEST_BIN_DIR=$dir/$target/release
  for b in "${GUEST_TEST_BINS[@]}" "$GUEST_BIN_DIR/preempt-lat" "$GUEST_BIN_DIR/preempt-host-worker"; do
    file -L "$b" 2>/dev/null | grep -qE 'static(-pie)? linked|statically linked' || { echo "$b is not statically linked" >&2; return 1; }
  done
}
