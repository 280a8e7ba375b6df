#!/usr/bin/env bash
# The guest tests of scripts/qemu/run-guest-tests.sh --patched, on ROCm's out-of-tree amdgpu
# (amdgpu-dkms + patches/dkms/) loaded as modules into the DKMS harness kernel:
#
#   PREEMPT_DKMS_SRC=/usr/src/amdgpu-6.12.12-2164967.24.04 scripts/qemu/run-guest-tests-dkms.sh [--stock]
#
# --stock: the unpatched amdgpu-dkms modules, one boot, and only what differs from upstream's
# stock kernel is checked: the modules load and the zero-count probe of nr 0x40 answers EINVAL
# (a hole in amdgpu-dkms's table: kfd::PreemptProbe::AbsentEinval), with no kernel splat; the
# tests' own results are printed for information (their stock expectations are upstream's).
#
# 1. scripts/qemu/build-kernel-dkms.sh (the kernel, with amdgpu's helpers as modules) and
#    scripts/qemu/build-dkms-module.sh (the patched amdgpu-dkms modules);
# 2. the same static test binaries as run-guest-tests.sh --patched, kfd-sys's bindings generated
#    from the patched amdgpu-dkms kfd_ioctl.h;
# 3. an initramfs whose /init loads the modules (insmod, in dependency order: helpers, then
#    amdkcl, amdxcp, amddrm_buddy, amd-sched, amdttm, amddrm_ttm_helper, amdgpu) and then hands
#    over to the unchanged scripts/qemu/guest-init.sh;
# 4. two boots as in run-guest-tests.sh (the tests; then kfd-preempt-ids and kfd-exec-reopen);
# 5. the verdict: every guest test exits 0, doctor sees the header's KFD version, no GPU node and
#    the preempt ioctl with this build's ABI, validate is ok, no WARNING/BUG/lockdep splat.
# The serial logs are kept in target/guest-dkms/.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
flavor=patched; margs=()
if [ "${1:-}" = --stock ]; then flavor=stock; margs=(--stock); fi
OUT=$REPO/target/guest-dkms-$flavor; mkdir -p "$OUT"
t0=$(date +%s)
log() { echo "guest-tests[dkms-$flavor]: $*" >&2; }
# shellcheck source=scripts/qemu/lib.sh
. "$HERE/lib.sh"

KB=$("$HERE/build-kernel-dkms.sh")
BZ=$KB/arch/x86/boot/bzImage
MOD=$("$HERE/build-dkms-module.sh" "${margs[@]}")
KHDR=$MOD/include/uapi/linux/kfd_ioctl.h
if [ "$flavor" = patched ] && ! grep -q '#define AMDKFD_IOC_PREEMPT_QUEUES' "$KHDR"; then log "$KHDR is not patched"; exit 1; fi
kver=$(awk '/#define KFD_IOCTL_MAJOR_VERSION/{ma=$3} /#define KFD_IOCTL_MINOR_VERSION/{mi=$3} END{print ma"."mi}' "$KHDR")
KREL=$(cat "$KB/include/config/kernel.release")
log "kernel $KREL ($BZ), amdgpu-dkms $(sed -n 's/^PACKAGE_VERSION="\(.*\)"/\1/p' "$MOD/dkms.conf")$([ "$flavor" = patched ] && echo ' + patches/dkms') ($MOD), header KFD $kver; ready after $(( $(date +%s) - t0 ))s"

# Static binaries (lib.sh, as run-guest-tests.sh --patched), bindings from the patched DKMS header.
t1=$(date +%s)
TARGET=x86_64-unknown-linux-gnu
export RUSTFLAGS="-C target-feature=+crt-static" KFD_IOCTL_H=$KHDR
feats=(-p kfd-sys --features kfd-sys/bindgen)
cd "$REPO"
build_guest_binaries "$REPO/target/guest-dkms/cargo" "${feats[@]}" || { log "the static guest binaries did not build"; exit 1; }
test_bins=("${GUEST_TEST_BINS[@]}")
PL=$GUEST_BIN_DIR/preempt-lat
nice -n 10 cargo build --release -q -p kfd-sys -p preempt-capi --lib "${feats[@]}" --target "$TARGET" --target-dir "$REPO/target/guest-dkms/cargo"
gcc -static -O2 -Wall -Werror -I"$REPO/preempt-capi/include" -o "$OUT/capi_test" "$REPO/preempt-capi/tests/c/capi_test.c" \
  "$REPO/target/guest-dkms/cargo/$TARGET/release/libpreempt_kfd.a" -lpthread -ldl -lm 2>&1 | grep -v "statically linked applications requires at runtime" >&2 || true
gcc -static -O2 -Wall -o "$OUT/kfd-exec-reopen" "$REPO/patches/tests/kfd-exec-reopen.c"
gcc -static -O2 -Wall -o "$OUT/kfd-preempt-ids" "$REPO/patches/tests/kfd-preempt-ids.c"
log "static binaries built in $(( $(date +%s) - t1 ))s"

# initramfs: the project's guest, plus the modules and a loader in front of its init.
R=$OUT/initramfs; rm -rf "$R"; mkdir -p "$R"/{bin,dev,proc,sys,tmp,tests/bin,modules}
cp /bin/busybox "$R/bin/busybox"
install -m755 "$HERE/guest-init.sh" "$R/guest-init.sh"
for b in "${test_bins[@]}"; do cp "$b" "$R/tests/bin/$(basename "$b" | sed 's/-[0-9a-f]\{16\}$//')"; done
cp "$PL" "$GUEST_BIN_DIR/preempt-host-worker" "$R/bin/"
cp "$OUT/capi_test" "$OUT/kfd-exec-reopen" "$OUT/kfd-preempt-ids" "$R/tests/"
printf 'PREEMPT_REQUIRE_KFD=1\nPREEMPT_EXPECT_KFD_VERSION=%s\nRUST_BACKTRACE=1\nPREEMPT_EXPECT_DKMS=1\n' "$kver" > "$R/tests/env"
[ "$flavor" = stock ] || echo PREEMPT_EXPECT_PATCHED=1 >> "$R/tests/env"
# Load order: the kernel's helper modules (harness-modules.txt, retried until their own
# dependencies are in), then the DKMS modules in the order of their dependencies.
order=()
while read -r m; do cp "$KB/$m" "$R/modules/"; order+=("$(basename "$m")"); done < "$KB/harness-modules.txt"
dk=(amd/amdkcl/amdkcl.ko amd/amdxcp/amdxcp.ko amddrm_buddy.ko scheduler/amd-sched.ko ttm/amdttm.ko amddrm_ttm_helper.ko amd/amdgpu/amdgpu.ko)
for m in "${dk[@]}"; do
  [ -f "$MOD/$m" ] || { log "no $m in $MOD"; exit 1; }
  cp "$MOD/$m" "$R/modules/"
done
cat > "$R/init" <<EOF
#!/bin/busybox sh
# Loads the kernel's helper modules and the amdgpu-dkms modules, then runs the project's guest.
B=/bin/busybox
\$B mount -t proc proc /proc
\$B mount -t sysfs sysfs /sys
helpers="${order[*]}"
for pass in 1 2 3 4 5; do
  left=""
  for m in \$helpers; do \$B insmod /modules/\$m 2>/dev/null || left="\$left \$m"; done
  helpers=\$left
  [ -z "\$helpers" ] && break
done
[ -z "\$helpers" ] || echo "=== guest: helper modules not loaded:\$helpers"
for m in $(printf '%s ' "${dk[@]##*/}"); do
  if \$B insmod /modules/\$m; then echo "=== guest: insmod \$m ok"; else echo "=== guest: insmod \$m FAILED"; fi
done
echo "=== guest: modules: \$(\$B cut -d' ' -f1 /proc/modules | \$B tr '\n' ' ')"
\$B umount /sys; \$B umount /proc
exec /guest-init.sh
EOF
chmod 755 "$R/init"
(cd "$R" && find . | cpio -o -H newc --quiet | gzip -1) > "$OUT/initramfs.cpio.gz"

boot() { # $1 serial log, $2 timeout, $3 extra kernel args
  timeout "$2" qemu-system-x86_64 -m 2G -smp 1 -nographic -no-reboot -accel tcg \
    -kernel "$BZ" -initrd "$OUT/initramfs.cpio.gz" \
    -append "console=ttyS0 panic=-1 oops=panic loglevel=4 $3" > "$1.raw" 2>&1 || true
  tr -d '\r' < "$1.raw" > "$1"; rm -f "$1.raw"
}
t2=$(date +%s)
SER=$OUT/serial.log
boot "$SER" 900 ""
log "guest ran in $(( $(date +%s) - t2 ))s; serial log: $SER"

fail=0
grep -a '^=== guest: \(insmod\|modules\|helper\)' "$SER" | sed 's/^=== guest: /  /' >&2 || true
if ! grep -aq '^=== guest: insmod amdgpu.ko ok' "$SER"; then
  echo "FAIL guest dkms: amdgpu.ko did not load; see $SER"
  grep -aE 'amdgpu|amdkcl|amdttm|Unknown symbol|disagrees|kfd' "$SER" | head -20
  exit 1
fi
echo "PASS guest dkms: the patched amdgpu-dkms modules load ($(grep -a '^=== guest: modules:' "$SER" | cut -d: -f2- | wc -w) modules)"
grep -aq '^=== guest: done' "$SER" || { echo "FAIL guest dkms: the guest did not finish (crash or timeout); see $SER"; tail -30 "$SER"; exit 1; }
splat_re='WARNING:|BUG:|Oops|possible circular locking|possible recursive locking|inconsistent lock state|suspicious RCU'
if [ "$flavor" = stock ]; then
  sed -n '/^=== guest: doctor json begin/,/^=== guest: doctor json end/p' "$SER" | sed '1d;$d' > "$OUT/doctor.json"
  python3 - "$OUT/doctor.json" <<'PY' || fail=1
import json, sys
try:
    pi = json.load(open(sys.argv[1]))["facts"].get("preempt_ioctl") or {}
except Exception as e:
    print(f"FAIL guest dkms-stock doctor: no JSON ({e})"); sys.exit(1)
if pi.get("available") or "EINVAL" not in (pi.get("detail") or ""):
    print(f"FAIL guest dkms-stock doctor: the zero-count probe should answer EINVAL: {pi}"); sys.exit(1)
print(f"PASS guest dkms-stock probe: {pi.get('detail')}")
PY
  if sed -n '/^=== guest: dmesg begin/,/^=== guest: dmesg end/p' "$SER" | grep -aqE "$splat_re"; then
    echo "FAIL guest dkms-stock kernel log has splats; see $SER"; fail=1
  else echo "PASS guest dkms-stock kernel log: no WARNING/BUG/lockdep splat"; fi
  echo "info: the guest tests on unpatched amdgpu-dkms (upstream stock expectations, not checked):"
  grep -a '^=== guest: .* exit ' "$SER" | sed 's/^=== guest: /  /'
  log "total $(( $(date +%s) - t0 ))s"
  exit $fail
fi
for b in "${test_bins[@]}"; do
  n=$(basename "$b" | sed 's/-[0-9a-f]\{16\}$//')
  line=$(grep -a "^=== guest: $n exit " "$SER" || true)
  if [ "$line" = "=== guest: $n exit 0" ]; then
    echo "PASS guest dkms $n: $(sed -n "/^=== guest: running $n\$/,/^=== guest: $n exit/p" "$SER" | grep -a '^test result' || true)"
  else
    echo "FAIL guest dkms $n (${line:-no exit line})"; fail=1
    sed -n "/^=== guest: running $n\$/,/^=== guest: $n exit/p" "$SER" | grep -aE 'FAILED|panicked|assert' | head -20
  fi
done
sed -n '/^=== guest: doctor json begin/,/^=== guest: doctor json end/p' "$SER" | sed '1d;$d' > "$OUT/doctor.json"
python3 - "$OUT/doctor.json" "$kver" <<'PY' || fail=1
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception as e:
    print(f"FAIL guest dkms doctor: no JSON ({e})"); sys.exit(1)
f = d["facts"]; errs = []
if f.get("kfd_version") != sys.argv[2]: errs.append(f"kfd_version {f.get('kfd_version')!r} != {sys.argv[2]}")
nodes = f.get("nodes")
if not f.get("kfd_device_present"): errs.append("no /dev/kfd")
if not isinstance(nodes, list) or not nodes: errs.append(f"nodes: {nodes!r}")
elif any(n["gpu_id"] != 0 for n in nodes): errs.append("a GPU node in a GPU-less guest")
pi = f.get("preempt_ioctl") or {}
if not (pi.get("available") and pi.get("abi_version") == pi.get("built_abi_version")):
    errs.append(f"the preempt ioctl should be found with this build's ABI: {pi}")
if errs: print("FAIL guest dkms doctor:", "; ".join(errs)); sys.exit(1)
print(f"PASS guest dkms doctor: KFD {f['kfd_version']}, {len(nodes)} CPU node(s), no GPU; preempt ioctl: {pi.get('detail')}")
PY
grep -aq '^=== guest: doctor exit 0' "$SER" || { echo "FAIL guest dkms doctor exit status"; fail=1; }
sed -n '/^=== guest: validate json begin/,/^=== guest: validate json end/p' "$SER" | sed '1d;$d' > "$OUT/validate.json"
python3 - "$OUT/validate.json" <<'PY' || fail=1
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception as e:
    print(f"FAIL guest dkms validate: no JSON ({e})"); sys.exit(1)
pi = [c for c in d["checks"] if c["name"] == "patched preempt ioctl"]
if d.get("ok") is not True or len(pi) != 1 or pi[0]["status"] != "pass":
    print(f"FAIL guest dkms validate: ok {d.get('ok')}, patched preempt ioctl {pi}"); sys.exit(1)
print(f"PASS guest dkms validate: {d['passed']} passed, {d['failed']} failed, {d['skipped']} skipped")
PY
grep -aq '^=== guest: validate exit 0' "$SER" || { echo "FAIL guest dkms validate exit status"; fail=1; }
if grep -aq '^=== guest: capi_test exit 0' "$SER"; then echo "PASS guest dkms capi_test: $(grep -a '^capi_test: ' "$SER" | tail -1)"
else echo "FAIL guest dkms capi_test"; fail=1; fi
splats=$(sed -n '/^=== guest: dmesg begin/,/^=== guest: dmesg end/p' "$SER" | grep -aE "$splat_re" || true)
if [ -n "$splats" ]; then echo "FAIL guest dkms kernel log has splats:"; echo "$splats" | head -20; fail=1
elif ! grep -aq 'Lock dependency validator' "$SER"; then echo "FAIL guest dkms kernel log: lockdep is not on"; fail=1
else echo "PASS guest dkms kernel log: lockdep on, no WARNING/BUG/lockdep splat"; fi

# Second boot: kfd-preempt-ids --patched, then the exec/reopen reproducer (patches 0001-0002).
SER2=$OUT/serial-reopen.log
boot "$SER2" 600 "kfd_guest=exec-reopen"
iline=$(grep -a '^=== guest: kfd-preempt-ids exit ' "$SER2" || true)
if [ "$iline" = "=== guest: kfd-preempt-ids exit 0" ]; then echo "PASS guest dkms $(grep -a '^kfd-preempt-ids: ' "$SER2" | tail -1)"
else echo "FAIL guest dkms kfd-preempt-ids (${iline:-no exit line})"; grep -a '^kfd-preempt-ids: \|^FAIL: ' "$SER2" | head -20; fail=1; fi
rline=$(grep -a '^=== guest: kfd-exec-reopen exit ' "$SER2" || true)
rsplat=$(grep -aE "$splat_re|refcount_t|cannot create duplicate filename|kobject_add_internal failed|Call Trace:" "$SER2" || true)
if grep -aq '^=== guest: done' "$SER2" && [ "$rline" = "=== guest: kfd-exec-reopen exit 0" ] && [ -z "$rsplat" ]; then
  echo "PASS guest dkms kfd-exec-reopen: exec with /dev/kfd open, then reopen (plain and clone-vm): no use-after-free, no stack dump, the new process has its own proc/<pid>"
else
  echo "FAIL guest dkms kfd-exec-reopen: ${rline:-no exit line}"; printf '%s\n' "$rsplat" | head -5; fail=1
fi
log "total $(( $(date +%s) - t0 ))s"
exit $fail
