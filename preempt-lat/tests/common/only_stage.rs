//! One `acceptance` stage run alone on the host device (`--only STAGE`), as the tests of single
//! stages run it: bounded, its JSON summary read, the stage's record found, the archive's files
//! read back.
use super::{drain, wait_or_kill};
use serde_json::Value;
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// `program acceptance --device host --quick --only stage --format json` into `out`, where
/// `program` is a preempt-lat command (and its environment), bounded by `limit`: the summary
/// (stdout) and stderr. The exit status must agree with the summary's `ok`.
pub fn run(mut program: Command, stage: &str, out: &Path, limit: Duration) -> (Value, String) {
    let mut child = program
        .args(["acceptance", "--device", "host", "--quick", "--only", stage])
        .args(["--format", "json", "--node", &format!("test-{stage}"), "--out-dir"])
        .arg(out)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run preempt-lat");
    let (o, e) = (drain(child.stdout.take().unwrap()), drain(child.stderr.take().unwrap()));
    let status = wait_or_kill(&mut child, limit);
    let (stdout, stderr) = (o.join().unwrap(), e.join().unwrap());
    let status = status.unwrap_or_else(|| panic!("acceptance did not end within {limit:?} (killed): {stderr}"));
    let summary: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}\n{stderr}"));
    let want = if summary["ok"] == true { 0 } else { 3 };
    assert_eq!(status.code(), Some(want), "{stderr}");
    (summary, stderr)
}

/// The record of stage `id` in the first device's summary.
pub fn stage<'a>(summary: &'a Value, id: &str) -> &'a Value {
    summary["devices"][0]["stages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == id)
        .unwrap_or_else(|| panic!("no {id} stage: {summary}"))
}

/// The archive's members whose path ends with `end`: (path, contents).
pub fn members(archive: &Path, end: &str) -> Vec<(String, String)> {
    let f = std::fs::File::open(archive).unwrap();
    let mut a = tar::Archive::new(flate2::read::GzDecoder::new(f));
    let mut v = Vec::new();
    for e in a.entries().unwrap() {
        let mut e = e.unwrap();
        let p = e.path().unwrap().to_string_lossy().into_owned();
        if e.header().entry_type().is_file() && p.ends_with(end) {
            let mut s = String::new();
            e.read_to_string(&mut s).unwrap();
            v.push((p, s));
        }
    }
    v
}
