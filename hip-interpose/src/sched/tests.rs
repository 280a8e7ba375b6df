use super::*;

const HP: i32 = -1;
const NORMAL: i32 = 0;
const LOW: i32 = 1;

fn sched(streams: &[(Key, i32, bool, bool)]) -> Scheduler {
    let mut s = Scheduler::default();
    for &(k, p, pre, blocking) in streams {
        assert!(s.add(k, p, pre, blocking).is_empty());
    }
    s
}

#[test]
fn hp_work_suspends_lower_streams_until_its_last_mark_completes() {
    let mut s = sched(&[
        (10, HP, false, false),
        (20, LOW, true, false),
        (30, NORMAL, true, false),
    ]);
    let (m1, a) = s.submit(10).unwrap();
    assert_eq!(
        a,
        [Action::Suspend(20), Action::Suspend(30)],
        "both less urgent streams stop"
    );
    let (m2, a) = s.submit(10).unwrap();
    assert!(a.is_empty(), "already suspended: nothing more to do");
    assert!(s.completed(10, m1).is_empty(), "a later mark is still in flight");
    assert_eq!(s.completed(10, m2), [Action::Resume(20), Action::Resume(30)]);
    assert!(!s.is_suspended(20) && !s.is_suspended(30));
}

#[test]
fn equal_or_less_urgent_work_suspends_nothing() {
    let mut s = sched(&[
        (10, NORMAL, true, false),
        (20, NORMAL, true, false),
        (30, LOW, true, false),
    ]);
    assert!(!s.needs_mark(30), "nothing is less urgent than the low stream");
    let (_, a) = s.submit(10).unwrap();
    assert_eq!(
        a,
        [Action::Suspend(30)],
        "the normal stream stops only the low one, not its peer"
    );
}

#[test]
fn a_wait_on_a_suspended_streams_event_resumes_it_until_the_pin_goes() {
    let mut s = sched(&[(10, HP, false, false), (20, LOW, true, false)]);
    let (m, _) = s.submit(10).unwrap();
    assert!(s.is_suspended(20));
    assert_eq!(s.pin(20), [Action::Resume(20)], "HP waits on LP: LP must run");
    assert!(s.completed(10, m).is_empty(), "already running");
    let (_, a) = s.submit(10).unwrap();
    assert!(a.is_empty(), "pinned: not suspended again");
    assert_eq!(
        s.unpin(20),
        [Action::Suspend(20)],
        "pin gone while HP is busy: suspended again"
    );
}

#[test]
fn null_stream_work_keeps_blocking_streams_running() {
    let mut s = sched(&[
        (0, NORMAL, false, true),
        (10, HP, false, false),
        (20, LOW, true, true),
        (30, LOW, true, false),
    ]);
    assert!(s.needs_mark(0), "the null stream waits for the blocking LP stream");
    let (mn, a) = s.submit(0).unwrap();
    assert_eq!(
        a,
        [Action::Suspend(30)],
        "normal work stops the low streams, but not the blocking one it waits for"
    );
    let (mh, a) = s.submit(10).unwrap();
    assert!(
        a.is_empty(),
        "the blocking LP stream still runs: the null stream's work waits for it"
    );
    assert_eq!(
        s.completed(0, mn),
        [Action::Suspend(20)],
        "null work done: the blocking one stops too"
    );
    assert_eq!(s.completed(10, mh), [Action::Resume(20), Action::Resume(30)]);
}

#[test]
fn a_failed_stream_is_never_suspended_again_and_removal_resumes() {
    let mut s = sched(&[(10, HP, false, false), (20, LOW, true, false), (30, LOW, true, false)]);
    let (m, _) = s.submit(10).unwrap();
    s.failed(20);
    assert_eq!(s.completed(10, m), [Action::Resume(30)]);
    let (_, a) = s.submit(10).unwrap();
    assert_eq!(a, [Action::Suspend(30)], "20 failed once: left running");
    assert_eq!(
        s.remove(30),
        [Action::Resume(30)],
        "a destroyed stream is resumed first"
    );
    assert!(s.release_all().is_empty());
}

#[test]
fn unknown_streams_and_stale_marks_change_nothing() {
    let mut s = sched(&[(10, HP, false, false), (20, LOW, true, false)]);
    assert!(s.submit(99).is_none());
    assert!(s.completed(99, 1).is_empty() && s.pin(99).is_empty() && s.unpin(99).is_empty());
    let (m, _) = s.submit(10).unwrap();
    assert!(
        s.completed(10, m + 5).len() == 1,
        "a mark past the latest counts as the latest"
    );
    assert!(s.completed(10, m).is_empty(), "an old mark again: nothing");
}

#[test]
fn a_daemon_hold_suspends_whatever_the_rule_says_until_released() {
    let mut s = sched(&[(10, HP, false, false), (20, LOW, true, false)]);
    assert_eq!(s.hold(20), Some(vec![Action::Suspend(20)]), "another process's block");
    assert_eq!(s.hold(10), None, "a stream without a queue of its own cannot be held");
    let (m, a) = s.submit(10).unwrap();
    assert!(a.is_empty() && s.is_busy(10));
    assert!(
        s.completed(10, m).is_empty(),
        "the rule no longer wants it, the daemon still does"
    );
    assert!(!s.is_busy(10));
    assert_eq!(s.release(20), [Action::Resume(20)]);
    s.hold(20);
    assert_eq!(
        s.pin(20),
        Vec::<Action>::new(),
        "a pin does not override the daemon: its block ends on its own"
    );
    assert_eq!(
        s.release_holds(),
        [Action::Resume(20)],
        "the daemon went away: everything it held runs"
    );
}

#[test]
fn without_in_process_scheduling_only_the_daemon_suspends() {
    let mut s = Scheduler::new(false);
    s.add(10, HP, false, false);
    s.add(20, LOW, true, false);
    let (_, a) = s.submit(10).unwrap();
    assert!(
        a.is_empty(),
        "process granularity: the process's own work suspends nothing"
    );
    assert_eq!(
        s.busy_priorities().into_iter().collect::<Vec<_>>(),
        [HP],
        "but its busy levels are known"
    );
    assert_eq!(s.hold(20), Some(vec![Action::Suspend(20)]), "the daemon still can");
}

#[test]
fn a_new_priority_takes_effect_at_once() {
    let mut s = sched(&[(10, NORMAL, false, false), (20, NORMAL, true, false)]);
    let (_, a) = s.submit(10).unwrap();
    assert!(a.is_empty(), "peers");
    assert_eq!(
        s.set_priority(20, LOW),
        Some(vec![Action::Suspend(20)]),
        "now outranked by the busy stream"
    );
    assert_eq!(s.set_priority(20, HP), Some(vec![Action::Resume(20)]));
    assert_eq!(s.set_priority(99, HP), None);
}

/// The rule, evaluated from scratch.
fn rule(s: &Scheduler, key: Key) -> bool {
    let e = &s.streams[&key];
    let null_busy = s.streams.get(&0).is_some_and(Entry::busy);
    let outranked =
        e.pins == 0 && !(e.blocking && null_busy) && s.streams.values().any(|o| o.busy() && o.priority < e.priority);
    e.preemptible && !e.broken && (e.held || outranked)
}

#[test]
fn random_sequences_always_end_where_the_rule_says_and_actions_alternate() {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    for _ in 0..200 {
        let mut s = Scheduler::default();
        let mut suspended = std::collections::BTreeSet::new();
        let mut marks: Vec<(Key, u64)> = Vec::new();
        let mut pins: Vec<Key> = Vec::new();
        for _ in 0..200 {
            let key = Key::try_from(next(5)).unwrap(); // 0 is the null stream
            let actions = match next(9) {
                0 if !s.knows(key) => {
                    let p = i32::try_from(next(3)).unwrap() - 1;
                    s.add(key, if key == 0 { NORMAL } else { p }, next(2) == 0, next(2) == 0)
                }
                1 => s.remove(key),
                2 | 3 => match s.submit(key) {
                    Some((m, a)) => {
                        marks.push((key, m));
                        a
                    }
                    None => Vec::new(),
                },
                4 if !marks.is_empty() => {
                    let (k, m) = marks.remove(usize::try_from(next(marks.len() as u64)).unwrap());
                    s.completed(k, m)
                }
                5 => {
                    pins.push(key);
                    s.pin(key)
                }
                6 if !pins.is_empty() => s.unpin(pins.remove(0)),
                7 => s.hold(key).unwrap_or_default(),
                8 => s.release(key),
                _ => Vec::new(),
            };
            for a in actions {
                match a {
                    Action::Suspend(k) => assert!(suspended.insert(k), "suspend of {k}, already suspended"),
                    Action::Resume(k) => assert!(suspended.remove(&k), "resume of {k}, not suspended"),
                }
            }
            for k in s.streams.keys() {
                assert_eq!(s.is_suspended(*k), rule(&s, *k), "stream {k}");
                assert_eq!(
                    suspended.contains(k),
                    s.is_suspended(*k),
                    "actions and state agree on {k}"
                );
            }
            suspended.retain(|k| s.knows(*k));
        }
    }
}
