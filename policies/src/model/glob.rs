//! `*` wildcards for policy patterns (`nvidia.com/mig-*`, `batch-*`): the only syntax policies need.

/// Whether `text` matches `pattern`, where `*` matches any run of characters (including none).
pub fn matches(pattern: &str, text: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn literal_patterns_match_exactly() {
        assert!(matches("nvidia.com/gpu", "nvidia.com/gpu"));
        assert!(!matches("nvidia.com/gpu", "nvidia.com/gpu.shared"));
    }

    #[test]
    fn star_matches_any_suffix_prefix_or_middle() {
        assert!(matches("nvidia.com/mig-*", "nvidia.com/mig-1g.12gb"));
        assert!(matches(
            "aws.amazon.com/neuron*",
            "aws.amazon.com/neuroncore"
        ));
        assert!(matches("*-serving", "llm-serving"));
        assert!(matches("a*b*c", "a-x-b-y-c"));
        assert!(!matches("a*b*c", "a-x-c"));
        assert!(matches("*", ""));
        assert!(!matches("ab*ba", "aba"));
    }
}
