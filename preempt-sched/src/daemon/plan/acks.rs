//! Acknowledgements: an order's outcome, what the plan then wants of its stream, and a stalled
//! client waited for again.
use super::state::Timer;
use super::{ClientId, Out, Outcome, Plan, action_of};
use crate::daemon::text::escape;
use crate::proto::{Code, OrderAction, ProtoError};
use hpf::Action;
use std::time::Instant;

impl Plan {
    pub(super) fn ack(
        &mut self,
        c: ClientId,
        order: u64,
        ok: bool,
        error: Option<&str>,
        now: Instant,
        out: &mut Vec<Out>,
    ) -> Result<(), ProtoError> {
        let Some(o) = self.orders.get(&order).filter(|o| o.client == c).copied() else {
            return Err(ProtoError::new(
                Code::OutOfOrder,
                format!("order {order} is not outstanding for this client"),
            ));
        };
        self.orders.remove(&order);
        let key = (c, o.stream);
        let mut unstalled = false;
        if let Some(k) = self.clients.get_mut(&c) {
            k.orders.remove(&order);
            if o.late {
                k.late -= 1;
                unstalled = k.late == 0;
            }
        }
        if !o.late {
            self.timers.remove(&(o.sent + self.ack_timeout, Timer::Ack(order)));
        }
        let suspend = o.action == OrderAction::Suspend;
        if let Some(st) = self.streams.get_mut(&key) {
            st.order = None;
            if ok && st.suspended != suspend {
                st.suspended = suspend;
                if suspend {
                    self.suspended += 1;
                } else {
                    self.suspended -= 1;
                }
            }
            let confirmed = st.suspended;
            if !ok {
                out.push(Out::ClientLog(
                    c,
                    format!(
                        "{}: {:?} of stream {} failed: {}",
                        self.who(c),
                        o.action,
                        o.stream,
                        escape(error.unwrap_or("no reason given"))
                    ),
                ));
                // Still wanted: hpf records what the stream truly is (and tries it again at its
                // next change). Not wanted any more: the stream already is what the plan wants.
                if self.wants_suspended(key) == suspend
                    && let Some(device) = self.device_of(key)
                {
                    self.on_device(device, |p| {
                        p.failed(if suspend {
                            Action::Suspend(key)
                        } else {
                            Action::Resume(key)
                        });
                    });
                }
            }
            let want = self.wants_suspended(key);
            if want != confirmed {
                self.send(key, action_of(want), now, out);
            }
            self.refresh(key, Some(if ok { Outcome::Done } else { Outcome::Failed }), out);
        }
        if unstalled {
            out.push(Out::ClientLog(
                c,
                format!(
                    "{}: acknowledged every late order (the last {} ms after it was sent); its streams are waited for \
                     again",
                    self.who(c),
                    now.saturating_duration_since(o.sent).as_millis()
                ),
            ));
            self.refresh_client(c, None, out);
        }
        Ok(())
    }

    pub(super) fn refresh_client(&mut self, c: ClientId, outcome: Option<Outcome>, out: &mut Vec<Out>) {
        let streams: Vec<u64> = self
            .clients
            .get(&c)
            .map(|k| k.streams.iter().copied().collect())
            .unwrap_or_default();
        for s in streams {
            self.refresh((c, s), outcome, out);
        }
    }
}
