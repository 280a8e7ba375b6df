//! What a session is opened with: the device, the Lv3 mechanism, the grace period, the host
//! workers, the Lv1 launcher settings; and the level a stream is suspended at.
use crate::error::{Error, Result};
use host_device::WorkerExe;
use kfd::GracePeriod;
use lv3::MechanismChoice;
use std::fmt;
use std::str::FromStr;

/// Where a session runs. `FromStr`: `auto`, `host`, `kfd`, `hip` (= `hip:0`), `hip:N`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceSpec {
    /// `hip:0` when it can run here, else the host device.
    Auto,
    /// The host device: CPU worker processes standing in for a GPU (host Lv3 = SIGSTOP/SIGCONT).
    Host,
    /// HIP device N: low-priority streams whose KFD queues are discovered, Lv3 through lv3.
    Hip(u32),
    /// `/dev/kfd` alone, no HIP: only explicit KFD queue ids can be bound (a scheduler that
    /// knows its queues).
    Kfd,
}

impl FromStr for DeviceSpec {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "auto" => Ok(DeviceSpec::Auto),
            "host" => Ok(DeviceSpec::Host),
            "kfd" => Ok(DeviceSpec::Kfd),
            "hip" => Ok(DeviceSpec::Hip(0)),
            _ => s
                .strip_prefix("hip:")
                .and_then(|n| n.parse().ok())
                .map(DeviceSpec::Hip)
                .ok_or_else(|| Error::invalid(format!("unknown device {s:?}: expected auto, host, kfd or hip:N"))),
        }
    }
}

impl fmt::Display for DeviceSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceSpec::Auto => f.write_str("auto"),
            DeviceSpec::Host => f.write_str("host"),
            DeviceSpec::Kfd => f.write_str("kfd"),
            DeviceSpec::Hip(n) => write!(f, "hip:{n}"),
        }
    }
}

/// The level a low-priority stream is suspended at. `FromStr`: `auto`, `lv1` (or `1`), `lv3`
/// (or `3`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Level {
    /// Lv3 where the session has an Lv3 mechanism, else Lv1.
    #[default]
    Auto,
    /// Progressive launching: suspend stops the library's launcher and waits until what it had
    /// in flight (and anything else on the stream) completed. Only commands submitted through
    /// the library are held back.
    Lv1,
    /// Preemption of the running work where it is (CWSR on a GPU, SIGSTOP on the host).
    Lv3,
}

impl FromStr for Level {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "auto" => Ok(Level::Auto),
            "lv1" | "1" => Ok(Level::Lv1),
            "lv3" | "3" => Ok(Level::Lv3),
            _ => Err(Error::invalid(format!(
                "unknown level {s:?}: expected auto, lv1 or lv3"
            ))),
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Level::Auto => "auto",
            Level::Lv1 => "lv1",
            Level::Lv3 => "lv3",
        })
    }
}

/// Parses a mechanism name (`auto`, `ioctl`, `dbg-trap`, `update-queue`) into the API's error.
pub fn parse_mechanism(s: &str) -> Result<MechanismChoice> {
    s.parse()
        .map_err(|e: lv3::mechanism::UnknownMechanism| Error::invalid(e.to_string()))
}

/// A grace period from its wire form: 0 = the firmware's default, 1..=255 = that many units of
/// about 1K GPU clocks (the CP's field is 8 bits).
pub fn grace_from_units(units: u32) -> Result<GracePeriod> {
    match units {
        0 => Ok(GracePeriod::Default),
        n => u8::try_from(n)
            .map(GracePeriod::Clocks1k)
            .map_err(|_| Error::invalid(format!("grace period {n}: at most 255 units of ~1K GPU clocks"))),
    }
}

/// How a session is opened. `Default`: `auto` mechanism, the firmware's grace period, no force,
/// the default host workers and worker program, XSched's Lv1 settings.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The Lv3 mechanism on a GPU or `kfd` session (`auto` on the host device).
    pub mechanism: MechanismChoice,
    /// SUSPEND_QUEUES' and PREEMPT_QUEUES' grace period (update-queue has none).
    pub grace: GracePeriod,
    /// Build the asked mechanism even where the gathered facts say it cannot work (tests on a
    /// GPU-less kernel); its setup can still fail.
    pub force: bool,
    /// Worker processes per host LP stream; 0 = every core but one (at least 1).
    pub host_workers: usize,
    /// The host worker program; `None`: `$PREEMPT_HOST_WORKER`, else `preempt-host-worker`
    /// beside the running executable ([`crate::host::default_worker`]).
    pub worker: Option<WorkerExe>,
    /// The Lv1 launcher: at most `threshold` commands in flight, a sync point every `batch`.
    pub lv1: lv1::Config,
    /// GPU: command slots per delay stream (each submitted delay command books one); 0 = 65536.
    pub gpu_slots: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_and_print_back() {
        for s in ["auto", "host", "kfd", "hip:0", "hip:3"] {
            assert_eq!(s.parse::<DeviceSpec>().unwrap().to_string(), s);
        }
        assert_eq!("hip".parse::<DeviceSpec>().unwrap(), DeviceSpec::Hip(0));
        for bad in ["gpu", "hip:", "hip:-1", "hip:x", ""] {
            let e = bad.parse::<DeviceSpec>().unwrap_err();
            assert_eq!(e.kind, crate::ErrorKind::InvalidArgument, "{bad}");
        }
        assert_eq!("3".parse::<Level>().unwrap(), Level::Lv3);
        assert_eq!("lv1".parse::<Level>().unwrap().to_string(), "lv1");
        assert!("lv2".parse::<Level>().is_err());
        assert!(parse_mechanism("dbg-trap").is_ok());
        assert!(
            parse_mechanism("sigstop")
                .unwrap_err()
                .message
                .contains("expected auto")
        );
        assert_eq!(grace_from_units(0).unwrap(), GracePeriod::Default);
        assert_eq!(grace_from_units(4).unwrap(), GracePeriod::Clocks1k(4));
        assert!(grace_from_units(256).is_err());
    }
}
