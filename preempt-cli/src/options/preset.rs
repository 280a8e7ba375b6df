//! `--preset`: the seeds' experiments of chapters 7 and 8 (the MI308X test plan) as one flag each.
//! A preset stands for the options that define the experiment (the class set, the policy, the
//! arrivals, `--standalone`, the HP load) and sets its own default duration; what does not define
//! it (`--device`, `--duration-s`, `--out-dir`, `--format`, `--seed`, `--workers`, the mechanism)
//! stays the user's. An option a preset sets is refused beside it (clap's conflict: one line, exit
//! 2), so a result labelled with a preset is always that experiment.
use super::class::{self, ClassSpec};
use super::values::{Arrival, PolicyKind};
use clap::ValueEnum;

/// A preset of `priority`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Preset {
    /// Test 7.2.1, Fig. 9 top: priority's modes with HP at 20 % of the device (fixed arrivals,
    /// 20/s x 5 commands x 2 ms), the seeds' load; 3 s per mode.
    #[value(name = "7.2.1", alias = "fig9")]
    Fig9,
    /// Test 7.2.2's native row: two saturating queues q0, q1 (T = 0.5 ms) with no scheduling
    /// (hpf, equal prio: nothing is ever suspended), against each alone; 10 s.
    #[value(name = "7.2.2-native")]
    PartitionNative,
    /// Test 8.1.1, Fig. 13 left: a production training job pjob (iterations of 8 x 5 ms at
    /// 20/s: 80 % busy) over an opportunistic one ojob (back to back), hpf, against each alone; 5 s.
    #[value(name = "8.1.1", alias = "harvest")]
    Harvest,
    /// Test 8.2.1, Fig. 14: video frames (25 FPS, 8 ms each) and a speech job (every 3 s, 150 x
    /// 10 ms, due within 3 s: critical 2.5 s after it arrives) under laxity; 12.5 s.
    #[value(name = "8.2.1", alias = "videoconf")]
    Videoconf,
    /// 8.2.1's fixed-priority baseline: the same classes under hpf, frames above speech.
    #[value(name = "8.2.1-fixed")]
    VideoconfFixed,
    /// 8.2.1's native baseline: the same classes, no scheduling (hpf, equal prio).
    #[value(name = "8.2.1-native")]
    VideoconfNative,
    /// Test 8.3.1, Fig. 15a: an HP client at 10 req/s (4 x 2 ms each) against an LP client back
    /// to back (2 ms commands), hpf, against each alone; 10 s.
    #[value(name = "8.3.1", alias = "fig15a")]
    Fig15a,
}

/// What a preset of the class experiment expands to.
#[derive(Debug, Clone, PartialEq)]
pub struct ClassSet {
    pub policy: PolicyKind,
    pub classes: Vec<ClassSpec>,
    pub arrival: Arrival,
    pub standalone: bool,
}

/// What a preset of priority's modes expands to: its HP requests.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HpLoad {
    pub arrival: Arrival,
    pub hp_rate: f64,
    pub hp_cmds: u32,
    pub hp_t_ms: f64,
}

/// One request every 3 s (8.2.1's speech job: 3 s of audio, then its transcription).
const EVERY_3_S: &str = "rate=0.3333333333";

/// The laxity preset's classes. Frames may wait 20 ms (half a frame period) before they turn
/// critical. Speech's work is 1.5 s of device time, half its period: it runs below the frames
/// while it has slack, and 2.5 s after its request it turns critical (above the frames' critical
/// priority), so what is left of it runs before any frame and ends within the 3 s, while a
/// speech job on time never delays a frame. Turning critical earlier starves the frames for the
/// rest of the speech work: with 1.2 s, frames' P99 was 780 ms on the host device.
const VIDEOCONF: [&str; 2] = [
    "frames:rate=25:t=8:laxity=20:prio=2:crit=3",
    "speech:rate=0.3333333333:cmds=150:t=10:laxity=2500:prio=1:crit=4",
];

impl Preset {
    /// The name outputs record (the test plan's section).
    pub fn name(self) -> &'static str {
        match self {
            Preset::Fig9 => "7.2.1",
            Preset::PartitionNative => "7.2.2-native",
            Preset::Harvest => "8.1.1",
            Preset::Videoconf => "8.2.1",
            Preset::VideoconfFixed => "8.2.1-fixed",
            Preset::VideoconfNative => "8.2.1-native",
            Preset::Fig15a => "8.3.1",
        }
    }

    /// Every preset, in the order `--help` lists them.
    #[cfg(test)]
    pub const ALL: [Preset; 7] = [
        Preset::Fig9,
        Preset::PartitionNative,
        Preset::Harvest,
        Preset::Videoconf,
        Preset::VideoconfFixed,
        Preset::VideoconfNative,
        Preset::Fig15a,
    ];

    /// Seconds per run (per mode, per class alone and together) when `--duration-s` is not given.
    /// 8.2.1's 12.5 s hold four speech requests (at 3, 6, 9 and 12 s), the first three with
    /// their whole 3 s inside the run.
    pub fn duration_s(self) -> f64 {
        match self {
            Preset::Fig9 => 3.0,
            Preset::Harvest => 5.0,
            Preset::PartitionNative | Preset::Fig15a => 10.0,
            Preset::Videoconf | Preset::VideoconfFixed | Preset::VideoconfNative => 12.5,
        }
    }

    /// priority's modes with the seeds' HP load (7.2.1), or `None` for a class experiment.
    pub fn hp_load(self) -> Option<HpLoad> {
        (self == Preset::Fig9).then_some(HpLoad {
            // "Periodic submission": the foreground job of Fig. 9 top.
            arrival: Arrival::Fixed,
            hp_rate: 20.0,
            hp_cmds: 5,
            hp_t_ms: 2.0,
        })
    }

    /// The class experiment this preset runs (`None` for 7.2.1, priority's modes).
    pub fn class_set(self) -> Option<ClassSet> {
        let (policy, specs, arrival, standalone): (PolicyKind, Vec<String>, Arrival, bool) = match self {
            Preset::Fig9 => return None,
            Preset::PartitionNative => (
                PolicyKind::Hpf,
                vec!["q0:t=0.5:prio=0".into(), "q1:t=0.5:prio=0".into()],
                Arrival::Fixed,
                true,
            ),
            Preset::Harvest => (
                PolicyKind::Hpf,
                vec!["pjob:rate=20:cmds=8:t=5:prio=1".into(), "ojob:t=5:prio=0".into()],
                Arrival::Fixed,
                true,
            ),
            Preset::Videoconf => (
                PolicyKind::Laxity,
                VIDEOCONF.map(String::from).to_vec(),
                Arrival::Fixed,
                false,
            ),
            Preset::VideoconfFixed => (
                PolicyKind::Hpf,
                vec![
                    "frames:rate=25:t=8:prio=2".into(),
                    format!("speech:{EVERY_3_S}:cmds=150:t=10:prio=1"),
                ],
                Arrival::Fixed,
                false,
            ),
            Preset::VideoconfNative => (
                PolicyKind::Hpf,
                vec![
                    "frames:rate=25:t=8:prio=1".into(),
                    format!("speech:{EVERY_3_S}:cmds=150:t=10:prio=1"),
                ],
                Arrival::Fixed,
                false,
            ),
            Preset::Fig15a => (
                PolicyKind::Hpf,
                vec!["hp:rate=10:cmds=4:t=2:prio=1".into(), "lp:t=2:prio=0".into()],
                Arrival::Fixed,
                true,
            ),
        };
        // The strings above are this file's: a test parses every one, so none is dropped here.
        let classes = specs.iter().filter_map(|s| class::parse(s).ok()).collect();
        Some(ClassSet {
            policy,
            classes,
            arrival,
            standalone,
        })
    }
}

/// A preset of `sweep rate`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RatePreset {
    /// Test 8.3.2, Fig. 15b: K-EDF with K = 16 over 32 clients, log-normal arrivals (sigma 2),
    /// 100 to 1200 req/s (or --rates), 10 s per rate; and at 1000 req/s the same clients with no
    /// scheduling (K = 32: nothing suspended), the stand-in for the seeds' comparison point.
    #[value(name = "8.3.2", alias = "fig15b")]
    Fig15b,
}

/// What `sweep rate --preset 8.3.2` expands to.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateSet {
    pub policy: PolicyKind,
    pub k: usize,
    pub clients: u32,
    pub arrival: Arrival,
    pub sigma: f64,
    pub duration_s: f64,
    /// The rate of the comparison point (the seeds compare P99 at 1000 req/s).
    pub compare_at: f64,
}

impl RatePreset {
    pub fn name(self) -> &'static str {
        "8.3.2"
    }

    pub fn expand(self) -> RateSet {
        RateSet {
            policy: PolicyKind::Kedf,
            k: 16,
            clients: 32,
            arrival: Arrival::Lognormal,
            sigma: 2.0,
            duration_s: 10.0,
            compare_at: 1000.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(c: &ClassSet) -> Vec<&str> {
        c.classes.iter().map(|c| c.name.as_str()).collect()
    }

    #[test]
    fn every_class_preset_parses_and_passes_its_policy_s_checks() {
        for p in Preset::ALL {
            let Some(c) = p.class_set() else {
                assert_eq!(p, Preset::Fig9, "only 7.2.1 runs priority's modes");
                continue;
            };
            assert_eq!(c.classes.len(), 2, "{p:?}: no class string was dropped");
            assert_eq!(class::check_set(c.policy, &c.classes), Ok(()), "{p:?}");
            assert!(p.duration_s() > 0.0);
        }
        let v = Preset::ALL.map(|p| p.to_possible_value().unwrap().get_name().to_string());
        assert_eq!(
            v,
            Preset::ALL.map(|p| p.name().to_string()),
            "clap's word is the name outputs record"
        );
    }

    #[test]
    fn the_presets_are_the_experiments_the_docs_describe() {
        // 8.1.1: production above opportunistic, both training-like, against each alone.
        let h = Preset::Harvest.class_set().unwrap();
        assert_eq!(
            (h.policy, names(&h), h.standalone),
            (PolicyKind::Hpf, vec!["pjob", "ojob"], true)
        );
        assert!(h.classes[0].prio > h.classes[1].prio && h.classes[1].saturates());
        assert!(
            h.classes[0].rate * f64::from(h.classes[0].cmds) * h.classes[0].t_ms < 1000.0,
            "pjob leaves gaps"
        );
        // 8.2.1: 25 FPS frames, a request every 3 s for speech whose work fits in its 3 s.
        let v = Preset::Videoconf.class_set().unwrap();
        assert_eq!((v.policy, names(&v)), (PolicyKind::Laxity, vec!["frames", "speech"]));
        let (f, s) = (&v.classes[0], &v.classes[1]);
        assert_eq!((f.rate, 1.0 / s.rate), (25.0, 3.0000000003));
        let work_ms = f64::from(s.cmds) * s.t_ms;
        assert!(work_ms < 3000.0 && s.laxity_ms.unwrap() < 3000.0, "due within its 3 s");
        assert!(
            s.crit > f.crit && s.prio < f.prio,
            "below frames with slack, above once critical"
        );
        // Its baselines: the same work, fixed priority (frames first) and none.
        let fixed = Preset::VideoconfFixed.class_set().unwrap();
        let native = Preset::VideoconfNative.class_set().unwrap();
        for b in [&fixed, &native] {
            assert_eq!((b.policy, names(b)), (PolicyKind::Hpf, vec!["frames", "speech"]));
            for (x, y) in b.classes.iter().zip(&v.classes) {
                assert_eq!((x.rate, x.cmds, x.t_ms), (y.rate, y.cmds, y.t_ms));
            }
        }
        assert!(fixed.classes[0].prio > fixed.classes[1].prio);
        assert_eq!(native.classes[0].prio, native.classes[1].prio, "nothing is suspended");
        // 8.3.1: HP at 10 req/s, LP back to back.
        let a = Preset::Fig15a.class_set().unwrap();
        assert_eq!(
            (a.arrival, a.classes[0].rate, a.standalone),
            (Arrival::Fixed, 10.0, true)
        );
        assert!(a.classes[1].saturates() && a.classes[0].prio > a.classes[1].prio);
        // 7.2.2's native row: two saturating queues at one priority.
        let n = Preset::PartitionNative.class_set().unwrap();
        assert!(n.classes.iter().all(|c| c.saturates() && c.prio == Some(0)) && n.standalone);
        // 7.2.1: HP at 20 % of the device.
        let l = Preset::Fig9.hp_load().unwrap();
        assert!((l.hp_rate * f64::from(l.hp_cmds) * l.hp_t_ms / 1000.0 - 0.2).abs() < 1e-12);
        let r = RatePreset::Fig15b.expand();
        assert_eq!(
            (r.policy, r.k, r.arrival, r.sigma),
            (PolicyKind::Kedf, 16, Arrival::Lognormal, 2.0)
        );
        assert!(
            r.clients as usize > r.k,
            "K below the clients, or K-EDF suspends nothing"
        );
    }
}
