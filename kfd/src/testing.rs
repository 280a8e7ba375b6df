//! For tests that need a real amdkfd (feature `test-util`): the `*_kernel` test binaries of kfd
//! and lv3, which run in the QEMU guest (`scripts/qemu/run-guest-tests.sh`) and skip elsewhere.
use super::Kfd;

/// Opens /dev/kfd, or explains on stderr why the test `test` does not run here (`SKIPPED <test>:
/// <reason>`) and returns `None`. In the QEMU guest the harness sets `PREEMPT_REQUIRE_KFD=1`, and
/// then a missing /dev/kfd fails the test.
///
/// ```no_run
/// let Some(kfd) = kfd::testing::kfd_or_skip("my_kernel_test") else { return };
/// ```
///
/// # Panics
/// With `PREEMPT_REQUIRE_KFD` set, when /dev/kfd does not open.
pub fn kfd_or_skip(test: &str) -> Option<Kfd> {
    match Kfd::open() {
        Ok(k) => Some(k),
        Err(e) => {
            assert!(
                std::env::var_os("PREEMPT_REQUIRE_KFD").is_none(),
                "{test}: PREEMPT_REQUIRE_KFD is set but /dev/kfd does not open: {e}"
            );
            // Written straight to stderr: the test harness captures eprintln! of passing tests,
            // and a skip must be visible.
            use std::io::Write;
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED {test}: needs /dev/kfd ({e}); runs in the QEMU guest (scripts/qemu/run-guest-tests.sh)"
            );
            None
        }
    }
}

/// A process's per-process queue list in a temporary sysfs tree, changed the way amdkfd changes
/// it: a queue's directory appears when the queue is created and goes when it is destroyed
/// (docs/kfd-facts.md#queue-identity-in-sysfs). For tests of queue bindings on any machine.
/// The tree is removed on drop.
///
/// ```
/// let q = kfd::testing::FakeProcQueues::new(4242);
/// q.create(4, 0xbeef);
/// let before = kfd::sysfs::queue_node(&q.root(), 4242, 4).unwrap().unwrap();
/// q.replace(4);
/// assert_ne!(kfd::sysfs::queue_node(&q.root(), 4242, 4).unwrap(), Some(before));
/// ```
#[derive(Debug)]
pub struct FakeProcQueues {
    base: std::path::PathBuf,
    pid: u32,
}

impl FakeProcQueues {
    /// An empty queue list of process `pid` in a fresh temporary directory.
    ///
    /// # Panics
    /// When the temporary directory cannot be written.
    pub fn new(pid: u32) -> Self {
        use std::sync::atomic::{AtomicU32, Ordering};
        static N: AtomicU32 = AtomicU32::new(0);
        let base = std::env::temp_dir().join(format!(
            "kfd-fake-proc-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let q = FakeProcQueues { base, pid };
        std::fs::create_dir_all(q.queues()).expect("creating the fake queue list");
        q
    }

    /// The root to read it through.
    pub fn root(&self) -> crate::sysfs::SysRoot {
        crate::sysfs::SysRoot::new(&self.base)
    }

    fn queues(&self) -> std::path::PathBuf {
        self.root().kfd_proc().join(self.pid.to_string()).join("queues")
    }

    fn write(dir: &std::path::Path, gpu_id: u32) {
        std::fs::create_dir(dir).expect("creating a fake queue directory");
        // As amdkfd writes them: no trailing newline; a 1 MiB compute (type 0) ring.
        for (f, v) in [
            ("size", "1048576".to_string()),
            ("type", "0".into()),
            ("gpuid", gpu_id.to_string()),
        ] {
            std::fs::write(dir.join(f), v).expect("writing a fake queue file");
        }
    }

    /// A compute queue `id` on `gpu_id` is created.
    ///
    /// # Panics
    /// When the queue exists already or the tree cannot be written.
    pub fn create(&self, id: u32, gpu_id: u32) {
        Self::write(&self.queues().join(id.to_string()), gpu_id);
    }

    /// Queue `id` is destroyed.
    ///
    /// # Panics
    /// When there is no such queue.
    pub fn destroy(&self, id: u32) {
        std::fs::remove_dir_all(self.queues().join(id.to_string())).expect("destroying a fake queue");
    }

    /// Queue `id` is destroyed and another queue created with the same id (KFD hands out the
    /// lowest free id) on the same GPU. The new directory is made before the old one goes, so
    /// that it cannot get the old inode number back from this filesystem (kernfs never reuses
    /// one; ext4 and tmpfs may).
    ///
    /// # Panics
    /// When there is no such queue.
    pub fn replace(&self, id: u32) {
        let dir = self.queues().join(id.to_string());
        let gpu = std::fs::read_to_string(dir.join("gpuid")).expect("reading a fake queue's gpu id");
        let next = self.queues().join(format!("{id}.new"));
        Self::write(&next, gpu.trim().parse().expect("a fake gpu id"));
        std::fs::remove_dir_all(&dir).expect("destroying a fake queue");
        std::fs::rename(&next, &dir).expect("renaming a fake queue");
    }
}

impl Drop for FakeProcQueues {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.base);
    }
}
