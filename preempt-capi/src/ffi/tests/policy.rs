//! The helper's policy through the C ABI (docs/c-api.md, "The helper's policy"): the options
//! read with preempt-api's checks and words, the struct's earlier sizes defaulting to HPF, the
//! values a C integer can get wrong, and each policy's rule carried out on real host workers
//! (SIGSTOP: /proc says `T`). The rule's timing (shares over a second) is `capi_policy_test.c`'s
//! and `preempt-api/tests/host_policy.rs`'s.
use super::*;
use preempt_api::{MAX_POLICY_K, MAX_POLICY_ROUND, PolicyChoice, policy_choice};

const INVALID: c_int = preempt_status::PREEMPT_ERR_INVALID_ARGUMENT as c_int;
const BAD_HANDLE: c_int = preempt_status::PREEMPT_ERR_BAD_HANDLE as c_int;
const BUSY: c_int = preempt_status::PREEMPT_ERR_BUSY as c_int;
/// A bound for every wait of these tests (a failure, not a hang).
const LIMIT: Duration = Duration::from_secs(60);

/// `preempt_session_open("host", o)`: the code and the handle (0 on failure).
fn open(o: &preempt_options) -> (c_int, preempt_session_t) {
    let mut h = 0;
    // SAFETY: a valid string, struct and out pointer.
    let code = unsafe { preempt_session_open(c"host".as_ptr(), o, &mut h) };
    (code, h)
}

fn close(s: preempt_session_t) {
    // SAFETY: a handle.
    assert_eq!(unsafe { preempt_session_close(s) }, 0, "{}", last());
}

/// Host options with `policy` and its defaults otherwise.
fn with_policy(worker: &std::ffi::CString, policy: preempt_policy) -> preempt_options {
    let mut o = host_options(worker);
    o.policy = policy as i32;
    o
}

/// `body` on a thread of its own, failed after [`LIMIT`].
fn bounded(body: impl FnOnce() + Send + 'static) {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        body();
        let _ = tx.send(());
    });
    rx.recv_timeout(LIMIT)
        .expect("the test body finished within its limit (see its panic above, if any)");
}

/// Waits (at most 5 s) until `cond` holds; false if it never did.
fn eventually(mut cond: impl FnMut() -> bool) -> bool {
    let end = std::time::Instant::now() + Duration::from_secs(5);
    while std::time::Instant::now() < end {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    cond()
}

fn suspended(h: preempt_stream_t) -> bool {
    let mut f = -1;
    // SAFETY: a handle and a valid out pointer.
    assert_eq!(unsafe { preempt_is_suspended(h, &mut f) }, 0, "{}", last());
    f == 1
}

/// Whether the stream's workers are all stopped (`T`), or none is.
fn stopped(h: preempt_stream_t) -> bool {
    states(&pids(h)).iter().all(|&c| c == 'T')
}

fn running(h: preempt_stream_t) -> bool {
    states(&pids(h)).iter().all(|&c| c != 'T')
}

fn counts(s: preempt_session_t) -> (u64, u64) {
    let (mut a, mut f) = (u64::MAX, u64::MAX);
    // SAFETY: a handle and valid out pointers.
    assert_eq!(
        unsafe { preempt_helper_policy_counts(s, &mut a, &mut f) },
        0,
        "{}",
        last()
    );
    (a, f)
}

#[test]
fn the_policy_and_its_settings_are_read_with_the_api_s_checks_and_words() {
    let _one = serial();
    assert_eq!(u128::from(PREEMPT_MAX_POLICY_ROUND_NS), MAX_POLICY_ROUND.as_nanos());
    assert_eq!(usize::try_from(PREEMPT_MAX_POLICY_K).unwrap(), MAX_POLICY_K);
    assert_eq!(
        u128::from(PREEMPT_MAX_POLICY_SPAN_NS),
        preempt_api::MAX_POLICY_SPAN.as_nanos()
    );
    let worker = worker_path();
    let o = host_options(&worker);
    assert_eq!(
        o.policy,
        preempt_policy::PREEMPT_POLICY_HPF as i32,
        "the default is HPF"
    );
    assert_eq!(o.policy_round_ns, PREEMPT_POLICY_ROUND_NS_DEFAULT);
    assert_eq!(o.policy_k, 1);

    // Each C policy is the API's policy of its word, with the settings given.
    for (p, word) in preempt_policy::ALL {
        let mut o = with_policy(&worker, p);
        o.policy_round_ns = 20_000_000;
        o.policy_k = 3;
        let (code, s) = open(&o);
        assert_eq!(code, 0, "{word}: {}", last());
        let want = policy_choice(word, Duration::from_nanos(o.policy_round_ns), 3).unwrap();
        assert_eq!(handles::session(s).unwrap().helper_policy(), want, "{word}");
        close(s);
    }

    for n in [7, -1, i32::MAX] {
        let mut o = host_options(&worker);
        o.policy = n;
        assert_eq!(open(&o).0, INVALID, "{n}");
        assert!(
            last().contains(&format!(
                "preempt_options.policy: unknown policy \"{n}\": expected hpf (0), up (1)"
            )) && last().contains("laxity (3)"),
            "{}",
            last()
        );
    }

    // The round (up only) and k (kedf only): out of range is the API's error, naming the field.
    let round_ns = |ns: u64| {
        let mut o = with_policy(&worker, preempt_policy::PREEMPT_POLICY_UP);
        o.policy_round_ns = ns;
        o
    };
    let k = |k: u32| {
        let mut o = with_policy(&worker, preempt_policy::PREEMPT_POLICY_KEDF);
        o.policy_k = k;
        o
    };
    for ns in [0, PREEMPT_MAX_POLICY_ROUND_NS + 1, u64::MAX] {
        assert_eq!(open(&round_ns(ns)).0, INVALID, "round {ns}");
        let words = policy_choice("up", Duration::from_nanos(ns), 1).unwrap_err().message;
        assert_eq!(last(), format!("preempt_options.policy_round_ns: {words}"));
    }
    for n in [0, PREEMPT_MAX_POLICY_K + 1, u32::MAX] {
        assert_eq!(open(&k(n)).0, INVALID, "k {n}");
        let words = policy_choice("kedf", Duration::ZERO, usize::try_from(n).unwrap())
            .unwrap_err()
            .message;
        assert_eq!(last(), format!("preempt_options.policy_k: {words}"));
    }
    for o in [
        round_ns(PREEMPT_MAX_POLICY_ROUND_NS),
        round_ns(1),
        k(PREEMPT_MAX_POLICY_K),
        k(1),
    ] {
        let (code, s) = open(&o);
        assert_eq!(code, 0, "the bounds themselves are accepted: {}", last());
        close(s);
    }
    // A setting of another policy is not read.
    let mut o = with_policy(&worker, preempt_policy::PREEMPT_POLICY_LAXITY);
    o.policy_round_ns = 0;
    o.policy_k = 0;
    let (code, s) = open(&o);
    assert_eq!(code, 0, "{}", last());
    assert_eq!(handles::session(s).unwrap().helper_policy(), Some(PolicyChoice::Laxity));
    close(s);
}

/// A program built against an earlier header has no `policy`: whatever lies past its struct, its
/// session runs highest-priority-first only.
#[test]
fn options_of_the_earlier_sizes_default_to_hpf() {
    let _one = serial();
    let worker = worker_path();
    for size in [
        crate::types::PREEMPT_OPTIONS_V2_SIZE,
        crate::types::PREEMPT_OPTIONS_V1_SIZE,
    ] {
        let mut o = with_policy(&worker, preempt_policy::PREEMPT_POLICY_UP);
        o.struct_size = u32::try_from(size).unwrap();
        if size == crate::types::PREEMPT_OPTIONS_V1_SIZE {
            o.scheduler = c"not a scheduler word".as_ptr();
        }
        let (code, s) = open(&o);
        assert_eq!(code, 0, "struct_size {size}: {}", last());
        assert_eq!(handles::session(s).unwrap().helper_policy(), None, "struct_size {size}");
        let lp = create(s, preempt_level::PREEMPT_LEVEL_LV3);
        // SAFETY: a handle.
        assert_eq!(unsafe { preempt_helper_schedule_share(lp, 1) }, INVALID);
        assert!(last().contains("PREEMPT_POLICY_HPF"), "{}", last());
        close(s);
    }
}

#[test]
fn the_schedule_calls_check_their_values_handles_and_the_session_s_policy() {
    let _one = serial();
    let worker = worker_path();
    let hpf = open_host(&worker);
    let lp = create(hpf, preempt_level::PREEMPT_LEVEL_LV3);
    let (mut a, mut f) = (0u64, 0u64);
    // SAFETY: handles and valid out pointers throughout.
    unsafe {
        for code in [
            preempt_helper_schedule_share(lp, 1),
            preempt_helper_schedule_deadline(lp, 1),
            preempt_helper_schedule_laxity(lp, 0, 1, 2),
            preempt_helper_ready(lp),
            preempt_helper_idle(lp),
            preempt_helper_policy_counts(hpf, &mut a, &mut f),
        ] {
            assert_eq!(code, INVALID);
            assert!(
                last().contains("PREEMPT_POLICY_HPF") && last().contains("PREEMPT_POLICY_UP"),
                "{}",
                last()
            );
        }
        assert_eq!(preempt_helper_schedule_share(0, 1), BAD_HANDLE);
        assert_eq!(preempt_helper_ready(987_654), BAD_HANDLE);
        assert_eq!(
            preempt_helper_policy_counts(lp, &mut a, &mut f),
            BAD_HANDLE,
            "a stream handle"
        );
    }
    close(hpf);

    let up = open(&with_policy(&worker, preempt_policy::PREEMPT_POLICY_UP)).1;
    let lp = create(up, preempt_level::PREEMPT_LEVEL_LV3);
    let name = format!("stream handle {lp}");
    // SAFETY: as above; the NULL pointers are refused.
    unsafe {
        assert_eq!(preempt_helper_schedule_share(lp, 0), INVALID);
        assert!(last().contains(&name) && last().contains("share of 0"), "{}", last());
        assert_eq!(preempt_helper_ready(lp), INVALID, "the share of 0 scheduled nothing");
        assert!(last().contains("not scheduled"), "{}", last());
        assert_eq!(preempt_helper_idle(lp), INVALID);
        assert_eq!(preempt_helper_schedule_deadline(lp, 1_000_000), INVALID);
        assert!(last().contains("registers a queue with a share"), "{}", last());
        assert_eq!(preempt_helper_schedule_laxity(lp, 0, 1, 2), INVALID);
        assert_eq!(preempt_helper_policy_counts(up, std::ptr::null_mut(), &mut f), INVALID);
        assert!(last().contains("NULL"), "{}", last());
        assert_eq!(preempt_helper_policy_counts(up, &mut a, std::ptr::null_mut()), INVALID);
        assert_eq!(preempt_helper_schedule_share(lp, u32::MAX), 0, "{}", last());
        assert_eq!(preempt_helper_ready(lp), 0, "{}", last());
        assert_eq!(preempt_helper_idle(lp), 0, "{}", last());
    }
    close(up);

    let kedf = open(&with_policy(&worker, preempt_policy::PREEMPT_POLICY_KEDF)).1;
    let lp = create(kedf, preempt_level::PREEMPT_LEVEL_LV3);
    // SAFETY: a handle.
    unsafe {
        for ns in [0, PREEMPT_MAX_POLICY_SPAN_NS + 1, u64::MAX] {
            assert_eq!(preempt_helper_schedule_deadline(lp, ns), INVALID, "deadline {ns}");
            assert!(last().contains("deadline of"), "{}", last());
        }
        assert_eq!(preempt_helper_schedule_share(lp, 1), INVALID);
        assert!(last().contains("registers a queue with a deadline"), "{}", last());
        for ns in [1, PREEMPT_MAX_POLICY_SPAN_NS] {
            assert_eq!(preempt_helper_schedule_deadline(lp, ns), 0, "deadline {ns}: {}", last());
        }
    }
    close(kedf);

    let laxity = open(&with_policy(&worker, preempt_policy::PREEMPT_POLICY_LAXITY)).1;
    let lp = create(laxity, preempt_level::PREEMPT_LEVEL_LV3);
    // SAFETY: a handle.
    unsafe {
        for ns in [PREEMPT_MAX_POLICY_SPAN_NS + 1, u64::MAX] {
            assert_eq!(preempt_helper_schedule_laxity(lp, ns, 1, 2), INVALID, "laxity {ns}");
            assert!(last().contains("PREEMPT_MAX_POLICY_SPAN_NS"), "{}", last());
        }
        assert_eq!(preempt_helper_schedule_deadline(lp, 1), INVALID);
        for ns in [0, PREEMPT_MAX_POLICY_SPAN_NS] {
            assert_eq!(
                preempt_helper_schedule_laxity(lp, ns, i32::MIN, i32::MAX),
                0,
                "laxity {ns}: {}",
                last()
            );
        }
    }
    close(laxity);
}

/// Under a utilization partition every scheduled stream is held (its workers stopped) but the
/// ready one whose turn it is; a hand resume of the policy's hold is BUSY; idle again, the
/// stream is held again; close leaves no worker stopped.
#[test]
fn a_partition_holds_every_scheduled_stream_but_the_ready_one() {
    let _one = serial();
    bounded(|| {
        let worker = worker_path();
        let s = open(&with_policy(&worker, preempt_policy::PREEMPT_POLICY_UP)).1;
        let (a, b) = (
            create(s, preempt_level::PREEMPT_LEVEL_LV3),
            create(s, preempt_level::PREEMPT_LEVEL_LV3),
        );
        // SAFETY: handles.
        unsafe {
            assert_eq!(preempt_helper_schedule_share(a, 3), 0, "{}", last());
            assert_eq!(preempt_helper_schedule_share(b, 1), 0, "{}", last());
        }
        assert!(suspended(a) && suspended(b), "idle scheduled streams are held");
        assert!(eventually(|| stopped(a) && stopped(b)), "{:?}", states(&pids(a)));
        // SAFETY: a handle.
        assert_eq!(unsafe { preempt_resume(b) }, BUSY);
        assert!(
            last().contains(&format!("stream handle {b}")) && last().contains("policy"),
            "{}",
            last()
        );
        // SAFETY: a handle.
        assert_eq!(unsafe { preempt_helper_ready(a) }, 0, "{}", last());
        assert!(!suspended(a) && suspended(b), "the one ready stream holds the device");
        assert!(eventually(|| running(a) && stopped(b)));
        // SAFETY: a handle.
        assert_eq!(unsafe { preempt_helper_idle(a) }, 0, "{}", last());
        assert!(suspended(a), "idle again, it is held again");
        let (actions, failures) = counts(s);
        assert!(actions >= 4 && failures == 0, "{actions} actions, {failures} failures");
        let workers = [pids(a), pids(b)].concat();
        close(s);
        for p in workers {
            assert_ne!(
                host_device::proc_state(p).ok(),
                Some('T'),
                "worker {p} left stopped by close"
            );
        }
    });
}

/// K-EDF with k = 1 runs the stream due first; least laxity the stream of the highest priority
/// now, its laxity priority while it has slack and its critical priority from the moment it has
/// none (a laxity of 0).
#[test]
fn k_edf_and_laxity_run_the_stream_their_rule_picks() {
    let _one = serial();
    bounded(|| {
        let worker = worker_path();
        let s = open(&with_policy(&worker, preempt_policy::PREEMPT_POLICY_KEDF)).1;
        let (late, soon) = (
            create(s, preempt_level::PREEMPT_LEVEL_LV3),
            create(s, preempt_level::PREEMPT_LEVEL_LV3),
        );
        // SAFETY: handles.
        unsafe {
            assert_eq!(preempt_helper_schedule_deadline(late, 1_000_000_000), 0, "{}", last());
            assert_eq!(preempt_helper_schedule_deadline(soon, 10_000_000), 0, "{}", last());
            assert_eq!(preempt_helper_ready(late), 0, "{}", last());
            assert_eq!(preempt_helper_ready(soon), 0, "{}", last());
        }
        assert!(
            !suspended(soon) && suspended(late),
            "k = 1: the stream due first (10 ms after it became ready) runs, the one due in 1 s waits"
        );
        close(s);

        let s = open(&with_policy(&worker, preempt_policy::PREEMPT_POLICY_LAXITY)).1;
        let (slack, other) = (
            create(s, preempt_level::PREEMPT_LEVEL_LV3),
            create(s, preempt_level::PREEMPT_LEVEL_LV3),
        );
        // SAFETY: handles.
        unsafe {
            // `slack`: priority 1 for an hour, then 5; `other`: 2 at once (laxity 0) and after.
            assert_eq!(
                preempt_helper_schedule_laxity(slack, PREEMPT_MAX_POLICY_SPAN_NS, 1, 5),
                0,
                "{}",
                last()
            );
            assert_eq!(preempt_helper_schedule_laxity(other, 0, 2, 2), 0, "{}", last());
            assert_eq!(preempt_helper_ready(slack), 0, "{}", last());
            assert_eq!(preempt_helper_ready(other), 0, "{}", last());
            assert!(
                !suspended(other) && suspended(slack),
                "with slack left, laxity priority 1 is below 2"
            );
            // No slack: at its critical priority (5) at once.
            assert_eq!(preempt_helper_schedule_laxity(slack, 0, 1, 5), 0, "{}", last());
            assert_eq!(preempt_helper_idle(slack), 0, "{}", last());
            assert_eq!(preempt_helper_ready(slack), 0, "{}", last());
        }
        assert!(
            !suspended(slack) && suspended(other),
            "without slack, critical priority 5 is above 2"
        );
        close(s);
    });
}
