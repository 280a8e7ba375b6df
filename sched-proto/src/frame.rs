//! Framing: a 4-byte big-endian length, then that many bytes of payload (at most
//! [`MAX_FRAME`]). [`Decoder`] takes bytes as they come (non-blocking reads cut frames anywhere)
//! and yields whole payloads; it never holds more than one read beyond a frame, and a header
//! announcing more than [`MAX_FRAME`] is refused before any of its payload is read.
use std::fmt;

/// The largest payload a frame may carry, in bytes. Every message of the protocol is far below
/// it (names and texts are bounded by [`super::MAX_NAME`] and [`super::MAX_TEXT`]).
pub const MAX_FRAME: usize = 4096;

/// Bytes of the length header.
pub const HEADER: usize = 4;

/// A frame the decoder refuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameError {
    /// The header announces `len` bytes, more than [`MAX_FRAME`]; the stream cannot be
    /// resynchronised, so the connection ends.
    TooLarge {
        /// The announced length.
        len: u64,
    },
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::TooLarge { len } => write!(f, "frame of {len} bytes announced, at most {MAX_FRAME} allowed"),
        }
    }
}

impl std::error::Error for FrameError {}

/// `payload` with its length header; `None` if it is longer than [`MAX_FRAME`].
pub fn encode(payload: &[u8]) -> Option<Vec<u8>> {
    if payload.len() > MAX_FRAME {
        return None;
    }
    let len = u32::try_from(payload.len()).ok()?;
    let mut out = Vec::with_capacity(HEADER + payload.len());
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(payload);
    Some(out)
}

/// Reassembles frames from a byte stream. See the [module documentation](self).
///
/// Taking a frame costs its own length, not the bytes behind it: the frames taken are skipped by
/// an offset and dropped in one move when the next bytes arrive (a read of 64 KiB of tiny frames
/// must not cost a memmove of the rest per frame).
#[derive(Debug, Default)]
pub struct Decoder {
    buf: Vec<u8>,
    /// Bytes of `buf` already taken.
    start: usize,
}

impl Decoder {
    /// An empty decoder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends bytes read from the stream.
    pub fn push(&mut self, bytes: &[u8]) {
        if self.start > 0 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// The next whole payload, `None` until one is complete, or the refusal of an oversized
    /// header (after which the decoder must not be used: the stream is out of step).
    pub fn next_frame(&mut self) -> Result<Option<Vec<u8>>, FrameError> {
        let rest = &self.buf[self.start..];
        let Some(header) = rest.first_chunk::<HEADER>() else {
            return Ok(None);
        };
        let len = u32::from_be_bytes(*header);
        let len_usize = usize::try_from(len).unwrap_or(usize::MAX);
        if len_usize > MAX_FRAME {
            return Err(FrameError::TooLarge { len: u64::from(len) });
        }
        if rest.len() < HEADER + len_usize {
            return Ok(None);
        }
        let payload = rest[HEADER..HEADER + len_usize].to_vec();
        self.start += HEADER + len_usize;
        if self.start == self.buf.len() {
            self.buf.clear();
            self.start = 0;
        }
        Ok(Some(payload))
    }

    /// Bytes held and not yet taken as frames (non-zero at end of stream: a truncated frame).
    pub fn pending(&self) -> usize {
        self.buf.len() - self.start
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_cut_anywhere_come_out_whole_and_in_order() {
        let a = encode(b"first").unwrap();
        let b = encode(b"").unwrap();
        let c = encode(&vec![b'x'; MAX_FRAME]).unwrap();
        let all: Vec<u8> = [a, b, c].concat();
        for cut in [1, 3, 4, 7, 100, all.len()] {
            let mut d = Decoder::new();
            let mut got = Vec::new();
            for chunk in all.chunks(cut) {
                d.push(chunk);
                while let Some(f) = d.next_frame().unwrap() {
                    got.push(f);
                }
            }
            assert_eq!(got.len(), 3, "cut {cut}");
            assert_eq!(got[0], b"first");
            assert!(got[1].is_empty());
            assert_eq!(got[2].len(), MAX_FRAME);
            assert_eq!(d.pending(), 0);
        }
    }

    #[test]
    fn an_oversized_header_is_refused_before_its_payload() {
        assert!(encode(&vec![0; MAX_FRAME + 1]).is_none());
        let mut d = Decoder::new();
        let too_big = u32::try_from(MAX_FRAME + 1).unwrap();
        d.push(&too_big.to_be_bytes());
        assert_eq!(
            d.next_frame(),
            Err(FrameError::TooLarge {
                len: u64::from(too_big)
            })
        );
        let mut d = Decoder::new();
        d.push(&u32::MAX.to_be_bytes());
        assert!(d.next_frame().is_err());
    }

    #[test]
    fn a_truncated_frame_stays_pending() {
        let f = encode(b"hello").unwrap();
        let mut d = Decoder::new();
        d.push(&f[..f.len() - 1]);
        assert_eq!(d.next_frame(), Ok(None));
        assert_eq!(d.pending(), f.len() - 1);
    }
}
