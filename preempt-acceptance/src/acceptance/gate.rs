//! Whether the targets fail the run. On a GPU a target that FAILs is what a user runs
//! `acceptance` to find out, so it fails the run (exit status 3) as a failed stage does, named on
//! the summary's last lines. Host figures never do: the host device's worker processes stand in
//! for a GPU and often fail a GPU's targets, which says nothing about the code; they stay
//! information, shown in the table. `--no-gate` makes a GPU's targets information too (a fleet
//! run that collects archives and gates on stages alone). A target not measured (N/A) is the
//! stage's failure or skip, already counted there.
use super::summary::{DeviceRun, Summary};
use super::targets::Verdict;

/// The targets that fail the run: each FAIL of a GPU device judged from a GPU figure, as
/// `device: id (scope): value`.
pub fn failing_targets(devices: &[DeviceRun]) -> Vec<String> {
    devices
        .iter()
        .filter(|d| !d.host_figures)
        .flat_map(|d| {
            d.targets
                .iter()
                .filter(|t| t.verdict == Verdict::Fail && !t.host_figures)
                .map(move |t| format!("{}: {} ({}): {}", d.device, t.id, t.scope, t.shown))
        })
        .collect()
}

/// Applies the gate to a tallied summary: with `gate`, a GPU's failing targets are recorded and
/// make it not ok.
pub fn decide(s: &mut Summary, gate: bool) {
    s.gated = gate;
    s.failed_targets = if gate { failing_targets(&s.devices) } else { Vec::new() };
    s.ok = s.ok && s.failed_targets.is_empty();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acceptance::summary::{StageRecord, Status, TOOL};
    use crate::acceptance::targets::Judged;
    use crate::exit::Verdict as Exit;

    fn judged(id: &str, scope: &str, verdict: Verdict, host: bool) -> Judged {
        Judged {
            verdict,
            host_figures: host,
            measured: Some(120.0),
            shown: "120.000 us".into(),
            ..Judged::not_measured(id, scope, String::new())
        }
    }

    fn device(name: &str, host: bool, targets: Vec<Judged>) -> DeviceRun {
        DeviceRun {
            device: name.into(),
            host_figures: host,
            dir: name.replace(':', ""),
            stages: vec![StageRecord {
                status: Status::Pass,
                ..StageRecord::skipped("environment", "e", 1.0, &[], "ok".into())
            }],
            targets,
        }
    }

    fn summary(devices: Vec<DeviceRun>) -> Summary {
        let mut s = Summary {
            tool: TOOL.into(),
            version: "v".into(),
            git_revision: "r".into(),
            node: "n".into(),
            started_utc: "2026-01-01T00:00:00Z".into(),
            quick: false,
            command: vec![],
            interrupted: false,
            devices,
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

    fn text(s: &Summary) -> String {
        let mut out = Vec::new();
        crate::output::export(crate::options::Format::Text, s, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn a_failing_target_on_a_gpu_fails_the_run_and_is_named() {
        let gpu = device(
            "hip:0",
            false,
            vec![
                judged("lv3-p99", "dbg-trap", Verdict::Fail, false),
                judged("lv3-p99", "preempt-queues", Verdict::Pass, false),
                judged("lv3-flat-in-t", "lv3", Verdict::NotMeasured, false),
            ],
        );
        let mut s = summary(vec![gpu.clone()]);
        assert!(s.ok, "every stage passed");
        decide(&mut s, true);
        assert_eq!(Exit::from_ok(s.ok), Exit::CheckFailed, "exit status 3");
        assert_eq!(s.failed_targets, ["hip:0: lv3-p99 (dbg-trap): 120.000 us"]);
        let t = text(&s);
        assert!(
            t.ends_with(
                "targets: 1 failed on a GPU, which fails the run (exit status 3; --no-gate makes them information):\n  \
                 FAIL hip:0: lv3-p99 (dbg-trap): 120.000 us\n"
            ),
            "{t}"
        );
        // --no-gate: information, the table still says FAIL.
        let mut s = summary(vec![gpu]);
        decide(&mut s, false);
        assert_eq!((Exit::from_ok(s.ok), s.failed_targets.len()), (Exit::Pass, 0));
        let t = text(&s);
        assert!(t.contains("  FAIL Lv3 suspend P99"), "{t}");
        assert!(t.ends_with("targets: information only (--no-gate)\n"), "{t}");
    }

    #[test]
    fn host_figures_are_information_and_their_fails_are_shown() {
        let host = device("host", true, vec![judged("lv3-p99", "sigstop", Verdict::Fail, true)]);
        let mut s = summary(vec![host.clone()]);
        decide(&mut s, true);
        assert_eq!(Exit::from_ok(s.ok), Exit::Pass, "exit status 0");
        assert!(s.failed_targets.is_empty());
        let t = text(&s);
        assert!(
            t.contains("  FAIL Lv3 suspend P99 at T = 0.5 ms < 100 us (sigstop): 120.000 us [host figure]"),
            "{t}"
        );
        assert!(
            t.ends_with(
                "targets: host figures, information only (a host figure often fails a GPU target), not gated on\n"
            ),
            "{t}"
        );
        // A GPU whose targets pass beside the host device: nothing fails the run; a host figure in a
        // GPU's row (a result file written on the host) does not gate either.
        let gpu = device(
            "hip:1",
            false,
            vec![
                judged("lv3-p99", "dbg-trap", Verdict::Pass, false),
                judged("lv3-p99", "x", Verdict::Fail, true),
            ],
        );
        let mut s = summary(vec![host, gpu]);
        decide(&mut s, true);
        assert!(s.ok && s.failed_targets.is_empty());
        assert!(text(&s).ends_with("targets: none measured on a GPU failed (a GPU's failing target fails the run)\n"));
        // A failed stage fails the run whatever the targets.
        let mut s = summary(vec![DeviceRun {
            stages: vec![StageRecord {
                status: Status::Fail,
                ..StageRecord::skipped("x", "x", 1.0, &[], String::new())
            }],
            ..device("hip:0", false, vec![])
        }]);
        decide(&mut s, true);
        assert!(!s.ok && s.failed_targets.is_empty());
    }
}
