//! The Lv1 launcher's own host cost per command ([`lv1::cost::measure`]): a benchmark, it
//! asserts nothing. Host figures; quote the load printed beside them.
//!
//! ```sh
//! cargo run --release -p lv1 --example launcher-cost -- --threshold 16 --batch 8 --runs 5
//! cargo run --release -p lv1 --example launcher-cost -- --threshold 8 --batch 4 --json
//! ```
//!
//! Options: `--commands N` (default 1000000), `--threshold T` (16), `--batch B` (8),
//! `--runs R` (1: with more, a median [min-max] line follows the runs), `--json` (one JSON
//! object per run instead of text). Syscalls are not counted here; count them from outside,
//! e.g. `strace -f -c -o syscalls.txt target/release/examples/launcher-cost`.

use lv1::Config;
use lv1::cost::{self, Cost};
use std::process::ExitCode;

struct Args {
    commands: u64,
    threshold: usize,
    batch: usize,
    runs: usize,
    json: bool,
}

fn parse() -> Result<Args, String> {
    let mut a = Args {
        commands: 1_000_000,
        threshold: 16,
        batch: 8,
        runs: 1,
        json: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--commands" => a.commands = number(&value()?)?,
            "--threshold" => a.threshold = number(&value()?)?,
            "--batch" => a.batch = number(&value()?)?,
            "--runs" => a.runs = number::<usize>(&value()?)?.max(1),
            "--json" => a.json = true,
            "--help" | "-h" => return Err(String::new()),
            _ => return Err(format!("unknown argument {flag:?}")),
        }
    }
    Ok(a)
}

fn number<T: std::str::FromStr>(s: &str) -> Result<T, String> {
    s.parse().map_err(|_| format!("not a number: {s:?}"))
}

/// The 1-minute load average (`/proc/loadavg`), or NaN where it cannot be read.
fn load() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(f64::NAN)
}

fn print_run(a: &Args, run: usize, c: &Cost, load: (f64, f64)) {
    let u = &c.used;
    if a.json {
        println!(
            "{{\"device\":\"null (host figures)\",\"threshold\":{},\"batch\":{},\"commands\":{},\"completed\":{},\
             \"cpu_ns_per_cmd\":{:.1},\"switches_per_cmd\":{:.5},\"voluntary_switches\":{},\"involuntary_switches\":{},\
             \"wall_ns_per_cmd\":{:.1},\"cores_busy\":{:.3},\"submit_samples\":{},\"submit_p50_ns\":{},\
             \"submit_p99_ns\":{},\"submit_max_ns\":{},\"load_before\":{:.2},\"load_after\":{:.2}}}",
            a.threshold,
            a.batch,
            c.commands,
            c.completed,
            c.cpu_ns_per_command(),
            c.switches_per_command(),
            u.voluntary_switches,
            u.involuntary_switches,
            c.wall_ns_per_command(),
            c.cores_busy(),
            c.submit.samples,
            c.submit.p50_ns,
            c.submit.p99_ns,
            c.submit.max_ns,
            load.0,
            load.1
        );
    } else {
        println!(
            "run {run}/{}: threshold {} batch {}, {} commands (host figures, null queue): CPU {:.0} ns/cmd \
             ({:.2} cores busy), {:.4} context switches/cmd ({} voluntary, {} involuntary), wall {:.0} ns/cmd, \
             submit p50/p99/max {}/{}/{} ns ({} samples); load {:.2} -> {:.2}",
            a.runs,
            a.threshold,
            a.batch,
            c.commands,
            c.cpu_ns_per_command(),
            c.cores_busy(),
            c.switches_per_command(),
            u.voluntary_switches,
            u.involuntary_switches,
            c.wall_ns_per_command(),
            c.submit.p50_ns,
            c.submit.p99_ns,
            c.submit.max_ns,
            c.submit.samples,
            load.0,
            load.1
        );
    }
}

/// "median [min-max]" of `v` (not empty).
fn spread(mut v: Vec<f64>, digits: usize) -> String {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let median = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    format!("{median:.digits$} [{:.digits$}-{:.digits$}]", v[0], v[n - 1])
}

fn main() -> ExitCode {
    let a = match parse() {
        Ok(a) => a,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("launcher-cost: {e}");
            }
            eprintln!(
                "usage: launcher-cost [--commands N] [--threshold T] [--batch B] [--runs R] [--json]\n\
                 (see the comment at the top of lv1/examples/launcher-cost.rs)"
            );
            return ExitCode::from(2);
        }
    };
    let cfg = match Config::new(a.threshold, a.batch) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("launcher-cost: {e}");
            return ExitCode::from(2);
        }
    };
    let mut costs = Vec::new();
    for run in 1..=a.runs {
        let before = load();
        let c = match cost::measure(a.commands, cfg) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("launcher-cost: {e}");
                return ExitCode::FAILURE;
            }
        };
        print_run(&a, run, &c, (before, load()));
        costs.push(c);
    }
    if a.runs > 1 && !a.json {
        let col = |f: &dyn Fn(&Cost) -> f64| costs.iter().map(f).collect::<Vec<_>>();
        #[allow(clippy::cast_precision_loss)] // nanoseconds of one submit: far below 2^53
        let (p50, p99) = (col(&|c| c.submit.p50_ns as f64), col(&|c| c.submit.p99_ns as f64));
        println!(
            "median [min-max] of {} runs (host figures): CPU {} ns/cmd, context switches {} /cmd, wall {} ns/cmd, \
             submit p50 {} ns, p99 {} ns",
            a.runs,
            spread(col(&Cost::cpu_ns_per_command), 0),
            spread(col(&Cost::switches_per_command), 4),
            spread(col(&Cost::wall_ns_per_command), 0),
            spread(p50, 0),
            spread(p99, 0)
        );
    }
    ExitCode::SUCCESS
}
