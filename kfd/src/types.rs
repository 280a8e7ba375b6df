//! Typed arguments and results of the KFD calls, decoded from the raw uapi structs.
use kfd_sys as sys;
use serde::Serialize;

/// A KFD queue id (per process, allocated by KFD; not ROCr's `hsa_queue_t.id`).
pub type QueueId = u32;

/// `AMDKFD_IOC_GET_VERSION`'s answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct KfdVersion {
    pub major: u32,
    pub minor: u32,
}

impl KfdVersion {
    /// The debugger API (RUNTIME_ENABLE, DBG_TRAP) arrived in 1.13 (Linux 6.5).
    pub fn has_debugger_api(&self) -> bool {
        (self.major, self.minor) >= (1, 13)
    }
}

impl std::fmt::Display for KfdVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// Per-queue outcome of SUSPEND_QUEUES / RESUME_QUEUES, decoded from the id array the kernel
/// rewrites in place: bit 31 = INVALID (no such queue of this process, or not suspendable,
/// e.g. still carrying EC_QUEUE_NEW), bit 30 = ERROR (the unmap or map failed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum QueueState {
    Ok,
    Invalid,
    Error,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct QueueStatus {
    pub id: QueueId,
    pub state: QueueState,
}

impl QueueStatus {
    /// Decodes one entry the kernel wrote back for the id `id` we passed.
    pub fn decode(id: QueueId, raw: u32) -> Self {
        let state = if raw & sys::KFD_DBG_QUEUE_ERROR_MASK != 0 {
            QueueState::Error
        } else if raw & sys::KFD_DBG_QUEUE_INVALID_MASK != 0 {
            QueueState::Invalid
        } else {
            QueueState::Ok
        };
        QueueStatus { id, state }
    }
}

/// The answer to the patched kernel's PREEMPT_QUEUES / RESUME_QUEUES (`Kfd::preempt_queues`,
/// `Kfd::resume_queues_patched`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PreemptOutcome {
    /// One per id passed, in order (bit 31 INVALID, bit 30 ERROR, as DBG_TRAP's).
    pub statuses: Vec<QueueStatus>,
    /// Time the kernel spent unmapping/mapping queues, fence wait included (HWS: the
    /// `execute_queues_cpsch` runlist update; no-HWS and MES: the per-queue dequeues).
    pub kernel_ns: u64,
    /// Queues now in the requested state (already preempted/resumed ones count).
    pub num_done: u32,
    /// `KFD_PREEMPT_QUEUES_VERSION` the kernel reported.
    pub abi_version: u32,
    /// The words the kernel wrote back, one per id: the id with status bits 31/30.
    pub raw: Vec<u32>,
}

/// PREEMPT_QUEUES flag: `grace_period` is valid (set by [`GracePeriod::Clocks1k`]).
pub const PREEMPT_FLAG_GRACE_PERIOD: u32 = kfd_sys::preempt::KFD_PREEMPT_QUEUES_FLAG_GRACE_PERIOD;

/// The grace period of SUSPEND_QUEUES: how long the CP lets waves run before it saves them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GracePeriod {
    /// The firmware default (`0xffffffff` on the wire).
    #[default]
    Default,
    /// In units of about 1K GPU clocks; an 8-bit field in the CP, and the kernel turns 0 into 1.
    Clocks1k(u8),
}

impl GracePeriod {
    pub fn raw(self) -> u32 {
        match self {
            GracePeriod::Default => u32::MAX,
            GracePeriod::Clocks1k(n) => u32::from(n),
        }
    }

    /// ROCdbgapi's choice (it passes 0, which the kernel makes 1): the shortest wait, so a wave
    /// that never reaches a natural break (a spinning delay kernel) is saved at once rather than
    /// after the firmware's full default (docs/kfd-facts.md#grace-period).
    pub const SHORTEST: GracePeriod = GracePeriod::Clocks1k(1);

    /// The (flags, grace_period) pair of the patched PREEMPT_QUEUES: the default is "no flag".
    pub fn preempt_ioctl_raw(self) -> (u32, u32) {
        match self {
            GracePeriod::Default => (0, 0),
            GracePeriod::Clocks1k(n) => (PREEMPT_FLAG_GRACE_PERIOD, u32::from(n)),
        }
    }
}

/// `default`, or the number of ~1K-clock units.
impl std::fmt::Display for GracePeriod {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GracePeriod::Default => f.write_str("default"),
            GracePeriod::Clocks1k(n) => write!(f, "{n}"),
        }
    }
}

/// `default` or `0..=255`, as [`Display`](std::fmt::Display) writes it.
impl std::str::FromStr for GracePeriod {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        if s.trim() == "default" {
            return Ok(GracePeriod::Default);
        }
        s.trim().parse::<u8>().map(GracePeriod::Clocks1k).map_err(|_| {
            format!("{s:?} is not a grace period: give a whole number 0-255 (units of ~1K GPU clocks) or 'default'")
        })
    }
}

impl Serialize for GracePeriod {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// Arguments of UPDATE_QUEUE. KFD overwrites all four properties, so a restore must carry the
/// queue's original ring address, exact ring size, percentage and priority.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct QueueUpdate {
    pub ring_base_address: u64,
    pub ring_size: u32,
    /// 0..=100; 0 with a NULL ring makes the queue inactive.
    pub percentage: u32,
    /// Bits 8-15 of the percentage word: the PM4 target XCC (0 = all).
    pub pm4_target_xcc: u8,
    /// 0..=15 (ROCr: LOW 0, NORMAL 7, HIGH 11).
    pub priority: u32,
}

impl QueueUpdate {
    /// "Update with NULL ring address is used to disable the queue" (kfd_chardev.c). The kernel
    /// also zeroes the queue's ring in its properties and MQD this way; ROCr and kfdtest instead
    /// keep the ring, size and priority and set percentage 0 (see [`QueueUpdate::pause`]).
    pub fn disable() -> Self {
        QueueUpdate {
            ring_base_address: 0,
            ring_size: 0,
            percentage: 0,
            pm4_target_xcc: 0,
            priority: 0,
        }
    }

    /// The same queue with percentage 0: inactive (QUEUE_IS_ACTIVE needs a percentage > 0), its
    /// ring, size and priority kept, as ROCr's scratch reclaim and kfdtest's CWSR test disable a
    /// queue (docs/kfd-facts.md#update_queue-disable-and-restore).
    pub fn pause(self) -> Self {
        QueueUpdate { percentage: 0, ..self }
    }

    pub(crate) fn to_raw(self, queue_id: QueueId) -> sys::kfd_ioctl_update_queue_args {
        sys::kfd_ioctl_update_queue_args {
            ring_base_address: self.ring_base_address,
            queue_id,
            ring_size: self.ring_size,
            queue_percentage: self.percentage | (u32::from(self.pm4_target_xcc) << 8),
            queue_priority: self.priority,
        }
    }
}

/// The queue types of `KFD_IOC_QUEUE_TYPE_*`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum QueueType {
    Compute,
    Sdma,
    ComputeAql,
    SdmaXgmi,
    SdmaByEngId,
    Other(u32),
}

impl QueueType {
    pub fn from_raw(v: u32) -> Self {
        match v {
            sys::KFD_IOC_QUEUE_TYPE_COMPUTE => QueueType::Compute,
            sys::KFD_IOC_QUEUE_TYPE_SDMA => QueueType::Sdma,
            sys::KFD_IOC_QUEUE_TYPE_COMPUTE_AQL => QueueType::ComputeAql,
            sys::KFD_IOC_QUEUE_TYPE_SDMA_XGMI => QueueType::SdmaXgmi,
            sys::KFD_IOC_QUEUE_TYPE_SDMA_BY_ENG_ID => QueueType::SdmaByEngId,
            other => QueueType::Other(other),
        }
    }
}

/// One GET_QUEUE_SNAPSHOT entry: the stock way to learn a runtime-created queue's ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct QueueSnapshot {
    pub exception_status: u64,
    pub ring_base_address: u64,
    pub write_pointer_address: u64,
    pub read_pointer_address: u64,
    pub ctx_save_restore_address: u64,
    pub queue_id: QueueId,
    pub gpu_id: u32,
    pub ring_size: u32,
    pub queue_type: QueueType,
    pub ctx_save_restore_area_size: u32,
}

impl From<&sys::kfd_queue_snapshot_entry> for QueueSnapshot {
    fn from(e: &sys::kfd_queue_snapshot_entry) -> Self {
        QueueSnapshot {
            exception_status: e.exception_status,
            ring_base_address: e.ring_base_address,
            write_pointer_address: e.write_pointer_address,
            read_pointer_address: e.read_pointer_address,
            ctx_save_restore_address: e.ctx_save_restore_address,
            queue_id: e.queue_id,
            gpu_id: e.gpu_id,
            ring_size: e.ring_size,
            queue_type: QueueType::from_raw(e.queue_type),
            ctx_save_restore_area_size: e.ctx_save_restore_area_size,
        }
    }
}

/// What DBG_TRAP ENABLE writes to `rinfo_ptr` (`struct kfd_runtime_info`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct RuntimeInfo {
    pub r_debug: u64,
    /// `DEBUG_RUNTIME_STATE_*`: 0 disabled, 1 enabled, 2 enabled busy, 3 enabled error.
    pub runtime_state: u32,
    pub ttmp_setup: bool,
}

/// A pending debug event (QUERY_DEBUG_EVENT).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct DebugEvent {
    pub exception_mask: u64,
    pub gpu_id: u32,
    pub queue_id: QueueId,
}

/// `1 << (code - 1)`, as the header's `KFD_EC_MASK(ecode)`.
pub const fn ec_mask(code: u32) -> u64 {
    1u64 << (code - 1)
}

/// The exception bit new queues carry while debugging is on; they cannot be suspended until
/// it is cleared (GET_QUEUE_SNAPSHOT or SUSPEND_QUEUES with it in the clear mask).
pub const EC_QUEUE_NEW_MASK: u64 = ec_mask(sys::EC_QUEUE_NEW);
/// The runtime-enable notification a self-debugger acknowledges with SEND_RUNTIME_EVENT.
pub const EC_PROCESS_RUNTIME_MASK: u64 = ec_mask(sys::EC_PROCESS_RUNTIME);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_bits_decode_error_before_invalid() {
        assert_eq!(QueueStatus::decode(5, 5).state, QueueState::Ok);
        assert_eq!(QueueStatus::decode(5, 5 | 0x8000_0000).state, QueueState::Invalid);
        assert_eq!(QueueStatus::decode(5, 5 | 0x4000_0000).state, QueueState::Error);
        assert_eq!(QueueStatus::decode(5, 5 | 0xC000_0000).state, QueueState::Error);
    }

    #[test]
    fn grace_and_update_encode_as_the_kernel_reads_them() {
        assert_eq!(GracePeriod::Default.raw(), 0xffff_ffff);
        assert_eq!(GracePeriod::Clocks1k(3).raw(), 3);
        let u = QueueUpdate {
            ring_base_address: 0x7000_0000,
            ring_size: 1 << 20,
            percentage: 100,
            pm4_target_xcc: 2,
            priority: 7,
        };
        let raw = u.to_raw(9);
        assert_eq!(
            (raw.queue_id, raw.queue_percentage, raw.queue_priority),
            (9, 100 | (2 << 8), 7)
        );
        assert_eq!(QueueUpdate::disable().to_raw(1).ring_base_address, 0);
    }

    #[test]
    fn grace_encodes_for_the_preempt_ioctl() {
        assert_eq!(GracePeriod::Default.preempt_ioctl_raw(), (0, 0));
        assert_eq!(GracePeriod::Clocks1k(0).preempt_ioctl_raw(), (1, 0));
        assert_eq!(GracePeriod::Clocks1k(255).preempt_ioctl_raw(), (1, 255));
    }

    #[test]
    fn exception_masks_match_the_header_macro() {
        // KFD_EC_MASK(EC_QUEUE_NEW) with EC_QUEUE_NEW = 31.
        assert_eq!(EC_QUEUE_NEW_MASK, 1 << 30);
        assert_eq!(EC_PROCESS_RUNTIME_MASK, 1 << (sys::EC_PROCESS_RUNTIME - 1));
    }
}
