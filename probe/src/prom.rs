//! Just enough of the Prometheus text format (0.0.4) to read a server's own counters and gauges:
//! the sum of every sample of one metric, over all its label sets (vLLM labels per engine, so a
//! data-parallel server has one series per engine), or over those a selector picks
//! (`name{result="ok"}`).

/// Sum of the samples `spec` names: `name` or `name{label="value",...}`; `name_total` counts as
/// `name` (exporters differ on whether a counter's `_total` is part of its name). `None` when no
/// sample matches — the caller must not read "absent" as "zero".
pub fn sum(text: &str, spec: &str) -> Option<f64> {
    let (name, selector) = match spec.split_once('{') {
        Some((n, sel)) => (n, labels(sel.strip_suffix('}').unwrap_or(sel))),
        None => (spec, Vec::new()),
    };
    let total = format!("{name}_total");
    let mut found = None;
    for line in text.lines() {
        let line = line.trim_start();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((sample, sample_labels, value)) = split_sample(line) else {
            continue;
        };
        if (sample != name && sample != total)
            || !selector
                .iter()
                .all(|want| labels(sample_labels).contains(want))
        {
            continue;
        }
        if let Ok(v) = value.parse::<f64>()
            && v.is_finite()
        {
            *found.get_or_insert(0.0) += v;
        }
    }
    found
}

/// `name{labels} value [timestamp]` → (name, labels, value). Label values may hold spaces,
/// braces and escaped quotes, so the label set is skipped quote-aware.
fn split_sample(line: &str) -> Option<(&str, &str, &str)> {
    let name_end = line.find(|c: char| c == '{' || c.is_whitespace())?;
    let name = &line[..name_end];
    let mut rest = &line[name_end..];
    let mut label_text = "";
    if rest.starts_with('{') {
        let close = closing_brace(rest)?;
        label_text = &rest[1..close];
        rest = &rest[close + 1..];
    }
    Some((name, label_text, rest.split_whitespace().next()?))
}

fn closing_brace(s: &str) -> Option<usize> {
    let (mut in_quotes, mut escaped) = (false, false);
    for (i, c) in s.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if in_quotes => escaped = true,
            '"' => in_quotes = !in_quotes,
            '}' if !in_quotes => return Some(i),
            _ => {}
        }
    }
    None
}

/// `a="x",b="y \" z"` → [(a, x), (b, y " z)].
fn labels(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some((key, after)) = rest.split_once('=') {
        let key = key.trim().trim_start_matches(',').trim().to_string();
        let Some(after) = after.trim_start().strip_prefix('"') else {
            break;
        };
        let (mut value, mut escaped, mut end) = (String::new(), false, None);
        for (i, c) in after.char_indices() {
            match c {
                _ if escaped => {
                    value.push(if c == 'n' { '\n' } else { c });
                    escaped = false;
                }
                '\\' => escaped = true,
                '"' => {
                    end = Some(i);
                    break;
                }
                _ => value.push(c),
            }
        }
        let Some(end) = end else { break };
        out.push((key, value));
        rest = &after[end + 1..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const VLLM: &str = r#"# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 2.0
vllm:num_requests_running{engine="1",model_name="m"} 1.0
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="a } \" b"} 10.0
vllm:generation_tokens_created{engine="0",model_name="m"} 1.7e9
"#;

    #[test]
    fn samples_are_summed_over_label_sets_and_total_is_optional() {
        assert_eq!(sum(VLLM, "vllm:num_requests_running"), Some(3.0));
        assert_eq!(sum(VLLM, "vllm:generation_tokens"), Some(10.0));
        assert_eq!(sum(VLLM, "vllm:generation_tokens_total"), Some(10.0));
        assert_eq!(sum(VLLM, "vllm:num_requests_waiting"), None);
    }

    #[test]
    fn a_selector_picks_label_sets() {
        let text = "r_total{result=\"ok\"} 4\nr_total{result=\"timeout\"} 9\nr_total{x=\"1\",result=\"ok\"} 1\n";
        assert_eq!(sum(text, "r{result=\"ok\"}"), Some(5.0));
        assert_eq!(sum(text, "r_total"), Some(14.0));
        assert_eq!(sum(text, "r{result=\"error\"}"), None);
    }

    #[test]
    fn unlabelled_samples_with_timestamps_parse() {
        assert_eq!(
            sum("tgi_queue_size 4 1700000000000\n", "tgi_queue_size"),
            Some(4.0)
        );
        assert_eq!(sum("x NaN\n", "x"), None);
    }
}
