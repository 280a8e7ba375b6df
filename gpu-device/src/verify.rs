//! Correctness of a GPU run, from the LP commands' own records (pure, unit-tested).
//!
//! Every LP command's slot must say `Complete` (all blocks finished, booked exactly once, with
//! this command's tag) and `start < end`. And no LP command may start or end while the LP queue
//! was suspended: a window runs from the moment the suspend returned to the moment the resume
//! was called (host ns). A command that was running when the queue was preempted must therefore
//! end after that resume; one ending inside the window means the suspend did not stop it
//! (the mechanism failed silently, or ROCr's scratch reclaim re-enabled the queue). After an Lv1
//! drain nothing may even run through a window.
//!
//! Slot stamps are GPU wall-clock ticks, mapped to host ns with the run's [`ClockMap`]; the window
//! is shrunk by a margin (at least the map's one-sided bias bound) on both sides so that clock error cannot produce
//! a false failure. Windows narrower than twice the margin are counted as unchecked.
use crate::calib::ClockMap;
use crate::kernel::{DelaySlot, SlotStatus};

/// When the LP queue was suspended, in host ns (calib::host_ns).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// The sample (HP request) index.
    pub sample: usize,
    /// The suspend (Lv3) or drain (Lv1) returned.
    pub from_ns: u64,
    /// The resume was called.
    pub to_ns: u64,
}

/// What was wrong with one command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Problem {
    NotComplete(SlotStatus),
    /// `start >= end`: the stamps are not those of one execution.
    StartNotBeforeEnd,
    /// Ended while the queue was suspended (should have ended after the resume).
    EndedWhileSuspended {
        sample: usize,
    },
    /// Started while the queue was suspended.
    StartedWhileSuspended {
        sample: usize,
    },
    /// Lv1: ran through a window although the drain said the queue was idle.
    RanThroughDrain {
        sample: usize,
    },
}

/// The verdict on all slots.
#[derive(Debug, Clone, PartialEq)]
pub struct SlotCheck {
    /// Per command: `(id, correct)` records for the run's correctness tally (preempt-lat's
    /// `measure::Correctness::check`); a command that never completed has none (missing), a
    /// duplicated one has two.
    pub records: Vec<(u64, bool)>,
    pub problems: Vec<(u64, Problem)>,
    /// Windows too narrow to check after the margin.
    pub unchecked_windows: usize,
    pub margin_ns: f64,
}

impl SlotCheck {
    /// One line per problem (at most `max`), for stderr.
    pub fn describe(&self, max: usize) -> Vec<String> {
        let mut v: Vec<String> = self
            .problems
            .iter()
            .take(max)
            .map(|(id, p)| format!("LP command {id}: {p:?}"))
            .collect();
        if self.problems.len() > max {
            v.push(format!("... and {} more", self.problems.len() - max));
        }
        v
    }
}

/// Checks `slots` (index = command id) of commands launched with `nblocks` blocks against the
/// suspension `windows` (sorted, disjoint). `drained`: Lv1, where nothing runs during a window.
pub fn check_slots(
    slots: &[DelaySlot],
    nblocks: u32,
    windows: &[Window],
    map: &ClockMap,
    margin_ns: f64,
    drained: bool,
) -> SlotCheck {
    let mut records = Vec::with_capacity(slots.len());
    let mut problems = Vec::new();
    let shrunk: Vec<(usize, f64, f64)> = windows
        .iter()
        .map(|w| (w.sample, w.from_ns as f64 + margin_ns, w.to_ns as f64 - margin_ns))
        .filter(|(_, lo, hi)| lo < hi)
        .collect();
    let unchecked_windows = windows.len() - shrunk.len();
    for (i, s) in slots.iter().enumerate() {
        let id = i as u64;
        // Slot buffers hold at most 4 Mi commands (the budget cap): the index fits the 32-bit tag.
        match s.status(u32::try_from(i).unwrap_or(u32::MAX), nblocks) {
            SlotStatus::Complete => {}
            st @ SlotStatus::Duplicated { .. } => {
                records.extend([(id, true), (id, true)]);
                problems.push((id, Problem::NotComplete(st)));
                continue;
            }
            st @ (SlotStatus::WrongTag | SlotStatus::StateLost) => {
                records.push((id, false));
                problems.push((id, Problem::NotComplete(st)));
                continue;
            }
            st => {
                problems.push((id, Problem::NotComplete(st)));
                continue;
            }
        }
        if s.start >= s.end {
            records.push((id, false));
            problems.push((id, Problem::StartNotBeforeEnd));
            continue;
        }
        let (start, end) = (map.to_host_ns(s.start), map.to_host_ns(s.end));
        // Windows that can overlap [start, end]: from the first ending after `start`.
        let first = shrunk.partition_point(|&(_, _, hi)| hi <= start);
        let mut bad = None;
        for &(sample, lo, hi) in shrunk[first..].iter().take_while(|&&(_, lo, _)| lo < end) {
            bad = if end > lo && end < hi {
                Some(Problem::EndedWhileSuspended { sample })
            } else if start > lo && start < hi {
                Some(Problem::StartedWhileSuspended { sample })
            } else if drained && start <= lo && end >= hi {
                Some(Problem::RanThroughDrain { sample })
            } else {
                None
            };
            if bad.is_some() {
                break;
            }
        }
        records.push((id, bad.is_none()));
        if let Some(p) = bad {
            problems.push((id, p));
        }
    }
    SlotCheck {
        records,
        problems,
        unchecked_windows,
        margin_ns,
    }
}

/// The T a run achieved, measured by its own LP commands.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RunT {
    /// Median of end - start over the commands counted, in ns (at the clock map's fitted rate).
    pub median_ns: f64,
    /// Commands counted: complete, and never inside a suspension window.
    pub commands: usize,
    /// Complete commands left out because a suspension window (widened by the margin) overlapped
    /// them: their end - start includes the time they spent suspended.
    pub excluded: usize,
}

/// The achieved T of a run from its `slots` (index = command id, launched with `nblocks` blocks):
/// the median wall-clock length of the complete commands that no suspension window touched.
/// `windows` as for [`check_slots`]; each is widened by `margin_ns` on both sides (clock-map
/// error), so a command near a window is left out rather than counted with its suspension.
/// `None` when no command qualifies.
pub fn achieved_t(
    slots: &[DelaySlot],
    nblocks: u32,
    windows: &[Window],
    map: &ClockMap,
    margin_ns: f64,
) -> Option<RunT> {
    let widened: Vec<(f64, f64)> = windows
        .iter()
        .map(|w| (w.from_ns as f64 - margin_ns, w.to_ns as f64 + margin_ns))
        .collect();
    let mut lengths = Vec::new();
    let mut excluded = 0;
    for (i, s) in slots.iter().enumerate() {
        let id = u32::try_from(i).unwrap_or(u32::MAX);
        if s.status(id, nblocks) != SlotStatus::Complete || s.start >= s.end {
            continue;
        }
        let (start, end) = (map.to_host_ns(s.start), map.to_host_ns(s.end));
        let first = widened.partition_point(|&(_, hi)| hi <= start);
        if widened.get(first).is_some_and(|&(lo, _)| lo < end) {
            excluded += 1;
            continue;
        }
        lengths.push(s.wall_ticks() as f64 * map.ns_per_tick);
    }
    lengths.sort_by(f64::total_cmp);
    let median_ns = match lengths.len() {
        0 => return None,
        n if n % 2 == 1 => lengths[n / 2],
        n => (lengths[n / 2 - 1] + lengths[n / 2]) / 2.0,
    };
    Some(RunT {
        median_ns,
        commands: lengths.len(),
        excluded,
    })
}

/// HP start latency of one sample: the probe's start (GPU ticks, mapped to host ns) minus the
/// request time (host ns). A negative difference (the probe "started" before it was requested:
/// clock-map error larger than the latency) is `Err` with the difference, for the caller to
/// report rather than hide.
pub fn hp_start_ns(map: &ClockMap, probe_ticks: u64, t_req_ns: u64) -> Result<u64, f64> {
    let d = map.to_host_ns(probe_ticks) - t_req_ns as f64;
    if d < 0.0 { Err(d) } else { Ok(crate::num::round_u64(d)) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::DELAY_TAG_MAGIC;

    /// 1 tick = 10 ns (100 MHz), tick 0 = host 0.
    const MAP: ClockMap = ClockMap {
        anchor_ticks: 0,
        anchor_host_ns: 0.0,
        ns_per_tick: 10.0,
        late_bias_max_ns: 0.0,
    };
    const NB: u32 = 4;

    /// A complete slot for command `id` running from host ns `s` to `e`.
    fn ok(id: u64, s: u64, e: u64) -> DelaySlot {
        DelaySlot {
            start: s / 10,
            end: e / 10,
            blocks: NB,
            done: 1,
            tag: id ^ DELAY_TAG_MAGIC,
        }
    }

    fn win(sample: usize, a: u64, b: u64) -> Window {
        Window {
            sample,
            from_ns: a,
            to_ns: b,
        }
    }

    #[test]
    fn clean_lv3_run_passes_and_spanning_commands_end_after_the_resume() {
        // Command 1 was preempted by the window [1500, 1800] and finished after the resume.
        let slots = [ok(0, 0, 1000), ok(1, 1000, 2500), ok(2, 2500, 3500)];
        let c = check_slots(&slots, NB, &[win(0, 1500, 1800)], &MAP, 10.0, false);
        assert!(c.problems.is_empty(), "{:?}", c.problems);
        assert_eq!(c.records, vec![(0, true), (1, true), (2, true)]);
        assert_eq!(c.unchecked_windows, 0);
    }

    #[test]
    fn a_command_ending_inside_a_suspension_fails() {
        // Command 1 was running at the suspend and ended before the resume: not preempted.
        let slots = [ok(0, 0, 1000), ok(1, 1000, 1700), ok(2, 1750, 2500)];
        let c = check_slots(&slots, NB, &[win(0, 1500, 1800)], &MAP, 10.0, false);
        assert_eq!(
            c.problems,
            vec![
                (1, Problem::EndedWhileSuspended { sample: 0 }),
                (2, Problem::StartedWhileSuspended { sample: 0 })
            ]
        );
        assert_eq!(c.records, vec![(0, true), (1, false), (2, false)]);
    }

    #[test]
    fn lv1_drain_forbids_running_through_a_window() {
        let slots = [ok(0, 1000, 2500)];
        assert!(
            check_slots(&slots, NB, &[win(3, 1500, 1800)], &MAP, 10.0, false)
                .problems
                .is_empty()
        );
        let c = check_slots(&slots, NB, &[win(3, 1500, 1800)], &MAP, 10.0, true);
        assert_eq!(c.problems, vec![(0, Problem::RanThroughDrain { sample: 3 })]);
    }

    #[test]
    fn margin_absorbs_clock_error_and_narrow_windows_are_unchecked() {
        // Ends 5 ns into the window: within a 10 ns margin, not a failure.
        let slots = [ok(0, 0, 1500), ok(1, 1500, 3000)];
        let c = check_slots(&slots, NB, &[win(0, 1495, 1800), win(1, 2000, 2015)], &MAP, 10.0, false);
        assert!(c.problems.is_empty(), "{:?}", c.problems);
        assert_eq!(c.unchecked_windows, 1);
    }

    #[test]
    fn incomplete_duplicated_wrong_tag_and_bad_stamps_are_all_reported() {
        let mut dup = ok(1, 0, 100);
        dup.done = 2;
        let mut wrong = ok(2, 0, 100);
        wrong.tag = 7;
        let mut partial = ok(3, 0, 100);
        partial.blocks = 2;
        let backwards = DelaySlot {
            start: 50,
            end: 50,
            ..ok(4, 0, 0)
        };
        let slots = [DelaySlot::default(), dup, wrong, partial, backwards, ok(5, 0, 100)];
        let c = check_slots(&slots, NB, &[], &MAP, 0.0, false);
        let kinds: Vec<u64> = c.problems.iter().map(|p| p.0).collect();
        assert_eq!(kinds, vec![0, 1, 2, 3, 4]);
        assert_eq!(c.problems[4].1, Problem::StartNotBeforeEnd);
        // No record for a command that never completed (0, 3), two for a duplicated one (1).
        assert_eq!(c.records, vec![(1, true), (1, true), (2, false), (4, false), (5, true)]);
        assert!(c.describe(2).last().unwrap().contains("3 more"));
    }

    #[test]
    fn lost_wave_state_is_a_wrong_result() {
        let mut lost = ok(1, 100, 200);
        lost.tag |= crate::kernel::DELAY_STATE_LOST;
        let c = check_slots(&[ok(0, 0, 100), lost], NB, &[], &MAP, 0.0, false);
        assert_eq!(c.problems, vec![(1, Problem::NotComplete(SlotStatus::StateLost))]);
        assert_eq!(c.records, vec![(0, true), (1, false)]);
    }

    #[test]
    fn achieved_t_leaves_out_suspended_and_incomplete_commands() {
        // Commands of 1000 ns back to back; command 2 spans the window [2400, 2600] and lasts
        // 1000 + 200 ns (left out); command 4 never completed (not counted).
        let mut slots: Vec<DelaySlot> = (0..6).map(|i| ok(i, i * 1000, i * 1000 + 1000)).collect();
        slots[2] = ok(2, 2000, 3200);
        slots[3] = ok(3, 3200, 4200);
        slots[4].done = 0;
        slots[4].blocks = 1;
        let w = [win(0, 2400, 2600)];
        let t = achieved_t(&slots, NB, &w, &MAP, 100.0).unwrap();
        assert_eq!((t.median_ns, t.commands, t.excluded), (1000.0, 4, 1));
        // Near a window: [4300, 4400] widened by 150 touches command 3 (ends 4200), by 50 not.
        let near = [win(0, 4300, 4400)];
        assert_eq!(achieved_t(&slots, NB, &near, &MAP, 150.0).unwrap().excluded, 1);
        assert_eq!(achieved_t(&slots, NB, &near, &MAP, 50.0).unwrap().excluded, 0);
        // The median of an even count is the midpoint; the rate is the map's.
        let two = [ok(0, 0, 1000), ok(1, 1000, 3000)];
        assert_eq!(achieved_t(&two, NB, &[], &MAP, 0.0).unwrap().median_ns, 1500.0);
        let slow = ClockMap {
            ns_per_tick: 20.0,
            ..MAP
        };
        assert_eq!(achieved_t(&two[..1], NB, &[], &slow, 0.0).unwrap().median_ns, 2000.0);
        assert_eq!(achieved_t(&[DelaySlot::default()], NB, &[], &MAP, 0.0), None);
    }

    #[test]
    fn hp_start_uses_the_clock_map() {
        let map = ClockMap {
            anchor_ticks: 1_000,
            anchor_host_ns: 50_000.0,
            ns_per_tick: 10.0,
            late_bias_max_ns: 0.0,
        };
        // Probe at tick 1_300 = host 53_000 ns; request at host 51_000 ns: 2 us.
        assert_eq!(hp_start_ns(&map, 1_300, 51_000), Ok(2_000));
        assert_eq!(hp_start_ns(&map, 1_300, 54_000), Err(-1_000.0));
    }
}
