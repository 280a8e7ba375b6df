//! The listener's gate: a pause after an accept error (EMFILE and the like: the listener stays
//! readable, and accepting again at once would spin), and a bound on the log lines that refused
//! connections write (a client that reconnects in a loop must not fill the log).
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// How long the listener rests after an accept error.
pub(super) const ACCEPT_PAUSE: Duration = Duration::from_millis(100);

/// One log line per uid (or for accept errors) per this long; the rest are counted.
const LOG_EVERY: Duration = Duration::from_secs(1);

/// Lines about one uid's misbehaving connections (refusals, their closing) per second.
const LINES_PER_UID: u32 = 32;

/// At most `per_second` lines per uid in each second, the rest counted: one mechanism for the
/// refused connections (one line a second) and for the lines about connections (32).
#[derive(Debug)]
struct PerUid {
    per_second: u32,
    /// Per uid: the second its lines are counted in, lines written in it, lines suppressed.
    windows: BTreeMap<u32, (Instant, u32, u64)>,
}

impl PerUid {
    fn new(per_second: u32) -> Self {
        PerUid {
            per_second,
            windows: BTreeMap::new(),
        }
    }

    /// `Some(lines suppressed before this one)` if a line about `uid` may be written now, or
    /// `None` (counted).
    fn admit(&mut self, uid: u32, now: Instant) -> Option<u64> {
        if self.windows.len() > 4096 {
            // Bounded by the uids seen in the last second.
            self.windows.retain(|_, (t, _, _)| now.duration_since(*t) < LOG_EVERY);
        }
        let e = self.windows.entry(uid).or_insert((now, 0, 0));
        if now.duration_since(e.0) >= LOG_EVERY {
            e.0 = now;
            e.1 = 0;
        }
        if e.1 >= self.per_second {
            e.2 += 1;
            return None;
        }
        e.1 += 1;
        Some(std::mem::take(&mut e.2))
    }

    /// The uids whose suppressed lines were not said and whose second is over, with their
    /// counts (now said).
    fn flush(&mut self, now: Instant) -> Vec<(u32, u64)> {
        let mut out = Vec::new();
        for (&uid, (t, n, suppressed)) in &mut self.windows {
            if *suppressed > 0 && now.duration_since(*t) >= LOG_EVERY {
                out.push((uid, std::mem::take(suppressed)));
                *t = now;
                *n = 0;
            }
        }
        out
    }
}

#[derive(Debug)]
pub(super) struct Gate {
    paused_until: Option<Instant>,
    errors: u64,
    last_error_log: Option<Instant>,
    /// Connections refused at accept: one line per uid a second.
    refusals: PerUid,
    /// Lines about one uid's connections.
    lines: PerUid,
}

impl Default for Gate {
    fn default() -> Self {
        Gate {
            paused_until: None,
            errors: 0,
            last_error_log: None,
            refusals: PerUid::new(1),
            lines: PerUid::new(LINES_PER_UID),
        }
    }
}

impl Gate {
    /// When the listener opens again, if it is paused.
    pub fn until(&self) -> Option<Instant> {
        self.paused_until
    }

    /// An accept failed: the listener pauses; the log line to write, if one is due.
    pub fn close(&mut self, now: Instant, e: &std::io::Error) -> Option<String> {
        self.paused_until = Some(now + ACCEPT_PAUSE);
        self.errors += 1;
        if self.last_error_log.is_some_and(|t| now.duration_since(t) < LOG_EVERY) {
            return None;
        }
        self.last_error_log = Some(now);
        Some(format!(
            "accept: {e}; not accepting for {} ms ({} such errors so far)",
            ACCEPT_PAUSE.as_millis(),
            self.errors
        ))
    }

    /// Whether the pause is over now (the caller listens again).
    pub fn reopen(&mut self, now: Instant) -> bool {
        if self.paused_until.is_some_and(|t| t <= now) {
            self.paused_until = None;
            return true;
        }
        false
    }

    /// A connection of `uid` was refused: the suffix of its log line (naming the refusals not
    /// logged since the last), or `None` if no line is due.
    pub fn refused(&mut self, uid: u32, now: Instant) -> Option<String> {
        let n = self.refusals.admit(uid, now)?;
        Some(if n > 0 {
            format!(" (and {n} more of uid {uid} refused, not logged)")
        } else {
            String::new()
        })
    }

    /// Whether a line about a connection of `uid` may be written now (at most
    /// [`LINES_PER_UID`] a second): `Some(suffix)` naming the lines suppressed before it, or
    /// `None` (counted).
    pub fn line(&mut self, uid: u32, now: Instant) -> Option<String> {
        let n = self.lines.admit(uid, now)?;
        Some(if n > 0 {
            format!(" ({n} lines about uid {uid}'s connections suppressed before this one)")
        } else {
            String::new()
        })
    }

    /// The counts of lines suppressed in a second now over (a uid that goes quiet still has
    /// them said), one line per uid.
    pub fn flush(&mut self, now: Instant) -> Vec<String> {
        self.lines
            .flush(now)
            .into_iter()
            .map(|(uid, n)| format!("{n} lines about uid {uid}'s connections suppressed in the last second"))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_accept_error_pauses_the_listener_and_logs_once_a_second() {
        let mut g = Gate::default();
        let t = Instant::now();
        let e = std::io::Error::from_raw_os_error(24);
        assert!(
            g.close(t, &e)
                .unwrap()
                .contains("not accepting for 100 ms (1 such errors")
        );
        assert_eq!(g.until(), Some(t + ACCEPT_PAUSE));
        assert!(!g.reopen(t + ACCEPT_PAUSE / 2));
        assert!(g.reopen(t + ACCEPT_PAUSE));
        assert_eq!(g.until(), None);
        assert!(
            g.close(t + ACCEPT_PAUSE, &e).is_none(),
            "a second error within 1 s: no line"
        );
        assert!(g.close(t + LOG_EVERY, &e).unwrap().contains("(3 such errors"));
    }

    #[test]
    fn lines_about_one_uid_are_bounded_per_second() {
        let mut g = Gate::default();
        let t = Instant::now();
        for _ in 0..LINES_PER_UID {
            assert_eq!(g.line(5, t).as_deref(), Some(""));
        }
        for _ in 0..100 {
            assert!(g.line(5, t).is_none());
        }
        assert_eq!(g.line(6, t).as_deref(), Some(""), "another uid is not held back");
        assert_eq!(
            g.line(5, t + LOG_EVERY).as_deref(),
            Some(" (100 lines about uid 5's connections suppressed before this one)")
        );
        // A uid that goes quiet after being suppressed still has its count said (one line of
        // this second was written above).
        for _ in 0..LINES_PER_UID + 2 {
            let _ = g.line(5, t + LOG_EVERY);
        }
        assert!(g.flush(t + LOG_EVERY).is_empty(), "not before its second is over");
        assert_eq!(
            g.flush(t + LOG_EVERY * 2),
            vec!["3 lines about uid 5's connections suppressed in the last second".to_owned()]
        );
        assert!(g.flush(t + LOG_EVERY * 3).is_empty());
    }

    #[test]
    fn refusals_log_one_line_per_uid_per_second() {
        let mut g = Gate::default();
        let t = Instant::now();
        assert_eq!(g.refused(7, t).as_deref(), Some(""));
        assert_eq!(g.refused(8, t).as_deref(), Some(""), "another uid has its own line");
        for _ in 0..1000 {
            assert!(g.refused(7, t + Duration::from_millis(10)).is_none());
        }
        assert_eq!(
            g.refused(7, t + LOG_EVERY).as_deref(),
            Some(" (and 1000 more of uid 7 refused, not logged)")
        );
    }
}
