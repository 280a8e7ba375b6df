//! The seeds' targets in one place, and the one judge of a result against them.
//!
//! Every target is a bound on one measured figure, named after the test plan's section or the
//! XSched figure it comes from. [`judge()`] reads a result of any kind (one run, a sweep, the
//! threshold sweep, `priority`, the class experiment and `sweep rate`, `launcher-cost`, `overhead`,
//! the Example 5 example's JSON) and returns one
//! [`Judgement`] per target it measures; `report` prints them over a whole directory and the
//! commands print their own. A host figure is judged like any other but labelled as host: it
//! says how the *host device* behaves, never what a GPU does.
use serde::Serialize;
use std::io::{self, Write};

mod cases;
mod judge;
pub use judge::judge;

/// A bound on a measured figure.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Bound {
    /// Strictly below.
    Below(f64),
    /// At most.
    AtMost(f64),
    /// Inside the closed interval.
    Within(f64, f64),
    /// At least.
    AtLeast(f64),
    /// Strictly above.
    Above(f64),
}

impl Bound {
    /// Whether `v` meets the bound (NaN never does).
    pub fn holds(self, v: f64) -> bool {
        match self {
            Bound::Below(b) => v < b,
            Bound::AtMost(b) => v <= b,
            Bound::Within(lo, hi) => (lo..=hi).contains(&v),
            Bound::AtLeast(b) => v >= b,
            Bound::Above(b) => v > b,
        }
    }

    /// The bound for people, e.g. `< 100 us`.
    pub fn describe(self, unit: &str) -> String {
        let u = if unit.is_empty() {
            String::new()
        } else {
            format!(" {unit}")
        };
        match self {
            Bound::Below(b) => format!("< {b}{u}"),
            Bound::AtMost(b) => format!("<= {b}{u}"),
            Bound::Within(lo, hi) => format!("{lo} to {hi}{u}"),
            Bound::AtLeast(b) => format!(">= {b}{u}"),
            Bound::Above(b) => format!("> {b}{u}"),
        }
    }
}

/// One target of the seeds' test plan.
#[derive(Debug)]
pub struct Target {
    /// Stable id (JSON, CSV).
    pub id: &'static str,
    /// Where the target comes from (test plan section, XSched figure).
    pub source: &'static str,
    /// What is measured.
    pub what: &'static str,
    pub bound: Bound,
    pub unit: &'static str,
    /// What produces the figure.
    pub measured_by: &'static str,
}

/// Every target, in the order tables print them.
pub const TARGETS: [Target; 22] = [
    Target {
        id: "lv3-p99",
        source: "test 4.1.1, Fig. 11a",
        what: "Lv3 suspend P99 at T = 0.5 ms",
        bound: Bound::Below(100.0),
        unit: "us",
        measured_by: "preempt-lat --level 3 --t-ms 0.5",
    },
    // The seeds' 4.1.1 table: Lv1 at ~4 ms (XSched's MI50) against Lv3 below 100 us, "40x or
    // more". Judged from one sweep that ran both levels at the same T, so that T, the LP kernel
    // and the machine are the same on both sides of the ratio.
    Target {
        id: "lv3-vs-lv1",
        source: "test 4.1.1",
        what: "Lv1 suspend P99 / Lv3 suspend P99, same sweep, same T",
        bound: Bound::AtLeast(40.0),
        unit: "x",
        measured_by: "sweep t --levels 1,3",
    },
    Target {
        id: "lv3-flat-in-t",
        source: "Fig. 11a",
        what: "Lv3 suspend P99, max / min over T",
        bound: Bound::AtMost(1.5),
        unit: "x",
        measured_by: "sweep t",
    },
    Target {
        id: "lv1-threshold-x-t",
        source: "Fig. 11a",
        what: "Lv1 suspend P99 / (threshold x T)",
        bound: Bound::Within(0.5, 1.5),
        unit: "x",
        measured_by: "preempt-lat --level 1, sweep t",
    },
    // The seeds' Fig. 11a table puts Lv2 at ~1 x T (0.5 ms at T = 0.5 ms on K40m and NPU3720;
    // MI308X "to be tested"). Lv2 waits out the rest of the running command, uniform over
    // [0, T] for a request at a random moment, so its P99 is about T. The band is Lv1's, +-50 %
    // around the expectation: below 0.5 x T the suspend did not wait for the running command (not
    // Lv2), above 1.5 x T it waited for more than one. Only the host device has Lv2
    // (docs/kfd-facts.md#lv2-on-gfx942-no-route-under-hws): every figure judged here is a host
    // figure.
    Target {
        id: "lv2-one-t",
        source: "test 7.3.1, Fig. 11a",
        what: "Lv2 suspend P99 / T",
        bound: Bound::Within(0.5, 1.5),
        unit: "x",
        measured_by: "preempt-lat --level 2 --device host, sweep t (host device only)",
    },
    Target {
        id: "lv1-overhead",
        source: "Fig. 11c",
        what: "Lv1 launcher overhead at threshold >= 10",
        bound: Bound::Below(1.0),
        unit: "%",
        measured_by: "sweep threshold",
    },
    Target {
        id: "hp-p99-fig9",
        source: "Fig. 9 top, test 7.2.1",
        what: "HP P99 / standalone HP P99 under scheduling",
        bound: Bound::AtMost(1.30),
        unit: "x",
        measured_by: "priority",
    },
    Target {
        id: "hp-p99-fig15a",
        source: "Fig. 15a, test 8.3.1",
        what: "HP P99 / standalone HP P99 under scheduling",
        bound: Bound::AtMost(1.10),
        unit: "x",
        measured_by: "priority",
    },
    Target {
        id: "partition",
        source: "Fig. 9 bottom, test 7.2.2",
        what: "share achieved - share asked, per queue",
        bound: Bound::Within(-5.0, 5.0),
        unit: "points",
        measured_by: "priority --policy up --shares 75:25",
    },
    // The seeds' 7.2.2: the partition costs < 1.5 % of the combined throughput (XSched's mean),
    // read as the class experiment's combined throughput under `up` against the classes alone.
    Target {
        id: "partition-overhead",
        source: "test 7.2.2",
        what: "combined throughput lost under the utilization partition vs the classes alone",
        bound: Bound::Below(1.5),
        unit: "%",
        measured_by: "priority --policy up --class ... --standalone",
    },
    Target {
        id: "overhead",
        source: "Fig. 12a, test 7.4.1",
        what: "whole-run overhead of being scheduled, no preemption",
        bound: Bound::Below(3.4),
        unit: "%",
        measured_by: "overhead",
    },
    Target {
        id: "scheduler-cpu",
        source: "Fig. 12b, test 7.4.2",
        what: "scheduler CPU, % of one core (overhead: over native; launcher-cost: the launcher, worst T)",
        bound: Bound::Below(5.0),
        unit: "%",
        measured_by: "overhead, launcher-cost",
    },
    Target {
        id: "throughput-loss",
        source: "Example 5 (seeds 000-004)",
        what: "combined throughput lost under priority vs no priority",
        bound: Bound::Below(10.0),
        unit: "%",
        measured_by: "examples/example5_inference.py --json",
    },
    // The seeds' Example 5 report: high's P99 below 14 ms against the baseline's 18.5 ms (the
    // three replicas at once, no priority), read as their ratio so that it means the same on
    // any device and model.
    Target {
        id: "example5-high-vs-baseline",
        source: "Example 5 (seed 004)",
        what: "high's P99 under priority / high's P99 with no priority (Test 2)",
        bound: Bound::AtMost(14.0 / 18.5),
        unit: "x",
        measured_by: "examples/example5_inference.py --json",
    },
    Target {
        id: "example5-low-high",
        source: "Example 5 (seed 004)",
        what: "low's P99 / high's P99 under priority",
        bound: Bound::Above(1.5),
        unit: "x",
        measured_by: "examples/example5_inference.py --json",
    },
    // The seeds' 8.1.1 (Fig. 13 left): the production job keeps > 0.95 of its throughput alone,
    // the opportunistic job still gets > 10 % of its own. Throughput is device work per second
    // (commands x T), together over alone, with the same arrivals and duration.
    Target {
        id: "harvest-pjob",
        source: "test 8.1.1, Fig. 13",
        what: "production job's throughput beside the opportunistic job / alone",
        bound: Bound::AtLeast(0.95),
        unit: "x",
        measured_by: "priority --preset 8.1.1",
    },
    Target {
        id: "harvest-ojob",
        source: "test 8.1.1, Fig. 13",
        what: "opportunistic job's throughput beside the production job / alone",
        bound: Bound::AtLeast(0.10),
        unit: "x",
        measured_by: "priority --preset 8.1.1",
    },
    // The seeds' 8.2.1 (Fig. 14): frames P99 < 100 ms (still 25 FPS) and every speech request
    // done within its 3 s. Judged for laxity and for its native and fixed-priority baselines,
    // the seeds' three rows (each baseline expected to miss one of the two).
    Target {
        id: "videoconf-frames-p99",
        source: "test 8.2.1, Fig. 14",
        what: "video frames' P99 latency beside the speech job",
        bound: Bound::Below(100.0),
        unit: "ms",
        measured_by: "priority --preset 8.2.1 (and 8.2.1-fixed, 8.2.1-native)",
    },
    Target {
        id: "videoconf-speech",
        source: "test 8.2.1, Fig. 14",
        what: "slowest speech request's completion (one every 3 s)",
        bound: Bound::Below(3.0),
        unit: "s",
        measured_by: "priority --preset 8.2.1 (and 8.2.1-fixed, 8.2.1-native)",
    },
    // The seeds' 8.3.2 asks for P99 at 1000 req/s 1.3 x better than Paella's. No Paella runs
    // here: the same clients with no scheduling stand in, a weaker baseline than Paella, so a
    // PASS does not reproduce the seeds' claim.
    Target {
        id: "fig15b-vs-native",
        source: "test 8.3.2, Fig. 15b (Paella's 1.3x; native stands in)",
        what: "P99 at 1000 req/s, native over K-EDF (K = 16), worst client",
        bound: Bound::AtLeast(1.3),
        unit: "x",
        measured_by: "sweep rate --preset 8.3.2",
    },
    Target {
        id: "lv3-hp-start-p99",
        source: "test 4.1.1",
        what: "Lv3 HP start P99 at T = 0.5 ms",
        bound: Bound::Below(100.0),
        unit: "us",
        measured_by: "preempt-lat --level 3 --t-ms 0.5",
    },
    // The seeds name no figure for stability, only "long runs without a crash" and "100+
    // requests without an error": what can fail over a long run is counted, and none may.
    Target {
        id: "soak-stable",
        source: "seeds 000 and 004 (system stability)",
        what: "problems over a long run: a failed exactly-once check, leaked descriptors or threads, RSS past its bound",
        bound: Bound::AtMost(0.0),
        unit: "",
        measured_by: "soak (an hour; acceptance --long)",
    },
];

/// The target with `id` (every id used in this file exists: a test checks it).
fn target(id: &str) -> &'static Target {
    TARGETS.iter().find(|t| t.id == id).unwrap_or(&TARGETS[0])
}

/// A measured figure against its target.
#[derive(Debug, Clone, Serialize)]
pub struct Judgement {
    pub target: &'static str,
    pub source: &'static str,
    pub what: &'static str,
    pub bound: String,
    pub measured: f64,
    pub unit: &'static str,
    pub pass: bool,
    pub device: String,
    /// The figure is a host device figure (CPU worker processes), not a GPU figure.
    pub host_figures: bool,
    /// Which result and which part of it (file, level, T, mode).
    pub from: String,
}

pub(super) fn judgement(id: &str, measured: f64, device: &str, from: String) -> Judgement {
    let t = target(id);
    Judgement {
        target: t.id,
        source: t.source,
        what: t.what,
        bound: t.bound.describe(t.unit),
        measured,
        unit: t.unit,
        pass: t.bound.holds(measured),
        device: device.to_string(),
        host_figures: device == "host",
        from,
    }
}

/// The one target table: every target, each judgement of it (or "not measured"), PASS/FAIL,
/// host figures labelled.
pub fn text(js: &[Judgement], w: &mut dyn Write) -> io::Result<()> {
    writeln!(w, "targets (the seeds' test plan):")?;
    writeln!(w, "| target | source | bound | measured | device | verdict | from |")?;
    writeln!(w, "| --- | --- | --- | --- | --- | --- | --- |")?;
    for t in &TARGETS {
        let mine: Vec<&Judgement> = js.iter().filter(|j| j.target == t.id).collect();
        if mine.is_empty() {
            writeln!(
                w,
                "| {} | {} | {} | - | - | not measured | {} |",
                t.what,
                t.source,
                t.bound.describe(t.unit),
                t.measured_by
            )?;
        }
        for j in mine {
            let device = if j.host_figures {
                "host (host figure, not a GPU figure)".to_string()
            } else {
                j.device.clone()
            };
            writeln!(
                w,
                "| {} | {} | {} | {:.3} {} | {} | {} | {} |",
                j.what,
                j.source,
                j.bound,
                j.measured,
                j.unit,
                device,
                if j.pass { "PASS" } else { "FAIL" },
                j.from
            )?;
        }
    }
    Ok(())
}

/// Judgements as a result: JSON the array, CSV a row each, text the target table.
pub struct Judged<'a>(pub &'a [Judgement]);

impl crate::output::Export for Judged<'_> {
    type Whole = [Judgement];
    type Row<'a>
        = &'a Judgement
    where
        Self: 'a;
    fn whole(&self) -> &[Judgement] {
        self.0
    }
    fn rows(&self) -> Vec<&Judgement> {
        self.0.iter().collect()
    }
    fn text(&self, w: &mut dyn Write) -> io::Result<()> {
        text(self.0, w)
    }
}

#[cfg(test)]
mod tests;
