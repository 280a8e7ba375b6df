//! examples/hip/two_priorities.c as the interposer stage runs it: its source (embedded here and
//! written into the stage's directory, so that the stage needs no checkout of the repository and
//! the archive holds exactly what was compiled), its command lines built from typed values, and
//! what it prints: its one `key=value` line on stdout and the interposer's exit line on stderr.
use serde::Serialize;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The program's sources, by the file names the stage writes them under (`delay_run.h` is
/// included by name from the program's directory).
pub const SOURCES: [(&str, &str); 2] = [
    (
        PROGRAM_SOURCE,
        include_str!("../../../../examples/hip/two_priorities.c"),
    ),
    ("delay_run.h", include_str!("../../../../examples/hip/delay_run.h")),
];

/// The file the program's source is written to.
pub const PROGRAM_SOURCE: &str = "two_priorities.c";

/// The three runs, in the order they run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// The HP requests and no LP work: what a request costs with nothing to wait for.
    Alone,
    /// The LP stream busy, no interposer: what a request waits for there.
    Without,
    /// The same under the interposer (`LD_PRELOAD`).
    With,
}

impl Mode {
    pub const ALL: [Mode; 3] = [Mode::Alone, Mode::Without, Mode::With];

    pub fn name(self) -> &'static str {
        match self {
            Mode::Alone => "alone",
            Mode::Without => "without",
            Mode::With => "with",
        }
    }

    /// Whether the interposer is preloaded.
    pub fn preloaded(self) -> bool {
        self == Mode::With
    }
}

/// The program's work: N LP commands of T ms given up front, K HP requests of H ms, G ms apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Workload {
    pub lp: u32,
    pub lp_ms: u32,
    pub hp: u32,
    pub hp_ms: u32,
    pub gap_ms: u32,
}

impl Workload {
    /// docs/hardware-validation.md section 12's run by hand: the LP stream's 2 s of work outlast
    /// the 200 requests.
    pub const GPU: Workload = Workload {
        lp: 100,
        lp_ms: 20,
        hp: 200,
        hp_ms: 1,
        gap_ms: 5,
    };
    /// `--quick` on a GPU: 1.2 s of LP work against 50 requests.
    pub const GPU_QUICK: Workload = Workload {
        lp: 60,
        hp: 50,
        ..Workload::GPU
    };
    /// The host device with kernels that fill it: without the interposer a request waits for the
    /// running LP kernel (about 10 ms of 20 on average, then its own 1 ms and the 5 ms gap), so
    /// 60 requests take about 1.2 s, inside the LP stream's 2 s: every request has LP work to
    /// wait for.
    pub const HOST: Workload = Workload {
        hp: 60,
        ..Workload::GPU
    };
    /// `--quick` on the host device: 15 requests (about 0.3 s without the interposer) inside
    /// 0.6 s of LP work; each run takes under a second.
    pub const HOST_QUICK: Workload = Workload {
        lp: 30,
        hp: 15,
        ..Workload::GPU
    };

    pub fn of(host: bool, quick: bool) -> Workload {
        match (host, quick) {
            (false, false) => Workload::GPU,
            (false, true) => Workload::GPU_QUICK,
            (true, false) => Workload::HOST,
            (true, true) => Workload::HOST_QUICK,
        }
    }
}

/// One run's command line: the compiled program, the code object it loads, the mode and the work.
#[derive(Debug, Clone)]
pub struct Invocation {
    pub program: PathBuf,
    pub code_object: PathBuf,
    pub mode: Mode,
    pub work: Workload,
}

impl Invocation {
    /// The program's arguments: `CODE_OBJECT [--no-lp | --lp N --lp-ms T] --hp K --hp-ms H
    /// --gap-ms G`.
    pub fn args(&self) -> Vec<OsString> {
        fn opt(a: &mut Vec<OsString>, name: &str, v: u32) {
            a.push(name.into());
            a.push(v.to_string().into());
        }
        let w = &self.work;
        let mut a: Vec<OsString> = vec![self.code_object.clone().into()];
        if self.mode == Mode::Alone {
            // The flag rather than `--lp 0`: as section 12 runs it by hand.
            a.push("--no-lp".into());
        } else {
            opt(&mut a, "--lp", w.lp);
            opt(&mut a, "--lp-ms", w.lp_ms);
        }
        opt(&mut a, "--hp", w.hp);
        opt(&mut a, "--hp-ms", w.hp_ms);
        opt(&mut a, "--gap-ms", w.gap_ms);
        a
    }
}

/// One line for the record: `VAR=value ... program args`, as a shell would take it (the values
/// here have no spaces).
pub fn shell_line(env: &[(&str, OsString)], program: &Path, args: &[OsString]) -> String {
    let mut parts: Vec<String> = env
        .iter()
        .map(|(k, v)| format!("{k}={}", v.to_string_lossy()))
        .collect();
    parts.push(program.display().to_string());
    parts.extend(args.iter().map(|a| a.to_string_lossy().into_owned()));
    parts.join(" ")
}

/// What is wrong with a run's stdout.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LineError {
    #[error("no key=value line (hp_requests=...) on its stdout")]
    NoLine,
    #[error("its line has no number for {key}: {line}")]
    Missing { key: &'static str, line: String },
}

/// The program's line: latencies in microseconds on the host clock, and the exactly-once count
/// of its LP commands.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ProgramLine {
    pub hp_requests: u64,
    pub hp_p50_us: f64,
    pub hp_p99_us: f64,
    pub hp_max_us: f64,
    pub lp_commands: u64,
    pub lp_exactly_once: u64,
    pub lp_bad: u64,
}

impl ProgramLine {
    /// The last line of `stdout` that has `hp_requests=`, read by its keys (the order and any
    /// other key do not matter).
    pub fn parse(stdout: &str) -> Result<ProgramLine, LineError> {
        let line = stdout
            .lines()
            .rev()
            .find(|l| l.split_whitespace().any(|kv| kv.starts_with("hp_requests=")))
            .ok_or(LineError::NoLine)?;
        let get = |key: &'static str| -> Result<f64, LineError> {
            line.split_whitespace()
                .filter_map(|kv| kv.split_once('='))
                .find(|(k, _)| *k == key)
                .and_then(|(_, v)| v.parse::<f64>().ok())
                .filter(|v| v.is_finite() && *v >= 0.0)
                .ok_or_else(|| LineError::Missing {
                    key,
                    line: line.trim().to_string(),
                })
        };
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // counts, checked >= 0
        let count = |key: &'static str| get(key).map(|v| v as u64);
        Ok(ProgramLine {
            hp_requests: count("hp_requests")?,
            hp_p50_us: get("p50_us")?,
            hp_p99_us: get("p99_us")?,
            hp_max_us: get("max_us")?,
            lp_commands: count("lp_commands")?,
            lp_exactly_once: count("lp_exactly_once")?,
            lp_bad: count("lp_bad")?,
        })
    }
}

/// What the interposer says at exit under `PREEMPT_INTERPOSE_LOG=1`:
/// `preempt-hip: pid <p> exits: <m> marks, <s> suspends, <r> resumes, <f> failures`.
///
/// Read here from the line's documented format, not through hip-interpose's own reader: that
/// crate is the cdylib exporting HIP's names (`libpreempt_hip.so`), which must never be linked
/// into preempt-lat. Two things keep the two readers one format: the unit test below uses the
/// line hip-interpose's own test pins its writer to, and the acceptance test reads the real
/// library's line through this reader.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ExitLine {
    pub pid: u32,
    pub marks: u64,
    pub suspends: u64,
    pub resumes: u64,
    pub failures: u64,
}

const EXIT_PREFIX: &str = "preempt-hip: pid ";
const EXIT_MIDDLE: &str = " exits: ";
const EXIT_COUNTS: [&str; 4] = ["marks", "suspends", "resumes", "failures"];

impl ExitLine {
    /// `line` if it is an exit line.
    pub fn parse(line: &str) -> Option<ExitLine> {
        let (pid, counts) = line.trim().strip_prefix(EXIT_PREFIX)?.split_once(EXIT_MIDDLE)?;
        let mut n = [0u64; 4];
        let parts: Vec<&str> = counts.split(", ").collect();
        if parts.len() != n.len() {
            return None;
        }
        for ((slot, part), word) in n.iter_mut().zip(parts).zip(EXIT_COUNTS) {
            let (v, w) = part.split_once(' ')?;
            if w != word {
                return None;
            }
            *slot = v.parse().ok()?;
        }
        let [marks, suspends, resumes, failures] = n;
        Some(ExitLine {
            pid: pid.parse().ok()?,
            marks,
            suspends,
            resumes,
            failures,
        })
    }

    /// The first exit line in a run's stderr.
    pub fn find(stderr: &str) -> Option<ExitLine> {
        stderr.lines().find_map(ExitLine::parse)
    }
}

/// The interposer's other lines in a run's stderr (which device and mechanism, the streams it
/// took over, a failure), at most `max`: kept with the figures, for whoever reads the archive.
pub fn interposer_lines(stderr: &str, max: usize) -> Vec<String> {
    stderr
        .lines()
        .filter(|l| l.starts_with("preempt-hip: "))
        .take(max)
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_programs_line_is_read_by_its_keys() {
        // As two_priorities.c prints it.
        let out = "hp_requests=15 hp_ms=1 p50_us=1345 p99_us=4247 max_us=4247 lp_commands=30 lp_ms=20 \
                   lp_exactly_once=30 lp_bad=0 child_failed=0\n";
        assert_eq!(
            ProgramLine::parse(out),
            Ok(ProgramLine {
                hp_requests: 15,
                hp_p50_us: 1345.0,
                hp_p99_us: 4247.0,
                hp_max_us: 4247.0,
                lp_commands: 30,
                lp_exactly_once: 30,
                lp_bad: 0,
            })
        );
        assert_eq!(
            ProgramLine::parse("two_priorities: hipModuleLoad failed\n"),
            Err(LineError::NoLine)
        );
        assert_eq!(
            ProgramLine::parse("hp_requests=3 p50_us=1 p99_us=x max_us=2 lp_commands=0 lp_exactly_once=0 lp_bad=0"),
            Err(LineError::Missing {
                key: "p99_us",
                line: "hp_requests=3 p50_us=1 p99_us=x max_us=2 lp_commands=0 lp_exactly_once=0 lp_bad=0".into()
            })
        );
        // Only the line counts, not the text before it; the last line wins.
        let two = "hp_requests=1 p50_us=9 p99_us=9 max_us=9 lp_commands=0 lp_exactly_once=0 lp_bad=0\nnoise\n\
                   hp_requests=2 p50_us=1 p99_us=2 max_us=3 lp_commands=4 lp_exactly_once=3 lp_bad=1\n";
        let l = ProgramLine::parse(two).unwrap();
        assert_eq!((l.hp_requests, l.lp_exactly_once, l.lp_bad), (2, 3, 1));
    }

    #[test]
    fn the_exit_line_reads_as_hip_interpose_writes_it() {
        // The line hip-interpose/src/exit_line.rs's own test pins its writer to.
        let line = "preempt-hip: pid 42 exits: 200 marks, 7 suspends, 7 resumes, 0 failures";
        let want = ExitLine {
            pid: 42,
            marks: 200,
            suspends: 7,
            resumes: 7,
            failures: 0,
        };
        assert_eq!(ExitLine::parse(line), Some(want));
        let stderr = format!("preempt-hip: pid 42 on the stand-in\n{line}\nhp_requests=1\n");
        assert_eq!(ExitLine::find(&stderr), Some(want));
        assert_eq!(interposer_lines(&stderr, 1), ["preempt-hip: pid 42 on the stand-in"]);
        for bad in [
            "preempt-hip: pid 42 exits: 1 marks, 2 suspends",
            "preempt-hip: pid x exits: 1 marks, 2 suspends, 3 resumes, 4 failures",
            "preempt-hip: pid 42 exits: 1 marks, 2 resumes, 3 suspends, 4 failures",
            "preempt-hip: pid 42 exits: 1 marks, 2 suspends, 3 resumes, 4 failures, 5 more",
        ] {
            assert_eq!(ExitLine::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn each_mode_has_its_command_line() {
        let inv = |mode| Invocation {
            program: "/x/two_priorities".into(),
            code_object: "/x/delay.co".into(),
            mode,
            work: Workload::GPU,
        };
        let args = |mode| -> Vec<String> {
            inv(mode)
                .args()
                .into_iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect()
        };
        // docs/hardware-validation.md section 12's commands.
        assert_eq!(
            args(Mode::Alone).join(" "),
            "/x/delay.co --no-lp --hp 200 --hp-ms 1 --gap-ms 5"
        );
        for m in [Mode::Without, Mode::With] {
            assert_eq!(
                args(m).join(" "),
                "/x/delay.co --lp 100 --lp-ms 20 --hp 200 --hp-ms 1 --gap-ms 5"
            );
        }
        assert_eq!(
            shell_line(&[("A", "1".into())], Path::new("/x/p"), &inv(Mode::Alone).args()[..2]),
            "A=1 /x/p /x/delay.co --no-lp"
        );
        // On the host device (kernels that fill it) the LP stream outlasts the requests waiting
        // for it without the interposer: half an LP command each on average, its own work and
        // the gap. (On a GPU a request's one block does not wait for the LP kernel's CUs.)
        for w in [Workload::HOST, Workload::HOST_QUICK] {
            assert!(w.lp * w.lp_ms >= w.hp * (w.lp_ms / 2 + w.hp_ms + w.gap_ms), "{w:?}");
        }
    }
}
