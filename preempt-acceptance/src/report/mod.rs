//! `preempt-lat report FILE...`: JSON results from many runs (and machines) merged into one
//! table and one plot, grouped by device, mechanism, kernel and gfx target. Reads what `run
//! --format json`, `sweep t` (`sweep-t.json`) and `priority` (`priority.json`) write; other JSON
//! is listed as skipped, with the reason. A directory given stands for its acceptance archives
//! and its `*.json` files; what is read and how much is [`read`]'s (regular files of at most
//! 1 GiB, parsed without the runs' samples).
mod classes;
pub mod read;

use crate::error::{Context, Error, usage};
use crate::exit::{Outcome, Verdict};
use crate::options::ReportOptions;
use crate::output::Export;
use crate::output::files::{prepare, write_all};
use crate::plot::{self, Axis, Scale, Series};
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

/// What a row is grouped by.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Group {
    pub device: String,
    pub mechanism: String,
    pub kernel: String,
    pub gfx_target: String,
}

/// One measurement (a run, or one mode of a priority run) of one file.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub device: String,
    pub mechanism: String,
    pub kernel: String,
    pub gfx_target: String,
    /// `run` (latency of a preemption), `priority:<mode>`, or `<policy>:<class>` (class
    /// experiment; `<policy>@<rate>/s:<class>` in a rate sweep: request latency).
    pub kind: String,
    pub level: Option<u64>,
    pub t_ms: Option<f64>,
    /// run: suspend latency; priority: HP request latency.
    pub p50_ns: Option<u64>,
    pub p99_ns: Option<u64>,
    pub max_ns: Option<u64>,
    /// run: HP start P99.
    pub hp_start_p99_ns: Option<u64>,
    /// priority: HP P99 / standalone-hp P99.
    pub hp_p99_vs_standalone: Option<f64>,
    pub count: Option<u64>,
    /// `None` where nothing was checked (standalone-hp).
    pub correct: Option<bool>,
    pub git_revision: String,
    pub file: String,
}

impl Row {
    fn new(g: Group, kind: String, file: &str, git_revision: String) -> Self {
        Row {
            device: g.device,
            mechanism: g.mechanism,
            kernel: g.kernel,
            gfx_target: g.gfx_target,
            kind,
            level: None,
            t_ms: None,
            p50_ns: None,
            p99_ns: None,
            max_ns: None,
            hp_start_p99_ns: None,
            hp_p99_vs_standalone: None,
            count: None,
            correct: None,
            git_revision,
            file: file.into(),
        }
    }

    /// What the row is grouped by.
    pub fn group(&self) -> Group {
        Group {
            device: self.device.clone(),
            mechanism: self.mechanism.clone(),
            kernel: self.kernel.clone(),
            gfx_target: self.gfx_target.clone(),
        }
    }
}

fn s(v: &Value) -> String {
    v.as_str().map(str::to_string).unwrap_or_default()
}

fn group(env: &Value) -> Group {
    Group {
        device: s(&env["device"]),
        mechanism: s(&env["mechanism"]),
        kernel: s(&env["kernel"]),
        gfx_target: env["gfx_target"].as_str().unwrap_or("-").to_string(),
    }
}

/// The rows of one run result (`run --format json`, an element of `sweep-t.json`).
fn run_row(v: &Value, file: &str) -> Option<Row> {
    let (p, lat) = (&v["params"], &v["latency_ns"]);
    let sus = &lat["suspend"];
    (p.is_object() && lat.is_object() && v["env"].is_object()).then(|| Row {
        level: p["level"].as_u64(),
        t_ms: p["t_ms"].as_f64(),
        p50_ns: sus["p50"].as_u64(),
        p99_ns: sus["p99"].as_u64(),
        max_ns: sus["max"].as_u64(),
        hp_start_p99_ns: lat["hp_start"]["p99"].as_u64(),
        count: sus["count"].as_u64(),
        correct: v["correctness"]["ok"].as_bool(),
        ..Row::new(group(&v["env"]), "run".into(), file, s(&v["env"]["git_revision"]))
    })
}

/// The rows of a priority result: one per mode.
fn priority_rows(v: &Value, file: &str) -> Vec<Row> {
    let modes = v["modes"].as_array().map(Vec::as_slice).unwrap_or_default();
    modes
        .iter()
        .map(|m| {
            let mut g = group(&v["env"]);
            g.mechanism = m["mechanism"].as_str().unwrap_or("-").to_string();
            let h = &m["hp_latency_ns"];
            Row {
                t_ms: v["params"]["t_ms"].as_f64(),
                p50_ns: h["p50"].as_u64(),
                p99_ns: h["p99"].as_u64(),
                max_ns: h["max"].as_u64(),
                hp_p99_vs_standalone: m["hp_p99_vs_standalone"].as_f64(),
                count: h["count"].as_u64(),
                correct: m["correctness"]["ok"].as_bool(),
                ..Row::new(
                    g,
                    format!("priority:{}", s(&m["mode"])),
                    file,
                    s(&v["env"]["git_revision"]),
                )
            }
        })
        .collect()
}

/// Why a file holds no row.
const NOT_A_RESULT: &str = "not a preempt-lat run, sweep-t, priority, class experiment or sweep rate result";

/// The rows of one file's JSON; none: it holds none (`NOT_A_RESULT`).
pub fn rows_of(v: &Value, file: &str) -> Option<Vec<Row>> {
    let rows: Vec<Row> = if v["modes"].is_array() && v["target_p99_ratio"].is_number() {
        priority_rows(v, file)
    } else if v["classes"].is_array() && v["combined_work_per_s"].is_number() {
        classes::schedule_rows(v, file, "")
    } else if v["sweep"].as_str() == Some("rate") {
        classes::sweep_rate_rows(v, file)
    } else if let Some(a) = v.as_array() {
        a.iter().filter_map(|x| run_row(x, file)).collect()
    } else {
        run_row(v, file).into_iter().collect()
    };
    (!rows.is_empty()).then_some(rows)
}

#[allow(clippy::cast_precision_loss)] // ns: far below 2^52
fn us(ns: Option<u64>) -> String {
    ns.map_or_else(|| "-".into(), |n| format!("{:.1}", n as f64 / 1000.0))
}

/// The merged table, grouped, for people.
/// The merged table and the files that were left out (file, why).
struct Merged {
    rows: Vec<Row>,
    skipped: Vec<(String, String)>,
}

/// JSON and CSV: the rows (the skipped files are only listed in the text).
impl Export for Merged {
    type Whole = [Row];
    type Row<'a> = &'a Row;
    fn whole(&self) -> &[Row] {
        &self.rows
    }
    fn rows(&self) -> Vec<&Row> {
        self.rows.iter().collect()
    }
    fn text(&self, w: &mut dyn Write) -> std::io::Result<()> {
        text(&self.rows, &self.skipped, w)
    }
}

fn text(rows: &[Row], skipped: &[(String, String)], w: &mut dyn Write) -> std::io::Result<()> {
    let mut groups: BTreeMap<Group, Vec<&Row>> = BTreeMap::new();
    for r in rows {
        groups.entry(r.group()).or_default().push(r);
    }
    for (g, rs) in &groups {
        let note = if crate::output::is_host_device(&g.device) {
            " (host figures, not GPU figures)"
        } else {
            ""
        };
        writeln!(
            w,
            "== device {}, mechanism {}, kernel {}, gfx {}{note}",
            g.device, g.mechanism, g.kernel, g.gfx_target
        )?;
        writeln!(
            w,
            "{:<24} {:>5} {:>8} {:>10} {:>10} {:>10} {:>12} {:>7} {:>7}  file",
            "kind", "level", "T ms", "p50 us", "p99 us", "max us", "HP start p99", "count", "correct"
        )?;
        for r in rs {
            writeln!(
                w,
                "{:<24} {:>5} {:>8} {:>10} {:>10} {:>10} {:>12} {:>7} {:>7}  {}",
                r.kind,
                r.level.map_or_else(|| "-".into(), |l| l.to_string()),
                r.t_ms.map_or_else(|| "-".into(), plot::ticks::fmt_num),
                us(r.p50_ns),
                us(r.p99_ns),
                us(r.max_ns),
                r.hp_p99_vs_standalone
                    .map_or_else(|| us(r.hp_start_p99_ns), |x| format!("{x:.2}x alone")),
                r.count.map_or_else(|| "-".into(), |c| c.to_string()),
                match r.correct {
                    Some(true) => "OK",
                    Some(false) => "FAILED",
                    None => "-",
                },
                r.file
            )?;
        }
        writeln!(w)?;
    }
    writeln!(
        w,
        "run rows: suspend latency (HP start P99 beside it); priority rows: HP request latency (P99 against standalone-hp beside it); class rows (<policy>:<class>): request latency, arrival to completion (P99 against the class alone beside it)"
    )?;
    for (f, why) in skipped {
        writeln!(w, "skipped {f}: {why}")?;
    }
    Ok(())
}

/// P99 suspend latency against T, one line (with its p50-p99 band) per group and level.
#[allow(clippy::cast_precision_loss)] // ns: far below 2^52
fn plot_rows(rows: &[Row], path: &Path) -> Result<(), Error> {
    let mut lines: BTreeMap<(Group, u64), Vec<&Row>> = BTreeMap::new();
    for r in rows.iter().filter(|r| r.kind == "run") {
        if let (Some(level), Some(_), Some(_)) = (r.level, r.t_ms, r.p99_ns) {
            lines.entry((r.group(), level)).or_default().push(r);
        }
    }
    let series: Vec<Series> = lines
        .into_iter()
        .map(|((g, level), mut rs)| {
            rs.sort_by(|a, b| a.t_ms.unwrap_or(0.0).total_cmp(&b.t_ms.unwrap_or(0.0)));
            let us = |ns: Option<u64>| ns.unwrap_or(0) as f64 / 1000.0;
            Series {
                label: format!(
                    "Lv{level} {} {}{}",
                    g.device,
                    g.mechanism,
                    if g.gfx_target == "-" {
                        String::new()
                    } else {
                        format!(" {}", g.gfx_target)
                    }
                ),
                points: rs.iter().map(|r| (r.t_ms.unwrap_or(0.0), us(r.p99_ns))).collect(),
                spread: rs
                    .iter()
                    .map(|r| (r.t_ms.unwrap_or(0.0), us(r.p50_ns), us(r.p99_ns)))
                    .collect(),
                connect: true,
            }
        })
        .collect();
    if series.is_empty() {
        return Ok(());
    }
    let devices: std::collections::BTreeSet<&str> = rows.iter().map(|r| r.device.as_str()).collect();
    let hosts = devices.iter().filter(|d| crate::output::is_host_device(d)).count();
    let label = match hosts {
        0 => format!("GPU {}", devices.into_iter().collect::<Vec<_>>().join(", ")),
        n if n == devices.len() => plot::device_label(devices.first().copied().unwrap_or_default(), true),
        _ => "host and GPU devices: host figures are not GPU figures".into(),
    };
    plot::draw(
        path,
        &plot::Figure {
            title: &format!("P99 suspend latency vs T, merged results ({label})"),
            x: Axis {
                title: "T, LP command time (ms)".into(),
                scale: Scale::Log,
            },
            y: Axis {
                title: "suspend latency (µs): P99, band p50-p99".into(),
                scale: Scale::Log,
            },
            series: &series,
            refs: &[],
            x_names: &[],
        },
    )
}

/// Adds a result's rows and judgements (`judged`), or says in `skipped` why it holds none.
fn add_result(
    name: &str,
    v: &Value,
    rows: &mut Vec<Row>,
    judged: &mut Vec<crate::targets::Judgement>,
    skipped: &mut Vec<(String, String)>,
) {
    let j = crate::targets::judge(v, name);
    match rows_of(v, name) {
        Some(r) => rows.extend(r),
        None if !j.is_empty() => {} // judged only (the threshold sweep, launcher-cost, Example 5)
        None => skipped.push((name.to_string(), NOT_A_RESULT.to_string())),
    }
    judged.extend(j);
}

/// `preempt-lat report`.
pub fn run(o: &ReportOptions) -> Outcome {
    // A directory stands for its acceptance archives (read by `acceptance::fleet`) and its
    // *.json files (read here); what is not a regular file in it is listed, never opened.
    let (mut inputs, mut found, mut skipped) = (Vec::new(), Vec::new(), Vec::new());
    for f in &o.files {
        let given = read::given(f).map_err(|e| usage!("{}: cannot read: {e}", f.display()))?;
        match given {
            read::Given::File(p) => inputs.push(p),
            read::Given::Dir {
                archives,
                json,
                left_out,
            } => {
                if !archives && json.is_empty() && left_out.is_empty() {
                    return Err(usage!(
                        "{}: a directory is read for acceptance archives (*.tar.gz) and result files (*.json), and \
                         it holds none",
                        f.display()
                    )
                    .into());
                }
                if archives {
                    inputs.push(f.clone());
                }
                found.extend(json);
                skipped.extend(left_out);
            }
        }
    }
    // Acceptance archives and directories of them (`acceptance::fleet`): their results join the
    // rows; their stages and targets make a table of their own.
    let fleet = crate::acceptance::fleet::read(&inputs)?;
    let mut rows = Vec::new();
    skipped.extend(fleet.skipped.iter().cloned());
    let mut judged = Vec::new();
    for (name, v) in &fleet.results {
        add_result(name, v, &mut rows, &mut judged, &mut skipped);
    }
    // A file named is read whole or the report is refused; one found in a directory is listed
    // as skipped.
    let named = fleet.files.iter().map(|f| (f, true));
    for (f, was_named) in named.chain(found.iter().map(|f| (f, false))) {
        let name = f.display().to_string();
        match read::result(f) {
            Ok(v) => add_result(&name, &v, &mut rows, &mut judged, &mut skipped),
            Err(read::NotRead::Refused(why)) if was_named => return Err(usage!("{name}: {why}").into()),
            Err(read::NotRead::Refused(why)) => skipped.push((name, why)),
            Err(read::NotRead::NotJson(e)) => skipped.push((name, format!("not JSON: {e}"))),
        }
    }
    if rows.is_empty() && judged.is_empty() && fleet.runs.is_empty() {
        return Err(usage!(
            "no result in {} file(s): {}",
            o.files.len(),
            skipped
                .iter()
                .map(|(f, w)| format!("{f}: {w}"))
                .collect::<Vec<_>>()
                .join("; ")
        )
        .into());
    }
    rows.sort_by(|a, b| {
        (a.group(), &a.kind, a.level)
            .cmp(&(b.group(), &b.kind, b.level))
            .then(a.t_ms.unwrap_or(0.0).total_cmp(&b.t_ms.unwrap_or(0.0)))
    });
    let merged = Merged { rows, skipped };
    prepare(&o.out_dir)?;
    write_all(&o.out_dir, "report", &merged)?;
    write_all(&o.out_dir, "targets", &crate::targets::Judged(&judged))?;
    if !merged.rows.is_empty() {
        plot_rows(&merged.rows, &o.out_dir.join("report.svg"))?;
    }
    let mut out = std::io::stdout().lock();
    crate::output::export(o.format, &merged, &mut out).context("writing the report")?;
    if o.format == crate::options::Format::Text {
        writeln!(out)
            .and_then(|()| crate::targets::text(&judged, &mut out))
            .context("writing the report")?;
    }
    let fleet_ok = fleet.finish(&o.out_dir, o.format, &mut out)?;
    Ok(Verdict::from_ok(
        fleet_ok && merged.rows.iter().all(|r| r.correct != Some(false)),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run_json(device: &str, level: u64, t: f64, p99: u64) -> Value {
        json!({
            "params": {"level": level, "t_ms": t},
            "env": {"device": device, "mechanism": "sigstop", "kernel": "6.12", "gfx_target": null, "git_revision": "x"},
            "latency_ns": {"suspend": {"p50": p99 / 2, "p99": p99, "max": p99 * 2, "count": 10}, "hp_start": {"p99": p99}},
            "correctness": {"ok": true},
        })
    }

    #[test]
    fn runs_sweeps_and_priority_results_become_rows() {
        let one = rows_of(&run_json("host", 3, 0.5, 20_000), "a.json").unwrap();
        assert_eq!((one.len(), one[0].level, one[0].p99_ns), (1, Some(3), Some(20_000)));
        assert_eq!(one[0].gfx_target, "-");
        let sweep = json!([run_json("host", 1, 0.1, 1), run_json("host", 3, 0.1, 2), {"other": 1}]);
        assert_eq!(rows_of(&sweep, "s.json").unwrap().len(), 2);
        let prio = json!({
            "env": {"device": "host", "mechanism": "per mode", "kernel": "k", "git_revision": "x"},
            "params": {"t_ms": 0.5},
            "target_p99_ratio": 1.3,
            "modes": [
                {"mode": "standalone-hp", "mechanism": "-", "hp_latency_ns": {"p50": 1, "p99": 2, "max": 3, "count": 4}, "correctness": null},
                {"mode": "lv3", "mechanism": "sigstop", "hp_latency_ns": {"p99": 2}, "hp_p99_vs_standalone": 1.0, "correctness": {"ok": true}},
            ],
        });
        let p = rows_of(&prio, "p.json").unwrap();
        assert_eq!(
            p.iter().map(|r| r.kind.as_str()).collect::<Vec<_>>(),
            ["priority:standalone-hp", "priority:lv3"]
        );
        assert_eq!(
            (p[0].correct, p[1].correct, p[1].mechanism.as_str()),
            (None, Some(true), "sigstop")
        );
        assert!(rows_of(&json!({"device": "host"}), "d.json").is_none());
    }

    #[test]
    fn text_groups_by_device_mechanism_kernel_and_gfx() {
        let mut rows = rows_of(&run_json("host", 3, 0.5, 20_000), "a.json").unwrap();
        let mut gpu = run_json("hip:0", 3, 0.5, 30_000);
        gpu["env"]["mechanism"] = json!("dbg-trap");
        gpu["env"]["gfx_target"] = json!("gfx942");
        rows.extend(rows_of(&gpu, "b.json").unwrap());
        let mut out = Vec::new();
        text(&rows, &[("c.json".into(), "not JSON".into())], &mut out).unwrap();
        let t = String::from_utf8(out).unwrap();
        assert!(t.contains("== device host, mechanism sigstop, kernel 6.12, gfx - (host figures, not GPU figures)"));
        assert!(t.contains("== device hip:0, mechanism dbg-trap, kernel 6.12, gfx gfx942\n"));
        assert!(t.contains("skipped c.json: not JSON"));
    }
}
