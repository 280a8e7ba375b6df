//! Client-supplied text as it goes into the daemon's log: one line of printable ASCII, every
//! other character escaped, so that a client cannot forge log lines (a newline), hide text (a
//! terminal escape, zero-width and tag characters) or make a line read backwards (U+202E
//! RIGHT-TO-LEFT OVERRIDE). Unicode has many invisible and reordering characters, and more come
//! with each version: a list of the bad ones would always be one short, so only what is known to
//! be harmless passes.

/// `s` with every character but printable ASCII written as `\u{..}` (and a backslash as `\\`,
/// so that an escape in the log is always the daemon's).
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c == '\\' {
            out.push_str("\\\\");
        } else if needs_escape(c) {
            out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    out
}

fn needs_escape(c: char) -> bool {
    !(' '..='~').contains(&c)
}

#[cfg(test)]
mod tests {
    use super::escape;

    #[test]
    fn everything_but_printable_ascii_is_escaped() {
        assert_eq!(escape("lp-worker 7"), "lp-worker 7");
        assert_eq!(escape("é"), "\\u{e9}", "even harmless letters: the log is ASCII");
        for invisible in ['\u{ad}', '\u{180e}', '\u{fff9}', '\u{e0041}', '\u{200b}'] {
            assert_eq!(
                escape(&invisible.to_string()),
                format!("\\u{{{:x}}}", u32::from(invisible))
            );
        }
        assert_eq!(
            escape("a\nclient 9 (root) connected"),
            "a\\u{a}client 9 (root) connected"
        );
        assert_eq!(escape("evil\u{202e}txt.exe"), "evil\\u{202e}txt.exe");
        assert_eq!(escape("\u{1b}[2J"), "\\u{1b}[2J");
        assert_eq!(escape("\u{2067}x\u{2069}\u{200b}"), "\\u{2067}x\\u{2069}\\u{200b}");
        assert_eq!(
            escape("a\\u{a}"),
            "a\\\\u{a}",
            "a client cannot write an escape of its own"
        );
    }
}
