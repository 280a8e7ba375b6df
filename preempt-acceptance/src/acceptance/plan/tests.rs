use super::*;
use crate::options::{AcceptanceStageOptions, Cli, Command};
use clap::Parser;
use std::path::Path;

fn ids(v: &[Stage]) -> Vec<&str> {
    v.iter().map(|s| s.id.as_str()).collect()
}

#[test]
fn every_stage_needs_only_stages_before_it() {
    for dev in [DeviceSpec::HOST, DeviceSpec::Hip(0)] {
        let v = stages(dev, false, Some(LONG));
        for (i, s) in v.iter().enumerate() {
            for n in s.needs.iter().chain(&s.needs_any) {
                let before = ids(&v[..i]);
                assert!(before.contains(&n.as_str()), "{dev}: {} needs {n}, not before it", s.id);
            }
        }
        let unique: std::collections::BTreeSet<&str> = ids(&v).into_iter().collect();
        assert_eq!(unique.len(), v.len(), "ids are unique: {:?}", ids(&v));
        assert_eq!(v.first().map(|s| s.id.as_str()), Some("environment"));
        assert_eq!(v.last().map(|s| s.id.as_str()), Some("kernel-log"));
    }
}

#[test]
fn a_gpu_has_a_stage_per_mechanism_and_the_host_its_sigstop() {
    let gpu = stages(DeviceSpec::Hip(1), true, None);
    for k in MechanismKind::AUTO_ORDER {
        for prefix in ["suspend-resume", "latency-lv3", "bystander"] {
            let id = format!("{prefix}-{}", k.name());
            assert!(ids(&gpu).contains(&id.as_str()), "{id}");
        }
        assert_eq!(mechanism_of(&gpu, &format!("latency-lv3-{k}")), Some(Mech::Kfd(k)));
    }
    let skipped: Vec<&str> = gpu
        .iter()
        .filter(|s| s.not_here.is_some())
        .map(|s| s.id.as_str())
        .collect();
    assert_eq!(skipped, ["latency-lv2"], "every stage applies to a GPU but Lv2");
    let host = stages(DeviceSpec::HOST, true, None);
    let skipped: Vec<&str> = host
        .iter()
        .filter(|s| s.not_here.is_some())
        .map(|s| s.id.as_str())
        .collect();
    assert_eq!(
        skipped,
        [
            "hip-smoke",
            "calibration",
            "discovery",
            "dynamic-queues",
            "sweep-state",
            "bystander"
        ]
    );
    assert!(ids(&host).contains(&"latency-lv3-sigstop"));
}

/// Every child command line is one the CLI accepts (parsed and checked as a user's would be).
#[test]
fn every_child_command_line_parses() {
    let dir = Path::new("/tmp/x");
    for dev in [DeviceSpec::HOST, DeviceSpec::Hip(2)] {
        for quick in [false, true] {
            let v = stages(dev, quick, Some(LONG));
            for s in &v {
                let chosen = s.needs_any.first().and_then(|id| mechanism_of(&v, id));
                let Some(a) = args(s, dev, quick, dir, chosen) else {
                    assert_eq!(s.work, Work::KernelLog);
                    continue;
                };
                let cli = Cli::try_parse_from(std::iter::once("preempt-lat".to_string()).chain(a.clone()))
                    .unwrap_or_else(|e| panic!("{}: {a:?}: {e}", s.id));
                match cli.checked() {
                    Ok(Command::AcceptanceStage(o)) => assert_eq!(o.device, dev),
                    Ok(_) if s.not_here.is_some() => {}
                    Ok(_) => assert!(a.contains(&dev.to_string()), "{a:?}"),
                    Err(e) if s.not_here.is_some() => assert!(!e.to_string().is_empty()),
                    Err(e) => panic!("{}: {a:?}: {e}", s.id),
                }
            }
        }
    }
}

/// The dynamic-queues stage runs on a GPU after discovery, bounded, and is skipped on the host
/// device with its reason.
#[test]
fn dynamic_queues_is_a_gpu_stage_after_discovery() {
    let find = |v: &[Stage]| v.iter().find(|s| s.id == "dynamic-queues").cloned().unwrap();
    for quick in [false, true] {
        let gpu = stages(DeviceSpec::Hip(0), quick, None);
        let s = find(&gpu);
        assert_eq!(s.work, Work::Internal(InternalStage::DynamicQueues, None));
        assert_eq!(s.needs, ["discovery"]);
        assert_eq!(s.not_here, None);
        assert_eq!(s.bound, secs(DYNAMIC_QUEUES_BOUND_S, &Sizes::of(quick)));
        let a = args(&s, DeviceSpec::Hip(0), quick, Path::new("/tmp/x"), None).unwrap();
        assert_eq!(&a[..2], ["__acceptance-stage", "dynamic-queues"]);
    }
    let host = find(&stages(DeviceSpec::HOST, true, None));
    assert_eq!(
        host.not_here.as_deref(),
        Some("GPU only: no KFD queues on the host device")
    );
}

/// Lv2: the host device runs it (its latency at T = 0.5 ms, in sweep t, in priority's default
/// modes, each needing latency-lv2); a GPU's plan lists latency-lv2 as skipped with the API's
/// one-line reason and sweeps 1,3.
#[test]
fn lv2_runs_on_the_host_device_and_a_gpu_plan_says_why_not() {
    let dir = Path::new("/tmp/x");
    for quick in [false, true] {
        let host = stages(DeviceSpec::HOST, quick, None);
        let lv2 = host.iter().find(|s| s.id == "latency-lv2").unwrap();
        assert_eq!(
            (lv2.work, lv2.not_here.as_deref()),
            (Work::Latency(Level::Lv2, None), None)
        );
        assert_eq!(lv2.needs, ["environment"]);
        let a = args(lv2, DeviceSpec::HOST, quick, dir, None).unwrap();
        assert!(a.windows(2).any(|w| w == ["--level", "2"]), "{a:?}");
        let at = |id: &str| host.iter().position(|s| s.id == id).unwrap();
        assert!(at("latency-lv1") < at("latency-lv2") && at("latency-lv2") < at("sweep-t"));
        for id in ["sweep-t", "priority"] {
            assert!(host[at(id)].needs.contains(&"latency-lv2".to_string()), "{id}");
        }
        let sweep = args(&host[at("sweep-t")], DeviceSpec::HOST, quick, dir, None).unwrap();
        assert!(sweep.windows(2).any(|w| w == ["--levels", "1,2,3"]), "{sweep:?}");
        let prio = args(&host[at("priority")], DeviceSpec::HOST, quick, dir, None).unwrap();
        assert!(
            !prio.contains(&"--modes".to_string()),
            "the device's modes, lv2 among them: {prio:?}"
        );

        let gpu = stages(DeviceSpec::Hip(3), quick, None);
        let lv2 = gpu.iter().find(|s| s.id == "latency-lv2").unwrap();
        let why = preempt_api::lv2_unavailable(DeviceSpec::Hip(3)).message;
        assert_eq!(lv2.not_here.as_deref(), Some(why.as_str()));
        assert!(
            !why.contains('\n') && why.ends_with(preempt_api::LV2_ON_GPU_DOC),
            "{why}"
        );
        let at = |id: &str| gpu.iter().position(|s| s.id == id).unwrap();
        for id in ["sweep-t", "priority"] {
            assert!(!gpu[at(id)].needs.contains(&"latency-lv2".to_string()), "{id}");
        }
        let sweep = args(&gpu[at("sweep-t")], DeviceSpec::Hip(3), quick, dir, None).unwrap();
        assert!(sweep.windows(2).any(|w| w == ["--levels", "1,3"]), "{sweep:?}");
    }
}

/// Every device's plan runs the bandwidth partition (`priority --policy up --shares 75:25`: the
/// class experiment, through the application helper's policy) and the overhead comparison
/// (`overhead` at every level of the device) right after `priority`, with the Lv3 mechanism
/// priority uses and needing what it needs (the partition suspends at Lv3 only: one Lv3 latency
/// that passed), sized by `--quick`; overhead's stdout is its result.
#[test]
fn partition_and_overhead_follow_priority_with_its_mechanism() {
    use crate::options::{Format, PolicyKind, values::parse_shares};
    use preempt_api::MechanismChoice;
    let dir = Path::new("/tmp/x");
    for dev in [DeviceSpec::HOST, DeviceSpec::Hip(1)] {
        for quick in [false, true] {
            let z = Sizes::of(quick);
            let v = stages(dev, quick, Some(LONG));
            let at = |id: &str| {
                v.iter()
                    .position(|s| s.id == id)
                    .unwrap_or_else(|| panic!("{dev}: no {id}"))
            };
            let (prio, part, over) = (&v[at("priority")], &v[at("partition")], &v[at("overhead")]);
            assert_eq!(
                (at("partition"), at("overhead")),
                (at("priority") + 1, at("priority") + 2),
                "{dev}: {:?}",
                ids(&v)
            );
            assert_eq!((part.work, over.work), (Work::Partition, Work::Overhead));
            assert_eq!((&part.not_here, &over.not_here), (&None, &None), "{dev}: both run here");
            assert!(!prio.needs_any.is_empty());
            assert_eq!((&part.needs_any, &over.needs_any), (&prio.needs_any, &prio.needs_any));
            assert!(part.needs.is_empty(), "{:?}", part.needs);
            assert_eq!(over.needs, prio.needs, "overhead runs priority's levels");
            // The last Lv3 latency stage's mechanism (the first that passed, in a run).
            let chosen = prio.needs_any.last().and_then(|id| mechanism_of(&v, id));
            let want_mech = match chosen {
                Some(Mech::Kfd(k)) => MechanismChoice::Only(k),
                _ => MechanismChoice::Auto,
            };
            let parse = |s: &Stage| {
                let a = args(s, dev, quick, dir, chosen).unwrap();
                let cli = Cli::try_parse_from(std::iter::once("preempt-lat".to_string()).chain(a.clone()))
                    .unwrap_or_else(|e| panic!("{a:?}: {e}"));
                cli.checked().unwrap_or_else(|e| panic!("{a:?}: {e}"))
            };
            let Command::Priority(p) = parse(part) else {
                panic!("partition runs priority")
            };
            assert!(p.runs_classes(), "the class experiment, not priority's modes");
            assert_eq!(p.policy, PolicyKind::Up);
            assert_eq!(p.shares, Some(parse_shares(SHARES).unwrap()));
            assert_eq!(p.duration_s, z.partition_s);
            assert_eq!((p.common.device, p.common.mechanism), (dev, want_mech));
            assert_eq!(p.out_dir, dir);
            let Command::Overhead(o) = parse(over) else {
                panic!("overhead runs overhead")
            };
            let levels = if dev.has_lv2() {
                vec![Level::Lv1, Level::Lv2, Level::Lv3]
            } else {
                vec![Level::Lv1, Level::Lv3]
            };
            assert_eq!(o.levels, levels, "{dev}: every level the device has");
            assert_eq!(
                (o.runs, o.commands, o.format),
                (z.overhead_runs, z.overhead_commands, Format::Json)
            );
            assert_eq!((o.common.device, o.common.mechanism), (dev, want_mech));
            // What report judges: the class experiment's schedule.json; overhead's stdout.
            assert_eq!(result_files(part.work), ["schedule.json"]);
            assert_eq!(stdout_file(part.work), "stdout.txt");
            assert_eq!(result_files(over.work), [stdout_file(over.work)]);
        }
    }
    let (f, q) = (Sizes::FULL, Sizes::QUICK);
    assert!(q.partition_s < f.partition_s);
    assert!(q.overhead_runs * q.overhead_commands < f.overhead_runs * f.overhead_commands);
}

/// docs/hardware-validation.md's first table has a row per stage of a GPU's plan (per
/// mechanism as `<mechanism>`), in the plan's order, and its progress-line example counts the
/// stages as the plan does.
#[test]
fn the_hardware_doc_lists_every_stage_of_a_gpu_and_counts_them() {
    let doc = include_str!("../../../../docs/hardware-validation.md");
    let plan = stages(DeviceSpec::Hip(0), false, None);
    let mut want: Vec<String> = Vec::new();
    for s in &plan {
        let id = MechanismKind::AUTO_ORDER
            .into_iter()
            .fold(s.id.clone(), |id, k| id.replace(k.name(), "<mechanism>"));
        if !want.contains(&id) {
            want.push(id);
        }
    }
    let start = doc.find("| stage | what it does |").expect("the doc's stage table");
    let rows: Vec<String> = doc[start..]
        .lines()
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .filter_map(|l| Some(l.split('`').nth(1)?.to_string()))
        .collect();
    assert_eq!(rows, want, "docs/hardware-validation.md's stage table");
    // `acceptance hip:0 [ i/n] id: ...`: n is the plan's length, stage i is id.
    let line = doc
        .split("(`acceptance hip:0 [")
        .nth(1)
        .expect("the doc's progress line");
    let (count, rest) = line.split_once(']').unwrap();
    let (i, n) = count.trim().split_once('/').unwrap();
    let (i, n): (usize, usize) = (i.trim().parse().unwrap(), n.parse().unwrap());
    let id = rest.trim_start().split(':').next().unwrap();
    assert_eq!(n, plan.len(), "stages of a GPU");
    assert_eq!(plan[i - 1].id, id, "stage {i}");
}

#[test]
fn quick_shrinks_the_bounds() {
    let (full, quick) = (
        stages(DeviceSpec::HOST, false, None),
        stages(DeviceSpec::HOST, true, None),
    );
    for (f, q) in full.iter().zip(&quick) {
        assert!(q.bound < f.bound, "{}", f.id);
    }
}

/// A child line of an internal stage, as preempt-lat parses it: `__acceptance-stage`'s options.
fn internal_stage(line: Vec<String>) -> AcceptanceStageOptions {
    match Cli::try_parse_from(std::iter::once("preempt-lat".to_string()).chain(line))
        .unwrap()
        .checked()
    {
        Ok(Command::AcceptanceStage(o)) => o,
        other => panic!("not __acceptance-stage: {other:?}"),
    }
}

/// The interposer stage runs on both devices after overhead, the presets and Example 5, needing
/// what its program needs (the host device: its environment; a GPU: the LP queue found by
/// `auto`, as the interposer finds it), and it is told `--quick`.
#[test]
fn the_interposer_stage_follows_overhead_and_is_sized_by_quick() {
    let dir = Path::new("/tmp/x");
    for (dev, needs) in [(DeviceSpec::HOST, "environment"), (DeviceSpec::Hip(2), "discovery")] {
        for quick in [false, true] {
            let v = stages(dev, quick, Some(LONG));
            let at = |id: &str| v.iter().position(|s| s.id == id).unwrap();
            let s = &v[at("interposer")];
            assert_eq!(at("interposer"), at("example5") + 1, "after the presets and Example 5");
            assert_eq!(s.work, Work::Internal(InternalStage::Interposer, None));
            assert_eq!((s.needs.as_slice(), &s.not_here), (&[needs.to_string()][..], &None));
            assert_eq!(s.bound, secs(INTERPOSER_BOUND_S, &Sizes::of(quick)));
            let a = args(s, dev, quick, dir, None).unwrap();
            let o = internal_stage(a);
            assert_eq!((o.stage, o.device, o.quick), (InternalStage::Interposer, dev, quick));
            let other = args(&v[at("environment")], dev, quick, dir, None).unwrap();
            assert!(!other.contains(&"--quick".to_string()), "{other:?}");
        }
    }
}

/// Example 5 runs on both devices right after the presets, needing what the session stages need
/// (a Lv3 latency that passed, as priority; the host device's environment or a GPU's LP queue
/// found by `auto`, as the package finds it), told `--quick`; its child line is the internal
/// stage's, its result file the example's JSON, which report judges. (The example's own command
/// line is the stage's, tested beside it in preempt-lat.)
#[test]
fn example5_follows_the_presets_with_the_session_stages_needs() {
    let dir = Path::new("/tmp/x");
    for (dev, needs) in [(DeviceSpec::HOST, "environment"), (DeviceSpec::Hip(1), "discovery")] {
        for quick in [false, true] {
            let v = stages(dev, quick, Some(LONG));
            let at = |id: &str| v.iter().position(|s| s.id == id).unwrap();
            let s = &v[at("example5")];
            assert_eq!(at("example5"), at("case-8.3.2") + 1, "{dev}: after the presets");
            assert_eq!(s.work, Work::Internal(InternalStage::Example5, None));
            assert_eq!((s.needs.as_slice(), &s.not_here), (&[needs.to_string()][..], &None));
            assert_eq!(s.needs_any, v[at("priority")].needs_any, "a Lv3 latency that passed");
            assert_eq!(s.bound, secs(EXAMPLE5_BOUND_S, &Sizes::of(quick)));
            assert_eq!(result_files(s.work), ["example5.json"]);
            let a = args(s, dev, quick, dir, None).unwrap();
            let o = internal_stage(a);
            assert_eq!((o.stage, o.device, o.quick), (InternalStage::Example5, dev, quick));
        }
    }
}

/// The seeds' experiments as presets: after overhead and before Example 5 and the interposer, 7.2.2's native
/// row, 7.2.1's HP load (needing what priority needs), then the case studies (8.2.1's
/// baselines before laxity), each with priority's Lv3 mechanism; each child line is the preset,
/// shortened by --quick, and writes what report judges.
#[test]
fn the_presets_run_after_overhead_in_the_test_plan_s_order() {
    use crate::options::{Preset, RatePreset};
    let dir = Path::new("/tmp/x");
    let want = [
        ("partition-native", Work::Preset(Preset::PartitionNative)),
        ("priority-fig9", Work::Preset(Preset::Fig9)),
        ("case-8.1.1", Work::Preset(Preset::Harvest)),
        ("case-8.2.1-native", Work::Preset(Preset::VideoconfNative)),
        ("case-8.2.1-fixed", Work::Preset(Preset::VideoconfFixed)),
        ("case-8.2.1", Work::Preset(Preset::Videoconf)),
        ("case-8.3.1", Work::Preset(Preset::Fig15a)),
        ("case-8.3.2", Work::RatePreset(RatePreset::Fig15b)),
    ];
    for dev in [DeviceSpec::HOST, DeviceSpec::Hip(0)] {
        for quick in [false, true] {
            let v = stages(dev, quick, Some(LONG));
            let at = |id: &str| {
                v.iter()
                    .position(|s| s.id == id)
                    .unwrap_or_else(|| panic!("{dev}: no {id}"))
            };
            let first = at("overhead") + 1;
            let got: Vec<(&str, Work)> = v[first..first + want.len()]
                .iter()
                .map(|s| (s.id.as_str(), s.work))
                .collect();
            assert_eq!(got, want, "{dev}");
            assert_eq!(v[first + want.len()].id, "example5");
            let prio = &v[at("priority")];
            for (id, work) in want {
                let s = &v[at(id)];
                assert_eq!(s.needs_any, prio.needs_any, "{id}: priority's Lv3 mechanism");
                let needs: &[String] = if id == "priority-fig9" { &prio.needs } else { &[] };
                assert_eq!(s.needs, needs, "{id}");
                assert_eq!(s.not_here, None, "{id} runs on {dev}");
                let a = args(s, dev, quick, dir, None).unwrap();
                let cli = Cli::try_parse_from(std::iter::once("preempt-lat".to_string()).chain(a.clone()))
                    .unwrap_or_else(|e| panic!("{a:?}: {e}"));
                match (cli.checked().unwrap_or_else(|e| panic!("{a:?}: {e}")), work) {
                    (Command::Priority(p), Work::Preset(want)) => {
                        assert_eq!(p.preset, Some(want));
                        let d = if quick {
                            Sizes::quick_preset_s(want)
                        } else {
                            want.duration_s()
                        };
                        assert_eq!(p.duration_s, d, "{id}");
                        assert!(!quick || d < 10.0, "{id}: short with --quick");
                        let file = if want.class_set().is_some() {
                            "schedule.json"
                        } else {
                            "priority.json"
                        };
                        assert_eq!(result_files(work), [file]);
                    }
                    (Command::Sweep(crate::options::Sweep::Rate(r)), Work::RatePreset(want)) => {
                        assert_eq!(r.preset, Some(want));
                        assert_eq!(
                            r.compare_at().map(|c| r.rates.contains(&c)),
                            Some(true),
                            "the comparison rate is swept"
                        );
                        assert!(!quick || (r.rates.len() == 2 && r.duration_s <= 1.0), "{:?}", r.rates);
                        assert_eq!(
                            r.common.workers.is_some(),
                            dev.is_host(),
                            "one worker per client on the host"
                        );
                        assert_eq!(result_files(work), ["sweep-rate.json"]);
                    }
                    (c, w) => panic!("{id}: {w:?} ran {c:?}"),
                }
            }
        }
    }
}

/// `--long`'s default length: the hour (`--long` without minutes parses to it: a test below).
const LONG: Duration = Duration::from_secs(3600);

#[test]
fn long_alone_is_the_hour_and_long_with_minutes_a_trial() {
    let long = |a: &[&str]| {
        let argv = ["preempt-lat", "acceptance"].iter().chain(a).copied();
        match Cli::try_parse_from(argv).map(Cli::checked) {
            Ok(Ok(Command::Acceptance(o))) => Ok(o.long),
            Ok(Ok(_)) => unreachable!(),
            Ok(Err(e)) => Err(e.to_string()),
            Err(e) => Err(e.to_string()),
        }
    };
    assert_eq!(long(&[]), Ok(None));
    assert_eq!(long(&["--long"]), Ok(Some(LONG)));
    assert_eq!(long(&["--long=0.2"]), Ok(Some(Duration::from_secs(12))));
    assert!(long(&["--long=0.05"]).unwrap_err().contains("at least 0.1 minutes"));
}

/// `--long` adds the soak before the kernel log, its bound its length and a margin (not halved
/// by `--quick`), through the Lv3 mechanism a latency stage showed working: an hour of 1-minute
/// windows, or a trial's length of shorter ones; without it the plan is unchanged.
#[test]
fn long_adds_the_soak_before_the_kernel_log_for_its_length() {
    for dev in [DeviceSpec::HOST, DeviceSpec::Hip(0)] {
        for quick in [false, true] {
            for (length, minutes, window) in [(LONG, "60", "60"), (Duration::from_secs(12), "0.2", "1")] {
                let short = stages(dev, quick, None);
                let long = stages(dev, quick, Some(length));
                assert!(!ids(&short).contains(&"soak"));
                let mut without: Vec<&str> = ids(&long);
                without.retain(|id| *id != "soak");
                assert_eq!(without, ids(&short));
                let soak = &long[long.len() - 2];
                assert_eq!(
                    (soak.id.as_str(), soak.work, soak.bound),
                    ("soak", Work::Soak(length), length + LONG_MARGIN)
                );
                assert!(!soak.needs_any.is_empty() && soak.needs_any.iter().all(|n| n.starts_with("latency-lv3-")));
                let a = args(soak, dev, quick, Path::new("/tmp/x"), None).unwrap();
                assert_eq!(
                    a[..7],
                    [
                        "soak",
                        "--device",
                        &dev.to_string(),
                        "--minutes",
                        minutes,
                        "--window-s",
                        window
                    ]
                );
                assert_eq!(result_files(Work::Soak(length)), ["soak.json"]);
            }
        }
    }
}
