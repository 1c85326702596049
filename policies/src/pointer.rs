//! RFC 6901 JSON Pointers, built as strings because findings and patches carry them as strings.

/// Escapes one reference token (`~` → `~0`, `/` → `~1`).
pub fn escape(token: &str) -> String {
    if token.contains(['~', '/']) {
        token.replace('~', "~0").replace('/', "~1")
    } else {
        token.to_owned()
    }
}

/// `base` + `/` + escaped `token`.
pub fn join(base: &str, token: &str) -> String {
    let mut out = String::with_capacity(base.len() + token.len() + 1);
    out.push_str(base);
    out.push('/');
    out.push_str(&escape(token));
    out
}

/// `base` + `/` + `index`.
pub fn join_index(base: &str, index: usize) -> String {
    format!("{base}/{index}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_slash_and_tilde_in_annotation_keys() {
        assert_eq!(
            join("/metadata/annotations", "probelint.io/ignore"),
            "/metadata/annotations/probelint.io~1ignore"
        );
        assert_eq!(escape("a~b/c"), "a~0b~1c");
    }

    #[test]
    fn joined_pointer_resolves_with_serde_json() {
        let v = serde_json::json!({"metadata": {"annotations": {"a/b~c": 1}}});
        let p = join("/metadata/annotations", "a/b~c");
        assert_eq!(v.pointer(&p), Some(&serde_json::json!(1)));
    }
}
