//! The worker's side of its command socket: what it has read and not yet run, and whether a
//! `hold` (host Lv2) keeps it from starting the next command.
//!
//! The worker reads whatever has arrived before it starts each command (see `worker_main`), so
//! the commands queued behind the running one are read ahead of their turn. That is what lets a
//! `hold` sent while a command runs take effect when that command ends: it would otherwise sit
//! behind the queued `run` lines of the same stream. Commands read ahead are run in order, each
//! once, after the `release`.
use super::proto::ToWorker;
use lv1::CommandId;
use std::collections::VecDeque;
use std::io;

/// Commands read and not yet started, the hold, and the `held` answers owed.
#[derive(Debug, Default)]
pub(crate) struct Inbox {
    /// Bytes after the last complete line.
    partial: Vec<u8>,
    queued: VecDeque<(CommandId, u64)>,
    held: bool,
    /// `hold` lines taken in and not yet answered with `held`.
    owed: u32,
}

impl Inbox {
    /// Takes in `bytes` read from the socket: each complete line is a command, applied in order.
    /// A line that is not the protocol is an error naming it.
    pub fn take(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.partial.extend_from_slice(bytes);
        while let Some(end) = self.partial.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.partial.drain(..=end).collect();
            self.apply(&line[..end])?;
        }
        Ok(())
    }

    /// The end of input: a last line without its newline still counts.
    pub fn end(&mut self) -> io::Result<()> {
        let rest = std::mem::take(&mut self.partial);
        if rest.iter().all(u8::is_ascii_whitespace) {
            return Ok(());
        }
        self.apply(&rest)
    }

    fn apply(&mut self, line: &[u8]) -> io::Result<()> {
        let text = String::from_utf8_lossy(line);
        match ToWorker::parse(&text) {
            Some(ToWorker::Run { id, work_ns }) => self.queued.push_back((id, work_ns)),
            Some(ToWorker::Hold) => {
                self.held = true;
                self.owed += 1;
            }
            Some(ToWorker::Release) => self.held = false,
            None => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("bad command: {text:?}"),
                ));
            }
        }
        Ok(())
    }

    /// How many `held` answers are owed (each `hold` gets one), clearing the count.
    pub fn take_owed(&mut self) -> u32 {
        std::mem::take(&mut self.owed)
    }

    /// The next command to start: none while held, or when nothing is queued.
    pub fn next(&mut self) -> Option<(CommandId, u64)> {
        if self.held { None } else { self.queued.pop_front() }
    }

    /// Whether a hold is in force.
    #[cfg(test)]
    pub fn is_held(&self) -> bool {
        self.held
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hold_keeps_queued_commands_back_and_release_runs_each_once_in_order() {
        let mut b = Inbox::default();
        // The hold arrives behind two queued commands, as it does while the first one runs.
        b.take(b"run 1 5\nrun 2 5\nhold\nrun 3 5\n").unwrap();
        assert_eq!(b.take_owed(), 1, "one held answer per hold");
        assert_eq!(b.take_owed(), 0);
        assert!(b.is_held());
        assert_eq!(b.next(), None, "held: nothing starts, queued or not");
        b.take(b"release\n").unwrap();
        let ran: Vec<_> = std::iter::from_fn(|| b.next()).collect();
        assert_eq!(ran, [(1, 5), (2, 5), (3, 5)]);
        assert_eq!(b.next(), None);
    }

    #[test]
    fn lines_split_across_reads_are_joined_and_a_last_line_needs_no_newline() {
        let mut b = Inbox::default();
        b.take(b"run 7 1").unwrap();
        assert_eq!(b.next(), None, "half a line is not a command");
        b.take(b"00\nho").unwrap();
        assert_eq!(b.next(), Some((7, 100)));
        b.take(b"ld\nrelease\nrun 8 2").unwrap();
        assert_eq!((b.take_owed(), b.is_held()), (1, false));
        b.end().unwrap();
        assert_eq!(b.next(), Some((8, 2)));
    }

    #[test]
    fn a_line_outside_the_protocol_is_an_error_naming_it() {
        let e = Inbox::default().take(b"run 1\n").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        assert!(e.to_string().contains("\"run 1\""), "{e}");
        assert!(Inbox::default().take(b"hold 1\n").is_err());
    }
}
