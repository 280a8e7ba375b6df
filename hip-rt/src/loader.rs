//! Where HIP and hiprtc are looked for (pure: builds the candidate lists that `ffi` opens).

/// Sonames tried, newest ROCm first.
pub const HIP_SONAMES: [&str; 4] = [
    "libamdhip64.so.7",
    "libamdhip64.so.6",
    "libamdhip64.so.5",
    "libamdhip64.so",
];
/// hiprtc's sonames, newest ROCm first (HIP <= 5.2 has hiprtc inside libamdhip64 instead).
pub const HIPRTC_SONAMES: [&str; 4] = ["libhiprtc.so.7", "libhiprtc.so.6", "libhiprtc.so.5", "libhiprtc.so"];

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
            let c = format!("{dir}{so}");
            if !out.contains(&c) {
                out.push(c);
            }
        }
    }
    out
}

/// hiprtc candidates for a loaded HIP: the same directory and major version first.
///
/// ```
/// let r = hip_rt::hiprtc_candidates_for("/opt/rocm-6.4.1/lib/libamdhip64.so.6", None);
/// assert_eq!(r[0], "/opt/rocm-6.4.1/lib/libhiprtc.so.6");
/// ```
pub fn hiprtc_candidates_for(hip_path: &str, rocm_path: Option<&str>) -> Vec<String> {
    let (dir, file) = hip_path.rsplit_once('/').map_or(("", hip_path), |(d, f)| (d, f));
    let mut out = Vec::new();
    if let Some(major) = file.strip_prefix("libamdhip64.so.").and_then(|v| v.split('.').next()) {
        if !dir.is_empty() {
            out.push(format!("{dir}/libhiprtc.so.{major}"));
        }
        out.push(format!("libhiprtc.so.{major}"));
    }
    for c in library_candidates(&HIPRTC_SONAMES, rocm_path) {
        if !out.contains(&c) {
            out.push(c);
        }
    }
    out
}
