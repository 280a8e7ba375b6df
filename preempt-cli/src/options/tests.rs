use super::*;
use clap::CommandFactory;
use preempt_api::GracePeriod;
use preempt_api::MechanismChoice;

/// The command, or the line that refuses it (clap's or a check's: both are usage errors).
fn parse(args: &[&str]) -> Result<Command, UsageError> {
    let cli = Cli::try_parse_from(std::iter::once("preempt-lat").chain(args.iter().copied()))
        .map_err(|e| UsageError::new(e.to_string()))?;
    cli.checked()
}

#[test]
fn the_command_line_is_consistent() {
    Cli::command().debug_assert();
}

#[test]
fn no_subcommand_is_a_run_with_the_defaults() {
    let Ok(Command::Run(o)) = parse(&[]) else {
        panic!("a run")
    };
    assert_eq!((o.level, o.t_ms, o.samples, o.warmup), (Level::Lv3, 0.5, 300, 10));
    assert_eq!((o.common.lv1.threshold, o.common.lv1.batch, o.common.seed), (8, 4, 1));
    assert_eq!(
        (o.common.device, o.lp.lp_state, o.format),
        (DeviceSpec::Auto, LpState::Light, Format::Text)
    );
}

#[test]
fn lists_are_put_in_order_once_parsed() {
    let Ok(Command::Priority(o)) = parse(&["priority", "--modes", "lv3,native,standalone-hp"]) else {
        panic!("priority")
    };
    assert_eq!(o.modes, [Mode::StandaloneHp, Mode::Native, Mode::Lv3]);
    let Ok(Command::Priority(o)) = parse(&["priority", "--modes", "lv3,lv2,lv1"]) else {
        panic!("priority")
    };
    assert_eq!(
        o.modes,
        [Mode::Lv1, Mode::Lv2, Mode::Lv3],
        "lv2 runs between lv1 and lv3"
    );
    let Ok(Command::Sweep(Sweep::State(o))) = parse(&["sweep", "state", "--states", "heavy,light,heavy"]) else {
        panic!("sweep state")
    };
    assert_eq!(o.states, [LpState::Heavy, LpState::Light]);
}

#[test]
fn launcher_cost_takes_its_own_options() {
    let Ok(Command::LauncherCost(o)) = parse(&["launcher-cost", "--format", "csv", "--threshold", "4"]) else {
        panic!("launcher-cost")
    };
    assert_eq!((o.format, o.lv1.threshold, o.lv1.batch), (Format::Csv, 4, 4));
    for meaningless in ["--seed", "--mechanism", "--grace"] {
        let e = parse(&["launcher-cost", meaningless, "1"]).unwrap_err().to_string();
        assert!(e.contains(&format!("unexpected argument '{meaningless}'")), "{e}");
    }
    let e = parse(&["launcher-cost", "--threshold", "2", "--batch", "4"])
        .unwrap_err()
        .to_string();
    assert!(e.contains("--threshold (2) must be >= --batch (4)"), "{e}");
}

#[test]
fn the_api_words_parse_and_preempt_lat_refuses_kfd_and_auto() {
    let Ok(Command::Run(o)) = parse(&["--level", "lv1", "--device", "hip"]) else {
        panic!("a run")
    };
    assert_eq!((o.level, o.common.device), (Level::Lv1, DeviceSpec::Hip(0)));
    let e = parse(&["--device", "kfd"]).unwrap_err().to_string();
    assert!(
        e.contains("invalid value 'kfd' for '--device <DEVICE>'") && e.contains("use hip:N"),
        "{e}"
    );
    let e = parse(&["sweep", "t", "--levels", "1,auto"]).unwrap_err().to_string();
    assert!(
        e.contains("invalid value 'auto' for '--levels <LEVELS>'") && e.contains("use 3"),
        "{e}"
    );
    let e = parse(&["--level", "4"]).unwrap_err().to_string();
    assert!(
        e.contains(r#"unknown level "4": expected auto (0), lv1 (1), lv2 (2) or lv3 (3)"#),
        "{e}"
    );
    // Lv2: the host device's (and auto's, checked once it resolved); refused on a named GPU
    // with the API's reason, before anything runs.
    for args in [&["--level", "lv2", "--device", "host"][..], &["--level", "2"]] {
        let Ok(Command::Run(o)) = parse(args) else {
            panic!("{args:?}: a run")
        };
        assert_eq!(o.level, Level::Lv2);
    }
    let gpu_lv2 = preempt_api::lv2_unavailable(DeviceSpec::Hip(0)).message;
    for (args, option) in [
        (&["--level", "2", "--device", "hip:0"][..], "--level"),
        (&["sweep", "t", "--levels", "1,2", "--device", "hip"], "--levels"),
        (&["sweep", "state", "--levels", "lv2"], "--levels"),
    ] {
        let e = parse(args).unwrap_err().to_string();
        assert_eq!(e, format!("{option} 2: {gpu_lv2}"), "{args:?}");
    }
    // sweep t's default levels are the device's: 2 on the host device only.
    let Ok(Command::Sweep(Sweep::T(o))) = parse(&["sweep", "t"]) else {
        panic!("sweep t")
    };
    assert_eq!(o.levels.on(DeviceSpec::HOST), [Level::Lv1, Level::Lv2, Level::Lv3]);
    assert_eq!(o.levels.on(DeviceSpec::Hip(0)), Levels::EVERYWHERE);
    let Ok(Command::Sweep(Sweep::T(o))) = parse(&["sweep", "t", "--levels", "3,2"]) else {
        panic!("sweep t")
    };
    assert_eq!(o.levels.on(DeviceSpec::HOST), [Level::Lv3, Level::Lv2], "as given");
    let e = parse(&["--mechanism", "sigstop"]).unwrap_err().to_string();
    assert!(e.contains(r#"unknown mechanism "sigstop": expected auto"#), "{e}");
}

#[test]
fn common_cross_checks() {
    let ok = Common {
        lv1: Lv1Options { threshold: 8, batch: 4 },
        device: DeviceSpec::Auto,
        seed: 1,
        mechanism: MechanismChoice::Auto,
        grace: None,
        workers: None,
        quiet: true,
    };
    assert!(ok.check().is_ok());
    assert_eq!(
        ok.grace(),
        GracePeriod::Clocks1k(1),
        "ROCdbgapi's shortest grace by default"
    );
    assert!(
        Common {
            lv1: Lv1Options { threshold: 2, batch: 4 },
            ..ok.clone()
        }
        .check()
        .unwrap_err()
        .to_string()
        .contains("--threshold (2) must be >= --batch (4)")
    );
    let host_dbg = Common {
        device: DeviceSpec::HOST,
        mechanism: "dbg-trap".parse().unwrap(),
        ..ok.clone()
    };
    assert!(host_dbg.check().unwrap_err().to_string().contains("needs an AMD GPU"));
    let uq_grace = Common {
        device: DeviceSpec::Hip(0),
        mechanism: "update-queue".parse().unwrap(),
        grace: Some(GracePeriod::Clocks1k(4)),
        ..ok.clone()
    };
    assert!(
        uq_grace
            .check()
            .unwrap_err()
            .to_string()
            .contains("update-queue cannot set a grace period")
    );
    let host_grace = Common {
        device: DeviceSpec::HOST,
        grace: Some(GracePeriod::Default),
        ..ok.clone()
    };
    assert!(
        host_grace
            .check()
            .unwrap_err()
            .to_string()
            .contains("SIGSTOP has no grace period")
    );
    let dbg_grace = Common {
        device: DeviceSpec::Hip(0),
        mechanism: "dbg-trap".parse().unwrap(),
        grace: Some(GracePeriod::Default),
        ..ok
    };
    assert!(dbg_grace.check().is_ok());
    assert_eq!(dbg_grace.grace(), GracePeriod::Default);
}

#[test]
fn heavy_lp_state_is_refused_on_the_host_device_only() {
    let e = check_lp_state(DeviceSpec::HOST, LpState::Heavy)
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("--lp-state heavy needs an AMD GPU") && e.contains("processes with none"),
        "{e}"
    );
    assert!(check_lp_state(DeviceSpec::HOST, LpState::Light).is_ok());
    for d in [DeviceSpec::Auto, DeviceSpec::Hip(0)] {
        assert!(check_lp_state(d, LpState::Heavy).is_ok(), "{d}");
    }
}

/// priority's modes: by default every mode the device has (lv2 on the host device only, between
/// lv1 and lv3); lv2 asked for on a named GPU is refused with the API's reason, before anything
/// runs; asked for with --device auto it waits until the device is known.
#[test]
fn priority_runs_lv2_where_the_device_has_it() {
    let Ok(Command::Priority(o)) = parse(&["priority"]) else {
        panic!("priority")
    };
    assert!(o.modes.is_empty(), "no --modes: the device decides");
    assert_eq!(o.modes_on(DeviceSpec::HOST), Mode::ALL);
    let on_gpu = o.modes_on(DeviceSpec::Hip(0));
    assert_eq!(
        on_gpu,
        Mode::ALL.into_iter().filter(|&m| m != Mode::Lv2).collect::<Vec<_>>()
    );
    let names: Vec<&str> = o.modes_on(DeviceSpec::HOST).iter().map(|m| m.name()).collect();
    assert_eq!(names, ["standalone-hp", "standalone-lp", "native", "lv1", "lv2", "lv3"]);
    let Ok(Command::Priority(o)) = parse(&["priority", "--modes", "lv2", "--device", "host"]) else {
        panic!("priority")
    };
    assert_eq!(o.modes_on(DeviceSpec::HOST), [Mode::Lv2]);
    assert!(
        parse(&["priority", "--modes", "lv2"]).is_ok(),
        "auto: checked once resolved"
    );
    let gpu_lv2 = preempt_api::lv2_unavailable(DeviceSpec::Hip(1)).message;
    for args in [
        &["priority", "--modes", "lv2", "--device", "hip:1"][..],
        &["priority", "--modes", "standalone-hp,lv2,lv3", "--device", "hip:1"],
    ] {
        assert_eq!(
            parse(args).unwrap_err().to_string(),
            format!("--modes lv2: {gpu_lv2}"),
            "{args:?}"
        );
    }
    let Ok(Command::Priority(o)) = parse(&["priority", "--modes", "lv1,lv3", "--device", "hip:1"]) else {
        panic!("priority on a GPU without lv2")
    };
    assert_eq!(o.modes_on(DeviceSpec::Hip(1)), [Mode::Lv1, Mode::Lv3]);
}

#[test]
fn hpf_runs_the_modes_alone_and_the_class_experiment_with_classes() {
    let priority = |args: &[&str]| {
        let mut a = vec!["priority", "--device", "host"];
        a.extend_from_slice(args);
        match parse(&a) {
            Ok(Command::Priority(o)) => o,
            other => panic!("{a:?}: {other:?}"),
        }
    };
    assert!(!priority(&[]).runs_classes(), "the default: the modes");
    assert!(!priority(&["--policy", "hpf", "--processes", "2"]).runs_classes());
    let o = priority(&["--policy", "hpf", "--class", "hi:rate=5:prio=1", "--class", "lo:prio=0"]);
    assert!(o.runs_classes());
    assert_eq!(o.class_specs().len(), 2);
    assert!(
        priority(&[
            "--policy",
            "hpf",
            "--class",
            "a:prio=1",
            "--class",
            "b:prio=0",
            "--standalone"
        ])
        .runs_classes()
    );
    assert!(priority(&["--policy", "kedf", "--class", "a:deadline=1", "--class", "b:deadline=2"]).runs_classes());
}

/// A preset expands to the experiment docs/priority.md describes, keeps --duration-s, --device
/// and the like the user's, and refuses an option it sets with one line.
#[test]
fn a_preset_expands_and_the_user_keeps_the_rest() {
    for p in preset::Preset::ALL {
        let Ok(Command::Priority(o)) = parse(&["priority", "--preset", p.name(), "--device", "host"]) else {
            panic!("{p:?}")
        };
        assert_eq!((o.duration_s, o.common.device), (p.duration_s(), DeviceSpec::HOST));
        assert_eq!(o.preset_name(), Some(p.name()));
        match p.class_set() {
            Some(c) => {
                assert!(o.runs_classes(), "{p:?}: the class experiment");
                assert_eq!(
                    (o.policy, &o.classes, o.arrival, o.standalone),
                    (c.policy, &c.classes, c.arrival, c.standalone)
                );
            }
            None => {
                assert!(!o.runs_classes(), "7.2.1 runs priority's modes");
                assert!((o.hp_load() - 0.2).abs() < 1e-12, "HP at 20 % of the device");
                assert_eq!(o.arrival, Arrival::Fixed);
            }
        }
    }
    let Ok(Command::Priority(o)) = parse(&["priority", "--preset", "harvest", "--duration-s", "1.5"]) else {
        panic!("an alias")
    };
    assert_eq!((o.preset, o.duration_s), (Some(Preset::Harvest), 1.5));
    let Ok(Command::Priority(o)) = parse(&["priority"]) else {
        panic!("priority")
    };
    assert_eq!(
        (o.duration_s, o.preset, o.hp_load()),
        (3.0, None, 0.04),
        "no preset: 3 s, HP at 4 %"
    );
    for (bad, says) in [
        (
            &["priority", "--preset", "8.2.1", "--policy", "hpf"][..],
            "cannot be used with",
        ),
        (
            &["priority", "--preset", "8.1.1", "--class", "a:prio=1"],
            "cannot be used with",
        ),
        (
            &["priority", "--preset", "7.2.1", "--hp-rate", "5"],
            "cannot be used with",
        ),
        (
            &["priority", "--preset", "8.3.1", "--standalone"],
            "cannot be used with",
        ),
        (
            &["priority", "--preset", "8.2.1", "--modes", "lv3"],
            "--modes is for priority's modes",
        ),
        (&["priority", "--preset", "9.9.9"], "invalid value"),
        (
            &["sweep", "rate", "--preset", "8.3.2", "--k", "4"],
            "cannot be used with",
        ),
    ] {
        let e = parse(bad).unwrap_err().to_string();
        assert!(e.contains(says), "{bad:?}: {e}");
    }
}

#[test]
fn the_rate_preset_is_fig15b_with_the_user_s_rates_and_duration() {
    let Ok(Command::Sweep(Sweep::Rate(o))) = parse(&["sweep", "rate", "--preset", "8.3.2"]) else {
        panic!("sweep rate")
    };
    let x = preset::RatePreset::Fig15b.expand();
    assert_eq!(
        (o.policy, o.k, o.clients, o.arrival, o.sigma),
        (x.policy, x.k, x.clients, x.arrival, x.sigma)
    );
    assert_eq!(
        (o.duration_s, o.compare_at(), o.template().len()),
        (x.duration_s, Some(1000.0), 32)
    );
    assert_eq!(o.rates.first().zip(o.rates.last()), Some((&100.0, &1200.0)));
    let Ok(Command::Sweep(Sweep::Rate(o))) = parse(&[
        "sweep",
        "rate",
        "--preset",
        "fig15b",
        "--rates",
        "1000,100",
        "--duration-s",
        "1",
    ]) else {
        panic!("sweep rate")
    };
    assert_eq!((o.rates.as_slice(), o.duration_s), (&[100.0, 1000.0][..], 1.0));
    let Ok(Command::Sweep(Sweep::Rate(o))) = parse(&["sweep", "rate"]) else {
        panic!("sweep rate")
    };
    assert_eq!(
        (o.duration_s, o.compare_at(), o.k),
        (1.0, None, 2),
        "no preset: the host defaults"
    );
}
