//! What a session is opened with: the device, the Lv3 mechanism, the grace period, the host
//! workers, the Lv1 launcher settings; and the level a stream is suspended at.
//!
//! Long because it is the one grammar of devices, levels and mechanisms for every front end, its
//! exhaustive matches side by side (the device recipe of docs/conventions.md edits them in one
//! place).
use crate::error::{Error, Result};
use gpu_device::LpState;
use host_device::WorkerExe;
use kfd::GracePeriod;
use lv3::MechanismChoice;
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

pub use policies::any::{Choice as PolicyChoice, Params as PolicyParams};
pub use policies::laxity::LaxityParams;

/// The one wording of a name that is not in the grammar, in every front end (the C ABI, Python,
/// `preempt-lat`): `unknown <what> "<given>": expected <the words>`. lv3's mechanism names read
/// the same way (`lv3::mechanism::UnknownMechanism`).
fn unknown(what: &str, given: &str, expected: &str) -> Error {
    Error::invalid(format!("unknown {what} {given:?}: expected {expected}"))
}

/// Where a session runs. `FromStr`: the words of [`DeviceSpec::WORDS`] (`auto`, `host`, `kfd`,
/// `hip:N`), `hip` (= `hip:0`) and `host:N` (`host` = `host:0`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceSpec {
    /// `hip:0` when it can run here, else the host device.
    Auto,
    /// Host device N: CPU worker processes standing in for a GPU (host Lv3 = SIGSTOP/SIGCONT).
    /// Every N runs the same way; N is the device's identity for the scheduler daemon, which
    /// schedules each device apart (`host:0` and `host:1` stand in for two GPUs of one node).
    Host(u32),
    /// HIP device N: low-priority streams whose KFD queues are discovered, Lv3 through lv3.
    Hip(u32),
    /// `/dev/kfd` alone, no HIP: only explicit KFD queue ids can be bound (a scheduler that
    /// knows its queues).
    Kfd,
}

// The one table of devices: a new device is a variant, its entry in `WORDS` and its arm in each
// exhaustive match below; the grammar, its error text, `preempt-lat --device`'s help and every
// caller that asks a property (`is_host`) follow.
impl DeviceSpec {
    /// Every word of the grammar, in the order messages and help list them: `Hip(0)` stands for
    /// every `hip:N`.
    pub const WORDS: [DeviceSpec; 4] = [DeviceSpec::Auto, DeviceSpec::HOST, DeviceSpec::Kfd, DeviceSpec::Hip(0)];

    /// The host device `host` (= `host:0`).
    pub const HOST: DeviceSpec = DeviceSpec::Host(0);

    /// The device's word in the grammar (`hip:N` for every HIP device).
    pub const fn word(self) -> &'static str {
        match self {
            DeviceSpec::Auto => "auto",
            DeviceSpec::Host(_) => "host",
            DeviceSpec::Kfd => "kfd",
            DeviceSpec::Hip(_) => "hip:N",
        }
    }

    /// What the device is, in one line (`preempt-lat --device`'s help for its word).
    pub const fn summary(self) -> &'static str {
        match self {
            DeviceSpec::Auto => "an AMD GPU (hip:0) if usable, else the host device",
            DeviceSpec::Host(_) => {
                "the host device: CPU worker processes; host figures, not GPU figures (host = host:0)"
            }
            DeviceSpec::Kfd => "/dev/kfd alone: binds KFD queue ids a scheduler already has",
            DeviceSpec::Hip(_) => "HIP device N (hip = hip:0)",
        }
    }

    /// Whether the device is CPU worker processes standing in for a GPU: its figures are host
    /// figures, never GPU figures; its Lv3 is SIGSTOP/SIGCONT (no KFD mechanism, no grace
    /// period) and its LP commands have no GPU wave state (no LP state).
    pub const fn is_host(self) -> bool {
        match self {
            DeviceSpec::Host(_) => true,
            DeviceSpec::Auto | DeviceSpec::Hip(_) | DeviceSpec::Kfd => false,
        }
    }

    /// Whether the device has Lv2 ([`Level::Lv2`]: a stream finishes the commands it runs and
    /// starts no new one): the host device's workers do; an AMD GPU (`hip:N`, `kfd`) has no
    /// per-queue route under the hardware scheduler ([`lv2_unavailable`] says why). `auto` is
    /// whichever device it resolves to, so not known here: false.
    pub const fn has_lv2(self) -> bool {
        match self {
            DeviceSpec::Host(_) => true,
            DeviceSpec::Auto | DeviceSpec::Hip(_) | DeviceSpec::Kfd => false,
        }
    }

    /// What the grammar expects, for its error text: the words of [`DeviceSpec::WORDS`]
    /// (`auto, host, kfd or hip:N`) and what N is.
    pub fn expected() -> String {
        let words = Self::WORDS.map(DeviceSpec::word);
        let listed = match words.split_last() {
            Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
            _ => words.join(""),
        };
        format!("{listed} (N = HIP device index, e.g. hip:0; hip = hip:0; host:N = host device N, host = host:0)")
    }
}

impl FromStr for DeviceSpec {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        if let Some(d) = Self::WORDS.into_iter().find(|d| d.word() == s) {
            return Ok(d);
        }
        let indexed = |prefix: &str| s.strip_prefix(prefix).and_then(|n| n.parse().ok());
        match s {
            "hip" => Ok(DeviceSpec::Hip(0)),
            _ => indexed("hip:")
                .map(DeviceSpec::Hip)
                .or_else(|| indexed("host:").map(DeviceSpec::Host))
                .ok_or_else(|| unknown("device", s, &Self::expected())),
        }
    }
}

impl fmt::Display for DeviceSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceSpec::Hip(n) => write!(f, "hip:{n}"),
            // `host` stays `host` (what results and the front ends have always said).
            DeviceSpec::Host(n) if *n > 0 => write!(f, "host:{n}"),
            d => f.write_str(d.word()),
        }
    }
}

/// Where the toolkit says why an AMD GPU has no Lv2 (every refusal of Lv2 on a GPU points there).
pub const LV2_ON_GPU_DOC: &str = "docs/kfd-facts.md#lv2-on-gfx942-no-route-under-hws";

/// Why an AMD GPU (`hip:N`, `kfd`) has no Lv2, in one line ending with where the sources are
/// ([`LV2_ON_GPU_DOC`]).
pub const LV2_ON_GPU_WHY: &str = "there is no per-queue Lv2 on gfx942 under HWS (the hardware scheduler takes one \
    queue off the GPU only by saving its waves, which is Lv3; it drains only with HWS off or for every queue of the \
    node): use Lv3 or Lv1; see docs/kfd-facts.md#lv2-on-gfx942-no-route-under-hws";

/// The refusal of [`Level::Lv2`] on `device`, an AMD GPU (`hip:N`, `kfd`): `Unavailable`, one
/// line saying why and where the sources are ([`LV2_ON_GPU_WHY`]), in every front end.
pub fn lv2_unavailable(device: DeviceSpec) -> Error {
    Error::new(
        crate::ErrorKind::Unavailable,
        format!("Lv2 is unavailable on {device}: {LV2_ON_GPU_WHY}"),
    )
}

/// The level a low-priority stream is suspended at. `FromStr`: `auto` (or `0`), `lv1` (or `1`),
/// `lv2` (or `2`), `lv3` (or `3`); the numbers are C's `preempt_level` ([`Level::from_number`]).
/// With the `serde` feature it serializes as its number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum Level {
    /// Lv3 where the session has an Lv3 mechanism, else Lv1.
    #[default]
    Auto,
    /// Progressive launching: suspend stops the library's launcher and waits until what it had
    /// in flight (and anything else on the stream) completed. Only commands submitted through
    /// the library are held back.
    Lv1,
    /// Deactivation (XSched's Lv2): suspend lets the commands running finish and starts no new
    /// one; those held back run after resume. The host device only (its workers finish the command
    /// they run, about the rest of one command, at most T); an AMD GPU has none
    /// ([`lv2_unavailable`]).
    Lv2,
    /// Preemption of the running work where it is (CWSR on a GPU, SIGSTOP on the host).
    Lv3,
}

impl Level {
    /// Every level, in the order of their numbers.
    pub const ALL: [Level; 4] = [Level::Auto, Level::Lv1, Level::Lv2, Level::Lv3];

    /// The level's number: 0 (auto), 1, 2 or 3, as C's `preempt_level` and as results record it.
    pub fn number(self) -> u8 {
        match self {
            Level::Auto => 0,
            Level::Lv1 => 1,
            Level::Lv2 => 2,
            Level::Lv3 => 3,
        }
    }

    /// The level of a number (C's `preempt_level`), with the grammar's error for any other.
    pub fn from_number(n: i64) -> Result<Level> {
        Level::ALL
            .into_iter()
            .find(|l| i64::from(l.number()) == n)
            .ok_or_else(|| unknown_level(&n.to_string()))
    }
}

fn unknown_level(s: &str) -> Error {
    unknown("level", s, "auto (0), lv1 (1), lv2 (2) or lv3 (3)")
}

impl FromStr for Level {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Level::ALL
            .into_iter()
            .find(|l| s == l.to_string() || s == l.number().to_string())
            .ok_or_else(|| unknown_level(s))
    }
}

/// Written as its number (0, 1, 2 or 3), as every result of `preempt-lat` always has.
#[cfg(feature = "serde")]
impl serde::Serialize for Level {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_u8(self.number())
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Level::Auto => "auto",
            Level::Lv1 => "lv1",
            Level::Lv2 => "lv2",
            Level::Lv3 => "lv3",
        })
    }
}

/// Parses a mechanism name (`auto` or one of [`mechanism_names`]) into the API's error; an old
/// name (`ioctl`) is refused with its new one.
pub fn parse_mechanism(s: &str) -> Result<MechanismChoice> {
    s.parse()
        .map_err(|e: lv3::mechanism::UnknownMechanism| Error::invalid(e.to_string()))
}

/// The Lv3 mechanisms' names in `auto`'s order (lv3's `MechanismKind::AUTO_ORDER`): what the
/// bindings list (Python's `preempt_kfd.MECHANISMS`).
pub fn mechanism_names() -> Vec<&'static str> {
    lv3::MechanismKind::AUTO_ORDER
        .into_iter()
        .map(lv3::MechanismKind::name)
        .collect()
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

/// Light LP blocks per CU by default: 2 blocks of 1024 threads fill every wave slot of a
/// gfx90a/gfx942 CU (8 waves per SIMD), so an HP kernel cannot slip in beside a running LP one.
pub const DEFAULT_BLOCKS_PER_CU: u32 = 2;
/// Which delay kernel the device's LP and HP commands run, and its grid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelChoice {
    /// Light (a few VGPRs per wave) or heavy (a CU's whole register file and LDS).
    pub state: LpState,
    /// Light kernel only: blocks of 1024 threads per CU (the heavy one always runs 1).
    pub blocks_per_cu: u32,
}

/// Overrides the light kernel's blocks per CU (1..=8) for a latency run
/// ([`KernelChoice::for_state`]); other values are ignored.
pub const BLOCKS_PER_CU_ENV: &str = "PREEMPT_LP_BLOCKS_PER_CU";

impl KernelChoice {
    /// The kernel of `state`, with [`BLOCKS_PER_CU_ENV`]'s blocks per CU for the light one where
    /// it is set to 1..=8 (2 fill the 32 wave slots of a gfx90a/gfx942 CU, 8 per SIMD, so an HP
    /// probe cannot slip in beside a running LP command; the heavy kernel always runs one block
    /// per CU: it fills the CU's registers and LDS by itself).
    pub fn for_state(state: LpState) -> Self {
        KernelChoice {
            state,
            blocks_per_cu: std::env::var(BLOCKS_PER_CU_ENV)
                .ok()
                .and_then(|v| v.trim().parse().ok())
                .filter(|n| (1..=8).contains(n))
                .unwrap_or(DEFAULT_BLOCKS_PER_CU),
        }
    }
}

impl Default for KernelChoice {
    fn default() -> Self {
        KernelChoice {
            state: LpState::Light,
            blocks_per_cu: DEFAULT_BLOCKS_PER_CU,
        }
    }
}

/// How a session is opened. `Default`: `auto` mechanism, the firmware's grace period, no force,
/// the default host workers and worker program, XSched's Lv1 settings, the light delay kernel,
/// Lv3 armed, Lv1 suspends that wait, no records kept, no scheduler daemon (the in-process
/// helper).
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
    /// GPU: the delay kernel behind `submit_delay` (light, 2 blocks per CU by default).
    pub gpu_kernel: KernelChoice,
    /// Build no Lv3 mechanism: the session's streams are Lv1 only (a GPU process that never
    /// preempts at Lv3 is then never put in debug mode by dbg-trap).
    pub no_lv3: bool,
    /// Lv1 suspend only stops the launcher and returns at once (XSched's scheduler); by default
    /// it also waits until the commands in flight completed, so the stream holds no running work.
    pub lv1_no_wait: bool,
    /// Keep what measurements need: the launcher's completions and the device's records
    /// ([`crate::LpStream::take_completions`], [`crate::LpStream::verify`]). Off by default: an
    /// application that never reads them would keep them all.
    pub keep_records: bool,
    /// The scheduler daemon's socket (docs/scheduler-daemon.md): the session's helper calls go
    /// to the daemon, which schedules across the node's processes; `None`: the in-process
    /// helper. Not read from the environment here: front ends resolve the word `unix:PATH`,
    /// `none` or `$PREEMPT_SCHEDULER` with [`crate::sched::scheduler_setting`].
    pub scheduler: Option<PathBuf>,
    /// How the session's client talks to the daemon (lease, timeouts, its name in the log).
    pub scheduler_client: ClientOptions,
    /// The helper's time-driven policy over the streams scheduled with it
    /// ([`crate::Session::helper_schedule`]; docs/c-api.md#the-helpers-policy): utilization
    /// partition, K-EDF or laxity. `None`: highest-priority-first blocks only. It runs in this
    /// process beside the blocks, also when they go to a scheduler daemon.
    pub policy: Option<PolicyChoice>,
}

/// The longest round of a utilization partition (a longer one would starve a queue for that
/// long).
pub const MAX_POLICY_ROUND: Duration = Duration::from_secs(10);

/// The most streams that run at once under K-EDF (more than a session has).
pub const MAX_POLICY_K: usize = 4096;

/// The helper's policy from its word (`hpf`, `up`, `kedf`, `laxity`, as `preempt-lat priority
/// --policy`) and the settings its word needs: `round` for `up`, `k` for `kedf` (ignored by the
/// others). `hpf` is `None`: blocks only.
pub fn policy_choice(word: &str, round: Duration, k: usize) -> Result<Option<PolicyChoice>> {
    let policy = crate::Policy::from_word(word).ok_or_else(|| unknown("policy", word, &crate::Policy::expected()))?;
    let choice = match policy {
        crate::Policy::HighestFirst => return Ok(None),
        crate::Policy::Partition => {
            if round.is_zero() || round > MAX_POLICY_ROUND {
                return Err(Error::invalid(format!(
                    "policy up: the round must be more than 0 and at most {MAX_POLICY_ROUND:?} (got {round:?})"
                )));
            }
            PolicyChoice::Partition { round }
        }
        crate::Policy::KEdf => {
            if k == 0 || k > MAX_POLICY_K {
                return Err(Error::invalid(format!(
                    "policy kedf: k (how many streams run at once) must be 1 to {MAX_POLICY_K} (got {k})"
                )));
            }
            PolicyChoice::KEdf { k }
        }
        crate::Policy::Laxity => PolicyChoice::Laxity,
    };
    Ok(Some(choice))
}

/// How a scheduler daemon's client behaves ([`Options::scheduler_client`], `crate::sched`).
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// The client's name in the daemon's log (at most `crate::sched::proto::MAX_NAME` bytes).
    pub name: String,
    /// While streams are suspended for the daemon, the longest the daemon may stay silent
    /// (the client pings it every quarter of this) before the client resumes them and
    /// reconnects. A daemon that dies is noticed at once (end of stream), whatever this is.
    pub lease: Duration,
    /// The longest any call waits on the daemon: a reply (`enter`, `leave`, `register`, the
    /// first connection's welcome), a write to it, `close`. Past it, `enter` returns with
    /// [`crate::sched::Entered::scheduled`] false and the block runs unscheduled; `leave`,
    /// `register` and `unregister` go on (sent, and recorded for the next daemon); the first
    /// connection fails. So a hung daemon delays an HP block by at most this much. Default
    /// [`DEFAULT_REPLY_TIMEOUT`], or [`REPLY_TIMEOUT_ENV`] in milliseconds.
    pub reply_timeout: Duration,
    /// The longest wait between two connection attempts.
    pub reconnect_max: Duration,
    /// Uids trusted as the daemon besides root, this process's own and the system user
    /// `preempt-sched` (see `crate::sched::client::trust`; also `PREEMPT_SCHEDULER_UID`).
    pub trusted_uids: Vec<u32>,
}

/// Default of [`ClientOptions::lease`]: a dead or hung daemon's suspensions are resumed within
/// ~50 ms.
pub const DEFAULT_LEASE: Duration = Duration::from_millis(50);

/// Default of [`ClientOptions::reply_timeout`]: the order of the lease, so that a sick daemon
/// costs an HP block about what its lease costs an LP stream.
pub const DEFAULT_REPLY_TIMEOUT: Duration = Duration::from_millis(50);

/// The environment variable that sets [`ClientOptions::reply_timeout`] in milliseconds
/// (1..=60000) for programs that cannot set options (C and Python front ends use the default
/// options); anything else is ignored.
pub const REPLY_TIMEOUT_ENV: &str = "PREEMPT_SCHEDULER_TIMEOUT_MS";

impl Default for ClientOptions {
    fn default() -> Self {
        let reply_timeout = std::env::var(REPLY_TIMEOUT_ENV)
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .filter(|ms| (1..=60_000).contains(ms))
            .map_or(DEFAULT_REPLY_TIMEOUT, Duration::from_millis);
        ClientOptions {
            name: format!("pid {}", std::process::id()),
            lease: DEFAULT_LEASE,
            reply_timeout,
            reconnect_max: Duration::from_millis(500),
            trusted_uids: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_and_print_back() {
        for d in DeviceSpec::WORDS {
            assert_eq!(d.to_string().parse::<DeviceSpec>().unwrap(), d);
            assert!(!d.summary().is_empty() && !d.summary().contains('\n'), "{d}");
        }
        assert_eq!("hip:3".parse::<DeviceSpec>().unwrap().to_string(), "hip:3");
        assert_eq!("hip".parse::<DeviceSpec>().unwrap(), DeviceSpec::Hip(0));
        assert_eq!("host:0".parse::<DeviceSpec>().unwrap(), DeviceSpec::HOST);
        assert_eq!("host".parse::<DeviceSpec>().unwrap(), DeviceSpec::Host(0));
        assert_eq!("host:7".parse::<DeviceSpec>().unwrap(), DeviceSpec::Host(7));
        assert_eq!(DeviceSpec::Host(7).to_string(), "host:7");
        assert!(DeviceSpec::Host(7).is_host() && DeviceSpec::Host(7).has_lv2());
        for bad in [
            "gpu",
            "hip:",
            "hip:-1",
            "hip:x",
            "",
            "host:",
            "host:-1",
            "host:x",
            "host:4294967296",
            "host0",
        ] {
            let e = bad.parse::<DeviceSpec>().unwrap_err();
            assert_eq!(e.kind, crate::ErrorKind::InvalidArgument, "{bad}");
        }
        for l in Level::ALL {
            assert_eq!(l.to_string().parse::<Level>().unwrap(), l);
            assert_eq!(l.number().to_string().parse::<Level>().unwrap(), l);
            assert_eq!(Level::from_number(i64::from(l.number())).unwrap(), l);
        }
        assert_eq!("3".parse::<Level>().unwrap(), Level::Lv3);
        assert_eq!("lv1".parse::<Level>().unwrap().to_string(), "lv1");
        assert_eq!("2".parse::<Level>().unwrap(), Level::Lv2);
        assert_eq!(Level::from_number(2).unwrap().to_string(), "lv2");
        // One wording for a word outside the grammar, whether it came as a name or a number.
        let by_name = "lv4".parse::<Level>().unwrap_err();
        assert_eq!(
            by_name.message,
            r#"unknown level "lv4": expected auto (0), lv1 (1), lv2 (2) or lv3 (3)"#
        );
        assert_eq!(by_name.kind, crate::ErrorKind::InvalidArgument);
        assert_eq!(
            Level::from_number(4).unwrap_err().message,
            "4".parse::<Level>().unwrap_err().message
        );
        // The words listed once each, in the table's order; the last after "or".
        assert_eq!(
            DeviceSpec::expected(),
            "auto, host, kfd or hip:N (N = HIP device index, e.g. hip:0; hip = hip:0; host:N = host device N, host = \
             host:0)"
        );
        assert_eq!(
            "gpu".parse::<DeviceSpec>().unwrap_err().message,
            format!("unknown device \"gpu\": expected {}", DeviceSpec::expected())
        );
        let hosts: Vec<_> = DeviceSpec::WORDS.into_iter().filter(|d| d.is_host()).collect();
        assert_eq!(
            hosts,
            [DeviceSpec::HOST],
            "only the host device is CPU worker processes"
        );
        let lv2: Vec<_> = DeviceSpec::WORDS.into_iter().filter(|d| d.has_lv2()).collect();
        assert_eq!(lv2, [DeviceSpec::HOST], "Lv2 on the host device only");
        assert_eq!(mechanism_names(), lv3::MechanismKind::names_where(|_| true));
        assert!(parse_mechanism("dbg-trap").is_ok());
        assert!(
            parse_mechanism("sigstop")
                .unwrap_err()
                .message
                .contains("expected auto")
        );
        let e = parse_mechanism("ioctl").unwrap_err();
        assert_eq!(e.kind, crate::ErrorKind::InvalidArgument);
        assert!(e.message.contains("renamed preempt-queues"), "{}", e.message);
        assert_eq!(grace_from_units(0).unwrap(), GracePeriod::Default);
        assert_eq!(grace_from_units(4).unwrap(), GracePeriod::Clocks1k(4));
        assert!(grace_from_units(256).is_err());
    }

    /// The one refusal of Lv2 on an AMD GPU: Unavailable (C's PREEMPT_ERR_UNAVAILABLE, Python's
    /// Unavailable), one line naming the device, saying there is no per-queue Lv2 under HWS and
    /// pointing to the facts.
    #[test]
    fn lv2_on_a_gpu_is_unavailable_and_says_why_and_where() {
        for d in [DeviceSpec::Hip(0), DeviceSpec::Hip(3), DeviceSpec::Kfd] {
            assert!(!d.has_lv2(), "{d}");
            let e = lv2_unavailable(d);
            assert_eq!(e.kind, crate::ErrorKind::Unavailable, "{d}");
            assert!(!e.message.contains('\n'), "{}", e.message);
            assert!(
                e.message.starts_with(&format!("Lv2 is unavailable on {d}: ")),
                "{}",
                e.message
            );
            assert!(
                e.message.contains("no per-queue Lv2 on gfx942 under HWS"),
                "{}",
                e.message
            );
            assert!(e.message.ends_with(LV2_ON_GPU_DOC) && LV2_ON_GPU_WHY.ends_with(LV2_ON_GPU_DOC));
        }
        // The pointer is the anchor GitHub makes of the section's heading.
        let facts = include_str!("../../docs/kfd-facts.md");
        let heading = facts
            .lines()
            .find_map(|l| l.strip_prefix("## Lv2 on "))
            .expect("docs/kfd-facts.md has the Lv2 section");
        let slug: String = format!("lv2 on {heading}")
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-')
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        assert_eq!(LV2_ON_GPU_DOC, format!("docs/kfd-facts.md#{slug}"));
    }
}
