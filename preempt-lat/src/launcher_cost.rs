//! `preempt-lat launcher-cost`: what the Lv1 launcher costs the host, on the host device, over
//! `--runs` runs (min / median / max): per command at T -> 0 over a queue that completes at
//! launch (the launcher alone: CPU of every thread, context switches, wall, `submit` latency),
//! per command on the host device launched directly and through the launcher, and XSched's
//! Fig. 12b: this process's CPU as a share of one core while LP commands of T run through the
//! launcher. Host figures, never GPU figures.
use crate::device::Device;
use crate::error::{Context, UsageError};
use crate::exit::{Outcome, Verdict};
use crate::host_direct as host;
use crate::options::LauncherCostOptions;
use crate::output::Export;
use serde::Serialize;
use std::io::{self, Write};

/// The T of XSched's Fig. 12b (ms): the launcher's share of a core while such commands run.
pub const FIG12B_T_MS: [f64; 3] = [0.01, 0.1, 1.0];
/// How long each Fig. 12b measurement keeps the LP queue busy (ms).
const FIG12B_WINDOW_MS: f64 = 200.0;

/// One figure over the runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Figure {
    /// What was measured, e.g. `null_device.cpu_ns_per_cmd`.
    pub name: String,
    pub unit: &'static str,
    pub min: f64,
    pub median: f64,
    pub max: f64,
}

impl Figure {
    /// The spread of `values` (one per run; none: all 0).
    pub fn of(name: impl Into<String>, unit: &'static str, mut values: Vec<f64>) -> Figure {
        values.sort_by(f64::total_cmp);
        let at = |i: usize| values.get(i).copied().unwrap_or(0.0);
        Figure {
            name: name.into(),
            unit,
            min: at(0),
            median: crate::stats::median(&values).unwrap_or(0.0),
            max: at(values.len().saturating_sub(1)),
        }
    }
}

/// What `launcher-cost` measured. The keys it always had come first (their values now the
/// medians over the runs); `runs` and `figures` carry every figure with its spread.
#[derive(Debug, Clone, Serialize)]
pub struct LauncherCost {
    pub batch: u32,
    pub commands: u32,
    pub device: String,
    pub direct_cpu_ns_per_cmd: f64,
    pub git_revision: &'static str,
    pub launcher_cpu_ns_per_cmd: f64,
    pub launcher_cpu_ns_per_cmd_null_device: f64,
    pub launcher_extra_cpu_ns_per_cmd: f64,
    pub note: &'static str,
    pub threshold: u32,
    pub workers: u32,
    pub runs: u32,
    pub figures: Vec<Figure>,
}

impl LauncherCost {
    fn median(&self, name: &str) -> f64 {
        self.figures.iter().find(|f| f.name == name).map_or(0.0, |f| f.median)
    }
}

/// Measures on `dev` (the host device only) and writes the result on stdout in `o.format`.
pub fn run(o: &LauncherCostOptions, dev: Device) -> Outcome {
    if !dev.is_host() {
        return Err(UsageError::new("launcher-cost measures the host device only: use --device host").into());
    }
    let workers = dev.workers();
    let (commands, threshold, batch) = (o.commands, o.lv1.threshold, o.lv1.batch);
    let runs = o.runs;
    let mut per_run: Vec<Vec<f64>> = vec![Vec::new(); 7 + FIG12B_T_MS.len()];
    for r in 1..=runs {
        if crate::measure::control::stop_requested() {
            break;
        }
        eprintln!("launcher-cost: run {r} of {runs}");
        let null = host::launcher_cost_null_device(commands, threshold, batch)?;
        let (direct, launcher) = host::launcher_cost(commands, threshold, batch, workers)?;
        #[allow(clippy::cast_precision_loss)] // latencies in ns: far below 2^53
        let row = [
            null.cpu_ns_per_command(),
            null.switches_per_command(),
            null.wall_ns_per_command(),
            null.submit.p50_ns as f64,
            null.submit.p99_ns as f64,
            direct,
            launcher,
        ];
        for (i, v) in row.into_iter().enumerate() {
            per_run[i].push(v);
        }
        for (i, &t_ms) in FIG12B_T_MS.iter().enumerate() {
            per_run[7 + i].push(host::launcher_core_share(
                t_ms,
                threshold,
                batch,
                workers,
                FIG12B_WINDOW_MS,
            )?);
        }
    }
    let mut values = per_run.into_iter();
    let mut next = |name: String, unit| Figure::of(name, unit, values.next().unwrap_or_default());
    let mut figures = vec![
        next("null_device.cpu_ns_per_cmd".into(), "ns"),
        next("null_device.context_switches_per_cmd".into(), "count"),
        next("null_device.wall_ns_per_cmd".into(), "ns"),
        next("null_device.submit_p50_ns".into(), "ns"),
        next("null_device.submit_p99_ns".into(), "ns"),
        next("host_device.direct_cpu_ns_per_cmd".into(), "ns"),
        next("host_device.launcher_cpu_ns_per_cmd".into(), "ns"),
    ];
    for t_ms in FIG12B_T_MS {
        figures.push(next(format!("launcher_core_percent.t_{t_ms}ms"), "% of one core"));
    }
    let mut r = LauncherCost {
        batch,
        commands,
        device: dev.to_string(),
        direct_cpu_ns_per_cmd: 0.0,
        git_revision: crate::env::git_revision(),
        launcher_cpu_ns_per_cmd: 0.0,
        launcher_cpu_ns_per_cmd_null_device: 0.0,
        launcher_extra_cpu_ns_per_cmd: 0.0,
        note: "host CPU of this process (submitting, launcher, completion and reader threads; not the worker \
               processes), host figures, not GPU figures; null_device: the launcher alone over a queue that \
               completes at launch, T -> 0; the top-level values are the medians of `figures`",
        threshold,
        workers,
        runs,
        figures,
    };
    r.direct_cpu_ns_per_cmd = r.median("host_device.direct_cpu_ns_per_cmd");
    r.launcher_cpu_ns_per_cmd = r.median("host_device.launcher_cpu_ns_per_cmd");
    r.launcher_cpu_ns_per_cmd_null_device = r.median("null_device.cpu_ns_per_cmd");
    r.launcher_extra_cpu_ns_per_cmd = r.launcher_cpu_ns_per_cmd - r.direct_cpu_ns_per_cmd;
    crate::output::export(o.format, &r, &mut io::stdout().lock()).context("writing the result")?;
    Ok(Verdict::Pass)
}

/// One CSV row per figure, with the parameters.
#[derive(Debug, Serialize)]
pub struct Row<'a> {
    pub device: &'a str,
    pub commands: u32,
    pub threshold: u32,
    pub batch: u32,
    pub workers: u32,
    pub runs: u32,
    pub figure: &'a str,
    pub unit: &'static str,
    pub min: f64,
    pub median: f64,
    pub max: f64,
    pub git_revision: &'static str,
}

/// JSON: the object; CSV: one row per figure; text: a table of the figures.
impl Export for LauncherCost {
    type Whole = Self;
    type Row<'a> = Row<'a>;
    fn whole(&self) -> &Self {
        self
    }
    fn rows(&self) -> Vec<Row<'_>> {
        self.figures
            .iter()
            .map(|f| Row {
                device: &self.device,
                commands: self.commands,
                threshold: self.threshold,
                batch: self.batch,
                workers: self.workers,
                runs: self.runs,
                figure: &f.name,
                unit: f.unit,
                min: f.min,
                median: f.median,
                max: f.max,
                git_revision: self.git_revision,
            })
            .collect()
    }
    fn text(&self, w: &mut dyn Write) -> io::Result<()> {
        writeln!(
            w,
            "preempt-lat launcher-cost on the host device: {} commands, threshold {}, batch {}, {} LP worker(s), {} \
             run(s); rev {}",
            self.commands, self.threshold, self.batch, self.workers, self.runs, self.git_revision
        )?;
        writeln!(
            w,
            "host CPU of this process per LP command (T -> 0) and its share of a core (Fig. 12b):"
        )?;
        writeln!(
            w,
            "  {:<42} {:>14} {:>12} {:>12} {:>12}",
            "figure", "unit", "min", "median", "max"
        )?;
        for f in &self.figures {
            writeln!(
                w,
                "  {:<42} {:>14} {:>12.4} {:>12.4} {:>12.4}",
                f.name, f.unit, f.min, f.median, f.max
            )?;
        }
        writeln!(
            w,
            "through the Lv1 launcher on the host device: {:.0} ns per command more than launched directly",
            self.launcher_extra_cpu_ns_per_cmd
        )?;
        writeln!(w, "note: host figures (CPU worker processes), not GPU figures")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::Format;

    fn sample() -> LauncherCost {
        LauncherCost {
            batch: 4,
            commands: 100,
            device: "host".into(),
            direct_cpu_ns_per_cmd: 9000.5,
            git_revision: "test",
            launcher_cpu_ns_per_cmd: 14000.25,
            launcher_cpu_ns_per_cmd_null_device: 4700.0,
            launcher_extra_cpu_ns_per_cmd: 4999.75,
            note: "n",
            threshold: 8,
            workers: 1,
            runs: 3,
            figures: vec![
                Figure::of("null_device.cpu_ns_per_cmd", "ns", vec![4800.0, 4700.0, 4600.0]),
                Figure::of("launcher_core_percent.t_0.1ms", "% of one core", vec![2.0, 1.0, 3.0]),
            ],
        }
    }

    fn out(format: Format) -> String {
        let mut w = Vec::new();
        crate::output::export(format, &sample(), &mut w).unwrap();
        String::from_utf8(w).unwrap()
    }

    #[test]
    fn a_figure_is_the_spread_of_its_runs() {
        let f = Figure::of("x", "ns", vec![3.0, 1.0, 2.0, 10.0, 5.0]);
        assert_eq!((f.min, f.median, f.max), (1.0, 3.0, 10.0));
        let one = Figure::of("x", "ns", vec![7.0]);
        assert_eq!((one.min, one.median, one.max), (7.0, 7.0, 7.0));
        let none = Figure::of("x", "ns", Vec::new());
        assert_eq!((none.min, none.median, none.max), (0.0, 0.0, 0.0));
    }

    #[test]
    fn every_format_carries_every_figure() {
        // The keys it always had, then the runs and the figures.
        let json = out(Format::Json);
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        for k in [
            "batch",
            "commands",
            "device",
            "direct_cpu_ns_per_cmd",
            "git_revision",
            "launcher_cpu_ns_per_cmd",
            "launcher_cpu_ns_per_cmd_null_device",
            "launcher_extra_cpu_ns_per_cmd",
            "note",
            "threshold",
            "workers",
            "runs",
            "figures",
        ] {
            assert!(keys.contains(&k), "{k} in {keys:?}");
        }
        assert_eq!(v["figures"][1]["median"], 2.0);
        let csv = out(Format::Csv);
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines.len(), 3, "a header and one row per figure: {csv}");
        assert_eq!(
            lines[0],
            "device,commands,threshold,batch,workers,runs,figure,unit,min,median,max,git_revision"
        );
        assert!(
            lines[1].starts_with("host,100,8,4,1,3,null_device.cpu_ns_per_cmd,ns,4600.0,4700.0,4800.0"),
            "{csv}"
        );
        let t = out(Format::Text);
        assert!(
            t.contains("launcher_core_percent.t_0.1ms") && t.contains("5000 ns"),
            "{t}"
        );
        assert!(t.contains("not GPU figures"), "{t}");
    }
}
