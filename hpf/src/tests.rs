//! hpf's rule, held against a walk over every queue and random interleavings.
use super::*;
use Action::{Resume, Suspend};

#[test]
fn an_hp_block_suspends_every_lp_queue_until_the_last_block_leaves() {
    let mut p = Policy::new();
    p.register(1, 0);
    p.register(2, 0);
    assert_eq!(p.enter(1), vec![Suspend(1), Suspend(2)]);
    assert!(p.is_suspended(1) && p.is_suspended(2));
    assert_eq!(p.enter(1), vec![]);
    assert_eq!(p.active_blocks(), 2);
    assert_eq!(p.leave(1), Ok(vec![]));
    assert_eq!(p.leave(1), Ok(vec![Resume(1), Resume(2)]));
    assert!(!p.is_suspended(1));
    assert_eq!(p.leave(1), Err(NotActive(1)));
    assert!(p.settled());
}

#[test]
fn only_strictly_higher_priorities_suspend() {
    let mut p = Policy::new();
    p.register('a', 0);
    p.register('b', 5);
    assert_eq!(
        p.enter(5),
        vec![Suspend('a')],
        "a block of equal priority does not suspend b"
    );
    assert_eq!(p.enter(9), vec![Suspend('b')]);
    assert_eq!(p.leave(9), Ok(vec![Resume('b')]));
    assert_eq!(p.leave(5), Ok(vec![Resume('a')]));
    assert_eq!(p.enter(-1), vec![], "a block below every queue suspends nothing");
}

#[test]
fn a_queue_registered_during_a_block_is_suspended_at_once_and_leaves_running() {
    let mut p = Policy::new();
    p.enter(1);
    assert_eq!(p.register(7, 0), vec![Suspend(7)]);
    assert_eq!(p.register(7, 0), vec![], "re-registering keeps the state");
    assert_eq!(p.register(7, 3), vec![Resume(7)], "raised above the block: runs");
    assert_eq!(p.register(7, 0), vec![Suspend(7)]);
    assert_eq!(p.unregister(7), vec![Resume(7)]);
    assert_eq!(p.unregister(7), vec![]);
    assert_eq!(p.leave(1), Ok(vec![]));
}

#[test]
fn failures_keep_the_recorded_state_true_and_reconcile_retries() {
    let mut p = Policy::new();
    p.register(1, 0);
    let a = p.enter(1);
    p.failed(a[0]);
    assert!(!p.is_suspended(1) && !p.settled());
    assert_eq!(p.reconcile(), vec![Suspend(1)]);
    let r = p.leave(1).unwrap();
    p.failed(r[0]);
    assert!(p.is_suspended(1), "a failed resume leaves it recorded as suspended");
    assert_eq!(p.reconcile(), vec![Resume(1)]);
    assert!(p.settled());
    p.failed(Suspend(99)); // unknown: ignored
}

#[test]
fn clear_blocks_resumes_everything() {
    let mut p = Policy::new();
    p.register(1, 0);
    p.register(2, 1);
    p.enter(3);
    p.enter(3);
    assert_eq!(p.clear_blocks(), vec![Resume(1), Resume(2)]);
    assert_eq!(p.ceiling(), None);
    assert_eq!(p.queues().collect::<Vec<_>>(), vec![(1, 0, false), (2, 1, false)]);
}

/// A reproducible stream of pseudo-random words (xorshift64).
fn xorshift(mut seed: u64) -> impl FnMut() -> u64 {
    move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    }
}

/// The naive rule, walked over every queue: what each call must return (in key order).
fn reference(queues: &mut BTreeMap<u64, (Priority, bool)>, ceiling: Option<Priority>) -> Vec<Action<u64>> {
    let mut out = Vec::new();
    for (&q, (p, s)) in queues.iter_mut() {
        let want = ceiling.is_some_and(|c| c > *p);
        if want != *s {
            *s = want;
            out.push(if want { Suspend(q) } else { Resume(q) });
        }
    }
    out
}

/// The indexed calls return exactly what a walk over every queue would, failures included.
#[test]
fn every_call_returns_what_the_full_walk_would() {
    let mut next = xorshift(0x2545_f491_4f6c_dd1d);
    let mut p: Policy<u64> = Policy::new();
    let mut model: BTreeMap<u64, (Priority, bool)> = BTreeMap::new();
    let mut blocks: Vec<Priority> = Vec::new();
    for _ in 0..30_000 {
        let r = next();
        let prio = Priority::try_from(r % 6).unwrap() - 1;
        let q = (r >> 16) % 12;
        let ceiling = |b: &Vec<Priority>| b.iter().max().copied();
        let got = match (r >> 8) % 7 {
            0 => {
                let s = model.get(&q).is_some_and(|m| m.1);
                model.insert(q, (prio, s));
                let got = p.register(q, prio);
                assert_eq!(got, reference(&mut model, ceiling(&blocks)));
                got
            }
            1 => {
                let got = p.unregister(q);
                let want = match model.remove(&q) {
                    Some((_, true)) => vec![Resume(q)],
                    _ => vec![],
                };
                assert_eq!(got, want);
                got
            }
            2 | 3 => {
                blocks.push(prio);
                let got = p.enter(prio);
                assert_eq!(got, reference(&mut model, ceiling(&blocks)));
                got
            }
            4 | 5 => {
                let Some(b) = blocks.pop() else { continue };
                let got = p.leave(b).unwrap();
                assert_eq!(got, reference(&mut model, ceiling(&blocks)));
                got
            }
            _ => {
                let got = p.reconcile();
                assert_eq!(got, reference(&mut model, ceiling(&blocks)));
                got
            }
        };
        // Some actions fail: the model records what the queue truly is.
        if let Some(&a) = got.first().filter(|_| r.is_multiple_of(5)) {
            p.failed(a);
            if let Some(m) = model.get_mut(&a.queue()) {
                m.1 = matches!(a, Resume(_));
            }
        }
        let mine: Vec<_> = p.queues().collect();
        let theirs: Vec<_> = model.iter().map(|(&q, &(p, s))| (q, p, s)).collect();
        assert_eq!(mine, theirs);
    }
}

/// A registration, or a block that moves no queue, costs what it changes: not a walk over
/// the thousands of queues already registered.
#[test]
fn calls_cost_what_they_change_not_the_number_of_queues() {
    let mut p: Policy<u64> = Policy::new();
    for q in 0..50_000 {
        p.register(q, Priority::try_from(q % 3).unwrap());
    }
    let v = p.visited();
    assert!(p.register(50_000, 0).is_empty());
    assert!(p.enter(0).is_empty(), "a block at the lowest priority suspends nothing");
    assert_eq!(p.leave(0), Ok(vec![]));
    assert!(p.visited() - v <= 4, "{} queues examined", p.visited() - v);
    // A block of priority 1 suspends the priority-0 queues: it examines those alone.
    let v = p.visited();
    let n0 = p.enter(1).len();
    assert_eq!(n0, 16_668);
    assert_eq!(p.visited() - v, 16_668);
    // Registering under it: one queue examined, one suspend.
    let v = p.visited();
    assert_eq!(p.register(60_000, 0), vec![Suspend(60_000)]);
    assert_eq!(p.visited() - v, 1);
}

/// Thousands of failed actions are tried again a bounded batch per call, all in turn: a
/// call costs what it changes plus [`RETRIES_PER_CALL`], and no failed resume is forgotten.
#[test]
fn failures_are_retried_in_bounded_batches_and_all_in_turn() {
    let mut p: Policy<u64> = Policy::new();
    for q in 0..1000 {
        p.register(q, 0);
    }
    let suspends = p.enter(1);
    assert_eq!(suspends.len(), 1000);
    let resumes = p.leave(1).unwrap();
    for a in resumes {
        p.failed(a); // every resume failed: all recorded suspended, none wanted so
    }
    assert!(!p.settled());
    let mut calls = 0;
    let mut retried = 0;
    while !p.settled() {
        let v = p.visited();
        // A call that moves nothing (a block below every queue) pays for one batch.
        retried += p.enter(-5).len();
        retried += p.leave(-5).unwrap().len();
        assert!(p.visited() - v <= 2 * RETRIES_PER_CALL as u64, "{}", p.visited() - v);
        calls += 1;
        assert!(calls < 100, "the failures are tried in turn");
    }
    assert_eq!(retried, 1000, "every failed resume tried again once");
}

/// Any interleaving of enters, leaves, registrations and failures keeps the invariant:
/// after a reconcile, a queue is suspended iff an active block outranks it.
#[test]
fn random_interleavings_keep_the_rule() {
    let mut next = xorshift(0x9e37_79b9_7f4a_7c15);
    let mut p: Policy<u64> = Policy::new();
    let mut blocks: Vec<Priority> = Vec::new();
    for _ in 0..20_000 {
        let r = next();
        let prio = Priority::try_from(r % 4).unwrap();
        match (r >> 8) % 6 {
            0 => {
                p.register((r >> 16) % 5, prio);
            }
            1 => {
                p.unregister((r >> 16) % 5);
            }
            2 | 3 => {
                p.enter(prio);
                blocks.push(prio);
            }
            4 => {
                if let Some(b) = blocks.pop() {
                    let acts = p.leave(b).unwrap();
                    if let Some(&a) = acts.first().filter(|_| r.is_multiple_of(3)) {
                        p.failed(a);
                    }
                }
            }
            _ => {
                p.reconcile();
            }
        }
        p.reconcile();
        assert!(p.settled());
        let ceiling = blocks.iter().max().copied();
        for (_, prio, suspended) in p.queues() {
            assert_eq!(suspended, ceiling.is_some_and(|c| c > prio));
        }
    }
}
