//! What a text edit changed, line by line: for tests that check an edit touched only the lines
//! it should.

use similar::{DiffOp, TextDiff};

/// The 0-based original lines the diff deletes or changes, and the number of lines it adds. A
/// last line that only gains a line break (text inserted after it) is not a change.
pub fn changed_lines(before: &str, after: &str) -> (Vec<usize>, usize) {
    let terminated = |t: &str| {
        if t.ends_with('\n') {
            t.to_owned()
        } else {
            format!("{t}\n")
        }
    };
    let (before, after) = (terminated(before), terminated(after));
    let diff = TextDiff::from_lines(&before, &after);
    let mut removed = Vec::new();
    let mut added = 0;
    for op in diff.ops() {
        match *op {
            DiffOp::Equal { .. } => {}
            DiffOp::Delete {
                old_index, old_len, ..
            } => removed.extend(old_index..old_index + old_len),
            DiffOp::Insert { new_len, .. } => added += new_len,
            DiffOp::Replace {
                old_index,
                old_len,
                new_len,
                ..
            } => {
                removed.extend(old_index..old_index + old_len);
                added += new_len;
            }
        }
    }
    (removed, added)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_line_is_reported_and_an_appended_line_break_is_not() {
        assert_eq!(changed_lines("a\nb\nc\n", "a\nB\nc\n"), (vec![1], 1));
        assert_eq!(changed_lines("a\nb", "a\nb\nc\n"), (vec![], 1));
    }
}
