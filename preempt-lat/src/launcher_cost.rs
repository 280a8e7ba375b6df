//! `preempt-lat launcher-cost`: the host CPU time per LP command of the Lv1 launcher at T -> 0,
//! on the host device: launched directly, through the launcher, and through the launcher over a
//! queue that completes at launch (the launcher alone).
use crate::device::Device;
use crate::exit::{Failure, Outcome, Verdict};
use crate::options::LauncherCostOptions;
use crate::output::Export;
use serde::Serialize;
use std::io::{self, Write};

/// What `launcher-cost` measured (the JSON object; its keys in alphabetical order, as they
/// have always been written).
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
}

/// Measures on `dev` (the host device only) and writes the result on stdout in `o.format`.
pub fn run(o: &LauncherCostOptions, dev: Device) -> Outcome {
    if !dev.is_host() {
        return Err(Failure::Usage(
            "launcher-cost measures the host device only: use --device host".into(),
        ));
    }
    let workers = dev.workers();
    let (commands, threshold, batch) = (o.commands, o.lv1.threshold, o.lv1.batch);
    let null_dev = crate::measure::host::launcher_cost_null_device(commands, threshold, batch)?;
    let (direct, launcher) = crate::measure::host::launcher_cost(commands, threshold, batch, workers)?;
    let r = LauncherCost {
        batch,
        commands,
        device: dev.to_string(),
        direct_cpu_ns_per_cmd: direct,
        git_revision: crate::env::git_revision(),
        launcher_cpu_ns_per_cmd: launcher,
        launcher_cpu_ns_per_cmd_null_device: null_dev,
        launcher_extra_cpu_ns_per_cmd: launcher - direct,
        note: "host CPU ns per LP command of this process (launcher, completion and reader threads), T -> 0; \
               null_device: the launcher alone over a queue that completes at launch; host figures, not GPU figures",
        threshold,
        workers,
    };
    crate::output::export(o.format, &r, &mut io::stdout().lock()).map_err(|e| format!("writing the result: {e}"))?;
    Ok(Verdict::Pass)
}

/// JSON: the object; CSV: a header and one row; text: a few labelled lines.
impl Export for LauncherCost {
    type Whole = Self;
    type Row<'a> = &'a Self;
    fn whole(&self) -> &Self {
        self
    }
    fn rows(&self) -> Vec<&Self> {
        vec![self]
    }
    fn text(&self, w: &mut dyn Write) -> io::Result<()> {
        writeln!(
            w,
            "preempt-lat launcher-cost on the host device: {} commands, threshold {}, batch {}, {} LP worker(s); rev {}",
            self.commands, self.threshold, self.batch, self.workers, self.git_revision
        )?;
        writeln!(w, "host CPU per LP command of this process, T -> 0:")?;
        for (what, ns) in [
            ("launched directly", self.direct_cpu_ns_per_cmd),
            ("through the Lv1 launcher", self.launcher_cpu_ns_per_cmd),
            ("the launcher's extra", self.launcher_extra_cpu_ns_per_cmd),
            (
                "the launcher alone (null device)",
                self.launcher_cpu_ns_per_cmd_null_device,
            ),
        ] {
            writeln!(w, "  {what:<33} {ns:>10.0} ns")?;
        }
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
        }
    }

    fn out(format: Format) -> String {
        let mut w = Vec::new();
        crate::output::export(format, &sample(), &mut w).unwrap();
        String::from_utf8(w).unwrap()
    }

    #[test]
    fn every_format_carries_every_figure() {
        // The keys as written (in order), one per line of the pretty object.
        let json = out(Format::Json);
        let keys: Vec<&str> = json
            .lines()
            .filter_map(|l| l.strip_prefix("  \"")?.split('"').next())
            .collect();
        assert_eq!(
            keys,
            [
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
                "workers"
            ]
        );
        let csv = out(Format::Csv);
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines.len(), 2, "a header and one row: {csv}");
        assert_eq!(lines[0], keys.join(","));
        assert!(
            lines[1].starts_with("4,100,host,9000.5,test,14000.25,4700.0,4999.75,n,8,1"),
            "{csv}"
        );
        let t = out(Format::Text);
        assert!(t.contains("through the Lv1 launcher") && t.contains("14000 ns"), "{t}");
        assert!(t.contains("not GPU figures"), "{t}");
    }
}
