//! How a kernel answers the probe for the project's patched preempt ioctls (a PREEMPT_QUEUES with
//! no ids: nr 0x40, zero flags, zero count), and what that answer means.
//!
//! "Absent" has two answers (docs/kfd-facts.md#dispatch-on-nr-only):
//! - **ENOTTY**: upstream amdkfd, whose command table ends below 0x40 (every number past its end
//!   is ENOTTY);
//! - **EINVAL**: ROCm's out-of-tree (DKMS) amdgpu, whose table reaches 0x87, so 0x40 is a hole in
//!   it and the dispatcher answers EINVAL for the hole's NULL handler.
//!
//! The patched handler never answers the zero-count probe with EINVAL: with zero flags, zero pad
//! and `num_queues` 0 it writes `version` and returns 0 before any other check can fail
//! (`patches/0003`, the `!args->num_queues` return). So EINVAL on this exact probe is a hole, not
//! a patched kernel refusing its arguments.
use crate::{KfdError, Op, Result};
use nix::errno::Errno;
use serde::Serialize;

/// The answer to the patched-ioctl probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "answer")]
pub enum PreemptProbe {
    /// The project's patched ioctls, at this ABI version (`KFD_PREEMPT_QUEUES_VERSION`).
    Present { version: u32 },
    /// ENOTTY: an upstream kernel without the patch.
    AbsentEnotty,
    /// EINVAL: a ROCm DKMS driver without the patch (0x40 is a hole in its command table).
    AbsentEinval,
}

impl PreemptProbe {
    /// Reads the kernel's answer: `Ok(version)` (the struct the kernel wrote back) or the errno.
    /// A kernel that answers 0x40 without writing a version is not running this project's patch
    /// (some other ioctl has that number): an error, so that nothing uses it.
    pub fn from_answer(answer: std::result::Result<u32, Errno>) -> Result<Self> {
        match answer {
            Ok(v) if v >= 1 => Ok(PreemptProbe::Present { version: v }),
            Ok(_) => Err(KfdError {
                partial: None,
                op: Op::PreemptQueues,
                queue: None,
                errno: Errno::ENOTTY,
                meaning: "ioctl nr 0x40 answered without writing a version: it is not the project's \
                          AMDKFD_IOC_PREEMPT_QUEUES (another patch uses that number)",
            }),
            Err(Errno::ENOTTY) => Ok(PreemptProbe::AbsentEnotty),
            Err(Errno::EINVAL) => Ok(PreemptProbe::AbsentEinval),
            Err(e) => Err(KfdError::new(Op::PreemptQueues, None, e)),
        }
    }

    /// The ABI version if present.
    pub fn version(self) -> Option<u32> {
        match self {
            PreemptProbe::Present { version } => Some(version),
            _ => None,
        }
    }

    /// One line for reports: what was answered and what it means.
    pub fn describe(self) -> String {
        match self {
            PreemptProbe::Present { version } => {
                format!("patched kernel: AMDKFD_IOC_PREEMPT_QUEUES answers, ABI version {version}")
            }
            PreemptProbe::AbsentEnotty => {
                "ENOTTY: not the project's patched kernel (patches/), nr 0x40/0x41 are absent (upstream amdkfd)"
                    .to_string()
            }
            PreemptProbe::AbsentEinval => "EINVAL on the zero-count probe: not the project's patched kernel; nr 0x40 \
                 is a hole in the command table (ROCm's DKMS amdgpu, whose table reaches 0x87)"
                .to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_absent_answers_and_the_present_one() {
        assert_eq!(
            PreemptProbe::from_answer(Ok(1)).unwrap(),
            PreemptProbe::Present { version: 1 }
        );
        assert_eq!(
            PreemptProbe::from_answer(Err(Errno::ENOTTY)).unwrap(),
            PreemptProbe::AbsentEnotty
        );
        assert_eq!(
            PreemptProbe::from_answer(Err(Errno::EINVAL)).unwrap(),
            PreemptProbe::AbsentEinval
        );
        assert!(PreemptProbe::AbsentEinval.describe().contains("DKMS"));
        assert!(PreemptProbe::AbsentEnotty.describe().starts_with("ENOTTY"));
        assert_eq!(PreemptProbe::AbsentEinval.version(), None);
    }

    #[test]
    fn other_answers_are_errors_not_absence() {
        let e = PreemptProbe::from_answer(Ok(0)).unwrap_err();
        assert!(e.to_string().contains("without writing a version"), "{e}");
        let e = PreemptProbe::from_answer(Err(Errno::EBADF)).unwrap_err();
        assert_eq!(e.errno, Errno::EBADF);
    }
}
