use super::*;
use preempt_api::GracePeriod;

#[test]
fn t_is_checked_with_a_reason() {
    assert_eq!(parse_t_ms("0.5"), Ok(0.5));
    for (s, want) in [
        ("0", "greater than 0"),
        ("-1", "greater than 0"),
        ("NaN", "finite"),
        ("1e9", "absurdly large"),
        ("x", "not a number"),
        ("1e-7", "below 1 ns"),
        ("1e-300", "T = 1e-300 ms is below 1 ns"),
    ] {
        assert!(parse_t_ms(s).unwrap_err().to_string().contains(want), "{s}");
    }
}

/// The API's grammar, its error text, and the two words preempt-lat refuses.
#[test]
fn devices_and_levels_are_the_api_s_but_kfd_and_auto() {
    let dev = |s: &str| (device().parse)(s);
    for d in DeviceSpec::WORDS.into_iter().filter(|&d| d != DeviceSpec::Kfd) {
        assert_eq!(dev(&d.to_string()), Ok(d));
    }
    assert_eq!(dev("hip:3"), Ok(DeviceSpec::Hip(3)));
    assert_eq!(dev("hip"), Ok(DeviceSpec::Hip(0)));
    assert_eq!(
        dev("gpu7").unwrap_err().to_string(),
        "gpu7".parse::<DeviceSpec>().unwrap_err().message,
        "the API's wording"
    );
    assert!(dev("kfd").unwrap_err().to_string().contains("preempt_queue_bind"));
    let lvl = |s: &str| (level().parse)(s);
    for (s, l) in [
        ("1", Level::Lv1),
        ("lv1", Level::Lv1),
        ("2", Level::Lv2),
        ("lv2", Level::Lv2),
        ("3", Level::Lv3),
        ("lv3", Level::Lv3),
    ] {
        assert_eq!(lvl(s), Ok(l));
    }
    assert_eq!(
        lvl("4").unwrap_err().to_string(),
        "4".parse::<Level>().unwrap_err().message
    );
    // Lv2 is refused where the device is known to be a GPU, with the API's words; the host
    // device and auto (checked once resolved) pass.
    let e = check_level("--level", DeviceSpec::Hip(1), Level::Lv2)
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        format!(
            "--level 2: {}",
            preempt_api::lv2_unavailable(DeviceSpec::Hip(1)).message
        )
    );
    for ok in [DeviceSpec::HOST, DeviceSpec::Auto] {
        assert_eq!(check_level("--level", ok, Level::Lv2), Ok(()));
    }
    assert_eq!(check_level("--level", DeviceSpec::Hip(0), Level::Lv3), Ok(()));
    assert!(lvl("auto").unwrap_err().to_string().contains("use 3"));
    assert!(
        lvl("0").unwrap_err().to_string().contains("use 3"),
        "0 is auto's number"
    );
    assert_eq!(
        serde_json::to_string(&Level::Lv3).unwrap(),
        "3",
        "results record the number"
    );
    let mech = |s: &str| (mechanism().parse)(s);
    assert_eq!(mech("auto"), Ok(MechanismChoice::Auto));
    assert_eq!(
        mech("sigstop").unwrap_err().to_string(),
        preempt_api::parse_mechanism("sigstop").unwrap_err().message
    );
}

/// `--help` lists each device but kfd and each mechanism with the API's and lv3's one line.
#[test]
fn help_lists_the_words_with_what_each_is() {
    let listed = |names: &[PossibleValue]| -> Vec<(String, String)> {
        names
            .iter()
            .filter(|v| !v.is_hide_set())
            .map(|v| {
                (
                    v.get_name().to_string(),
                    v.get_help().map(ToString::to_string).unwrap_or_default(),
                )
            })
            .collect()
    };
    let devices: Vec<_> = DeviceSpec::WORDS
        .into_iter()
        .filter(|&d| d != DeviceSpec::Kfd)
        .map(|d| (d.word().to_string(), d.summary().to_string()))
        .collect();
    assert_eq!(listed(&device().names), devices);
    let mechanisms = listed(&mechanism().names);
    assert_eq!(mechanisms[0].0, "auto");
    let kinds: Vec<_> = MechanismKind::AUTO_ORDER
        .into_iter()
        .map(|k| (k.name().to_string(), k.summary().to_string()))
        .collect();
    assert_eq!(mechanisms[1..], kinds[..]);
}

#[test]
fn grace_parses_numbers_and_default() {
    assert_eq!("default".parse::<GracePeriod>(), Ok(GracePeriod::Default));
    assert_eq!("0".parse::<GracePeriod>(), Ok(GracePeriod::Clocks1k(0)));
    assert_eq!("255".parse::<GracePeriod>(), Ok(GracePeriod::Clocks1k(255)));
    assert!("256".parse::<GracePeriod>().unwrap_err().to_string().contains("0-255"));
    assert_eq!(GracePeriod::Clocks1k(7).to_string(), "7");
}

#[test]
fn policy_words_are_the_apis_table() {
    use clap::ValueEnum;
    for k in PolicyKind::value_variants() {
        let word = k.to_possible_value().map(|v| v.get_name().to_string());
        assert_eq!(word.as_deref(), Some(k.policy().word()), "{k:?}");
    }
    assert_eq!(PolicyKind::value_variants().len(), preempt_api::Policy::ALL.len());
}
