//! The bystander cost of preemption, a hardware part of `validate`. Under HWS every suspend and
//! every resume unmaps and maps back *all* queues of *all* processes on the GPU
//! (docs/kfd-facts.md#whole-node-cost-under-hws), so our preemptions cost other processes too. This
//! measures what they cost one: a second process (this binary's hidden `__bystander-worker`,
//! [`worker`]) runs short delay kernels back to back on the same GPU while we preempt and resume
//! our own LP queue at a fixed period; its kernel timeline against our preemption windows gives its
//! extra latency and throughput loss per preemption ([`analysis`]).
//!
//! The parent side on a GPU is `crate::gpu::bystander`; here: the plan, the worker and its
//! protocol ([`protocol`], [`child`]: the parent's handle, which never lets the process outlive
//! it), the pure analysis and the text table.
use serde::Serialize;
use std::io::Write;

pub mod analysis;
pub mod child;
pub mod protocol;
pub mod worker;

pub use analysis::Cost;

/// One mechanism's measurement plan (validate's: [`Plan::VALIDATE`]).
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    /// One bystander kernel.
    pub kernel_ns: u64,
    /// The window with no preemption, then the window preempting every `period_ns`.
    pub baseline_ns: u64,
    pub window_ns: u64,
    pub period_ns: u64,
    /// How long each preemption holds our LP queue suspended (between the two calls).
    pub hold_ns: u64,
    /// Our LP command's T, in ms.
    pub lp_t_ms: f64,
    /// The worker's own limit, should the parent never close its stdin.
    pub worker_max_ms: u64,
}

impl Plan {
    /// 200 us bystander kernels; 1 s without, then 1 s with a preemption every 10 ms, held 1 ms.
    pub const VALIDATE: Plan = Plan {
        kernel_ns: 200_000,
        baseline_ns: 1_000_000_000,
        window_ns: 1_000_000_000,
        period_ns: 10_000_000,
        hold_ns: 1_000_000,
        lp_t_ms: 1.0,
        worker_max_ms: 300_000,
    };

    /// The worker's command line (after the program).
    pub fn worker_args(&self, device: &str) -> Vec<String> {
        [
            "__bystander-worker".to_string(),
            "--device".into(),
            device.into(),
            "--kernel-us".into(),
            format!("{}", self.kernel_ns as f64 / 1e3),
            "--max-duration-ms".into(),
            self.worker_max_ms.to_string(),
        ]
        .into()
    }

    /// Start offsets of the preemptions from the measured window's start: one every period, the
    /// first half a period in, none whose hold would reach past the window's end.
    pub fn preemption_offsets(&self) -> Vec<u64> {
        let first = self.period_ns / 2;
        (0..)
            .map(|i| first + i * self.period_ns.max(1))
            .take_while(|&o| o + self.hold_ns < self.window_ns)
            .collect()
    }

    /// Our LP commands: enough to keep the LP queue busy through both windows, suspensions
    /// included (they only make the chain last longer), plus a quarter for the set-up between.
    pub fn lp_commands(&self) -> u32 {
        let ms = (self.baseline_ns + self.window_ns) as f64 / 1e6;
        crate::num::ceil_u32(1.25 * ms / self.lp_t_ms.max(1e-3)).saturating_add(16)
    }
}

/// One mechanism's result, as validate's JSON carries it.
#[derive(Debug, Clone, Serialize)]
pub struct Measured {
    /// Our device (`hip:N`) and mechanism.
    pub device: String,
    pub mechanism: &'static str,
    /// What the bystander said it runs, and its pid.
    pub bystander: String,
    pub bystander_pid: u32,
    pub kernel_ns: u64,
    pub period_ns: u64,
    pub hold_ns: u64,
    pub baseline_window_ns: u64,
    pub measured_window_ns: u64,
    /// Our own suspend and resume calls (host wall clock), p50/p99.
    pub suspend_call_p50_ns: Option<u64>,
    pub suspend_call_p99_ns: Option<u64>,
    pub resume_call_p50_ns: Option<u64>,
    pub resume_call_p99_ns: Option<u64>,
    /// Our LP commands, all checked to have completed exactly once.
    pub lp_commands_exactly_once: u32,
    pub cost: Cost,
}

fn us(ns: Option<i64>) -> String {
    ns.map_or("-".to_string(), |v| format!("{:.1}", v as f64 / 1e3))
}

fn signed(v: Option<u64>) -> Option<i64> {
    v.map(|v| i64::try_from(v).unwrap_or(i64::MAX))
}

impl Measured {
    /// validate's one-line detail.
    pub fn summary(&self) -> String {
        let c = &self.cost;
        format!(
            "{} preemptions; bystander delay per preemption p50 {} us, p99 {} us; throughput {:.0} -> {:.0} kernels/s \
             ({:+.1}%); our LP commands exactly once: {}",
            c.preemptions,
            us(c.delay_per_preemption_p50_ns),
            us(c.delay_per_preemption_p99_ns),
            c.baseline_kernels_per_s,
            c.measured_kernels_per_s,
            -100.0 * c.throughput_loss_fraction,
            self.lp_commands_exactly_once
        )
    }
}

/// A table per mechanism, after validate's check lines.
pub fn text(results: &[Measured], w: &mut dyn Write) -> std::io::Result<()> {
    for r in results {
        let c = &r.cost;
        writeln!(
            w,
            "\nbystander cost, {} Lv3 {}: {} preemptions every {} ms, held {} ms; bystander pid {}: {}",
            r.device,
            r.mechanism,
            c.preemptions,
            r.period_ns as f64 / 1e6,
            r.hold_ns as f64 / 1e6,
            r.bystander_pid,
            r.bystander
        )?;
        writeln!(w, "  {:<48} {:>10} {:>10}", "", "p50", "p99")?;
        let row = |w: &mut dyn Write, what: &str, p50: Option<i64>, p99: Option<i64>, note: String| {
            let line = format!("  {what:<48} {:>10} {:>10}  {note}", us(p50), us(p99));
            writeln!(w, "{}", line.trim_end())
        };
        row(
            w,
            "bystander kernel, no preemption (us)",
            signed(Some(c.baseline_kernel_p50_ns)),
            signed(Some(c.baseline_kernel_p99_ns)),
            format!("{} kernels", c.baseline_kernels),
        )?;
        row(
            w,
            "extra per kernel overlapping a preemption (us)",
            c.overlapping_kernel_extra_p50_ns,
            c.overlapping_kernel_extra_p99_ns,
            format!("{} kernels", c.overlapping_kernels),
        )?;
        row(
            w,
            "bystander delay per preemption (us)",
            c.delay_per_preemption_p50_ns,
            c.delay_per_preemption_p99_ns,
            format!(
                "{} of {} preemptions overlapped",
                c.preemptions_overlapped, c.preemptions
            ),
        )?;
        row(
            w,
            "our suspend call (us)",
            signed(r.suspend_call_p50_ns),
            signed(r.suspend_call_p99_ns),
            String::new(),
        )?;
        row(
            w,
            "our resume call (us)",
            signed(r.resume_call_p50_ns),
            signed(r.resume_call_p99_ns),
            String::new(),
        )?;
        writeln!(
            w,
            "  bystander throughput: {:.0} kernels/s without, {:.0} kernels/s while preempting ({:.1}% lost; {} us per \
             preemption)",
            c.baseline_kernels_per_s,
            c.measured_kernels_per_s,
            100.0 * c.throughput_loss_fraction,
            c.lost_time_per_preemption_ns
                .map_or("-".to_string(), |v| format!("{:.1}", v / 1e3))
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use analysis::Span;

    #[test]
    fn validate_plan_preempts_inside_the_window_at_its_period() {
        let p = Plan::VALIDATE;
        let o = p.preemption_offsets();
        assert_eq!(o[0], p.period_ns / 2);
        assert!(o.windows(2).all(|w| w[1] - w[0] == p.period_ns));
        assert!(o.iter().all(|&x| x + p.hold_ns < p.window_ns));
        // As many as fit: the next one would reach past the window.
        assert!(o.last().unwrap() + p.period_ns + p.hold_ns >= p.window_ns);
        assert!(
            p.hold_ns < p.period_ns,
            "the bystander's baseline state between preemptions"
        );
    }

    #[test]
    fn lp_chain_outlasts_both_windows() {
        let p = Plan::VALIDATE;
        let chain_ns = f64::from(p.lp_commands()) * p.lp_t_ms * 1e6;
        assert!(chain_ns >= (p.baseline_ns + p.window_ns) as f64 * 1.25);
    }

    fn measured(mechanism: &'static str) -> Measured {
        let kernels: Vec<Span> = (0..40u64)
            .map(|i| Span {
                from_ns: i * 1000,
                to_ns: i * 1000 + 900,
            })
            .collect();
        let pre = [Span {
            from_ns: 30_100,
            to_ns: 30_200,
        }];
        let cost = analysis::analyze(&analysis::Timeline {
            kernels: &kernels,
            baseline: Span {
                from_ns: 0,
                to_ns: 20_000,
            },
            measured: Span {
                from_ns: 20_000,
                to_ns: 40_000,
            },
            preemptions: &pre,
            bystander_stopped_ns: Some(40_000),
        })
        .unwrap();
        Measured {
            device: "hip:0".into(),
            mechanism,
            bystander: "hip:0 (test)".into(),
            bystander_pid: 1,
            kernel_ns: 900,
            period_ns: 10_000,
            hold_ns: 50,
            baseline_window_ns: 20_000,
            measured_window_ns: 20_000,
            suspend_call_p50_ns: Some(40),
            suspend_call_p99_ns: Some(40),
            resume_call_p50_ns: None,
            resume_call_p99_ns: None,
            lp_commands_exactly_once: 3,
            cost,
        }
    }

    #[test]
    fn a_table_per_mechanism_and_units_in_every_json_figure() {
        let r = [measured("dbg-trap"), measured("update-queue")];
        let mut out = Vec::new();
        text(&r, &mut out).unwrap();
        let t = String::from_utf8(out).unwrap();
        for m in ["dbg-trap", "update-queue"] {
            assert_eq!(t.matches(&format!("bystander cost, hip:0 Lv3 {m}:")).count(), 1, "{t}");
        }
        for row in [
            "bystander kernel, no preemption (us)",
            "extra per kernel overlapping a preemption (us)",
            "bystander delay per preemption (us)",
            "our suspend call (us)",
            "our resume call (us)",
            "bystander throughput:",
        ] {
            assert_eq!(t.matches(row).count(), 2, "{row}: {t}");
        }
        let v = serde_json::to_value(&r[0]).unwrap();
        let mut figures: Vec<(String, serde_json::Value)> = v.as_object().unwrap().clone().into_iter().collect();
        figures.extend(v["cost"].as_object().unwrap().clone());
        for (k, val) in figures {
            if val.is_number() || val.is_null() {
                let unit = ["_ns", "_per_s", "_fraction"].iter().any(|u| k.ends_with(u));
                let count_or_id = [
                    "preemptions",
                    "preemptions_overlapped",
                    "baseline_kernels",
                    "overlapping_kernels",
                    "lp_commands_exactly_once",
                    "bystander_pid",
                ]
                .contains(&k.as_str());
                assert!(unit || count_or_id, "{k} has no unit in its name");
            }
        }
    }

    #[test]
    fn worker_args_parse_back() {
        let a = Plan::VALIDATE.worker_args("hip:3");
        assert_eq!(a[0], "__bystander-worker");
        assert_eq!(a[a.iter().position(|x| x == "--device").unwrap() + 1], "hip:3");
        let us: f64 = a[a.iter().position(|x| x == "--kernel-us").unwrap() + 1]
            .parse()
            .unwrap();
        assert_eq!(us * 1e3, Plan::VALIDATE.kernel_ns as f64);
    }
}
