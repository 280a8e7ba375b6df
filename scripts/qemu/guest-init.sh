#!/bin/busybox sh
# PID 1 of the QEMU guest: mounts the pseudo filesystems, runs every test binary in /tests with
# the environment from /tests/env, runs `preempt-lat doctor --format json`, checks the kernel
# log for splats, and powers off. Every result is a line "=== guest: NAME exit N" on the serial
# console, which scripts/qemu/run-guest-tests.sh turns into pass/fail.
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mount -t tmpfs tmpfs /tmp
export PATH=/bin
# Kernel messages would interleave with the JSON on the console; dmesg is dumped at the end.
echo 1 > /proc/sys/kernel/printk
set -a; . /tests/env; set +a
echo "=== guest: uname $(uname -r) $(uname -v)"
# A boot of its own for the C tests of patches/tests: the id checks of the patched ioctls, the
# hostile-input suite, then the reproducer of the stock duplicate proc/<pid> and use-after-free
# (kfd-exec-reopen.c, two rounds of each of its ways), last: the stock kernel oopses on it, so it
# must not share a boot with the other tests.
if grep -q 'kfd_guest=exec-reopen' /proc/cmdline; then
  echo "=== guest: running kfd-preempt-ids"
  if [ "${PREEMPT_EXPECT_PATCHED:-}" = 1 ]; then /tests/kfd-preempt-ids --patched; else /tests/kfd-preempt-ids --stock; fi
  echo "=== guest: kfd-preempt-ids exit $?"
  # The hostile-input suite (patches/tests/kfd-hostile.c), then the kernel log it left, cleared
  # so that the use-after-free reproducer's splats below are not counted against it.
  # (Not in the amdgpu-dkms guest, whose dispatch answers EINVAL where the oracle says ENOTTY.)
  if [ -x /tests/kfd-hostile ]; then
    echo "=== guest: running kfd-hostile"
    if [ "${PREEMPT_EXPECT_PATCHED:-}" = 1 ]; then /tests/kfd-hostile --patched $(cat /tests/hostile-args); else /tests/kfd-hostile --stock $(cat /tests/hostile-args); fi
    echo "=== guest: kfd-hostile exit $?"
    echo "=== guest: hostile dmesg begin"
    dmesg -c
    echo "=== guest: hostile dmesg end"
  fi
  echo "=== guest: running kfd-exec-reopen"
  /tests/kfd-exec-reopen 4
  echo "=== guest: kfd-exec-reopen exit $?"
  echo "=== guest: dmesg begin"
  dmesg
  echo "=== guest: dmesg end"
  echo "=== guest: done"
  reboot -f
fi
echo "=== guest: /dev/kfd $(ls -l /dev/kfd 2>&1)"
for n in /sys/class/kfd/kfd/topology/nodes/*; do echo "=== guest: $n/properties"; cat "$n/properties"; done
for t in /tests/bin/*; do
  name=$(basename "$t")
  echo "=== guest: running $name"
  "$t" --test-threads=1 --nocapture
  echo "=== guest: $name exit $?"
done
echo "=== guest: doctor json begin"
/bin/preempt-lat doctor --format json
rc=$?
echo "=== guest: doctor json end"
echo "=== guest: doctor exit $rc"
echo "=== guest: doctor text begin"
/bin/preempt-lat doctor
echo "=== guest: doctor text end"
echo "=== guest: validate json begin"
# stderr apart: notes or warnings must not land inside the JSON the host parses.
/bin/preempt-lat validate --format json 2>/tmp/validate.err
rc=$?
echo "=== guest: validate json end"
cat /tmp/validate.err
echo "=== guest: validate exit $rc"
# ---- BEGIN C ABI: the static C program over libpreempt_kfd.a ----
if [ -x /tests/capi_test ]; then
  echo "=== guest: running capi_test"
  if [ "${PREEMPT_EXPECT_PATCHED:-}" = 1 ]; then /tests/capi_test kfd --patched; else /tests/capi_test kfd --stock; fi
  echo "=== guest: capi_test exit $?"
fi
# ---- END C ABI ----
if [ -x /tests/guest-extra.sh ]; then . /tests/guest-extra.sh; fi
echo "=== guest: dmesg begin"
dmesg
echo "=== guest: dmesg end"
echo "=== guest: done"
# qemu runs with -no-reboot, so a reboot ends it (poweroff needs ACPI, which tinyconfig lacks).
reboot -f
