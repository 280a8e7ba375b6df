//! What `acceptance` found, as the archive's `summary.{json,txt,csv}` and stdout carry it: per
//! device, every stage with its status, reason and time, and the targets judged. `report` reads
//! the JSON back from archives (`fleet`), so every type here also deserializes, and fields added
//! later default when an older summary lacks them.
use super::targets::Judged;
use crate::output::Export;
use serde::{Deserialize, Serialize};
use std::io::{self, Write};

/// The tool name a summary carries: how `report` tells an acceptance summary from other JSON.
pub const TOOL: &str = "preempt-lat acceptance";

/// A stage's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Status {
    Pass,
    Fail,
    Skip,
}

impl Status {
    pub fn word(self) -> &'static str {
        match self {
            Status::Pass => "PASS",
            Status::Fail => "FAIL",
            Status::Skip => "SKIP",
        }
    }
}

/// One stage as it ran (or why it did not).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StageRecord {
    /// Stable id (`latency-lv3-dbg-trap`): `--only` and `--stage-bound` take it.
    pub id: String,
    /// What it does, for people.
    pub title: String,
    pub status: Status,
    /// Why it passed, failed or was skipped: one line.
    pub reason: String,
    /// Wall time it ran (0 when skipped).
    pub seconds: f64,
    /// Its time bound.
    pub bound_s: f64,
    /// The stages it needs (a failed or skipped one skips it).
    #[serde(default)]
    pub needs: Vec<String>,
    /// A stage skipped for what it needs: the failed stage behind it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocked_by: Option<String>,
    /// Its child's command line, `preempt-lat` first (none for a stage run in the parent).
    #[serde(default)]
    pub command: Option<String>,
    /// How its child ended (exit status, or what stopped it).
    #[serde(default)]
    pub ended: Option<String>,
    /// Its files in the archive, relative to the archive's top directory.
    #[serde(default)]
    pub files: Vec<String>,
    /// Of those, the results `report` merges (run JSON, sweep-t.json, sweep-state.json,
    /// priority.json, the partition's schedule.json, overhead.json).
    #[serde(default)]
    pub results: Vec<String>,
    /// What the stage found (its `stage.json` facts; null for subcommand stages).
    #[serde(default)]
    pub facts: serde_json::Value,
}

impl StageRecord {
    /// A stage that did not run, and why.
    pub fn skipped(id: &str, title: &str, bound_s: f64, needs: &[String], reason: String) -> Self {
        StageRecord {
            id: id.into(),
            title: title.into(),
            status: Status::Skip,
            reason,
            seconds: 0.0,
            bound_s,
            needs: needs.to_vec(),
            blocked_by: None,
            command: None,
            ended: None,
            files: Vec::new(),
            results: Vec::new(),
            facts: serde_json::Value::Null,
        }
    }
}

/// Everything about one device's stages.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DeviceRun {
    /// `host` or `hip:N`.
    pub device: String,
    /// Host figures, not GPU figures.
    pub host_figures: bool,
    /// The device's directory in the archive (`host`, `hip0`).
    pub dir: String,
    pub stages: Vec<StageRecord>,
    pub targets: Vec<Judged>,
}

impl DeviceRun {
    pub fn count(&self, s: Status) -> usize {
        self.stages.iter().filter(|r| r.status == s).count()
    }
}

/// The whole summary (`summary.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Summary {
    pub tool: String,
    pub version: String,
    pub git_revision: String,
    pub node: String,
    /// UTC, `YYYY-MM-DDTHH:MM:SSZ`.
    pub started_utc: String,
    pub quick: bool,
    /// The command line it was started with.
    pub command: Vec<String>,
    /// Ctrl-C/SIGTERM stopped it before every stage ran.
    pub interrupted: bool,
    pub devices: Vec<DeviceRun>,
    pub passed: usize,
    pub failed: usize,
    pub skipped: usize,
    /// No stage failed, none was interrupted and no target in [`Summary::failed_targets`].
    pub ok: bool,
    /// A GPU's failing targets fail the run (`acceptance` without `--no-gate`).
    #[serde(default)]
    pub gated: bool,
    /// The targets that failed the run: a GPU's FAILs when gated (`device: id (scope): value`);
    /// host figures never.
    #[serde(default)]
    pub failed_targets: Vec<String>,
    /// The archive's file name.
    pub archive: String,
}

impl Summary {
    /// Counts the stages and sets `ok`.
    pub fn tally(&mut self) {
        let n = |s| self.devices.iter().map(|d| d.count(s)).sum();
        (self.passed, self.failed, self.skipped) = (n(Status::Pass), n(Status::Fail), n(Status::Skip));
        self.ok = self.failed == 0 && !self.interrupted;
    }
}

/// One CSV row: a stage or a target of one device, in a summary or in `report`'s fleet table
/// (which adds the GPU and the archive; a summary leaves those columns out).
#[derive(Debug, Serialize)]
pub struct Row<'a> {
    pub node: &'a str,
    pub device: &'a str,
    /// The fleet table's: the GPU the run saw (`-`: none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu: Option<&'a str>,
    /// The fleet table's: the archive the run came from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub archive: Option<&'a str>,
    /// `stage` or `target`.
    pub kind: &'static str,
    pub id: &'a str,
    /// The mechanism or level a target row is about (empty for stages).
    pub scope: &'a str,
    /// PASS, FAIL, SKIP (stages); PASS, FAIL, N/A (targets).
    pub status: &'a str,
    pub seconds: Option<f64>,
    /// A target's measured value, as shown.
    pub measured: &'a str,
    pub host_figures: bool,
    pub reason: &'a str,
}

/// Whose rows: the columns every row of one device's stages and targets repeats.
#[derive(Debug, Clone, Copy)]
pub struct Who<'a> {
    pub node: &'a str,
    pub device: &'a str,
    pub gpu: Option<&'a str>,
    pub archive: Option<&'a str>,
    /// The device's: its stages' rows carry it (a target carries its own).
    pub host_figures: bool,
}

impl<'a> Who<'a> {
    /// Stage `id`'s row.
    pub fn stage(self, id: &'a str, status: Status, seconds: f64, reason: &'a str) -> Row<'a> {
        Row {
            node: self.node,
            device: self.device,
            gpu: self.gpu,
            archive: self.archive,
            kind: "stage",
            id,
            scope: "",
            status: status.word(),
            seconds: Some(seconds),
            measured: "",
            host_figures: self.host_figures,
            reason,
        }
    }

    /// Target `t`'s row.
    pub fn target(self, t: &'a Judged) -> Row<'a> {
        Row {
            node: self.node,
            device: self.device,
            gpu: self.gpu,
            archive: self.archive,
            kind: "target",
            id: &t.id,
            scope: &t.scope,
            status: t.verdict.word(),
            seconds: None,
            measured: &t.shown,
            host_figures: t.host_figures,
            reason: &t.note,
        }
    }
}

/// JSON: the summary whole; CSV: one row per stage and per target; text: the tables.
impl Export for Summary {
    type Whole = Self;
    type Row<'a> = Row<'a>;
    fn whole(&self) -> &Self {
        self
    }
    fn rows(&self) -> Vec<Row<'_>> {
        let mut v = Vec::new();
        for d in &self.devices {
            let who = Who {
                node: &self.node,
                device: &d.device,
                gpu: None,
                archive: None,
                host_figures: d.host_figures,
            };
            v.extend(
                d.stages
                    .iter()
                    .map(|s| who.stage(&s.id, s.status, s.seconds, &s.reason)),
            );
            v.extend(d.targets.iter().map(|t| who.target(t)));
        }
        v
    }
    fn text(&self, w: &mut dyn Write) -> io::Result<()> {
        text(self, w)
    }
}

fn text(s: &Summary, w: &mut dyn Write) -> io::Result<()> {
    writeln!(
        w,
        "preempt-lat acceptance {} (rev {}), node {}, started {}{}",
        s.version,
        s.git_revision,
        s.node,
        s.started_utc,
        if s.quick { ", --quick" } else { "" }
    )?;
    for d in &s.devices {
        let note = if d.host_figures {
            " (host device: host figures, not GPU figures)"
        } else {
            ""
        };
        writeln!(w, "\n== {}{note}", d.device)?;
        let width = d.stages.iter().map(|r| r.id.len()).max().unwrap_or(0);
        for r in &d.stages {
            let time = if r.status == Status::Skip {
                "-".to_string()
            } else {
                format!("{:.1} s", r.seconds)
            };
            writeln!(w, "  {} {:<width$} {:>9}  {}", r.status.word(), r.id, time, r.reason)?;
        }
        if !d.targets.is_empty() {
            writeln!(w, "  targets{}:", if d.host_figures { " (host figures)" } else { "" })?;
            for t in &d.targets {
                writeln!(w, "  {:<4} {}: {}", t.verdict.word(), t.label(), t.detail())?;
            }
        }
    }
    writeln!(
        w,
        "\nstages: {} passed, {} failed, {} skipped{}",
        s.passed,
        s.failed,
        s.skipped,
        if s.interrupted {
            "; INTERRUPTED before every stage ran"
        } else {
            ""
        }
    )?;
    targets_text(s, w)
}

/// What the targets did to the run: the GPU targets that failed it, one a line, or why none did.
fn targets_text(s: &Summary, w: &mut dyn Write) -> io::Result<()> {
    if !s.failed_targets.is_empty() {
        writeln!(
            w,
            "targets: {} failed on a GPU, which fails the run (exit status 3; --no-gate makes them information):",
            s.failed_targets.len()
        )?;
        for t in &s.failed_targets {
            writeln!(w, "  FAIL {t}")?;
        }
        return Ok(());
    }
    let line = if s.devices.iter().all(|d| d.host_figures) {
        "host figures, information only (a host figure often fails a GPU target), not gated on"
    } else if !s.gated {
        "information only (--no-gate)"
    } else {
        "none measured on a GPU failed (a GPU's failing target fails the run)"
    };
    writeln!(w, "targets: {line}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_are_written_in_capitals_and_read_back() {
        let r = StageRecord::skipped("sweep-t", "sweep t", 60.0, &["latency-lv1".into()], "why".into());
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["status"], "SKIP");
        let back: StageRecord = serde_json::from_value(v).unwrap();
        assert_eq!(
            (back.status, back.needs),
            (Status::Skip, vec!["latency-lv1".to_string()])
        );
        // An older summary without the later fields still reads.
        let old = serde_json::json!({"id": "x", "title": "x", "status": "PASS", "reason": "", "seconds": 1.0, "bound_s": 2.0});
        assert_eq!(serde_json::from_value::<StageRecord>(old).unwrap().status, Status::Pass);
    }

    #[test]
    fn the_csv_has_a_row_per_stage_and_per_target() {
        let mut out = Vec::new();
        crate::output::export(crate::options::Format::Csv, &summary(), &mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "node,device,kind,id,scope,status,seconds,measured,host_figures,reason\n\
             n1,host,stage,environment,,PASS,1.5,,true,\"ok, \"\"quoted\"\"\"\n\
             n1,host,stage,sweep-t,,SKIP,0.0,,true,needs x\n\
             n1,host,target,lv3-p99,sigstop,N/A,,-,false,sweep-t skipped\n"
        );
    }

    /// A host run: a stage passed, one skipped, a target not measured.
    fn summary() -> Summary {
        let mut s = Summary {
            tool: TOOL.into(),
            version: "v".into(),
            git_revision: "r".into(),
            node: "n1".into(),
            started_utc: "2026-01-01T00:00:00Z".into(),
            quick: true,
            command: vec![],
            interrupted: false,
            devices: vec![DeviceRun {
                device: "host".into(),
                host_figures: true,
                dir: "host".into(),
                stages: vec![
                    StageRecord {
                        status: Status::Pass,
                        seconds: 1.5,
                        ..StageRecord::skipped("environment", "e", 1.0, &[], "ok, \"quoted\"".into())
                    },
                    StageRecord::skipped("sweep-t", "t", 1.0, &[], "needs x".into()),
                ],
                targets: vec![Judged::not_measured("lv3-p99", "sigstop", "sweep-t skipped".into())],
            }],
            passed: 0,
            failed: 0,
            skipped: 0,
            ok: false,
            gated: false,
            failed_targets: Vec::new(),
            archive: String::new(),
        };
        s.tally();
        s
    }
}
