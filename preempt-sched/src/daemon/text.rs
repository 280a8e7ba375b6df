//! Client-supplied text as it goes into the daemon's log: one line, every control character and
//! every character that reorders or hides text escaped, so that a client cannot forge log lines
//! (a newline), hide text (a terminal escape) or make a line read backwards (U+202E RIGHT-TO-LEFT
//! OVERRIDE and the other bidirectional controls).

/// `s` with control, bidirectional and invisible formatting characters written as `\u{..}`
/// (and a backslash as `\\`, so that an escape in the log is always the daemon's).
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
    c.is_control()
        || matches!(c,
            // Bidirectional marks, embeddings, overrides and isolates.
            '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
            // Zero-width and other invisible formatting characters, line and paragraph separators.
            | '\u{200b}'..='\u{200d}' | '\u{2028}' | '\u{2029}' | '\u{2060}'..='\u{2064}' | '\u{feff}'
        )
}

#[cfg(test)]
mod tests {
    use super::escape;

    #[test]
    fn control_and_bidirectional_characters_are_escaped_and_the_rest_kept() {
        assert_eq!(escape("lp-worker 7"), "lp-worker 7");
        assert_eq!(escape("é 漢字"), "é 漢字");
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
