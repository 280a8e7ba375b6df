//! `acceptance`'s interposer stage on the host device: examples/hip/two_priorities.c compiled
//! against Debian's HIP headers and run on the stand-in runtime alone, without the interposer and
//! under it (the workspace's cdylibs as cargo built them, `cargo test --workspace` builds them),
//! judged and archived with its figures; and, from a copy of preempt-lat with nothing built
//! beside it, the stage skipped with the command that builds what is missing. Every run is
//! bounded by the test.
mod common;

use common::only_stage::{self, members};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(90);

fn scratch(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("acceptance-interposer-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `program acceptance --only interposer` (`program`: a preempt-lat binary, started as
/// `common::preempt_lat` starts it): the summary and stderr.
fn accept(program: &Path, out: &Path) -> (Value, String) {
    let mut c = Command::new("env");
    c.arg("--default-signal=INT,TERM").arg(program);
    only_stage::run(c, "interposer", out, LIMIT)
}

fn stage(summary: &Value) -> &Value {
    only_stage::stage(summary, "interposer")
}

#[test]
fn the_interposer_stage_passes_on_the_stand_in_with_its_figures_archived() {
    let dir = scratch("pass");
    let t0 = Instant::now();
    let (s, stderr) = accept(Path::new(env!("CARGO_BIN_EXE_preempt-lat")), &dir);
    let st = stage(&s);
    assert_eq!(st["status"], "PASS", "{st}\n{stderr}");
    assert!(
        t0.elapsed() < Duration::from_secs(30),
        "--quick took {:?}",
        t0.elapsed()
    );
    let reason = st["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("host figures (stand-in runtime, kernels filling the device): HP P50/P99 us alone "),
        "{reason}"
    );
    assert!(
        reason.ends_with("every LP command exactly once (30 of 20 ms)"),
        "{reason}"
    );
    let facts = &st["facts"];
    assert_eq!(facts["host_figures"], true);
    for mode in ["alone", "without", "with"] {
        let r = &facts["runs"][mode];
        for k in ["hp_p50_us", "hp_p99_us", "hp_max_us"] {
            assert!(r[k].as_f64().is_some_and(|v| v > 0.0), "{mode} {k}: {r}");
        }
        assert_eq!(
            (r["exit"].as_i64(), r["lp_bad"].as_u64()),
            (Some(0), Some(0)),
            "{mode}: {r}"
        );
        assert_eq!(r["hp_requests"], 15, "--quick's requests: {r}");
    }
    assert!(
        facts["runs"]["with"]["hp_p99_us"].as_f64() < facts["runs"]["without"]["hp_p99_us"].as_f64(),
        "{facts}"
    );
    // The exit line as the real library wrote it, read by the stage's own reader: its pid is the
    // one of the library's first line, its counts those the stage judged.
    let with = &facts["runs"]["with"];
    let x = &with["interposer"];
    assert!(
        x["suspends"].as_u64().is_some_and(|n| n > 0) && x["suspends"] == x["resumes"],
        "{with}"
    );
    assert_eq!(
        (x["failures"].as_u64(), x["marks"].as_u64()),
        (Some(0), Some(15)),
        "{with}"
    );
    let first = with["interposer_lines"][0].as_str().unwrap();
    assert!(
        first.starts_with(&format!("preempt-hip: pid {} on the stand-in HIP runtime", x["pid"])),
        "{with}"
    );
    assert!(with["command"].as_str().unwrap().contains("LD_PRELOAD="), "{with}");
    assert!(
        !facts["runs"]["without"]["command"]
            .as_str()
            .unwrap()
            .contains("LD_PRELOAD=")
    );
    // The archive holds the source that was compiled, cc's line and each run's output.
    let archive = dir.join(s["archive"].as_str().unwrap());
    let sources = members(&archive, "-interposer/two_priorities.c");
    assert_eq!(sources.len(), 1);
    assert_eq!(
        sources[0].1,
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/hip/two_priorities.c"))
            .unwrap()
    );
    let compile = members(&archive, "-interposer/compile.txt");
    assert!(compile[0].1.starts_with("cc -O2 "), "{}", compile[0].1);
    let with_err = members(&archive, "-interposer/with.stderr.txt");
    assert!(with_err[0].1.contains(" exits: 15 marks, "), "{}", with_err[0].1);
    let stage_json = members(&archive, "-interposer/stage.json");
    let sj: Value = serde_json::from_str(&stage_json[0].1).unwrap();
    assert_eq!(sj["facts"]["runs"], facts["runs"], "stage.json and the summary agree");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn without_the_built_libraries_the_stage_is_skipped_naming_the_build_command() {
    let dir = scratch("missing");
    // preempt-lat alone in a directory: nothing of the workspace built beside it. A hard link
    // (not a symlink: the stage looks beside the path it was started as).
    let lone = dir.join("bin");
    std::fs::create_dir_all(&lone).unwrap();
    let exe = lone.join("preempt-lat");
    if std::fs::hard_link(env!("CARGO_BIN_EXE_preempt-lat"), &exe).is_err() {
        std::fs::copy(env!("CARGO_BIN_EXE_preempt-lat"), &exe).unwrap();
    }
    let (s, stderr) = accept(&exe, &dir.join("out"));
    let st = stage(&s);
    assert_eq!(st["status"], "SKIP", "{st}\n{stderr}");
    let reason = st["reason"].as_str().unwrap();
    let release = if cfg!(debug_assertions) { "" } else { " --release" };
    assert!(reason.starts_with("libpreempt_hip.so, libhip_standin.so"), "{reason}");
    assert!(
        reason.contains(&format!(
            " not built (not in {} nor its deps/): `cargo build{release} -p hip-interpose -p hip-standin",
            lone.display()
        )),
        "{reason}"
    );
    assert_eq!(s["ok"], true, "a SKIP on the host device fails nothing");
    std::fs::remove_dir_all(&dir).unwrap();
}
