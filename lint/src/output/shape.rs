//! A finding's text shaped for a person reading a terminal: a short headline, then one short
//! line per piece of evidence, and the sources apart.
//!
//! The engine writes each finding as one sentence that carries everything: what is wrong, the
//! arithmetic behind it, the evidence, sometimes the source of a number. That sentence is right
//! for JSON, SARIF and the webhook, which show it whole; at a terminal it is a 300-character
//! line with parentheses three deep. The human renderer cuts it here, without changing what it
//! says: the clause before the first top-level `: ` is the headline (what is wrong, in which
//! container), what follows becomes `= note:` lines (split at top-level `; ` and before a
//! trailing parenthesis), and a citation (`owner/repo@commit …`, a URL, `repo#123`) leaves the
//! sentence for one `= source:` line. Every line is then wrapped to [`WIDTH`].
//!
//! "Top-level" means outside parentheses, brackets, braces, backticks and double quotes, so a
//! `: ` inside `(0 + 3 × 10 = 30 s: the default)` or a quoted command never cuts a sentence.

/// The widest line the human format writes, quoted source lines aside (they are the user's).
pub(super) const WIDTH: usize = 120;

/// The shortest headline budget, whatever the rule id's length.
pub(super) const MIN_HEADLINE: usize = 60;

/// A finding's message, cut for reading.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Shaped {
    pub headline: String,
    pub notes: Vec<String>,
    pub sources: Vec<String>,
}

/// Cuts `message` into a headline of at most `budget` characters, notes and sources (see the
/// module docs).
pub(super) fn message(message: &str, budget: usize) -> Shaped {
    let mut sources = Vec::new();
    let text = take_sources(message, &mut sources);
    let (mut head, mut rest) = match split_once_top(&text, ": ") {
        Some((head, rest)) if !head.trim().is_empty() => {
            (head.trim().to_owned(), Some(rest.trim().to_owned()))
        }
        _ => (text.trim().to_owned(), None),
    };
    // `container "vllm" (requests nvidia.com/gpu): readiness runs …` names only the subject
    // before its colon: the headline takes the first clause after it too, or it would say
    // which container but not what is wrong.
    if let Some(after) = rest.as_deref().filter(|_| names_only_a_subject(&head)) {
        let (first, more) = match split_once_top(after, ": ") {
            Some((first, more)) => (first.trim(), Some(more.trim().to_owned())),
            None => (after, None),
        };
        head = format!("{head}: {first}");
        rest = more;
    }
    let mut notes = Vec::new();
    let headline = short_headline(&head, budget, &mut notes);
    if let Some(rest) = rest {
        notes_of(&rest, 0, &mut notes);
    }
    notes.retain(|n| !n.is_empty());
    Shaped {
        headline,
        notes,
        sources,
    }
}

/// Whether `head` is only a subject: at most three words once its parentheses are left out
/// (`container "vllm" (requests nvidia.com/gpu)`).
fn names_only_a_subject(head: &str) -> bool {
    let mut outside = String::new();
    let mut depth = 0usize;
    for c in head.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            _ if depth == 0 => outside.push(c),
            _ => {}
        }
    }
    outside.split_whitespace().count() <= 3
}

/// One note per top-level `; ` part of `text`, a long trailing parenthesis in a note of its own,
/// and the same again inside it (two levels).
fn notes_of(text: &str, depth: usize, notes: &mut Vec<String>) {
    for part in split_top(text, "; ") {
        let peeled = peel_trailing_parenthesis(part);
        match peeled.as_slice() {
            [before, inner] if depth < 2 => {
                notes.push(before.clone());
                notes_of(inner, depth + 1, notes);
            }
            _ => notes.extend(peeled),
        }
    }
}

/// A help text with its citations taken out into `sources`.
pub(super) fn help(help: &str, sources: &mut Vec<String>) -> String {
    take_sources(help, sources).trim().to_owned()
}

/// Whether two texts say the same (case, spacing and a final full stop aside), or one only
/// repeats the start of the other: then the fix line would repeat the help.
pub(super) fn same_advice(help: &str, fix: &str) -> bool {
    let norm = |s: &str| {
        s.split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .trim_end_matches('.')
            .to_lowercase()
    };
    let (help, fix) = (norm(help), norm(fix));
    !fix.is_empty() && (help == fix || help.starts_with(&fix) || fix.starts_with(&help))
}

/// `text` wrapped at spaces to lines of at most `width` characters (a longer word stays whole),
/// joined by `\n`; the renderer indents each continuation under the first line's text.
pub(super) fn wrap(text: &str, width: usize) -> String {
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        let len = line.chars().count();
        if len > 0 && len + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() || lines.is_empty() {
        lines.push(line);
    }
    lines.join("\n")
}

/// The headline from `head`, at most `budget` characters. One too long loses its trailing
/// parentheses (to the notes, first), then its other top-level parentheses (right to left),
/// then everything after its last top-level `, ` or ` — ` that leaves it short; as a last
/// resort it is cut at a space and the rest starts the notes. Nothing is dropped.
fn short_headline(head: &str, budget: usize, notes: &mut Vec<String>) -> String {
    let fits = |text: &str| text.chars().count() <= budget;
    let mut head = head.to_owned();
    // What leaves the headline: its continuation first, then what its parentheses said.
    let (mut continuation, mut asides) = (Vec::new(), Vec::new());
    while !fits(&head) {
        let parts = peel_trailing_parenthesis(&head);
        if parts.len() < 2 {
            break;
        }
        head = parts[0].clone();
        continuation.insert(0, parts[1].clone());
    }
    let cut_at_clause = |head: &mut String, continuation: &mut Vec<String>| {
        let cut = [", ", " — ", " and ", " because ", " so ", " but ", " with "]
            .iter()
            .flat_map(|sep| {
                top_level_positions(head, sep)
                    .into_iter()
                    .map(move |i| (i, *sep))
            })
            .filter(|&(i, _)| head[..i].chars().count() <= budget && says_enough(&head[..i]))
            .max_by_key(|&(i, _)| i);
        if let Some((i, sep)) = cut {
            let rest = head[i + sep.len()..].trim();
            let rest = match sep {
                ", " | " and " => rest.to_owned(),
                _ => format!("{}{rest}", sep.trim_start()),
            };
            continuation.insert(0, rest);
            head.truncate(i);
            let kept = head.trim_end_matches([',', ';', ':', ' ']).len();
            head.truncate(kept);
        }
    };
    if !fits(&head) {
        cut_at_clause(&mut head, &mut continuation);
    }
    while !fits(&head) {
        // Left first: a subject's aside (`(requests nvidia.com/gpu)`) says least.
        let Some(open) = top_level_positions(&head, "(").first().copied() else {
            break;
        };
        let Some(len) = closing(&head[open..]) else {
            break;
        };
        // The aside with the words it qualifies: `progressDeadlineSeconds 600 s: the default`.
        let before = &head[..open];
        let clause = split_once_top(before, ": ").map_or(before, |(_, after)| after);
        let words: Vec<&str> = clause.split_whitespace().collect();
        // Three words, or four where the third from the end is a unit (`10 s of waiting`).
        let mut from = words.len().saturating_sub(3);
        if from > 0 && words[from].chars().count() <= 2 {
            from -= 1;
        }
        let qualified = words[from..].join(" ");
        let inner = head[open + 1..open + len - 1].trim();
        asides.push(if qualified.is_empty() {
            inner.to_owned()
        } else {
            format!("{qualified}: {inner}")
        });
        let (before, after) = (head[..open].trim_end(), head[open + len..].trim_start());
        let joint = if after.starts_with([':', ',', ';', ')', '.']) {
            ""
        } else {
            " "
        };
        head = format!("{before}{joint}{after}").trim().to_owned();
    }
    if !fits(&head) {
        cut_at_clause(&mut head, &mut continuation);
    }
    if !fits(&head) {
        let limit = head
            .char_indices()
            .nth(budget.saturating_sub(1))
            .map_or(head.len(), |(i, _)| i);
        // At a space outside backticks and quotes, so that no code span is cut in two.
        let cut = top_level_positions(&head, " ")
            .into_iter()
            .rfind(|&i| i <= limit)
            .unwrap_or(limit);
        continuation.insert(0, format!("…{}", head[cut..].trim()));
        head = format!("{}…", head[..cut].trim_end());
    }
    notes.extend(continuation);
    notes.extend(asides);
    head
}

/// Whether a cut headline still says something: three words or more after the subject's `: `,
/// not opening with a preposition (`container "vllm": with no command` does not).
fn says_enough(head: &str) -> bool {
    if head.trim_end().ends_with(':') {
        return false;
    }
    let said = split_once_top(head, ": ").map_or(head, |(_, after)| after);
    let words: Vec<&str> = said.split_whitespace().collect();
    let opens_a_phrase = words.first().is_some_and(|w| {
        [
            "with", "without", "in", "on", "for", "at", "by", "from", "when", "if", "as",
        ]
        .contains(&w.to_lowercase().as_str())
    });
    words.len() >= 3 && !opens_a_phrase
}

/// `text` split before its last top-level parenthesis when the text ends with it and it is
/// long (more than a few words): `a (b)` → [`a`, `b`]. A short one (`(150 s)`) stays.
fn peel_trailing_parenthesis(text: &str) -> Vec<String> {
    let text = text.trim();
    let body = text.trim_end_matches(['.', ',']);
    if !body.ends_with(')') {
        return vec![text.to_owned()];
    }
    let Some(open) = matching_open(body) else {
        return vec![text.to_owned()];
    };
    let inner = &body[open + 1..body.len() - 1];
    let before = body[..open].trim_end();
    if inner.chars().count() < 40 || before.is_empty() {
        return vec![text.to_owned()];
    }
    vec![before.to_owned(), inner.trim().to_owned()]
}

/// The byte index of the `(` that the final `)` of `text` closes.
fn matching_open(text: &str) -> Option<usize> {
    let mut depth = 0usize;
    for (i, c) in text.char_indices().rev() {
        match c {
            ')' => depth += 1,
            '(' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// Byte positions of `sep` in `text` outside brackets, backticks and double quotes.
fn top_level_positions(text: &str, sep: &str) -> Vec<usize> {
    let mut found = Vec::new();
    let (mut depth, mut tick, mut quote) = (0usize, false, false);
    for (i, c) in text.char_indices() {
        if depth == 0 && !tick && !quote && text[i..].starts_with(sep) {
            found.push(i);
        }
        match c {
            '`' if !quote => tick = !tick,
            '"' if !tick => quote = !quote,
            '(' | '[' | '{' if !tick && !quote => depth += 1,
            ')' | ']' | '}' if !tick && !quote => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    found
}

fn split_once_top<'a>(text: &'a str, sep: &str) -> Option<(&'a str, &'a str)> {
    let i = *top_level_positions(text, sep).first()?;
    Some((&text[..i], &text[i + sep.len()..]))
}

fn split_top<'a>(text: &'a str, sep: &str) -> Vec<&'a str> {
    let mut parts = Vec::new();
    let mut start = 0;
    for i in top_level_positions(text, sep) {
        parts.push(text[start..i].trim());
        start = i + sep.len();
    }
    parts.push(text[start..].trim());
    parts
}

/// Whether `text` cites a source: `owner/repo@<7+ hex digits>`, `repo#123`, or a URL.
fn is_citation(text: &str) -> bool {
    if text.contains("://") {
        return true;
    }
    text.split(|c: char| c.is_whitespace() || "(),;".contains(c))
        .any(|word| commit_reference(word) || issue_reference(word))
}

/// `kserve/kserve@aaac4e294`: a repository and at least 7 hex digits of a commit.
fn commit_reference(word: &str) -> bool {
    let Some((repo, commit)) = word.split_once('@') else {
        return false;
    };
    let hex = commit.chars().take_while(char::is_ascii_hexdigit).count();
    repo.contains('/') && !repo.starts_with('/') && (7..=40).contains(&hex)
}

/// `vllm#37133`: a repository name and an issue or pull request number.
fn issue_reference(word: &str) -> bool {
    let Some((repo, number)) = word.split_once('#') else {
        return false;
    };
    !repo.is_empty()
        && repo
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
        && !number.is_empty()
        && number.chars().all(|c| c.is_ascii_digit())
}

/// `text` with its citations moved to `sources`: every parenthesis that cites, and a top-level
/// clause (between `, ` or `; `) that starts with or consists of a citation. A citation that is
/// the whole text stays (nothing would be left to read).
fn take_sources(text: &str, sources: &mut Vec<String>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    // Parentheses first, innermost-first is not needed: a citing parenthesis leaves whole.
    while let Some(open) = top_level_positions(rest, "(").first().copied() {
        let Some(len) = closing(&rest[open..]) else {
            break;
        };
        let inner = &rest[open + 1..open + len - 1];
        if is_citation(inner) {
            out.push_str(rest[..open].trim_end());
            sources.push(inner.trim().to_owned());
        } else {
            out.push_str(&rest[..open + len]);
        }
        rest = &rest[open + len..];
    }
    out.push_str(rest);
    let clauses = split_top(&out, ", ");
    if clauses.len() > 1 && clauses.iter().any(|c| is_citation(c)) {
        let mut kept = Vec::new();
        for clause in clauses {
            if is_citation(clause) && !clause.contains(' ') || starts_with_citation(clause) {
                sources.push(clause.to_owned());
            } else {
                kept.push(clause);
            }
        }
        if !kept.is_empty() {
            out = kept.join(", ");
        }
    }
    out
}

/// `per kserve/kserve@… …`, `see https://…`, `kserve/kserve@… …`: a clause that is a citation.
fn starts_with_citation(clause: &str) -> bool {
    let words: Vec<&str> = clause.split_whitespace().take(2).collect();
    match words.as_slice() {
        [first, ..] if commit_reference(first) || first.contains("://") => true,
        ["per" | "see" | "from" | "in", second] => {
            commit_reference(second) || second.contains("://")
        }
        _ => false,
    }
}

/// The byte length of the parenthesis that opens `text`, through its `)`.
fn closing(text: &str) -> Option<usize> {
    let mut depth = 0usize;
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(i + 1);
                }
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_headline_is_the_clause_before_the_first_top_level_colon() {
        let shaped = message(
            "container `vllm` (requests nvidia.com/gpu) has no startupProbe: its liveness probe \
             (0 + 3 × 10 = 30 s) runs from container start and kills it mid-load (a startup \
             budget needs load ≈ 356–5548 s + 25 %; 671 GB read from PVC \"r1\")",
            90,
        );
        assert_eq!(
            shaped.headline,
            "container `vllm` (requests nvidia.com/gpu) has no startupProbe"
        );
        assert_eq!(
            shaped.notes,
            [
                "its liveness probe (0 + 3 × 10 = 30 s) runs from container start and kills it mid-load",
                "a startup budget needs load ≈ 356–5548 s + 25 %",
                "671 GB read from PVC \"r1\"",
            ]
        );
        assert!(shaped.sources.is_empty());
    }

    #[test]
    fn a_headline_that_names_only_its_container_takes_the_first_clause_too() {
        let shaped = message(
            "container \"triton\" (requests nvidia.com/gpu): startup budget 60 s (6 × 10 s) < \
             113 s (load 90 s from probelint.io/model-load-seconds + 25 %): shorter than the \
             load itself, so every start is killed mid-load",
            84,
        );
        assert_eq!(
            shaped.headline,
            "container \"triton\" (requests nvidia.com/gpu): startup budget 60 s (6 × 10 s) < 113 s"
        );
        assert_eq!(
            shaped.notes,
            [
                "load 90 s from probelint.io/model-load-seconds + 25 %",
                "shorter than the load itself, so every start is killed mid-load",
            ]
        );
        // Tighter: the inner parentheses leave the headline, last first.
        let shaped = message(
            "container \"triton\" (requests nvidia.com/gpu): livenessProbe targets \
             /v2/health/ready, a readiness endpoint: a busy model gets restarted",
            60,
        );
        assert_eq!(
            shaped.headline,
            "container \"triton\": livenessProbe targets /v2/health/ready"
        );
        assert_eq!(
            shaped.notes,
            [
                "a readiness endpoint",
                "container \"triton\": requests nvidia.com/gpu",
                "a busy model gets restarted"
            ]
        );
    }

    #[test]
    fn a_colon_inside_brackets_quotes_or_backticks_does_not_cut() {
        let shaped = message("probe `exec: [sh, -c, \"a: b\"]` (x: y) is slow", 90);
        assert_eq!(
            shaped.headline,
            "probe `exec: [sh, -c, \"a: b\"]` (x: y) is slow"
        );
        assert!(shaped.notes.is_empty());
    }

    #[test]
    fn citations_leave_the_sentence_for_the_source_line() {
        let shaped = message(
            "KServe injects readiness on port 8080 (kserve/kserve@aaac4e294 (2026-08-21), \
             pkg/controller/v1beta1/inferenceservice/utils.go:304-335): the probe never passes",
            90,
        );
        assert_eq!(shaped.headline, "KServe injects readiness on port 8080");
        assert_eq!(shaped.notes, ["the probe never passes"]);
        assert_eq!(
            shaped.sources,
            [
                "kserve/kserve@aaac4e294 (2026-08-21), pkg/controller/v1beta1/inferenceservice/utils.go:304-335"
            ]
        );
        let mut sources = Vec::new();
        let help = help(
            "drop the words, per vllm-project/vllm@048027fb vllm/entrypoints/cli/serve.py, and \
             keep the model (vllm#37133, #22072)",
            &mut sources,
        );
        assert_eq!(help, "drop the words, and keep the model");
        assert_eq!(
            sources,
            [
                "vllm#37133, #22072",
                "per vllm-project/vllm@048027fb vllm/entrypoints/cli/serve.py"
            ]
        );
        // Not citations: an image reference, an e-mail-like word, a fragment.
        for text in [
            "image vllm/vllm-openai@sha256:abc",
            "a@b",
            "port #1",
            "see (x)",
        ] {
            let mut sources = Vec::new();
            assert_eq!(super::help(text, &mut sources), text);
            assert!(sources.is_empty(), "{text}: {sources:?}");
        }
    }

    #[test]
    fn a_long_headline_is_cut_at_a_clause_never_lost() {
        let long = "GPU container `a-very-long-container-name-for-serving` in Deployment \
                    inference/a-very-long-deployment-name, which serves llama, has no probe";
        let shaped = message(long, 90);
        assert!(shaped.headline.chars().count() <= 90, "{shaped:?}");
        let joined = format!("{} {}", shaped.headline, shaped.notes.join(" "));
        for word in long.split_whitespace() {
            assert!(
                joined.contains(word.trim_end_matches(',')),
                "{word}: {shaped:?}"
            );
        }
        let words = "word ".repeat(40);
        let shaped = message(&words, 90);
        assert!(shaped.headline.ends_with('…') && shaped.notes[0].starts_with('…'));
        assert!(shaped.headline.chars().count() <= 90);
    }

    #[test]
    fn help_and_fix_that_say_the_same_are_one() {
        assert!(same_advice("add a startupProbe.", "Add a  startupProbe"));
        assert!(same_advice(
            "add a startupProbe on /health with failureThreshold 15",
            "add a startupProbe on /health"
        ));
        assert!(!same_advice(
            "add a startupProbe whose budget covers the load",
            "add a startupProbe on /health with failureThreshold 15"
        ));
    }

    #[test]
    fn wrap_keeps_every_word_and_the_width() {
        let text = "a ".repeat(100) + "unbreakable-".repeat(15).as_str();
        let wrapped = wrap(&text, 40);
        for line in wrapped.lines() {
            assert!(line.chars().count() <= 40 || !line.contains(' '), "{line}");
        }
        assert_eq!(
            wrapped.split_whitespace().collect::<Vec<_>>(),
            text.split_whitespace().collect::<Vec<_>>()
        );
        assert_eq!(wrap("", 10), "");
    }
}
