//! The preempt-lat binary end to end on the host device: bad input, output schemas, doctor,
//! sweeps, and the LP state (`--lp-state`, `sweep state`), which is n.a. on the host device.
//!
//! One test binary, long on purpose: each binary links the crate and its device stack again, which
//! costs a 2-core CI machine minutes.
use std::process::{Command, Output};

fn pl(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_preempt-lat"))
        .args(args)
        .output()
        .expect("run preempt-lat")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Each `(arguments, what stderr must say)` exits with status 2 (bad input).
fn refused_with_exit_2(cases: &[(&[&str], &str)]) {
    for (args, want) in cases {
        let o = pl(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert_eq!(
            stderr(&o).lines().count(),
            1,
            "{args:?}: one line, not clap's usage block: {}",
            stderr(&o)
        );
        assert!(stderr(&o).starts_with("preempt-lat: "), "{args:?}: {}", stderr(&o));
        assert!(
            stderr(&o).contains(want),
            "{args:?}: stderr lacks {want:?}: {}",
            stderr(&o)
        );
    }
}

/// clap's own refusals are one line too (clap's default is 2-5 lines), and a command without its
/// subcommand is an error that names them, not a help page with no error.
#[test]
fn clap_refusals_are_one_line() {
    refused_with_exit_2(&[
        (&["--t-ms", "x"], "invalid value 'x' for '--t-ms"),
        (&["--bogus"], "unexpected argument '--bogus'"),
        (&["sweep"], "sweep needs a subcommand: t, state, threshold"),
        (&["priority", "--modes", "nope"], "invalid value 'nope'"),
    ]);
    let help = pl(&["--help"]);
    assert_eq!(help.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&help.stdout).contains("Usage:"));
}

/// An output path is checked before anything runs, and a previous result there survives a refused
/// or failed run (`--samples 2000000000 --out r.json` must not empty r.json).
#[test]
fn outputs_are_checked_first_and_replaced_only_when_complete() {
    let dir = std::env::temp_dir().join(format!("preempt-lat-out-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let r = dir.join("r.json");
    std::fs::write(&r, "previous").unwrap();
    let r_arg = r.to_str().unwrap();
    refused_with_exit_2(&[
        (
            &["--device", "host", "--samples", "2000000000", "--out", r_arg],
            "too many for one run (at most 1000000)",
        ),
        (
            &["--device", "host", "--warmup", "2000000000"],
            "warm-up samples are too many",
        ),
        (
            &["--device", "host", "--out", "/proc/version"],
            "--out /proc/version: cannot write",
        ),
        (
            &["--device", "host", "--trace", "/proc/version"],
            "--trace /proc/version: cannot write",
        ),
        (
            &["sweep", "t", "--device", "host", "--out-dir", "/proc/version"],
            "--out-dir /proc/version: cannot create",
        ),
        (&["--t-ms", "1e-300"], "T = 1e-300 ms is below 1 ns"),
    ]);
    assert_eq!(std::fs::read_to_string(&r).unwrap(), "previous");
    let o = pl(&[
        "--device",
        "host",
        "--samples",
        "3",
        "--warmup",
        "1",
        "--format",
        "json",
        "--out",
        r_arg,
        "-q",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&r).unwrap()).expect("the new result");
    assert_eq!(v["samples"].as_array().map(Vec::len), Some(3));
    let left: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left.len(), 1, "no temporary file left beside it: {left:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Bad input: exit status 2 and one clear line naming the problem, before anything runs.
#[test]
fn bad_input_is_exit_2_with_a_clear_reason() {
    // The API's and lv3's wording, which list every device and every mechanism.
    let gpu7 = "gpu7".parse::<preempt_api::DeviceSpec>().unwrap_err().message;
    let ioctl = lv3::mechanism::UnknownMechanism("ioctl".into()).to_string();
    let cases: &[(&[&str], &str)] = &[
        (&["--t-ms", "0"], "greater than 0"),
        (&["--t-ms", "-1"], "greater than 0"),
        (&["--t-ms", "NaN"], "finite"),
        (&["--t-ms", "inf"], "finite"),
        (&["--t-ms", "1e9"], "absurdly large"),
        (&["--t-ms", "abc"], "not a number"),
        (
            &["--threshold", "2", "--batch", "4"],
            "--threshold (2) must be >= --batch (4)",
        ),
        (&["--samples", "0"], "at least 1"),
        (&["--threshold", "0"], "at least 1"),
        (&["--device", "gpu7"], "unknown device"),
        (&["--device", "hip:x"], "unknown device"),
        (&["--level", "4"], "invalid value '4'"),
        // The words of the C and Python API, with their error text; the two preempt-lat cannot
        // run are refused with what to use instead.
        (
            &["--level", "4"],
            r#"unknown level "4": expected auto (0), lv1 (1), lv2 (2) or lv3 (3)"#,
        ),
        (&["--device", "gpu7"], &gpu7),
        (
            &["--mechanism", "sigstop"],
            r#"unknown mechanism "sigstop": expected auto"#,
        ),
        (&["--device", "kfd"], "use hip:N, host or auto"),
        (&["--level", "auto"], "a measurement names the level it measures: use 3"),
        (&["sweep", "t", "--levels", "lv1,auto"], "a measurement names the level"),
        (&["--out", "/nonexistent-dir/x.json", "--samples", "1"], "cannot write"),
        (&["--device", "host", "--mechanism", "dbg-trap"], "needs an AMD GPU"),
        (&["--mechanism", "ioctl"], &ioctl),
        (&["--device", "host", "--grace", "4"], "SIGSTOP has no grace period"),
        (
            &["--device", "hip:0", "--mechanism", "update-queue", "--grace", "4"],
            "update-queue cannot set",
        ),
        (&["--grace", "300"], "0-255"),
        (&["--lp-state", "medium"], "invalid value 'medium'"),
        (
            &["--device", "host", "--lp-state", "heavy"],
            "--lp-state heavy needs an AMD GPU (--device hip:N)",
        ),
        (
            &["sweep", "t", "--device", "host", "--lp-state", "heavy"],
            "--lp-state heavy needs an AMD GPU",
        ),
        (&["sweep", "state", "--device", "host"], "sweep state needs an AMD GPU"),
        (&["sweep", "state", "--states", "light,huge"], "invalid value 'huge'"),
    ];
    refused_with_exit_2(cases);
}

#[test]
fn explicit_hip_device_without_a_gpu_fails_with_doctors_reason() {
    let o = pl(&["--device", "hip:0", "--samples", "1"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("--device hip:0: cannot run:") && e.contains("no /dev/kfd"),
        "{e}"
    );
}

/// The host device's worker is host-device's `preempt-host-worker`, found beside preempt-lat
/// (cargo builds both into one directory) unless `PREEMPT_HOST_WORKER` names another; missing,
/// it is one line that says how to build it.
#[test]
fn the_host_worker_is_found_beside_preempt_lat_or_named_by_the_variable() {
    let run = ["--device", "host", "--samples", "1", "--warmup", "0", "--quiet"];
    // A second name for preempt-lat in a directory of its own, with no worker beside it.
    let exe = std::path::Path::new(env!("CARGO_BIN_EXE_preempt-lat"));
    let dir = exe.with_file_name(format!("no-worker-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let alone = dir.join("preempt-lat");
    std::fs::hard_link(exe, &alone)
        .or_else(|_| std::fs::copy(exe, &alone).map(drop))
        .unwrap();
    let o = Command::new(&alone)
        .args(run)
        .env_remove("PREEMPT_HOST_WORKER")
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let e = stderr(&o);
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(
        e.contains("no preempt-host-worker beside preempt-lat") && e.contains("-p host-device`"),
        "{e}"
    );
    // The variable wins over the worker beside preempt-lat.
    let o = Command::new(exe)
        .args(run)
        .env("PREEMPT_HOST_WORKER", "/nonexistent/worker")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("cannot start host worker"), "{}", stderr(&o));
}

#[test]
fn auto_falls_back_to_host_and_json_carries_every_parameter() {
    let o = pl(&[
        "--level",
        "3",
        "--t-ms",
        "0.2",
        "--samples",
        "20",
        "--warmup",
        "2",
        "--seed",
        "5",
        "--format",
        "json",
        "--quiet",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("using the host device"),
        "auto must say it fell back: {}",
        stderr(&o)
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON on stdout");
    let p = &v["params"];
    assert_eq!(
        (
            p["level"].as_u64(),
            p["t_ms"].as_f64(),
            p["samples"].as_u64(),
            p["warmup"].as_u64(),
            p["seed"].as_u64()
        ),
        (Some(3), Some(0.2), Some(20), Some(2), Some(5))
    );
    assert_eq!((p["threshold"].as_u64(), p["batch"].as_u64()), (Some(8), Some(4)));
    // The host device has no LP wave state and its T needs no measuring: null, not a made-up value.
    assert!(p["lp_state"].is_null(), "{p}");
    assert!(v["lp_kernel"].is_null() && v["achieved_t"].is_null());
    assert_eq!(v["env"]["device"], "host");
    assert_eq!(v["env"]["mechanism"], "sigstop");
    assert_eq!(p["grace"], "1", "the grace period asked for is recorded");
    assert!(
        v["env"]["grace_period"]
            .as_str()
            .unwrap()
            .starts_with("n/a (host device")
    );
    assert!(v["env"]["device_detail"].as_str().unwrap().contains("not GPU figures"));
    for k in ["kernel", "git_revision", "tool_version", "cores"] {
        assert!(!v["env"][k].is_null(), "env.{k} missing");
    }
    for m in ["suspend", "hp_start", "resume"] {
        let s = &v["latency_ns"][m];
        assert_eq!(s["count"].as_u64(), Some(20), "{m}");
        for q in ["min", "p50", "p90", "p95", "p99", "p99_9", "max"] {
            assert!(s[q].as_u64().is_some_and(|x| x > 0), "{m}.{q}");
        }
        assert!(s["p50"].as_u64() <= s["p99"].as_u64() && s["p99"].as_u64() <= s["max"].as_u64());
    }
    assert_eq!(v["samples"].as_array().map(Vec::len), Some(20));
    assert_eq!(v["correctness"]["ok"], true);
    assert_eq!(v["interrupted"], false);
}

#[test]
fn lv1_csv_to_file_has_a_row_per_metric() {
    let dir = std::env::temp_dir().join(format!("preempt-lat-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("lv1.csv");
    let o = pl(&[
        "--device",
        "host",
        "--level",
        "1",
        "--t-ms",
        "0.2",
        "--samples",
        "5",
        "--warmup",
        "0",
        "--format",
        "csv",
        "--out",
        out.to_str().unwrap(),
        "--quiet",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(o.stdout.is_empty(), "--out: nothing on stdout");
    let csv = std::fs::read_to_string(&out).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 4, "{csv}");
    let cols = lines[0].split(',').count();
    assert!(lines[0].starts_with("device,mechanism,level,t_ms,threshold,batch"));
    let header: Vec<&str> = lines[0].split(',').collect();
    let lp_state = header
        .iter()
        .position(|&h| h == "lp_state")
        .expect("an lp_state column");
    for (l, metric) in lines[1..].iter().zip(["suspend", "hp_start", "resume"]) {
        assert_eq!(l.split(',').nth(lp_state), Some(""), "n.a. on the host device: {l}");
        assert_eq!(l.split(',').count(), cols, "{l}");
        assert!(l.starts_with("host,progressive-launch,1,0.2,8,4,"), "{l}");
        assert!(l.contains(&format!(",{metric},")), "{l}");
        assert!(l.ends_with(",true,false"), "correct, not interrupted: {l}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn doctor_json_says_no_gpu_and_host_available() {
    let o = pl(&["doctor", "--format", "json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    if std::path::Path::new("/dev/kfd").exists() {
        eprintln!("doctor test: /dev/kfd exists here; only the schema is checked");
    } else {
        assert_eq!(v["gpu_usable"], false);
        assert!(v["summary"].as_str().unwrap().contains("runs on the host device"));
    }
    assert!(
        v["levels"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l["device"] == "host" && l["available"] == true)
    );
    assert!(v["facts"]["header"]["kfd_version"].as_str().is_some());
}

#[test]
fn help_teaches_the_words() {
    let o = pl(&["--help"]);
    // Whitespace-folded: help text is wrapped to the terminal width.
    let h = String::from_utf8_lossy(&o.stdout)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    for w in [
        "suspend latency",
        "HP start latency",
        "host device",
        "--t-ms",
        "--threshold",
        "--lp-state",
        "doctor",
        "sweep",
        "sweep state",
        "priority",
        "--trace",
        "Examples",
    ] {
        assert!(h.contains(w), "--help lacks {w:?}");
    }
}

/// Ctrl-C: the run stops after the current sample, resumes what it suspended, and writes what
/// it measured, marked interrupted; the correctness check still covers every command.
#[test]
fn sigint_stops_cleanly_and_writes_partial_results() {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    // SIGINT at its default, as from a terminal, whatever the test runner inherited.
    let child = Command::new("env")
        .arg("--default-signal=INT")
        .arg(env!("CARGO_BIN_EXE_preempt-lat"))
        .args([
            "--device",
            "host",
            "--level",
            "3",
            "--t-ms",
            "1",
            "--samples",
            "1000000",
            "--format",
            "json",
            "--quiet",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Long enough for the workers to start and some samples to be taken, even on a loaded CI.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    kill(Pid::from_raw(child.id().cast_signed()), Signal::SIGINT).unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("stopping after the current sample"),
        "{}",
        stderr(&o)
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("partial JSON written");
    assert_eq!(v["interrupted"], true);
    let n = v["samples"].as_array().unwrap().len();
    assert!(n > 0 && n < 1_000_000, "{n} samples");
    assert_eq!(v["correctness"]["ok"], true, "{}", v["correctness"]);
}

#[test]
fn text_output_says_the_lp_state_is_not_applicable_on_the_host() {
    let o = pl(&[
        "--device",
        "host",
        "--lp-state",
        "light",
        "--t-ms",
        "0.2",
        "--samples",
        "3",
        "--warmup",
        "0",
        "--quiet",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let t = String::from_utf8_lossy(&o.stdout);
    assert!(
        t.contains("LP state n.a. (host device: CPU worker processes have no GPU wave state)"),
        "{t}"
    );
}

/// `--device auto` without a GPU falls back to the host device, where heavy has no meaning: a
/// usage error that says so, not a silent light run.
#[test]
fn heavy_without_a_gpu_is_refused_after_the_auto_fallback() {
    if std::path::Path::new("/dev/kfd").exists() {
        eprintln!("SKIPPED heavy_without_a_gpu_is_refused_after_the_auto_fallback: /dev/kfd exists here");
        return;
    }
    for args in [
        &["--lp-state", "heavy", "--samples", "1", "--quiet"][..],
        &[
            "sweep",
            "state",
            "--samples",
            "1",
            "--out-dir",
            "/nonexistent-never-made",
            "--quiet",
        ],
    ] {
        let o = pl(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        let e = stderr(&o);
        assert!(
            e.contains("using the host device")
                && e.contains("needs an AMD GPU")
                && e.contains("host device was selected"),
            "{args:?}: {e}"
        );
    }
}

fn scratch(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("preempt-lat-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[test]
fn sweep_t_writes_csv_json_and_svg() {
    let dir = scratch("sweep-t");
    let o = pl(&[
        "sweep",
        "t",
        "--device",
        "host",
        "--levels",
        "1,3",
        "--t-ms",
        "0.05,0.2",
        "--samples",
        "5",
        "--warmup",
        "0",
        "--out-dir",
        dir.to_str().unwrap(),
        "--quiet",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let csv = std::fs::read_to_string(dir.join("sweep-t.csv")).unwrap();
    // 2 levels x 2 T x 3 metrics, plus the header.
    assert_eq!(csv.lines().count(), 1 + 12, "{csv}");
    let runs: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("sweep-t.json")).unwrap()).unwrap();
    let runs = runs.as_array().unwrap();
    assert_eq!(runs.len(), 4);
    assert!(
        runs.iter()
            .all(|r| r["correctness"]["ok"] == true && r["env"]["device"] == "host")
    );
    assert!(
        runs.iter().all(|r| r["params"]["lp_state"].is_null()),
        "n.a. on the host device"
    );
    let svg = std::fs::read_to_string(dir.join("sweep-t.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    // A panel per level and metric, each level's line labelled once in the legend.
    for label in [
        "Lv1: suspend",
        "Lv1: HP start",
        "Lv3: suspend",
        "Lv3: HP start",
        "Lv1 P99",
        "Lv3 P99",
        "Lv3 target",
        "host figures, not GPU",
    ] {
        assert!(svg.contains(label), "the plot lacks {label:?}");
    }
    assert_eq!(svg.matches("Lv3 P99").count(), 1, "one legend entry per line");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn sweep_threshold_writes_overhead_points() {
    let dir = scratch("sweep-threshold");
    let o = pl(&[
        "sweep",
        "threshold",
        "--device",
        "host",
        "--thresholds",
        "1,4",
        "--t-ms",
        "0.5",
        "--commands",
        "20",
        "--out-dir",
        dir.to_str().unwrap(),
        "--quiet",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let pts: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("sweep-threshold.json")).unwrap()).unwrap();
    let pts = pts.as_array().unwrap();
    assert_eq!(pts.len(), 2);
    for (p, th) in pts.iter().zip([1, 4]) {
        assert_eq!(p["threshold"], th);
        assert!(p["lp_state"].is_null(), "n.a. on the host device: {p}");
        assert_eq!(p["batch"], th.min(4), "batch is capped by the threshold");
        assert!(p["direct_s"].as_f64().unwrap() > 0.0 && p["launcher_s"].as_f64().unwrap() > 0.0);
        assert!(
            p["commands"].as_u64().unwrap() >= 100,
            "raised to ~50 ms of work at T = 0.5 ms"
        );
    }
    assert_eq!(
        std::fs::read_to_string(dir.join("sweep-threshold.csv"))
            .unwrap()
            .lines()
            .count(),
        3
    );
    assert!(
        std::fs::read_to_string(dir.join("sweep-threshold.svg"))
            .unwrap()
            .contains("Lv1 overhead vs threshold")
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// A bad --out-dir is bad input (exit 2, not a failure's 1), refused before the sweep runs.
#[test]
fn sweep_out_dir_that_cannot_be_made_is_an_error() {
    let o = pl(&[
        "sweep",
        "t",
        "--device",
        "host",
        "--out-dir",
        "/proc/nope",
        "--samples",
        "1",
        "--quiet",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("--out-dir /proc/nope: cannot create"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn validate_without_kfd_skips_visibly_and_passes() {
    let o = pl(&["validate", "--format", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON report");
    if std::path::Path::new("/dev/kfd").exists() {
        eprintln!("validate test: /dev/kfd exists here; only the schema is checked");
    } else {
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        assert_eq!(v["ok"], true);
        assert_eq!(v["failed"], 0);
        let checks = v["checks"].as_array().unwrap();
        assert!(
            checks
                .iter()
                .all(|c| c["status"] == "skip" && c["detail"].as_str().unwrap().starts_with("skipped: ")),
            "{checks:?}"
        );
        assert!(
            checks
                .iter()
                .any(|c| c["category"] == "functional" && c["detail"].as_str().unwrap().contains("no GPU"))
        );
    }
    for k in [
        "tool",
        "version",
        "git_revision",
        "kernel",
        "passed",
        "failed",
        "skipped",
    ] {
        assert!(!v[k].is_null(), "{k}");
    }
}

/// Every non-metadata event of a Chrome trace lies inside the `run` span of its process.
fn assert_trace_inside_runs(path: &std::path::Path) -> serde_json::Value {
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("trace written")).expect("trace is JSON");
    let events = v["traceEvents"].as_array().expect("traceEvents");
    let timed: Vec<&serde_json::Value> = events.iter().filter(|e| e["ph"] != "M").collect();
    assert!(!timed.is_empty());
    for e in &timed {
        let run = timed
            .iter()
            .find(|r| r["name"] == "run" && r["pid"] == e["pid"])
            .unwrap_or_else(|| panic!("no run span for pid {}", e["pid"]));
        let (lo, hi) = (
            run["ts"].as_f64().unwrap(),
            run["ts"].as_f64().unwrap() + run["dur"].as_f64().unwrap(),
        );
        let (ts, dur) = (e["ts"].as_f64().unwrap(), e["dur"].as_f64().unwrap_or(0.0));
        assert!(ts >= lo && ts + dur <= hi, "{e} lies outside its run [{lo}, {hi}]");
        assert!(["X", "i"].contains(&e["ph"].as_str().unwrap()), "{e}");
    }
    v
}

fn cats(v: &serde_json::Value) -> std::collections::BTreeSet<String> {
    v["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["cat"].as_str().map(str::to_string))
        .collect()
}

#[test]
fn run_trace_is_a_chrome_trace_inside_the_run() {
    let dir = scratch("run-trace");
    std::fs::create_dir_all(&dir).unwrap();
    for level in ["3", "1"] {
        let trace = dir.join(format!("lv{level}.trace.json"));
        let o = pl(&[
            "--device",
            "host",
            "--level",
            level,
            "--t-ms",
            "0.2",
            "--samples",
            "10",
            "--warmup",
            "1",
            "--quiet",
            "--trace",
            trace.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        let v = assert_trace_inside_runs(&trace);
        let c = cats(&v);
        for want in ["run", "lp", "call", "suspended", "hp", "device"] {
            assert!(c.contains(want), "Lv{level}: no {want:?} events: {c:?}");
        }
        let probes = v["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["name"].as_str().is_some_and(|n| n.starts_with("HP request ")))
            .count();
        assert_eq!(probes, 11, "one HP request per sample, warm-up included");
    }
    let o = pl(&[
        "--device",
        "host",
        "--samples",
        "1",
        "--trace",
        "/nonexistent-dir/t.json",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--trace /nonexistent-dir/t.json: cannot write"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn priority_runs_every_mode_and_writes_json_csv_svg_and_trace() {
    let dir = scratch("priority");
    let trace = std::env::temp_dir().join(format!("preempt-lat-priority-{}.trace.json", std::process::id()));
    let o = pl(&[
        "priority",
        "--device",
        "host",
        "--duration-s",
        "0.4",
        "--hp-rate",
        "25",
        "--arrival",
        "fixed",
        "--hp-t-ms",
        "1",
        "--t-ms",
        "0.2",
        "--format",
        "json",
        "--quiet",
        "--out-dir",
        dir.to_str().unwrap(),
        "--trace",
        trace.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON on stdout");
    assert_eq!(v["env"]["device"], "host");
    assert_eq!(v["params"]["arrival"], "fixed");
    let modes = v["modes"].as_array().unwrap();
    let names: Vec<&str> = modes.iter().map(|m| m["mode"].as_str().unwrap()).collect();
    // The host device has every mode, lv2 between lv1 and lv3.
    assert_eq!(names, ["standalone-hp", "standalone-lp", "native", "lv1", "lv2", "lv3"]);
    for m in modes {
        let name = m["mode"].as_str().unwrap();
        if name != "standalone-lp" {
            // 25/s for 0.4 s, the first one gap after the start.
            assert_eq!(m["hp_requests"], 9, "{name}");
            let s = &m["hp_latency_ns"];
            assert!(s["p50"].as_u64() <= s["p90"].as_u64() && s["p99"].as_u64() <= s["max"].as_u64());
            assert!(
                s["p50"].as_u64().unwrap() >= 1_000_000,
                "{name}: an HP request is 1 ms of work"
            );
        }
        if name == "standalone-hp" {
            assert!(m["correctness"].is_null() && m["lp_throughput_per_s"].is_null());
        } else {
            assert_eq!(m["correctness"]["ok"], true, "{name}: {}", m["correctness"]);
            assert!(
                m["lp_throughput_vs_standalone"].as_f64().is_some_and(|x| x > 0.0),
                "{name}"
            );
        }
        if matches!(name, "native" | "lv1" | "lv2" | "lv3") {
            assert!(m["hp_p99_vs_standalone"].as_f64().is_some_and(|x| x > 0.0), "{name}");
        }
        let preemptions = m["preemptions"].as_u64().unwrap();
        if matches!(name, "lv1" | "lv2" | "lv3") {
            assert!((1..=9).contains(&preemptions), "{name}: {preemptions}");
            assert_eq!(m["policy"], "highest-priority-first");
        } else {
            assert_eq!(preemptions, 0, "{name}");
        }
    }
    let csv = std::fs::read_to_string(dir.join("priority.csv")).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 1 + names.len(), "{csv}");
    assert!(lines[0].starts_with("device,mode,policy,mechanism,"));
    for (line, name) in lines[1..].iter().zip(&names) {
        assert!(line.starts_with(&format!("host,{name},")), "{line}");
    }
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("priority.json")).unwrap()).unwrap();
    assert_eq!(json["modes"].as_array().unwrap().len(), names.len());
    let svg = std::fs::read_to_string(dir.join("priority.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    for want in [
        "host device: host figures, not GPU figures",
        "standalone-hp",
        "lv3",
        "1.30 x standalone-hp P99",
    ] {
        assert!(svg.contains(want), "the plot lacks {want:?}");
    }
    // Fig. 9 as the seeds draw it: each mode's HP latency distribution, from the JSON's points.
    let cdf = std::fs::read_to_string(dir.join("priority-cdf.svg")).unwrap();
    for want in [
        "HP latency CDF per mode",
        "host figures, not GPU figures",
        "standalone-hp",
        "lv3",
    ] {
        assert!(cdf.contains(want), "the CDF plot lacks {want:?}");
    }
    for m in json["modes"].as_array().unwrap() {
        let Some(points) = m["hp_latency_cdf"].as_array() else {
            assert!(m["hp_latency_ns"].is_null(), "{m}");
            continue;
        };
        let qs: Vec<f64> = points.iter().map(|p| p["q"].as_f64().unwrap()).collect();
        let ns: Vec<u64> = points.iter().map(|p| p["ns"].as_u64().unwrap()).collect();
        assert_eq!((qs.first(), qs.last()), (Some(&0.0), Some(&1.0)), "{m}");
        assert!(ns.windows(2).all(|w| w[0] <= w[1]), "a CDF never goes down: {ns:?}");
        assert_eq!(ns.last().copied(), m["hp_latency_ns"]["max"].as_u64(), "{m}");
    }
    let t = assert_trace_inside_runs(&trace);
    let c = cats(&t);
    for want in ["run", "lp", "hp", "scheduler", "suspended"] {
        assert!(c.contains(want), "no {want:?} events: {c:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_file(&trace);
}

#[test]
fn priority_refuses_bad_input_and_an_unusable_gpu_with_a_reason() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["priority", "--hp-rate", "0"],
            "--hp-rate must be a finite number greater than 0",
        ),
        (
            &["priority", "--hp-rate", "500", "--hp-t-ms", "2"],
            "would (nearly) saturate",
        ),
        (
            &["priority", "--duration-s", "0.01", "--hp-rate", "10"],
            "makes no HP request",
        ),
        (&["priority", "--modes", "lv4"], "invalid value 'lv4'"),
    ];
    refused_with_exit_2(cases);
    // The GPU path exists; without a GPU it stops at device selection with doctor's reason,
    // before anything starts (as a plain run does).
    let o = pl(&["priority", "--device", "hip:0", "--out-dir", "/nonexistent-dir/never"]);
    assert!(!o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("--device hip:0: cannot run"), "{}", stderr(&o));
}

#[test]
fn report_merges_json_results_into_one_table_and_plot() {
    let dir = scratch("report");
    std::fs::create_dir_all(&dir).unwrap();
    let mut files = Vec::new();
    for (level, t) in [("3", "0.2"), ("3", "0.5"), ("1", "0.2")] {
        let f = dir.join(format!("lv{level}-{t}.json"));
        let o = pl(&[
            "--device",
            "host",
            "--level",
            level,
            "--t-ms",
            t,
            "--samples",
            "5",
            "--warmup",
            "1",
            "--quiet",
            "--format",
            "json",
            "--out",
            f.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        files.push(f);
    }
    let bad = dir.join("not-a-result.json");
    std::fs::write(&bad, "{\"x\": 1}").unwrap();
    let out = dir.join("out");
    let mut args: Vec<&str> = vec!["report", "--out-dir", out.to_str().unwrap()];
    args.extend(files.iter().map(|f| f.to_str().unwrap()));
    args.push(bad.to_str().unwrap());
    let o = pl(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let t = String::from_utf8_lossy(&o.stdout);
    assert!(t.contains("== device host, mechanism sigstop,"), "{t}");
    assert!(t.contains("== device host, mechanism progressive-launch,"), "{t}");
    assert!(t.contains("(host figures, not GPU figures)"), "{t}");
    assert!(t.contains("skipped") && t.contains("not-a-result.json"), "{t}");
    let csv = std::fs::read_to_string(out.join("report.csv")).unwrap();
    assert_eq!(csv.lines().count(), 4, "a header and one row per run: {csv}");
    let svg = std::fs::read_to_string(out.join("report.svg")).unwrap();
    assert!(svg.contains("Lv3 host sigstop") && svg.contains("host figures, not GPU figures"));
    // The target table: the Lv3 run at T = 0.5 ms judged against 100 us, labelled as a host
    // figure; targets no result measures listed as such.
    assert!(t.contains("targets (the seeds' test plan):"), "{t}");
    let lv3 = t
        .lines()
        .find(|l| l.starts_with("| Lv3 suspend P99 at T = 0.5 ms |"))
        .unwrap_or_else(|| panic!("no Lv3 target row: {t}"));
    assert!(
        lv3.contains("host (host figure, not a GPU figure)") && lv3.contains("lv3-0.5.json"),
        "{lv3}"
    );
    assert!(lv3.contains("| PASS |") || lv3.contains("| FAIL |"), "{lv3}");
    assert!(t.contains("| not measured | sweep threshold |"), "{t}");
    let targets: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("targets.json")).unwrap()).unwrap();
    assert!(
        targets
            .as_array()
            .unwrap()
            .iter()
            .any(|j| j["target"] == "lv1-threshold-x-t")
    );
    // A threshold sweep alone has no table rows but is judged, not refused.
    let th = dir.join("sweep-threshold.json");
    let point = |threshold: u32, overhead: f64| serde_json::json!({"device": "host", "t_ms": 0.1, "threshold": threshold, "overhead_percent": overhead});
    std::fs::write(&th, serde_json::json!([point(4, 9.0), point(16, 0.5)]).to_string()).unwrap();
    let o = pl(&["report", "--out-dir", out.to_str().unwrap(), th.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let t = String::from_utf8_lossy(&o.stdout);
    assert!(
        t.lines()
            .any(|l| l.starts_with("| Lv1 launcher overhead at threshold >= 10 |")
                && l.contains("| 0.500 % |")
                && l.contains("| PASS |")),
        "{t}"
    );
    let o = pl(&["report", "--out-dir", out.to_str().unwrap(), bad.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("no result in 1 file(s)"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// validate's bystander worker on the host device (a CPU spin in place of the kernel): the
/// protocol, and that it stops on its limit or when its stdin closes.
#[test]
fn bystander_worker_speaks_the_protocol_on_the_host_device() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    let kernel_us = 200u64;
    let mut child = Command::new(env!("CARGO_BIN_EXE_preempt-lat"))
        .args([
            "__bystander-worker",
            "--device",
            "host",
            "--kernel-us",
            &kernel_us.to_string(),
            "--max-duration-ms",
            "100",
        ])
        .stdin(Stdio::piped()) // kept open: the worker stops on its limit
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let lines: Vec<serde_json::Value> = BufReader::new(child.stdout.take().unwrap())
        .lines()
        .map(|l| serde_json::from_str(&l.unwrap()).unwrap())
        .collect();
    assert!(child.wait().unwrap().success());
    let (ready, rest) = lines.split_first().unwrap();
    assert_eq!(ready["line"], "ready");
    assert_eq!(ready["pid"], child.id());
    assert_eq!(ready["kernel_ns"], kernel_us * 1000);
    let (done, kernels) = rest.split_last().unwrap();
    assert_eq!(done["line"], "done");
    assert_eq!(done["reason"], "--max-duration-ms reached");
    assert_eq!(done["kernels"], kernels.len());
    assert!(!kernels.is_empty());
    let mut last_end = 0;
    for k in kernels {
        assert_eq!(k["line"], "kernel");
        let (s, e) = (k["start_ns"].as_u64().unwrap(), k["end_ns"].as_u64().unwrap());
        assert!(s >= last_end, "one after another: {k}");
        assert!(e - s >= kernel_us * 1000, "a spin lasts at least its length: {k}");
        last_end = e;
    }
    assert!(done["stopped_ns"].as_u64().unwrap() >= last_end);

    // Its stdin closing stops it (the parent's signal, and what a dead parent leaves).
    let o = Command::new(env!("CARGO_BIN_EXE_preempt-lat"))
        .args(["__bystander-worker", "--device", "host", "--max-duration-ms", "60000"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let last = String::from_utf8_lossy(&o.stdout).lines().last().unwrap().to_string();
    assert!(last.contains(r#""reason":"stdin closed""#), "{last}");
}

/// Without a GPU the worker refuses before `ready`: no protocol line, the reason on stderr.
#[test]
fn bystander_worker_refuses_a_gpu_it_cannot_run_on() {
    let o = pl(&["__bystander-worker", "--device", "hip:0", "--max-duration-ms", "1000"]);
    if o.status.success() {
        eprintln!("a GPU is usable here: the worker ran");
        return;
    }
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(o.stdout.is_empty(), "no `ready` line");
    assert!(
        stderr(&o).starts_with("preempt-lat bystander worker: hip:0 cannot run here: "),
        "{}",
        stderr(&o)
    );
}

#[test]
fn bystander_worker_is_hidden_and_validate_has_the_bystander_check() {
    let help = pl(&["--help"]);
    assert!(!String::from_utf8_lossy(&help.stdout).contains("bystander-worker"));
    let o = pl(&["validate", "--format", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON report");
    assert!(v["bystander"].is_array());
    if !std::path::Path::new("/dev/kfd").exists() {
        assert_eq!(v["bystander"].as_array().unwrap().len(), 0, "no figures without a GPU");
        let b: Vec<_> = v["checks"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["name"].as_str().unwrap().contains("bystander"))
            .collect();
        assert_eq!(b.len(), 1, "{b:?}");
        assert_eq!(b[0]["category"], "functional");
        assert_eq!(b[0]["status"], "skip");
        assert!(
            b[0]["detail"].as_str().unwrap().starts_with("skipped: no GPU ("),
            "{b:?}"
        );
    }
}

/// launcher-cost: its own options (no seed), and every format; JSON is the object it always was.
#[test]
fn launcher_cost_writes_text_json_or_csv() {
    let base = ["launcher-cost", "--device", "host", "--commands", "300", "--runs", "2"];
    let run = |format: &str| {
        let o = pl(&[&base[..], &["--format", format]].concat());
        assert!(o.status.success(), "{format}: {}", stderr(&o));
        String::from_utf8(o.stdout).unwrap()
    };
    let v: serde_json::Value = serde_json::from_str(&run("json")).expect("one JSON object");
    assert_eq!(
        (v["commands"].as_u64(), v["device"].as_str()),
        (Some(300), Some("host"))
    );
    assert!(
        v["launcher_cpu_ns_per_cmd_null_device"]
            .as_f64()
            .is_some_and(|ns| ns > 0.0),
        "{v}"
    );
    // Every figure with its spread over the runs, the Fig. 12b share at each T among them.
    let figures = v["figures"].as_array().expect("figures");
    for f in figures {
        let (min, med, max) = (f["min"].as_f64(), f["median"].as_f64(), f["max"].as_f64());
        assert!(min <= med && med <= max, "{f}");
    }
    let share = |t: &str| {
        figures
            .iter()
            .find(|f| f["name"] == format!("launcher_core_percent.t_{t}ms"))
    };
    for t in ["0.01", "0.1", "1"] {
        let f = share(t).unwrap_or_else(|| panic!("Fig. 12b at T = {t} ms: {v}"));
        assert!(f["median"].as_f64().is_some_and(|p| p > 0.0), "{f}");
    }
    assert_eq!(v["runs"].as_u64(), Some(2));
    // CSV: one row per figure.
    let csv = run("csv");
    assert_eq!(
        csv.lines().count(),
        1 + figures.len(),
        "a header and one row per figure: {csv}"
    );
    assert!(csv.starts_with("device,commands,"), "{csv}");
    let text = run("text");
    assert!(
        text.contains("through the Lv1 launcher") && text.contains("not GPU figures"),
        "{text}"
    );
    let o = pl(&[&base[..], &["--seed", "3"]].concat());
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("unexpected argument '--seed'"), "{}", stderr(&o));
}
