//! `report` over many nodes: acceptance archives (and directories of them, as a Slurm array job
//! leaves them) read in memory ([`super::archive`], bounded), each archive's summary turned into
//! one row per node and device of a stage table and a target table, and the result files its
//! passed stages wrote handed to `report`'s own merge (`report` calls [`read`] first and merges
//! [`Fleet::results`] beside the plain files it was given).
use super::archive::{self, Limits};
use super::summary::{Row, Status, Summary, TOOL, Who};
use super::targets::{Judged, Verdict};
use crate::exit::Failure;
use crate::options::Format;
use crate::output::Export;
use serde::Serialize;
use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};

/// One stage of one node's device, as the table shows it.
#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    pub id: String,
    pub status: Status,
    pub seconds: f64,
    pub reason: String,
}

/// One device of one node's acceptance run.
#[derive(Debug, Clone, Serialize)]
pub struct NodeRun {
    pub node: String,
    pub device: String,
    /// The GPU as the HIP smoke stage named it (name and PCI bus), `-` where it did not run.
    pub gpu: String,
    pub host_figures: bool,
    pub archive: String,
    pub started_utc: String,
    pub quick: bool,
    pub interrupted: bool,
    pub stages: Vec<Cell>,
    pub targets: Vec<Judged>,
}

impl NodeRun {
    fn failed(&self) -> bool {
        self.interrupted || self.stages.iter().any(|c| c.status == Status::Fail)
    }
}

/// What `report`'s inputs held besides plain result files.
#[derive(Debug, Default)]
pub struct Fleet {
    /// The inputs that are neither archives nor directories: `report` reads them as before.
    pub files: Vec<PathBuf>,
    /// The results of the archives' stages, named `archive:member`.
    pub results: Vec<(String, Value)>,
    /// (input, why it was left out).
    pub skipped: Vec<(String, String)>,
    /// One per node and device.
    pub runs: Vec<NodeRun>,
}

/// Sorts `inputs` into archives (read here), directories (every archive directly in them) and
/// plain files (left to `report`). A directory without an archive is a usage error.
pub fn read(inputs: &[PathBuf]) -> Result<Fleet, Failure> {
    let mut f = Fleet::default();
    for p in inputs {
        if p.is_dir() {
            let mut found: Vec<PathBuf> = std::fs::read_dir(p)
                .map_err(|e| Failure::Usage(format!("{}: cannot read: {e}", p.display())))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|a| archive::is_archive(a) && a.is_file())
                .collect();
            if found.is_empty() {
                return Err(Failure::Usage(format!(
                    "{}: a directory is read for acceptance archives (*.tar.gz), and it holds none",
                    p.display()
                )));
            }
            found.sort();
            for a in found {
                f.read_archive(&a);
            }
        } else if archive::is_archive(p) {
            f.read_archive(p);
        } else {
            f.files.push(p.clone());
        }
    }
    Ok(f)
}

/// The GPU a run's HIP smoke stage saw.
fn gpu_of(d: &super::summary::DeviceRun) -> String {
    d.stages
        .iter()
        .find(|s| s.id == "hip-smoke" && s.status == Status::Pass)
        .and_then(|s| {
            Some(format!(
                "{} ({})",
                s.facts["name"].as_str()?,
                s.facts["pci_bus_id"].as_str()?
            ))
        })
        .unwrap_or_else(|| "-".into())
}

impl Fleet {
    fn read_archive(&mut self, path: &Path) {
        let name = path.display().to_string();
        let members = match archive::read(path, |m| m.ends_with(".json"), Limits::REPORT) {
            Ok(m) => m,
            Err(e) => {
                self.skipped.push((name, e));
                return;
            }
        };
        for (m, why) in members.skipped {
            self.skipped.push((format!("{name}:{m}"), why));
        }
        let member = |p: &str| members.kept.iter().find(|(n, _)| n == p).map(|(_, b)| b);
        let summaries: Vec<(String, Summary)> = members
            .kept
            .iter()
            .filter(|(n, _)| n.matches('/').count() == 1 && n.ends_with("/summary.json"))
            .filter_map(|(n, b)| {
                let s: Summary = serde_json::from_slice(b).ok()?;
                (s.tool == TOOL).then(|| (n.trim_end_matches("summary.json").to_string(), s))
            })
            .collect();
        if summaries.is_empty() {
            self.skipped
                .push((name, "no acceptance summary (<dir>/summary.json) in the archive".into()));
            return;
        }
        for (top, s) in summaries {
            for d in &s.devices {
                for st in &d.stages {
                    for r in &st.results {
                        match member(&format!("{top}{r}")).map(|b| serde_json::from_slice::<Value>(b)) {
                            Some(Ok(v)) => self.results.push((format!("{name}:{top}{r}"), v)),
                            Some(Err(e)) => self
                                .skipped
                                .push((format!("{name}:{top}{r}"), format!("not JSON: {e}"))),
                            None => self
                                .skipped
                                .push((format!("{name}:{top}{r}"), "listed but not in the archive".into())),
                        }
                    }
                }
                self.runs.push(NodeRun {
                    node: s.node.clone(),
                    device: d.device.clone(),
                    gpu: gpu_of(d),
                    host_figures: d.host_figures,
                    archive: name.clone(),
                    started_utc: s.started_utc.clone(),
                    quick: s.quick,
                    interrupted: s.interrupted,
                    stages: d
                        .stages
                        .iter()
                        .map(|c| Cell {
                            id: c.id.clone(),
                            status: c.status,
                            seconds: c.seconds,
                            reason: c.reason.clone(),
                        })
                        .collect(),
                    targets: d.targets.clone(),
                });
            }
        }
    }

    /// Writes `report-acceptance.{csv,json}` into `out_dir` and, for text, the tables on `w`.
    /// Whether every run passed (no stage failed, none interrupted). Nothing without runs.
    pub fn finish(&self, out_dir: &Path, format: Format, w: &mut dyn Write) -> Result<bool, String> {
        if self.runs.is_empty() {
            return Ok(true);
        }
        crate::output::files::write_all(out_dir, "report-acceptance", self)?;
        if format == Format::Text {
            self.text(w).map_err(|e| format!("writing the report: {e}"))?;
        }
        Ok(!self.runs.iter().any(NodeRun::failed))
    }
}

/// The columns of several runs' sequences (stage ids; targets): each where it sits on average
/// in the runs that have it (its index over the sequence's length), so that a host run's
/// `latency-lv3-sigstop` lands beside a GPU run's `latency-lv3-dbg-trap`; ties in first-seen
/// order.
fn columns(runs: impl Iterator<Item = Vec<String>>) -> Vec<String> {
    let mut cols: Vec<(String, f64, u32)> = Vec::new();
    for ids in runs {
        #[allow(clippy::cast_precision_loss)] // a few dozen stages
        let n = ids.len().max(1) as f64;
        for (i, id) in ids.into_iter().enumerate() {
            #[allow(clippy::cast_precision_loss)]
            let at = i as f64 / n;
            match cols.iter_mut().find(|c| c.0 == id) {
                Some(c) => (c.1, c.2) = (c.1 + at, c.2 + 1),
                None => cols.push((id, at, 1)),
            }
        }
    }
    let mut order: Vec<(usize, f64, String)> = cols
        .into_iter()
        .enumerate()
        .map(|(first, (id, sum, k))| (first, sum / f64::from(k), id))
        .collect();
    order.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
    order.into_iter().map(|(_, _, id)| id).collect()
}

/// A table: a header row, then rows, each cell padded to its column's width.
fn table(w: &mut dyn Write, head: &[String], rows: &[Vec<String>]) -> std::io::Result<()> {
    let n = head.len();
    let width: Vec<usize> = (0..n)
        .map(|i| {
            rows.iter()
                .map(|r| r.get(i).map_or(0, |c| c.chars().count()))
                .chain([head[i].chars().count()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    for r in std::iter::once(head).chain(rows.iter().map(Vec::as_slice)) {
        let cells: Vec<String> = (0..n)
            .map(|i| format!("{:<w$}", r.get(i).map_or("", String::as_str), w = width[i]))
            .collect();
        writeln!(w, "  {}", cells.join("  ").trim_end())?;
    }
    Ok(())
}

/// JSON: the runs; CSV: a row per stage and target; text: the stage table, the failures with
/// their reasons, the target table.
impl Export for Fleet {
    type Whole = [NodeRun];
    type Row<'a> = Row<'a>;
    fn whole(&self) -> &[NodeRun] {
        &self.runs
    }
    fn rows(&self) -> Vec<Row<'_>> {
        let mut v = Vec::new();
        for r in &self.runs {
            let who = Who {
                node: &r.node,
                device: &r.device,
                gpu: Some(&r.gpu),
                archive: Some(&r.archive),
                host_figures: r.host_figures,
            };
            v.extend(
                r.stages
                    .iter()
                    .map(|c| who.stage(&c.id, c.status, c.seconds, &c.reason)),
            );
            v.extend(r.targets.iter().map(|t| who.target(t)));
        }
        v
    }
    fn text(&self, w: &mut dyn Write) -> std::io::Result<()> {
        let archives: std::collections::BTreeSet<&str> = self.runs.iter().map(|r| r.archive.as_str()).collect();
        writeln!(
            w,
            "== acceptance: {} node/device run(s) from {} archive(s)",
            self.runs.len(),
            archives.len()
        )?;
        let stages = columns(
            self.runs
                .iter()
                .map(|r| r.stages.iter().map(|c| c.id.clone()).collect()),
        );
        writeln!(w, "stages (P pass, F fail, S skip, . not in that run):")?;
        for (i, id) in stages.iter().enumerate() {
            writeln!(w, "  {:>2} {id}", i + 1)?;
        }
        let who = |r: &NodeRun| {
            vec![
                r.node.clone(),
                format!("{}{}", r.device, if r.host_figures { " (host)" } else { "" }),
                r.gpu.clone(),
            ]
        };
        let mut head: Vec<String> = ["node", "device", "gpu"].map(String::from).to_vec();
        head.extend((1..=stages.len()).map(|i| i.to_string()));
        head.push("passed/failed/skipped".into());
        let rows: Vec<Vec<String>> = self
            .runs
            .iter()
            .map(|r| {
                let mut row = who(r);
                for id in &stages {
                    let cell = r.stages.iter().find(|c| &c.id == id).map_or(".", |c| match c.status {
                        Status::Pass => "P",
                        Status::Fail => "F",
                        Status::Skip => "S",
                    });
                    row.push(cell.into());
                }
                let n = |s| r.stages.iter().filter(|c| c.status == s).count();
                row.push(format!(
                    "{}/{}/{}{}",
                    n(Status::Pass),
                    n(Status::Fail),
                    n(Status::Skip),
                    if r.interrupted { " interrupted" } else { "" }
                ));
                row
            })
            .collect();
        table(w, &head, &rows)?;
        let failures: Vec<String> = self
            .runs
            .iter()
            .flat_map(|r| {
                r.stages
                    .iter()
                    .filter(|c| c.status == Status::Fail)
                    .map(move |c| format!("  {} {} {}: {}", r.node, r.device, c.id, c.reason))
            })
            .collect();
        if !failures.is_empty() {
            writeln!(w, "failed stages:")?;
            for f in failures {
                writeln!(w, "{f}")?;
            }
        }
        let key = |t: &Judged| format!("{} ({})", t.id, t.scope);
        let targets = columns(self.runs.iter().map(|r| r.targets.iter().map(key).collect()));
        if !targets.is_empty() {
            writeln!(w, "targets (N/A: not measured; [host]: host figures, not GPU figures):")?;
            for (i, id) in targets.iter().enumerate() {
                let text = self
                    .runs
                    .iter()
                    .flat_map(|r| &r.targets)
                    .find(|t| &key(t) == id)
                    .map_or(String::new(), |t| t.target.clone());
                writeln!(w, "  T{} {id}: {text}", i + 1)?;
            }
            let mut head: Vec<String> = ["node", "device", "gpu"].map(String::from).to_vec();
            head.extend((1..=targets.len()).map(|i| format!("T{i}")));
            let rows: Vec<Vec<String>> =
                self.runs
                    .iter()
                    .map(|r| {
                        let mut row = who(r);
                        for id in &targets {
                            row.push(r.targets.iter().find(|t| &key(t) == id).map_or(
                                ".".into(),
                                |t| match t.verdict {
                                    Verdict::NotMeasured => "N/A".into(),
                                    v => format!(
                                        "{} {}{}",
                                        v.word(),
                                        t.shown,
                                        if t.host_figures { " [host]" } else { "" }
                                    ),
                                },
                            ));
                        }
                        row
                    })
                    .collect();
            table(w, &head, &rows)?;
        }
        writeln!(w)
    }
}

#[cfg(test)]
mod tests;
