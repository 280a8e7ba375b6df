#!/usr/bin/env bash
# Boots the harness kernel in QEMU (TCG) with the project's static test binaries and checks
# what the guest reports.
#
#   scripts/qemu/run-guest-tests.sh [--patched]
#
# 1. scripts/qemu/build-kernel.sh: Debian linux-source-6.12 with amdgpu+amdkfd (cached);
# 2. static (crt-static) builds of the real-kernel tests (kfd: kfd_kernel; lv3: mechanism_kernel,
#    conformance_kernel, preempt_ioctl_kernel: the patched ioctls on --patched, their ENOTTY on
#    stock) and of preempt-lat with the host device's worker (preempt-host-worker, beside it in
#    the guest's /bin), in target/guest so the normal build cache is untouched;
# 3. a busybox initramfs with scripts/qemu/guest-init.sh as PID 1;
# 4. qemu-system-x86_64 under TCG (KVM on these machines does not boot a kernel), serial to a log;
# 5. pass/fail from the guest's markers: every test binary exits 0, doctor's JSON shows the
#    booted kernel's KFD version and no GPU node, and the kernel log has no WARNING/BUG/lockdep
#    splat. The serial log is kept in target/guest/serial-*.log.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
flavor=stock; kargs=()
if [ "${1:-}" = --patched ]; then flavor=patched; kargs=(--patched); fi
OUT=$REPO/target/guest; mkdir -p "$OUT"
t0=$(date +%s)
log() { echo "guest-tests[$flavor]: $*" >&2; }
# shellcheck source=scripts/qemu/lib.sh
. "$HERE/lib.sh"

BZ=$("$HERE/build-kernel.sh" "${kargs[@]}")
BUILD=$(cd "$(dirname "$BZ")/../../.." && pwd)
SRC=$(readlink -f "$BUILD/source")
KHDR=$SRC/include/uapi/linux/kfd_ioctl.h
kver=$(awk '/#define KFD_IOCTL_MAJOR_VERSION/{ma=$3} /#define KFD_IOCTL_MINOR_VERSION/{mi=$3} END{print ma"."mi}' "$KHDR")
log "kernel $(cat "$BUILD/DEBIAN_SOURCE_VERSION" 2>/dev/null) ($BZ), its header says KFD $kver; ready after $(( $(date +%s) - t0 ))s"

# Static binaries (build_guest_binaries, lib.sh); the C ABI's below.
t1=$(date +%s)
TARGET=x86_64-unknown-linux-gnu
export RUSTFLAGS="-C target-feature=+crt-static"
# The patched flavour generates kfd-sys's bindings from the patched kernel's own header (one
# source of truth); the stock flavour uses the committed bindings.
feats=()
if [ "$flavor" = patched ]; then export KFD_IOCTL_H=$KHDR; feats=(-p kfd-sys --features kfd-sys/bindgen); fi
cd "$REPO"
build_guest_binaries "$OUT/cargo" "${feats[@]}" || { log "the static guest binaries did not build"; exit 1; }
test_bins=("${GUEST_TEST_BINS[@]}")
PL=$GUEST_BIN_DIR/preempt-lat
log "static binaries built in $(( $(date +%s) - t1 ))s: $(basename -a "${test_bins[@]}" | tr '\n' ' ')"

# ---- BEGIN C ABI: capi_test, a static C program linked with libpreempt_kfd.a -------------------
# The C ABI's test (preempt-capi/tests/c/capi_test.c) against the real kernel: open, probe, bind
# made-up queue ids (INVALID), suspend/resume of bogus ids, close; run by guest-init.sh.
cargo build --release -q -p kfd-sys -p preempt-capi --lib "${feats[@]}" --target "$TARGET" --target-dir "$OUT/cargo"
CAPI=$OUT/capi_test
gcc -static -O2 -Wall -Werror -I"$REPO/preempt-capi/include" -o "$CAPI" "$REPO/preempt-capi/tests/c/capi_test.c" \
  "$OUT/cargo/$TARGET/release/libpreempt_kfd.a" -lpthread -ldl -lm 2>&1 | grep -v "statically linked applications requires at runtime" >&2 || true
file -L "$CAPI" 2>/dev/null | grep -qE 'static(-pie)? linked|statically linked' || { log "$CAPI is not statically linked"; exit 1; }
# ---- END C ABI ----------------------------------------------------------------------------------

# initramfs
R=$OUT/initramfs-$flavor; rm -rf "$R"; mkdir -p "$R"/{bin,dev,proc,sys,tmp,tests/bin}
cp /bin/busybox "$R/bin/busybox"
install -m755 "$HERE/guest-init.sh" "$R/init"
for b in "${test_bins[@]}"; do cp "$b" "$R/tests/bin/$(basename "$b" | sed 's/-[0-9a-f]\{16\}$//')"; done
cp "$PL" "$GUEST_BIN_DIR/preempt-host-worker" "$R/bin/"
cp "$CAPI" "$R/tests/capi_test" # C ABI
printf 'PREEMPT_REQUIRE_KFD=1\nPREEMPT_EXPECT_KFD_VERSION=%s\nRUST_BACKTRACE=1\n' "$kver" > "$R/tests/env"
if [ "$flavor" = patched ]; then printf 'PREEMPT_EXPECT_PATCHED=1\n' >> "$R/tests/env"; fi
(cd "$R" && find . | cpio -o -H newc --quiet | gzip -1) > "$OUT/initramfs-$flavor.cpio.gz"

# boot
t2=$(date +%s)
SER=$OUT/serial-$flavor.log
timeout 600 qemu-system-x86_64 -m 1G -smp 1 -nographic -no-reboot -accel tcg \
  -kernel "$BZ" -initrd "$OUT/initramfs-$flavor.cpio.gz" \
  -append "console=ttyS0 panic=-1 oops=panic loglevel=4" > "$SER.raw" 2>&1 || true
tr -d '\r' < "$SER.raw" > "$SER"; rm -f "$SER.raw"
log "guest ran in $(( $(date +%s) - t2 ))s; serial log: $SER"

# verdict
fail=0
check() { if "$@"; then :; else fail=1; fi; }
grep -q '^=== guest: done' "$SER" || { log "FAIL: the guest did not finish (crash or timeout); see $SER"; tail -30 "$SER" >&2; exit 1; }
for b in "${test_bins[@]}"; do
  n=$(basename "$b" | sed 's/-[0-9a-f]\{16\}$//')
  line=$(grep "^=== guest: $n exit " "$SER" || true)
  if [ "$line" = "=== guest: $n exit 0" ]; then
    summary=$(sed -n "/^=== guest: running $n\$/,/^=== guest: $n exit/p" "$SER" | grep '^test result' || true)
    echo "PASS guest $n: $summary"
  else
    echo "FAIL guest $n (${line:-no exit line})"; fail=1
    sed -n "/^=== guest: running $n\$/,/^=== guest: $n exit/p" "$SER" | grep -E 'FAILED|panicked|assert' | head -20
  fi
done
sed -n '/^=== guest: doctor json begin/,/^=== guest: doctor json end/p' "$SER" | sed '1d;$d' > "$OUT/doctor-$flavor.json"
check python3 - "$OUT/doctor-$flavor.json" "$kver" "$flavor" <<'PY'
import json, sys
path, kver, flavor = sys.argv[1], sys.argv[2], sys.argv[3]
try:
    d = json.load(open(path))
except Exception as e:
    print(f"FAIL guest doctor: no JSON ({e})"); sys.exit(1)
f = d["facts"]
errs = []
if f.get("kfd_version") != kver: errs.append(f"kfd_version {f.get('kfd_version')!r} != {kver}")
if not f.get("kfd_device_present"): errs.append("no /dev/kfd")
nodes = f.get("nodes")
if not isinstance(nodes, list) or not nodes: errs.append(f"nodes: {nodes!r}")
elif any(n["gpu_id"] != 0 for n in nodes): errs.append("a GPU node in a GPU-less guest")
if d.get("gpu_usable") is not False: errs.append("gpu_usable should be false")
if not any(l["device"] == "host" and l["available"] for l in d["levels"]): errs.append("host device not available")
pi = f.get("preempt_ioctl") or {}
if flavor == "patched" and not (pi.get("available") and pi.get("abi_version") == pi.get("built_abi_version")):
    errs.append(f"patched kernel: preempt ioctl should be found with this build's ABI: {pi}")
if flavor == "stock" and (pi.get("available") or "ENOTTY" not in pi.get("detail", "")):
    errs.append(f"stock kernel: preempt ioctl should be absent with ENOTTY: {pi}")
if errs: print("FAIL guest doctor:", "; ".join(errs)); sys.exit(1)
print(f"PASS guest doctor: KFD {f['kfd_version']}, {len(nodes)} CPU node(s), no GPU, host device available; preempt ioctl: {pi.get('detail')}")
PY
grep -q '^=== guest: doctor exit 0' "$SER" || { echo "FAIL guest doctor exit status"; fail=1; }
sed -n '/^=== guest: validate json begin/,/^=== guest: validate json end/p' "$SER" | sed '1d;$d' > "$OUT/validate-$flavor.json"
check python3 - "$OUT/validate-$flavor.json" "$flavor" <<'PY'
import json, sys
flavor = sys.argv[2]
try:
    d = json.load(open(sys.argv[1]))
except Exception as e:
    print(f"FAIL guest validate: no JSON ({e})"); sys.exit(1)
errs = []
ep = [c for c in d["checks"] if c["category"] == "error-path"]
if len(ep) < 5 or any(c["status"] != "pass" for c in ep):
    errs.append("error-path checks: " + "; ".join(f"{c['name']}: {c['status']} {c['detail']}" for c in ep if c["status"] != "pass") or f"only {len(ep)}")
fn = [c for c in d["checks"] if c["category"] == "functional"]
if not fn or any(c["status"] != "skip" or "no GPU" not in c["detail"] for c in fn):
    errs.append(f"functional checks should be skipped with 'no GPU': {fn}")
if d.get("ok") is not True: errs.append("ok is not true")
pi = [c for c in d["checks"] if c["name"] == "patched preempt ioctl"]
want = "pass" if flavor == "patched" else "skip"
if len(pi) != 1 or pi[0]["status"] != want: errs.append(f"patched preempt ioctl check should be {want}: {pi}")
if flavor == "patched" and sum(1 for c in ep if c["name"].startswith("preempt ioctl:")) < 5:
    errs.append("the patched kernel's ioctl error paths did not all run")
if errs: print("FAIL guest validate:", " | ".join(errs)); sys.exit(1)
print(f"PASS guest validate: {d['passed']} passed, {d['failed']} failed, {d['skipped']} skipped (hardware part: skipped: no GPU)")
PY
grep -q '^=== guest: validate exit 0' "$SER" || { echo "FAIL guest validate exit status"; fail=1; }
# ---- BEGIN C ABI --------------------------------------------------------------------------------
cline=$(grep "^=== guest: capi_test exit " "$SER" || true)
csum=$(grep '^capi_test: ' "$SER" | tail -1 || true)
if [ "$cline" = "=== guest: capi_test exit 0" ]; then
  echo "PASS guest capi_test (C ABI, static libpreempt_kfd.a, $flavor kernel): ${csum#capi_test: }"
else
  echo "FAIL guest capi_test (${cline:-no exit line})"; grep '^FAIL capi' "$SER" | head -20; fail=1
fi
# ---- END C ABI ----------------------------------------------------------------------------------
splats=$(sed -n '/^=== guest: dmesg begin/,/^=== guest: dmesg end/p' "$SER" |
  grep -E 'WARNING:|BUG:|Oops|possible circular locking|possible recursive locking|inconsistent lock state|lockdep|suspicious RCU' |
  grep -v 'lockdep: \(Lock dependency validator\|Linux\)' || true)
if [ -n "$splats" ]; then echo "FAIL guest kernel log has splats:"; echo "$splats" | head -20; fail=1
elif ! grep -q 'Lock dependency validator' "$SER"; then echo "FAIL guest kernel log: lockdep is not on, so no splat check is worth anything"; fail=1
elif ! grep -q 'KernelAddressSanitizer initialized' "$SER"; then echo "FAIL guest kernel log: KASAN is not on (scripts/qemu/kernel.config)"; fail=1
else echo "PASS guest kernel log: lockdep and KASAN on, no WARNING/BUG/KASAN/lockdep splat"; fi

# ---- BEGIN patches/tests (C): kfd-preempt-ids, kfd-exec-reopen (patches/0001, 0002) ----------
# A second boot, after every result above is in: kfd-preempt-ids (the patched ioctls' id handling;
# ENOTTY on stock), then kfd-exec-reopen: exec() with a /dev/kfd fd open, then open /dev/kfd
# again: stock 6.12.117 refuses the new process's proc/<pid> (a stack dump), frees its procfs
# kobject twice and oopses, so that a crash cannot take the other results down. Stock: expected
# failure (XFAIL); patched: must pass (the new process has its own proc/<pid>, no dump). A stock
# kernel that passes is reported (XPASS) and fails the run: the bug is then fixed in that kernel
# and patches 0001-0002 should go.
t3=$(date +%s)
REO=$OUT/kfd-exec-reopen
# The hostile suite's seed: PREEMPT_HOSTILE_SEED replays a run (the seed is in every log).
HSEED=${PREEMPT_HOSTILE_SEED:-$(date +%s)}
case "$HSEED" in ''|*[!0-9]*) log "PREEMPT_HOSTILE_SEED=$HSEED: not a number"; exit 1;; esac
if ! gcc -static -O2 -Wall -o "$REO" "$REPO/patches/tests/kfd-exec-reopen.c" ||
   ! gcc -static -O2 -Wall -o "$OUT/kfd-preempt-ids" "$REPO/patches/tests/kfd-preempt-ids.c" ||
   ! gcc -static -O2 -Wall -Wextra -Werror -pthread -o "$OUT/kfd-hostile" \
       "$REPO/patches/tests/kfd-hostile.c" "$REPO/patches/tests/kfd-hostile-races.c" 2> >(grep -v 'statically linked' >&2); then
  echo "FAIL guest patches/tests: cannot build patches/tests/*.c (gcc -static)"; fail=1
else
  R2=$OUT/initramfs-$flavor-reopen; rm -rf "$R2"; cp -a "$R" "$R2"; cp "$REO" "$R2/tests/kfd-exec-reopen"
  cp "$OUT/kfd-preempt-ids" "$OUT/kfd-hostile" "$R2/tests/"
  echo "--seed $HSEED" > "$R2/tests/hostile-args"
  (cd "$R2" && find . | cpio -o -H newc --quiet | gzip -1) > "$R2.cpio.gz"
  SER2=$OUT/serial-$flavor-reopen.log
  # Two vCPUs: the hostile suite's threads and processes race for real (MTTCG).
  timeout 600 qemu-system-x86_64 -m 1G -smp 2 -nographic -no-reboot -accel tcg \
    -kernel "$BZ" -initrd "$R2.cpio.gz" \
    -append "console=ttyS0 panic=-1 oops=panic loglevel=4 kfd_guest=exec-reopen" > "$SER2.raw" 2>&1 || true
  tr -d '\r' < "$SER2.raw" > "$SER2"; rm -f "$SER2.raw"
  iline=$(grep -a '^=== guest: kfd-preempt-ids exit ' "$SER2" || true)
  iout=$(grep -a '^kfd-preempt-ids: \|^FAIL: ' "$SER2" || true)
  if [ "$iline" = "=== guest: kfd-preempt-ids exit 0" ]; then echo "PASS guest $(printf '%s\n' "$iout" | tail -1 | sed 's/^kfd-preempt-ids: PASS /kfd-preempt-ids: /')"
  else echo "FAIL guest kfd-preempt-ids (${iline:-no exit line})"; printf '%s\n' "$iout" | head -20 | sed 's/^/  /'; fail=1; fi
  # kfd-hostile: its own verdict, and no splat in the kernel log it left (lockdep, KASAN, WARN, BUG).
  hline=$(grep -a '^=== guest: kfd-hostile exit ' "$SER2" || true)
  hout=$(grep -a '^kfd-hostile: \|^UNEXPECTED ' "$SER2" || true)
  hsplat=$(sed -n '/^=== guest: hostile dmesg begin/,/^=== guest: hostile dmesg end/p' "$SER2" |
    grep -aE 'WARNING:|BUG:|KASAN|Oops|general protection|list_(add|del) corruption|refcount_t|possible circular locking|possible recursive locking|inconsistent lock state|suspicious RCU|hung_task|blocked for more than|cannot create duplicate filename|kobject_add_internal failed|Call Trace:' || true)
  if [ "$hline" = "=== guest: kfd-hostile exit 0" ] && [ -z "$hsplat" ] && grep -aq '^=== guest: hostile dmesg end' "$SER2"; then
    echo "PASS guest kfd-hostile (seed $HSEED, $flavor kernel): $(printf '%s\n' "$hout" | grep '^kfd-hostile: PASS' | sed 's/^kfd-hostile: PASS: //; s/ (seed .*//') in the args, threads and procs phases; no splat"
  else
    echo "FAIL guest kfd-hostile (seed $HSEED; replay: PREEMPT_HOSTILE_SEED=$HSEED): ${hline:-no exit line: crash or hang}"
    [ -z "$hout" ] || printf '%s\n' "$hout" | head -20 | sed 's/^/  /'
    [ -z "$hsplat" ] || printf '%s\n' "$hsplat" | head -10 | sed 's/^/  kernel: /'
    echo "  serial log: $SER2"; fail=1
  fi
  rline=$(grep -a '^=== guest: kfd-exec-reopen exit ' "$SER2" || true)
  rout=$(grep -a '^kfd-exec-reopen: \|^kernel: \|^round \|^stage2: ' "$SER2" | head -12 || true)
  rsplat=$(sed -n '/^=== guest: hostile dmesg end/,$p' "$SER2" |
    grep -aE 'WARNING:|BUG:|Oops|refcount_t|possible circular locking|possible recursive locking|inconsistent lock state|cannot create duplicate filename|kobject_add_internal failed|Call Trace:' || true)
  if grep -aq '^=== guest: done' "$SER2" && [ "$rline" = "=== guest: kfd-exec-reopen exit 0" ] && [ -z "$rsplat" ]; then
    if [ "$flavor" = patched ]; then
      echo "PASS guest kfd-exec-reopen: exec with /dev/kfd open, then reopen (plain and clone-vm): no use-after-free, no stack dump, the new process has its own proc/<pid> ($(( $(date +%s) - t3 ))s)"
    else
      echo "FAIL guest kfd-exec-reopen: XPASS, the stock kernel did not show the duplicate proc/<pid>"
      echo "  and the use-after-free in kfd_create_process() (fixed by patches/0001-0002): are they fixed"
      echo "  in this kernel? see $SER2"; fail=1
    fi
  else
    what=${rline:-no exit line: the kernel crashed}
    if [ "$flavor" = stock ]; then
      echo "XFAIL guest kfd-exec-reopen (expected failure: stock amdkfd bug, a duplicate proc/<pid> and a"
      echo "  use-after-free of the procfs kobject in kfd_create_process()/kfd_process_wq_release(), fixed"
      echo "  by patches/0001-drm-amdkfd-do-not-free-a-process-s-procfs-kobject-tw.patch and"
      echo "  patches/0002-drm-amdkfd-give-up-a-process-s-sysfs-directory-when-.patch): $what"
    else
      echo "FAIL guest kfd-exec-reopen: $what"; fail=1
    fi
    [ -z "$rout" ] || printf '%s\n' "$rout" | sed 's/^/  /'
    [ -z "$rsplat" ] || printf '%s\n' "$rsplat" | head -5 | sed 's/^/  /'
    echo "  serial log: $SER2"
  fi
fi
# ---- END patches/tests -------------------------------------------------------------------------
log "total $(( $(date +%s) - t0 ))s"
exit $fail
