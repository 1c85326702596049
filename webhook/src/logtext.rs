//! Request text in log lines.
//!
//! With `--log-format text` a field is written as it is: a uid, name or namespace holding a
//! newline would end the review's line and start a forged one (`... INFO review uid=x
//! decision=allowed`), and a carriage return or an escape sequence would hide what precedes it
//! on a terminal. tracing-subscriber escapes only some terminal controls (ESC, BEL, BS, FF, DEL,
//! C1), not line breaks. So every field that comes from a request is written through [`Text`],
//! which, in the text format, escapes control characters, Unicode line and paragraph
//! separators, and the backslash (so that an escape cannot be faked either). The JSON format
//! needs none of this: serde_json escapes every control character inside its strings, and
//! [`Text`] writes its value unchanged there, so JSON logs keep the exact value.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};

static ESCAPE: AtomicBool = AtomicBool::new(false);

/// Escape request text in log fields from now on (the text format).
pub fn escape_request_text() {
    ESCAPE.store(true, Ordering::Relaxed);
}

/// A field that comes from a request.
pub struct Text<'a>(pub &'a str);

fn needs_escape(c: char) -> bool {
    c.is_control() || c == '\\' || c == '\u{2028}' || c == '\u{2029}'
}

impl fmt::Display for Text<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !ESCAPE.load(Ordering::Relaxed) || !self.0.contains(needs_escape) {
            return f.write_str(self.0);
        }
        write_escaped(f, self.0)
    }
}

fn write_escaped(f: &mut impl fmt::Write, text: &str) -> fmt::Result {
    for c in text.chars() {
        match c {
            '\n' => f.write_str("\\n")?,
            '\r' => f.write_str("\\r")?,
            '\t' => f.write_str("\\t")?,
            '\\' => f.write_str("\\\\")?,
            c if needs_escape(c) => write!(f, "\\u{{{:x}}}", c as u32)?,
            c => f.write_char(c)?,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn escaped(text: &str) -> String {
        let mut out = String::new();
        write_escaped(&mut out, text).expect("write");
        out
    }

    #[test]
    fn line_breaks_controls_and_backslashes_are_escaped_and_the_rest_kept() {
        assert_eq!(
            escaped("a\nb\r\tc\\d\u{1b}[2K\u{0}\u{85}\u{2028}é-名"),
            "a\\nb\\r\\tc\\\\d\\u{1b}[2K\\u{0}\\u{85}\\u{2028}é-名"
        );
        assert_eq!(escaped("llama-3-70b"), "llama-3-70b");
    }
}
