//! A queue of the scheduling experiment (a *class* of requests) as the command line gives it:
//! `NAME:key=value:...`, e.g. `video:rate=100:t=1:deadline=10` or `bulk:rate=0:t=1:share=25`.
use super::PolicyKind;
use crate::error::{UsageError, usage};
use serde::Serialize;

/// What one `--class` asks for. `rate` 0 makes a saturating queue (always a backlog of
/// commands, never idle), whose figure is its throughput rather than request latency.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClassSpec {
    pub name: String,
    /// Requests per second (0: saturating).
    pub rate: f64,
    /// T of each of its delay commands, in ms.
    pub t_ms: f64,
    /// Delay commands per request.
    pub cmds: u32,
    /// up: its share (any positive weight).
    pub share: Option<u32>,
    /// kedf: a request is due this long after it arrives, in ms.
    pub deadline_ms: Option<f64>,
    /// laxity: how long its work may wait at `prio` before it turns critical (`crit`), in ms.
    pub laxity_ms: Option<f64>,
    /// hpf: its priority (larger runs first); laxity: its priority while it has slack.
    pub prio: Option<i32>,
    pub crit: Option<i32>,
}

/// The keys a class takes, for the error messages.
pub const KEYS: &str = "rate, t, cmds, share, deadline, laxity, prio, crit";

fn number(key: &str, v: &str, lo: f64, hi: f64) -> Result<f64, UsageError> {
    let x: f64 = v.parse().map_err(|_| usage!("{key}={v} is not a number"))?;
    if !(x.is_finite() && (lo..=hi).contains(&x)) {
        return Err(usage!("{key}={v} is out of range ({lo} to {hi})"));
    }
    Ok(x)
}

fn int<T: TryFrom<i64>>(key: &str, v: &str, lo: i64, hi: i64) -> Result<T, UsageError> {
    let x: i64 = v.parse().map_err(|_| usage!("{key}={v} is not a whole number"))?;
    if !(lo..=hi).contains(&x) {
        return Err(usage!("{key}={v} is out of range ({lo} to {hi})"));
    }
    T::try_from(x).map_err(|_| usage!("{key}={v} is out of range"))
}

/// Parses `NAME:key=value:...` (clap's value parser for `--class`).
pub fn parse(s: &str) -> Result<ClassSpec, UsageError> {
    let mut parts = s.split(':');
    let name = parts.next().unwrap_or_default();
    if name.is_empty() || name.len() > 32 || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
        return Err(usage!(
            "{s:?}: a class starts with its name (1 to 32 of A-Z a-z 0-9 - _), then :key=value pairs ({KEYS})"
        ));
    }
    let mut c = ClassSpec {
        name: name.to_string(),
        rate: 0.0,
        t_ms: 0.5,
        cmds: 1,
        share: None,
        deadline_ms: None,
        laxity_ms: None,
        prio: None,
        crit: None,
    };
    for kv in parts {
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| usage!("{s:?}: {kv:?} is not key=value (keys: {KEYS})"))?;
        match k {
            "rate" => c.rate = number(k, v, 0.0, 100_000.0)?,
            "t" => c.t_ms = number(k, v, 0.001, 10_000.0)?,
            "cmds" => c.cmds = int(k, v, 1, 1000)?,
            "share" => c.share = Some(int(k, v, 1, 1_000_000)?),
            // A deadline of 0 is refused by the helper's policy (preempt_api::MAX_POLICY_SPAN
            // and its check): 1 us is the least.
            "deadline" => c.deadline_ms = Some(number(k, v, 0.001, 3_600_000.0)?),
            "laxity" => c.laxity_ms = Some(number(k, v, 0.0, 3_600_000.0)?),
            "prio" => c.prio = Some(int(k, v, -1000, 1000)?),
            "crit" => c.crit = Some(int(k, v, -1000, 1000)?),
            _ => return Err(usage!("{s:?}: unknown key {k:?} (keys: {KEYS})")),
        }
    }
    Ok(c)
}

impl ClassSpec {
    /// A saturating queue of `share` (what `--shares 75:25` makes).
    pub fn saturating(name: String, t_ms: f64, share: u32) -> Self {
        ClassSpec {
            name,
            rate: 0.0,
            t_ms,
            cmds: 1,
            share: Some(share),
            deadline_ms: None,
            laxity_ms: None,
            prio: None,
            crit: None,
        }
    }

    pub fn saturates(&self) -> bool {
        self.rate == 0.0
    }
}

/// What every class experiment checks of its classes, whoever gives them (`priority`, `sweep
/// rate`): at most 64, each name once, and each with the keys `policy` needs. The one-line reason
/// otherwise (a usage error).
pub fn check_set(policy: PolicyKind, classes: &[ClassSpec]) -> Result<(), UsageError> {
    if classes.len() > 64 {
        return Err(usage!("{} classes: at most 64", classes.len()));
    }
    let p = policy.name();
    for (i, c) in classes.iter().enumerate() {
        if classes[..i].iter().any(|d| d.name == c.name) {
            return Err(usage!("two classes are named {}", c.name));
        }
        let missing = match policy {
            PolicyKind::Up => c.share.is_none(),
            PolicyKind::Kedf => c.deadline_ms.is_none(),
            PolicyKind::Laxity => c.laxity_ms.is_none() || c.prio.is_none() || c.crit.is_none(),
            PolicyKind::Hpf => c.prio.is_none(),
        };
        if missing {
            return Err(usage!("--policy {p} needs {} in --class {}", needs(policy), c.name));
        }
    }
    Ok(())
}

/// The keys every class needs under `policy`, as the error messages name them.
pub fn needs(policy: PolicyKind) -> &'static str {
    match policy {
        PolicyKind::Up => "share=",
        PolicyKind::Kedf => "deadline=",
        PolicyKind::Laxity => "laxity=, prio= and crit=",
        PolicyKind::Hpf => "prio=",
    }
}

/// `sweep rate`'s built-in set-up: `clients` identical request classes `c0`, `c1`, ... of one
/// command of `t_ms` each, due `deadline_ms` after arrival, with every key any policy needs
/// (share 1, laxity = the deadline at priority 1, critical 2), each taking an equal part of the
/// swept rate (`rate=1` as a weight: see [`at_rate`]). Paella's and XSched's Fig. 15b serve many
/// clients with one deadline each; K-EDF then runs the K whose oldest work is due first.
pub fn built_in(clients: u32, t_ms: f64, deadline_ms: f64) -> Vec<ClassSpec> {
    (0..clients)
        .map(|i| ClassSpec {
            name: format!("c{i}"),
            rate: 1.0,
            t_ms,
            cmds: 1,
            share: Some(1),
            deadline_ms: Some(deadline_ms),
            laxity_ms: Some(deadline_ms),
            prio: Some(1),
            crit: Some(2),
        })
        .collect()
}

/// The classes of `template` at a total offered rate of `total` requests per second: each
/// request class gets its `rate=` weight's part of `total` (weights 3 and 1 at 100/s: 75/s and
/// 25/s); a saturating class (`rate=0`) stays saturating. `None` when no class has requests.
pub fn at_rate(template: &[ClassSpec], total: f64) -> Option<Vec<ClassSpec>> {
    let weights: f64 = template.iter().map(|c| c.rate).sum();
    (weights > 0.0).then(|| {
        template
            .iter()
            .map(|c| ClassSpec {
                rate: total * c.rate / weights,
                ..c.clone()
            })
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_class_reads_its_keys_and_keeps_defaults() {
        let c = parse("video:rate=100:t=1:deadline=10").unwrap();
        assert_eq!((c.name.as_str(), c.rate, c.t_ms, c.cmds), ("video", 100.0, 1.0, 1));
        assert_eq!(c.deadline_ms, Some(10.0));
        let b = parse("bulk:share=25").unwrap();
        assert!(b.saturates() && b.share == Some(25));
        let l = parse("f:rate=25:t=5:laxity=10:prio=2:crit=3").unwrap();
        assert_eq!((l.laxity_ms, l.prio, l.crit), (Some(10.0), Some(2), Some(3)));
    }

    #[test]
    fn bad_classes_say_what_is_wrong() {
        for (bad, says) in [
            ("", "starts with its name"),
            ("a b:rate=1", "starts with its name"),
            ("v:rate", "is not key=value"),
            ("v:speed=3", "unknown key \"speed\""),
            ("v:rate=-1", "out of range"),
            ("v:rate=nan", "out of range"),
            ("v:t=0", "out of range"),
            ("v:cmds=1.5", "not a whole number"),
            ("v:share=0", "out of range"),
            ("v:prio=99999999999999999999", "not a whole number"),
        ] {
            let e = parse(bad).unwrap_err().to_string();
            assert!(e.contains(says), "{bad:?}: {e}");
        }
    }

    #[test]
    fn a_swept_rate_is_split_by_the_weights_and_saturating_classes_stay() {
        let t = [
            parse("a:rate=3:deadline=1").unwrap(),
            parse("b:rate=1:deadline=1").unwrap(),
            parse("bg:deadline=9").unwrap(),
        ];
        let at = at_rate(&t, 100.0).unwrap();
        let rates: Vec<f64> = at.iter().map(|c| c.rate).collect();
        assert_eq!(rates, [75.0, 25.0, 0.0]);
        assert!(at[2].saturates());
        assert_eq!(at[0].deadline_ms, t[0].deadline_ms, "only the rate changes");
        assert!(
            at_rate(&t[2..], 100.0).is_none(),
            "no class with requests: nothing to sweep"
        );
        let b = built_in(4, 0.5, 20.0);
        let names: Vec<&str> = b.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["c0", "c1", "c2", "c3"]);
        let at = at_rate(&b, 1000.0).unwrap();
        assert!(at.iter().all(|c| c.rate == 250.0 && c.t_ms == 0.5), "equal parts");
        for policy in [PolicyKind::Up, PolicyKind::Kedf, PolicyKind::Laxity] {
            assert_eq!(
                check_set(policy, &b),
                Ok(()),
                "the built-in set-up serves every time-driven policy"
            );
        }
    }

    #[test]
    fn a_class_set_needs_unique_names_and_the_policy_keys() {
        let a = parse("a:rate=1").unwrap();
        let e = check_set(PolicyKind::Kedf, std::slice::from_ref(&a))
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            format!("--policy {} needs deadline= in --class a", PolicyKind::Kedf.name())
        );
        let e = check_set(
            PolicyKind::Up,
            &[parse("a:share=1").unwrap(), parse("a:share=2").unwrap()],
        )
        .unwrap_err()
        .to_string();
        assert_eq!(e, "two classes are named a");
        let many: Vec<ClassSpec> = (0..65).map(|i| parse(&format!("c{i}:share=1")).unwrap()).collect();
        assert_eq!(
            check_set(PolicyKind::Up, &many).unwrap_err().to_string(),
            "65 classes: at most 64"
        );
        let hpf = [parse("hi:rate=5:prio=2").unwrap(), parse("lo:prio=0").unwrap()];
        assert_eq!(check_set(PolicyKind::Hpf, &hpf), Ok(()));
        let e = check_set(PolicyKind::Hpf, &[hpf[0].clone(), a])
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            format!("--policy {} needs prio= in --class a", PolicyKind::Hpf.name())
        );
    }
}
