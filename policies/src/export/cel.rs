//! CEL literals: strings, lists of strings, and the policy's `*` patterns as predicates.

/// A CEL string literal: single-quoted, with backslashes and quotes escaped.
pub(super) fn quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('\'');
    for ch in text.chars() {
        match ch {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            '\n' => out.push_str("\\n"),
            _ => out.push(ch),
        }
    }
    out.push('\'');
    out
}

/// A CEL list of string literals.
pub(super) fn list<'a>(items: impl IntoIterator<Item = &'a str>) -> String {
    let items: Vec<String> = items.into_iter().map(quote).collect();
    format!("[{}]", items.join(", "))
}

/// A predicate that holds where the policy's pattern matches `var` (`*` matches any run of
/// characters, as `model::glob` does).
pub(super) fn glob(var: &str, pattern: &str) -> String {
    let parts: Vec<&str> = pattern.split('*').collect();
    match parts.as_slice() {
        [literal] => format!("{var} == {}", quote(literal)),
        [prefix, ""] => format!("{var}.startsWith({})", quote(prefix)),
        ["", suffix] => format!("{var}.endsWith({})", quote(suffix)),
        _ => {
            let regex: Vec<String> = parts.iter().map(|p| regex_escape(p)).collect();
            format!(
                "{var}.matches({})",
                quote(&format!("^{}$", regex.join(".*")))
            )
        }
    }
}

fn regex_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for ch in text.chars() {
        if "\\.+*?()|[]{}^$".contains(ch) {
            out.push('\\');
        }
        out.push(ch);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_escape_what_would_end_the_literal() {
        assert_eq!(quote(r"a'b\c"), r"'a\'b\\c'");
    }

    #[test]
    fn patterns_become_the_cheapest_predicate_that_matches_the_same_names() {
        assert_eq!(glob("k", "nvidia.com/gpu"), "k == 'nvidia.com/gpu'");
        assert_eq!(
            glob("k", "nvidia.com/mig-*"),
            "k.startsWith('nvidia.com/mig-')"
        );
        assert_eq!(glob("k", "*-gpu"), "k.endsWith('-gpu')");
        assert_eq!(glob("k", "a.*b*c"), r"k.matches('^a\\..*b.*c$')");
    }
}
