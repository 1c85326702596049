//! Message pieces that write themselves into the message that shows them, instead of into a
//! `String` of their own that is copied there and freed: every finding's message is built from
//! a few of them.

use std::fmt;

/// A piece of text written by `write` wherever it is formatted (`{}`).
pub(crate) fn shown<F>(write: F) -> impl fmt::Display
where
    F: Fn(&mut fmt::Formatter<'_>) -> fmt::Result,
{
    struct Shown<F>(F);
    impl<F: Fn(&mut fmt::Formatter<'_>) -> fmt::Result> fmt::Display for Shown<F> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            (self.0)(f)
        }
    }
    Shown(write)
}
