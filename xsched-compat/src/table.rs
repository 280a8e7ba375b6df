//! The process's HwQueues and XQueues: handles are numbers handed out here and looked up here,
//! never pointers, so an unknown or stale handle from a caller is an error, not a crash.
use crate::types::{Handle, XResult};
use std::collections::HashMap;

/// An XQueue: its HwQueue and what the program asked of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct XQueue {
    pub hwq: Handle,
    /// `XPreemptLevel` as asked (recorded; the queue runs at Lv3 whatever it is).
    pub level: i64,
    pub flags: i64,
    /// `XQueueSetLaunchConfig`'s values, recorded: Lv3 needs no launch window.
    pub threshold: Option<i64>,
    pub batch_size: Option<i64>,
    /// The last XSched priority hinted, if any.
    pub priority: Option<i32>,
}

/// Both tables. One counter numbers both kinds of handle, so an XQueue handle given where a
/// HwQueue handle is expected (or the reverse) is not found rather than taken for another queue.
#[derive(Default)]
pub struct Tables {
    last: Handle,
    /// HwQueue handle -> its HIP stream (as a number).
    hwqs: HashMap<Handle, usize>,
    xqs: HashMap<Handle, XQueue>,
}

impl Tables {
    fn fresh(&mut self) -> Handle {
        self.last += 1;
        self.last
    }

    /// A HwQueue for `stream`: one per stream, so wrapping it again answers the one there is
    /// (as XSched does).
    pub fn add_hwq(&mut self, stream: usize) -> Result<Handle, XResult> {
        if let Some((h, _)) = self.hwqs.iter().find(|(_, s)| **s == stream) {
            return Ok(*h);
        }
        let h = self.fresh();
        self.hwqs.insert(h, stream);
        Ok(h)
    }

    /// Forgets a HwQueue; refused while an XQueue is built on it.
    pub fn remove_hwq(&mut self, hwq: Handle) -> Result<(), XResult> {
        if !self.hwqs.contains_key(&hwq) {
            return Err(XResult::ErrorNotFound);
        }
        if self.xqs.values().any(|x| x.hwq == hwq) {
            return Err(XResult::ErrorNotAllowed);
        }
        self.hwqs.remove(&hwq);
        Ok(())
    }

    /// An XQueue on `hwq`: one per HwQueue, so asking again answers the one there is (as
    /// XSched does; its level and flags stay as first asked).
    pub fn add_xq(&mut self, hwq: Handle, level: i64, flags: i64) -> Result<Handle, XResult> {
        if !self.hwqs.contains_key(&hwq) {
            return Err(XResult::ErrorNotFound);
        }
        if let Ok(x) = self.xq_of(hwq) {
            return Ok(x);
        }
        let h = self.fresh();
        let q = XQueue {
            hwq,
            level,
            flags,
            threshold: None,
            batch_size: None,
            priority: None,
        };
        self.xqs.insert(h, q);
        Ok(h)
    }

    /// The XQueue built on `hwq`.
    pub fn xq_of(&self, hwq: Handle) -> Result<Handle, XResult> {
        self.xqs
            .iter()
            .find(|(_, x)| x.hwq == hwq)
            .map(|(h, _)| *h)
            .ok_or(XResult::ErrorNotFound)
    }

    pub fn xq(&self, xq: Handle) -> Result<&XQueue, XResult> {
        self.xqs.get(&xq).ok_or(XResult::ErrorNotFound)
    }

    pub fn xq_mut(&mut self, xq: Handle) -> Result<&mut XQueue, XResult> {
        self.xqs.get_mut(&xq).ok_or(XResult::ErrorNotFound)
    }

    /// The HIP stream under an XQueue.
    pub fn stream(&self, xq: Handle) -> Result<usize, XResult> {
        let q = self.xq(xq)?;
        self.hwqs.get(&q.hwq).copied().ok_or(XResult::ErrorNotFound)
    }

    pub fn remove_xq(&mut self, xq: Handle) -> Result<XQueue, XResult> {
        self.xqs.remove(&xq).ok_or(XResult::ErrorNotFound)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_are_checked() {
        let mut t = Tables::default();
        let h = t.add_hwq(0x10).unwrap();
        assert_eq!(t.add_hwq(0x10), Ok(h), "the HwQueue there is");
        assert_ne!(t.add_hwq(0x20), Ok(h));
        assert_eq!(t.add_xq(h + 100, 3, 0), Err(XResult::ErrorNotFound));
        let x = t.add_xq(h, 1, 0).unwrap();
        assert_ne!(x, h);
        assert_eq!(t.add_xq(h, 3, 0), Ok(x), "the XQueue there is");
        assert_eq!(t.xq(x).unwrap().level, 1);
        assert_eq!(
            t.add_xq(x, 1, 0),
            Err(XResult::ErrorNotFound),
            "an XQueue handle is no HwQueue"
        );
        assert_eq!(t.xq_of(h), Ok(x));
        assert_eq!(t.stream(x), Ok(0x10));
        assert_eq!(t.stream(h), Err(XResult::ErrorNotFound));
        assert_eq!(t.remove_hwq(h), Err(XResult::ErrorNotAllowed));
        assert!(t.remove_xq(x).is_ok());
        assert_eq!(t.remove_xq(x), Err(XResult::ErrorNotFound));
        assert_eq!(t.remove_hwq(h), Ok(()));
        assert_eq!(t.remove_hwq(h), Err(XResult::ErrorNotFound));
    }
}
