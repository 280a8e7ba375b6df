//! Synthetic timelines: kernels laid out one after another with a known duration, preemptions
//! placed inside or between them; every expected figure is derived from the construction.
use super::*;

const D: u64 = 100_000; // bystander kernel, ns
const G: u64 = 10_000; // gap between kernels (the worker's launch and wait)
const L: u64 = 4_000; // one preemption (shorter than a gap, shorter than a kernel)

/// Kernels back to back from `from` while they start before `to`; kernel `i` lasts `len(i)`.
fn stream(from: u64, to: u64, len: impl Fn(usize) -> u64) -> Vec<Span> {
    let mut v = Vec::new();
    let mut s = from;
    while s < to {
        let e = s + len(v.len());
        v.push(Span { from_ns: s, to_ns: e });
        s = e + G;
    }
    v
}

fn ends_in(v: &[Span], w: Span) -> usize {
    v.iter().filter(|k| w.from_ns < k.to_ns && k.to_ns <= w.to_ns).count()
}

fn rate(n: usize, w: Span) -> f64 {
    n as f64 / (w.len_ns() as f64 / 1e9)
}

/// Baseline [0, B), then the measured window [B, B + W): every `m`-th measured kernel is `e`
/// longer and holds one preemption inside it.
struct Built {
    kernels: Vec<Span>,
    preemptions: Vec<Span>,
    baseline: Span,
    measured: Span,
    hits: usize,
}

fn build(m: usize, e: u64) -> Built {
    let (b, w) = (20_000_000, 50_000_000);
    let baseline = Span { from_ns: 0, to_ns: b };
    let measured = Span {
        from_ns: b,
        to_ns: b + w,
    };
    let mut kernels = stream(0, b, |_| D);
    // The first measured kernel starts after the baseline window ends.
    let start = kernels.last().unwrap().to_ns + G;
    let meas = stream(start, measured.to_ns - D - e, |i| if i % m == 0 { D + e } else { D });
    let preemptions: Vec<Span> = meas
        .iter()
        .step_by(m)
        .map(|k| Span {
            from_ns: k.from_ns + D / 4,
            to_ns: k.from_ns + D / 4 + L,
        })
        .collect();
    let hits = preemptions.len();
    kernels.extend(meas);
    Built {
        kernels,
        preemptions,
        baseline,
        measured,
        hits,
    }
}

fn timeline(b: &Built, stopped: Option<u64>) -> Timeline<'_> {
    Timeline {
        kernels: &b.kernels,
        baseline: b.baseline,
        measured: b.measured,
        preemptions: &b.preemptions,
        bystander_stopped_ns: stopped,
    }
}

#[test]
fn every_preemption_inside_one_kernel_costs_that_kernel_its_extra() {
    let (m, e) = (5, 300_000);
    let b = build(m, e);
    let c = analyze(&timeline(&b, Some(b.measured.to_ns))).unwrap();
    let base_n = b.kernels.iter().filter(|k| k.to_ns <= b.baseline.to_ns).count();
    assert_eq!(c.baseline_kernels, base_n);
    assert_eq!((c.baseline_kernel_p50_ns, c.baseline_kernel_p99_ns), (D, D));
    assert_eq!(c.preemptions, b.hits);
    assert_eq!(c.preemptions_overlapped, b.hits);
    assert_eq!(c.overlapping_kernels, b.hits, "one kernel per preemption");
    let e = i64::try_from(e).unwrap();
    assert_eq!(c.overlapping_kernel_extra_p50_ns, Some(e));
    assert_eq!(c.overlapping_kernel_extra_p99_ns, Some(e));
    assert_eq!(c.delay_per_preemption_p50_ns, Some(e));
    assert_eq!(c.delay_per_preemption_p99_ns, Some(e));
    let (rb, rm) = (
        rate(ends_in(&b.kernels, b.baseline), b.baseline),
        rate(ends_in(&b.kernels, b.measured), b.measured),
    );
    assert_eq!(c.baseline_kernels_per_s, rb);
    assert_eq!(c.measured_kernels_per_s, rm);
    assert_eq!(c.throughput_loss_fraction, 1.0 - rm / rb);
    let lost = c.lost_time_per_preemption_ns.unwrap();
    assert_eq!(lost, (1.0 - rm / rb) * b.measured.len_ns() as f64 / b.hits as f64);
    // The same cost seen through the throughput: each preemption's e, up to what the
    // construction leaves out: an empty tail of at most a long kernel and two gaps at the
    // measured window's end, and one kernel more or less counted per window.
    let (nb, nm) = (ends_in(&b.kernels, b.baseline), ends_in(&b.kernels, b.measured));
    let w = b.measured.len_ns() as f64;
    let slack = ((2 * (D + G)) as f64 + e as f64 + w * (1.0 / nm as f64 + 1.0 / nb as f64)) / b.hits as f64;
    assert!((lost - e as f64).abs() <= slack, "{lost} vs {e} (slack {slack})");
}

#[test]
fn preemptions_between_kernels_cost_nothing_per_kernel() {
    let (b, w) = (5_000_000, 5_000_000);
    let baseline = Span { from_ns: 0, to_ns: b };
    let measured = Span {
        from_ns: b,
        to_ns: b + w,
    };
    let kernels = stream(0, b + w - D, |_| D);
    // Inside the gaps after the measured kernels: [end + G/4, end + G/4 + L], L < G/2.
    let preemptions: Vec<Span> = kernels
        .iter()
        .filter(|k| k.from_ns >= b)
        .map(|k| Span {
            from_ns: k.to_ns + G / 4,
            to_ns: k.to_ns + G / 4 + L,
        })
        .collect();
    assert!(!preemptions.is_empty());
    let c = analyze(&Timeline {
        kernels: &kernels,
        baseline,
        measured,
        preemptions: &preemptions,
        bystander_stopped_ns: Some(measured.to_ns + 1),
    })
    .unwrap();
    assert_eq!(c.preemptions, preemptions.len());
    assert_eq!((c.preemptions_overlapped, c.overlapping_kernels), (0, 0));
    assert_eq!(c.overlapping_kernel_extra_p50_ns, None);
    assert_eq!(c.delay_per_preemption_p99_ns, None);
    let (rb, rm) = (
        rate(ends_in(&kernels, baseline), baseline),
        rate(ends_in(&kernels, measured), measured),
    );
    assert_eq!(c.throughput_loss_fraction, 1.0 - rm / rb);
}

#[test]
fn a_kernel_over_two_preemptions_counts_once_for_the_first() {
    let baseline = Span {
        from_ns: 0,
        to_ns: 1_000_000,
    };
    let measured = Span {
        from_ns: 1_000_000,
        to_ns: 2_000_000,
    };
    let mut kernels = stream(0, 1_000_000 - D, |_| D);
    let long = Span {
        from_ns: 1_100_000,
        to_ns: 1_100_000 + 3 * D,
    };
    kernels.push(long);
    let p = [
        Span {
            from_ns: long.from_ns + D / 2,
            to_ns: long.from_ns + D / 2 + L,
        },
        Span {
            from_ns: long.from_ns + 2 * D,
            to_ns: long.from_ns + 2 * D + L,
        },
    ];
    let c = analyze(&Timeline {
        kernels: &kernels,
        baseline,
        measured,
        preemptions: &p,
        bystander_stopped_ns: Some(measured.to_ns),
    })
    .unwrap();
    let extra = i64::try_from(long.len_ns() - D).unwrap();
    assert_eq!(
        (c.preemptions, c.preemptions_overlapped, c.overlapping_kernels),
        (2, 1, 1)
    );
    assert_eq!(c.delay_per_preemption_p50_ns, Some(extra));
    assert_eq!(c.measured_kernels_per_s, rate(1, measured));
}

#[test]
fn a_bystander_that_died_or_stopped_early_gives_no_figures() {
    let b = build(5, 300_000);
    let died = analyze(&timeline(&b, None)).unwrap_err();
    assert_eq!(
        died,
        Problem::BystanderStopped {
            stopped_ns: None,
            window_end_ns: b.measured.to_ns
        }
    );
    assert!(died.to_string().contains("died"), "{died}");
    let early = b.measured.to_ns - 2_000_000;
    let e = analyze(&timeline(&b, Some(early))).unwrap_err();
    assert_eq!(
        e,
        Problem::BystanderStopped {
            stopped_ns: Some(early),
            window_end_ns: b.measured.to_ns
        }
    );
    assert!(e.to_string().contains("2000 us before"), "{e}");
}

#[test]
fn empty_windows_say_which() {
    let baseline = Span {
        from_ns: 0,
        to_ns: 10 * D,
    };
    let measured = Span {
        from_ns: 10 * D,
        to_ns: 20 * D,
    };
    let t = |k: &'static [Span]| Timeline {
        kernels: k,
        baseline,
        measured,
        preemptions: &[],
        bystander_stopped_ns: Some(measured.to_ns),
    };
    assert_eq!(analyze(&t(&[])).unwrap_err(), Problem::NoBaselineKernel);
    // A kernel straddling the baseline's end is not wholly inside it.
    static STRADDLE: [Span; 1] = [Span {
        from_ns: 9 * D,
        to_ns: 11 * D,
    }];
    assert_eq!(analyze(&t(&STRADDLE)).unwrap_err(), Problem::NoBaselineKernel);
    // Baseline kernels only: the bystander hung in the measured window.
    static BASE_ONLY: [Span; 2] = [
        Span {
            from_ns: D,
            to_ns: 2 * D,
        },
        Span {
            from_ns: 3 * D,
            to_ns: 4 * D,
        },
    ];
    assert_eq!(analyze(&t(&BASE_ONLY)).unwrap_err(), Problem::NoMeasuredKernel);
}

#[test]
fn no_preemption_no_per_preemption_figures() {
    let mut b = build(5, 0);
    b.preemptions.clear();
    let c = analyze(&timeline(&b, Some(b.measured.to_ns))).unwrap();
    assert_eq!((c.preemptions, c.overlapping_kernels), (0, 0));
    assert_eq!(c.lost_time_per_preemption_ns, None);
    assert_eq!(c.delay_per_preemption_p50_ns, None);
}
