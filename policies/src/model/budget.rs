//! The budget arithmetic that rules state in their messages and fixes write into manifests: one
//! function for each number, so that a help text and the fix beside it can never disagree.

use crate::model::load::{Basis, LoadTime};
use crate::model::text::shown;

/// The startup budget a container needs: load × (1 + margin), rounded up to whole seconds.
///
/// Capped at 2^53 s: an absurd `probelint.io/model-load-seconds` ("1e300") must not overflow
/// the arithmetic that rules and fixes do with the result.
pub fn required_startup_seconds(load_seconds: f64, margin: f64) -> i64 {
    const CAP: i64 = 1 << 53;
    ((load_seconds * (1.0 + margin)).ceil() as i64).clamp(-CAP, CAP)
}

/// The smallest `failureThreshold` at which a probe with `period` (> 0) and `initial_delay`
/// covers `needed` seconds: `initial_delay + failureThreshold × period ≥ needed`, and at least 1.
///
/// Rounded up without `remaining + period - 1`, which overflows for huge periods.
pub fn threshold_for(needed: i64, period: i64, initial_delay: i64) -> i64 {
    let remaining = needed.saturating_sub(initial_delay.max(0)).max(period);
    (remaining - 1) / period + 1
}

/// The startup budget a container needs for `load`: its slow end × (1 + margin).
pub fn needed_for(load: &LoadTime, margin: f64) -> i64 {
    required_startup_seconds(load.slow, margin)
}

/// `150 s (load 120 s from probelint.io/model-load-seconds + 25 %)`, or with an estimate
/// `3875 s (the slow end of load ≈ 241–3100 s + 25 %; 141 GB (…) downloaded from the Hugging Face
/// Hub …)`: how the required budget is explained.
pub fn required_arithmetic(load: &LoadTime, margin: f64) -> impl std::fmt::Display + '_ {
    shown(move |f| {
        write!(
            f,
            "{} s ({}load {} + {} %",
            needed_for(load, margin),
            if load.is_point() {
                ""
            } else {
                "the slow end of "
            },
            load.short(),
            (margin * 100.0).round() as i64
        )?;
        match load.basis {
            Basis::Declared => f.write_str(")"),
            _ => write!(f, "; {})", load.derivation()),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn required_arithmetic_reads_well() {
        let declared = LoadTime::point(120.0, Basis::Declared);
        assert_eq!(
            required_arithmetic(&declared, 0.25).to_string(),
            "150 s (load 120 s from probelint.io/model-load-seconds + 25 %)"
        );
        let assumed = LoadTime::point(
            300.0,
            Basis::Assumed {
                why: "no model named".into(),
            },
        );
        assert_eq!(
            required_arithmetic(&assumed, 0.25).to_string(),
            "375 s (load 300 s by policy default + 25 %; no model named)"
        );
    }

    #[test]
    fn threshold_rounds_up_and_is_at_least_one() {
        assert_eq!(threshold_for(150, 10, 0), 15);
        assert_eq!(threshold_for(151, 10, 0), 16);
        // The initial delay counts towards the budget; a negative one counts as none.
        assert_eq!(threshold_for(150, 10, 30), 12);
        assert_eq!(threshold_for(150, 10, -30), 15);
        // Nothing (or less than one period) needed: one failure is still the least there is.
        assert_eq!(threshold_for(0, 10, 0), 1);
        assert_eq!(threshold_for(5, 10, 0), 1);
        assert_eq!(threshold_for(-7, 10, 100), 1);
        // No overflow at the extremes the policy allows.
        assert_eq!(threshold_for(1 << 53, i64::MAX, 0), 1);
        assert_eq!(threshold_for(1 << 53, 1, i64::MIN), 1 << 53);
    }
}
