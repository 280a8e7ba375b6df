//! The LP side of a `priority` mode: a thread keeps the LP stream fed with delay commands and, as
//! it goes, takes what the stream reports (the launcher's completions; on the host device the
//! workers' records) into the exactly-once check ([`OnceTally`]) and the trace, so that nothing
//! piles up over the mode's length (kept to the end, both would take ~2.7 KB per LP command with
//! their trace spans). After the window the stream is drained and checked. On a GPU the device
//! records are its command slots (a bounded number, see [`super::modes::lp_budget`]), read once at
//! the end. After a stop the stream is not drained (its backlog is (2 x threshold + 2) x T; a stop
//! during the drain ends it) but closed within the API's bounded close
//! ([`crate::measure::settle`]); the check is then of the commands launched, and not made when the
//! close abandoned some.
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use preempt_api::{LpStream, Session};
use serde_json::json;

use crate::error::{Context, Error};
use crate::measure::Correctness;
use crate::measure::abandon;
use crate::measure::once::{Beyond, OnceTally};
use crate::measure::settle::{closed_after_stop, stream_idle_or_stop, stream_settled};
use crate::options::Mode;
use crate::trace::tracks::{DEVICE0 as LP_WORKER0, LP_QUEUE};
use crate::trace::{Trace, Track};
use preempt_api::latency::Settled;

/// How often the feeder takes what the stream reports.
const TAKE_EVERY: Duration = Duration::from_millis(50);

/// The check of one mode's LP commands, built as they complete.
pub struct LpCheck {
    /// The launcher's completions: one per command.
    done: OnceTally,
    /// The device's records (made with the first records: their count per command is the
    /// stream's).
    records: Option<OnceTally>,
    window: u64,
    /// Take the device's records as the run goes (the host device's accumulate until taken).
    records_as_they_come: bool,
    /// The LP spans (its own trace, with the mode's limit; merged into the mode's at the end).
    pub trace: Trace,
    pid: u32,
    /// The first error taking records met (reported after the mode).
    error: Option<Error>,
}

impl LpCheck {
    /// For a stream with `keep_ahead` commands pending at most; `trace` sets the limit (and off
    /// or on) of its spans, in process `pid`.
    pub fn new(keep_ahead: usize, host: bool, trace: Trace, pid: u32) -> Self {
        // An id this far behind the newest event is lost, not late: far beyond what the
        // launcher keeps in flight and pending.
        let window = (4 * keep_ahead as u64).max(1 << 16);
        LpCheck {
            done: OnceTally::new(1, Beyond::Duplicated, window),
            records: None,
            window,
            records_as_they_come: host,
            trace,
            pid,
            error: None,
        }
    }

    fn t(&self, tid: u32) -> Track {
        Track { pid: self.pid, tid }
    }

    /// Takes the completions and (where they pile up) the records `lp` holds; the final take
    /// reports what the device's verification found (not when commands were abandoned: the
    /// commands cut short are no verdict).
    fn take(&mut self, lp: &LpStream, final_take: bool, abandoned: bool) -> Result<(), Error> {
        let completions = lp.take_completions();
        let v = match self.records_as_they_come || final_take {
            true => Some(lp.verify().context("checking the LP commands")?),
            false => None,
        };
        // Read after what it bounds: everything taken was submitted before.
        let submitted = lp.stats().map_or(0, |s| s.submitted);
        for c in completions {
            self.done.add(c.id, c.ok, submitted);
            if self.trace.is_on() {
                let args = json!({ "submitted_ns": c.stamps.submitted_ns });
                let (t, s, e) = (self.t(LP_QUEUE), c.stamps.launched_ns, c.stamps.completed_ns);
                self.trace.span(t, "lp", format!("LP {}", c.id), s, e, args);
            }
        }
        let Some(v) = v else {
            return Ok(());
        };
        let window = self.window;
        let records = self
            .records
            .get_or_insert_with(|| OnceTally::new(v.records_per_command, Beyond::Ignored, window));
        for r in &v.records {
            records.add(r.id, r.correct, submitted);
        }
        if self.trace.is_on() {
            for (r, w) in v.records.iter().filter_map(|r| r.worker.map(|w| (r, w))) {
                let track = self.t(LP_WORKER0 + u32::try_from(w.worker).unwrap_or(0));
                let args = json!({ "worker": w.worker });
                self.trace
                    .span(track, "lp", format!("LP {}", r.id), w.start_ns, w.end_ns, args);
            }
        }
        if final_take && !abandoned && !v.check.problems.is_empty() {
            eprintln!("preempt-lat: LP commands FAILED verification:");
            for l in &v.check.problems {
                eprintln!("  {l}");
            }
        }
        Ok(())
    }

    /// Drains `lp` (at most `limit`), or once a stop is requested (before or during the drain)
    /// closes it in `session`, takes the rest and returns the check of every command that ran.
    /// `workers`: the host device's LP workers (their tracks are named).
    pub fn finish(
        mut self,
        session: &Session,
        lp: &LpStream,
        mode: Mode,
        limit: Duration,
        workers: u32,
    ) -> Result<(Correctness, Trace), Error> {
        // After a stop's deadline killed the workers, a failed take is that cut.
        if let Some(e) = self.error.take()
            && !abandon::happened()
        {
            return Err(e).with_context(|| mode.name().to_string());
        }
        let drained = stream_idle_or_stop(lp, Some(limit)).context("draining the LP queue")?;
        let settled = if drained {
            Settled {
                ran: lp.stats().map_or(0, |s| s.submitted),
                abandoned: 0,
            }
        } else {
            let gave_up = closed_after_stop(session.close_stream(lp.id()))
                .with_context(|| format!("{}: closing the LP stream", mode.name()))?;
            stream_settled(lp, gave_up)
        };
        self.take(lp, true, settled.abandoned > 0)
            .with_context(|| mode.name().to_string())?;
        self.name_worker_tracks(workers);
        if settled.abandoned > 0 {
            return Ok((Correctness::not_checked(settled.ran, settled.abandoned), self.trace));
        }
        let submitted = settled.ran;
        self.done.finish(submitted);
        let mut records = self
            .records
            .take()
            .unwrap_or_else(|| OnceTally::new(1, Beyond::Ignored, self.window));
        records.finish(submitted);
        Ok((Correctness::from_tallies(submitted, &self.done, &records), self.trace))
    }

    /// Names the host device's LP worker tracks in the trace.
    fn name_worker_tracks(&mut self, workers: u32) {
        if self.records_as_they_come && self.trace.is_on() {
            for w in 0..workers {
                let t = self.t(LP_WORKER0 + w);
                self.trace.name_thread(t, format!("LP worker {w}"));
            }
        }
    }
}

/// Keeps `keep_ahead` LP commands pending (within the stream's capacity) until `stop` (or until
/// a stop's deadline killed the LP workers: what it would submit then fails at once), taking what
/// the stream reports into `check` every [`TAKE_EVERY`].
pub fn feed(lp: &LpStream, lp_ns: u64, keep_ahead: usize, stop: &AtomicBool, mut check: LpCheck) -> LpCheck {
    let nap = Duration::from_nanos((lp_ns / 4).clamp(20_000, 1_000_000));
    let capacity = lp.capacity().unwrap_or(u64::MAX);
    let mut last_take = Instant::now();
    while !stop.load(Ordering::Relaxed) && !abandon::happened() {
        if last_take.elapsed() >= TAKE_EVERY {
            last_take = Instant::now();
            if let Err(e) = check.take(lp, false, false) {
                check.error.get_or_insert(e);
            }
        }
        let st = lp.stats().unwrap_or_default();
        if st.pending < keep_ahead && st.submitted < capacity && lp.submit_delay(lp_ns).is_ok() {
            continue;
        }
        std::thread::sleep(nap);
    }
    check
}
