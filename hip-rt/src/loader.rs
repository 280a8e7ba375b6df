//! Where HIP and hiprtc are looked for (pure: builds the searches that `ffi` runs).
//!
//! A HIP runtime already loaded in the process comes first: two HIP runtimes in one process do
//! not know each other's streams, so a `hipStream_t` that one of them made (ours, handed to
//! PyTorch as `torch.cuda.ExternalStream`) would mean nothing to the other
//! (docs/kfd-facts.md#one-hip-runtime-per-process). Only when none is loaded are the candidates
//! opened, in [`library_candidates`]'s order.
use std::fmt;

/// Sonames tried, newest ROCm first.
pub const HIP_SONAMES: [&str; 4] = [
    "libamdhip64.so.7",
    "libamdhip64.so.6",
    "libamdhip64.so.5",
    "libamdhip64.so",
];
/// hiprtc's sonames, newest ROCm first (HIP <= 5.2 has hiprtc inside libamdhip64 instead).
pub const HIPRTC_SONAMES: [&str; 4] = ["libhiprtc.so.7", "libhiprtc.so.6", "libhiprtc.so.5", "libhiprtc.so"];

/// Why hip-rt uses the library it uses ([`crate::Hip::library_origin`]).
///
/// ```no_run
/// let hip = hip_rt::Hip::load()?;
/// match hip.library_origin() {
///     hip_rt::Origin::InProcess { probe } => println!("{probe}: the runtime already in this process"),
///     why => println!("{}: {why}", hip.library_path()),
/// }
/// # Ok::<(), hip_rt::HipError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// It was already loaded in this process (by another library, e.g. PyTorch, or by an earlier
    /// load here), found as `probe` with `RTLD_NOLOAD`, which loads nothing: the process keeps
    /// one HIP runtime.
    InProcess { probe: String },
    /// None was loaded: `candidate` is the first candidate that opened.
    Opened { candidate: String },
    /// hiprtc inside libamdhip64 (HIP <= 5.2).
    BuiltIn,
}

impl Origin {
    /// A few words, for one-line descriptions.
    pub fn short(&self) -> &'static str {
        match self {
            Origin::InProcess { .. } => "already in the process",
            Origin::Opened { .. } => "opened",
            Origin::BuiltIn => "built into libamdhip64",
        }
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::InProcess { probe } => write!(
                f,
                "already loaded in this process (found as {probe}, e.g. by PyTorch): used as it is, no second runtime"
            ),
            Origin::Opened { candidate } => write!(
                f,
                "none was loaded in this process: opened {candidate}, the first candidate that loads"
            ),
            Origin::BuiltIn => write!(f, "built into libamdhip64 (HIP <= 5.2 has no separate libhiprtc)"),
        }
    }
}

/// Where to find one library: first among the libraries already in the process (`in_process`:
/// sonames, file names or paths probed with `RTLD_NOLOAD`), then the first of `open` that loads.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Search {
    pub in_process: Vec<String>,
    pub open: Vec<String>,
}

/// Where to look: `$ROCM_PATH/lib` first (an explicit choice), then the loader's own search
/// (LD_LIBRARY_PATH, ld.so.cache: Debian's packages), then `/opt/rocm/lib`.
///
/// ```
/// let c = hip_rt::library_candidates(&hip_rt::HIP_SONAMES, Some("/my/rocm"));
/// assert_eq!(c[0], "/my/rocm/lib/libamdhip64.so.7");
/// assert_eq!(c[4], "libamdhip64.so.7");
/// ```
pub fn library_candidates(sonames: &[&str], rocm_path: Option<&str>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let dirs = rocm_path
        .filter(|p| !p.is_empty())
        .map(|p| format!("{}/lib/", p.trim_end_matches('/')));
    for dir in [dirs, Some(String::new()), Some("/opt/rocm/lib/".to_string())]
        .into_iter()
        .flatten()
    {
        for so in sonames {
            push_new(&mut out, format!("{dir}{so}"));
        }
    }
    out
}

fn push_new(v: &mut Vec<String>, s: String) {
    if !v.contains(&s) {
        v.push(s);
    }
}

fn split_path(path: &str) -> (&str, &str) {
    path.rsplit_once('/').map_or(("", path), |(d, f)| (d, f))
}

/// The major version in a libamdhip64 file name or soname (`libamdhip64.so.6.4.43484` -> 6).
fn hip_major(name: &str) -> Option<&str> {
    let (_, file) = split_path(name);
    file.strip_prefix("libamdhip64.so.")
        .and_then(|v| v.split('.').next())
        .filter(|m| !m.is_empty() && m.bytes().all(|b| b.is_ascii_digit()))
}

/// hiprtc candidates for a loaded HIP: the same directory and major version first.
///
/// ```
/// let r = hip_rt::hiprtc_candidates_for("/opt/rocm-6.4.1/lib/libamdhip64.so.6", None);
/// assert_eq!(r[0], "/opt/rocm-6.4.1/lib/libhiprtc.so.6");
/// ```
pub fn hiprtc_candidates_for(hip_path: &str, rocm_path: Option<&str>) -> Vec<String> {
    hiprtc_beside(hip_path, hip_major(hip_path), rocm_path)
}

/// hiprtc beside the HIP file `hip_path` of major `major`: `<dir>/libhiprtc.so.<major>`, then
/// `<dir>/libhiprtc.so` (the same install: PyTorch's `torch/lib` names its copies without a
/// version), then `libhiprtc.so.<major>` through the loader, then every soname.
fn hiprtc_beside(hip_path: &str, major: Option<&str>, rocm_path: Option<&str>) -> Vec<String> {
    let (dir, _) = split_path(hip_path);
    let mut out = Vec::new();
    if let Some(m) = major
        && !dir.is_empty()
    {
        out.push(format!("{dir}/libhiprtc.so.{m}"));
    }
    if !dir.is_empty() {
        out.push(format!("{dir}/libhiprtc.so"));
    }
    if let Some(m) = major {
        out.push(format!("libhiprtc.so.{m}"));
    }
    for c in library_candidates(&HIPRTC_SONAMES, rocm_path) {
        push_new(&mut out, c);
    }
    out
}

/// The files mapped in this process (`maps`: `/proc/self/maps`) whose name says libamdhip64
/// (`libamdhip64.so...`, or a bundler's renamed `libamdhip64-<hash>.so...`), in order, once each:
/// a HIP runtime loaded under a soname that [`HIP_SONAMES`] does not list.
pub fn mapped_hip_files(maps: &str) -> Vec<String> {
    let mut out = Vec::new();
    for l in maps.lines() {
        let Some(path) = l.split_whitespace().nth(5).filter(|p| p.starts_with('/')) else {
            continue;
        };
        let (_, file) = split_path(path);
        if file.starts_with("libamdhip64.so") || (file.starts_with("libamdhip64-") && file.contains(".so")) {
            push_new(&mut out, path.to_string());
        }
    }
    out
}

/// HIP's search: every soname of [`HIP_SONAMES`] and every file of [`mapped_hip_files`] among the
/// libraries already loaded, then [`library_candidates`].
pub fn hip_search(rocm_path: Option<&str>, maps: &str) -> Search {
    let mut in_process: Vec<String> = HIP_SONAMES.iter().map(|s| s.to_string()).collect();
    for f in mapped_hip_files(maps) {
        push_new(&mut in_process, f);
    }
    Search {
        in_process,
        open: library_candidates(&HIP_SONAMES, rocm_path),
    }
}

/// hiprtc's search once HIP is loaded from `hip_file` (a path, or the soname it was opened by)
/// for `why`. HIP found in the process: a hiprtc of its major already loaded beside it, else
/// the files beside it (hiprtc shares no state with the runtime: it only compiles, so one opened
/// here cannot split the process's streams). HIP opened: [`hiprtc_candidates_for`] it, as before.
pub fn hiprtc_search(hip_file: &str, why: &Origin, rocm_path: Option<&str>) -> Search {
    match why {
        Origin::InProcess { probe } => {
            let major = hip_major(probe).or_else(|| hip_major(hip_file));
            let in_process = match major {
                Some(m) => vec![format!("libhiprtc.so.{m}")],
                None => HIPRTC_SONAMES.iter().map(|s| s.to_string()).collect(),
            };
            Search {
                in_process,
                open: hiprtc_beside(hip_file, major, rocm_path),
            }
        }
        Origin::Opened { .. } | Origin::BuiltIn => Search {
            in_process: Vec::new(),
            open: hiprtc_candidates_for(hip_file, rocm_path),
        },
    }
}
