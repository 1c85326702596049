//! Measures what one review costs in memory: the peak RSS of this process (`VmHWM`) while one
//! review is evaluated, as a multiple of the review's body. One review per run, so that each
//! peak is its own:
//!
//! ```text
//! cargo run --release -p probelint-webhook --example review_memory -- SHAPE COUNT LAYOUT MODE
//! ```
//!
//! - `SHAPE`: `containers` (a Deployment of COUNT copies of a GPU container without probes,
//!   what the engine does most work for), `minimal` (the same with the fewest bytes a GPU
//!   container can take), `numbers` (a ConfigMap-like object with an array of
//!   COUNT small integers: the most values per byte), `objects` (an array of COUNT `{}`),
//!   `strings` (an array of COUNT one-letter strings), `keys` (an object with COUNT keys);
//! - `LAYOUT`: `compact` or `pretty` (serde_json's two-space layout);
//! - `MODE`: `parse` (the parse alone), `validate`, `warn` or `mutate`.
//!
//! Prints one line: body bytes, the body's shape as the webhook measures it, the peak RSS over
//! the process's RSS before the review, and that as a multiple of the body. Evaluated with the
//! allocator the binary uses (mimalloc).

use probelint_policies::Policy;
use probelint_webhook::review::{self, Mode};
use serde_json::{Value, json};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn status_kib(field: &str) -> u64 {
    let text = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    text.lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn review_of(object: Value) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "0b6c5a3e-0000-4000-8000-000000000001",
            "kind": {"group": "apps", "version": "v1", "kind": "Deployment"},
            "resource": {"group": "apps", "version": "v1", "resource": "deployments"},
            "name": "big",
            "namespace": "default",
            "operation": "CREATE",
            "userInfo": {"username": "someone"},
            "object": object,
        }
    })
}

fn deployment(containers: Vec<Value>, extra: Value) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "big", "namespace": "default", "annotations": {"x": extra}},
        "spec": {
            "selector": {"matchLabels": {"app": "big"}},
            "template": {
                "metadata": {"labels": {"app": "big"}},
                "spec": {"containers": containers}
            }
        }
    })
}

fn gpu_container(i: usize) -> Value {
    json!({
        "name": format!("c{i}"),
        "image": "vllm/vllm-openai:v0.6.3",
        "args": ["--model", "meta-llama/Llama-3.1-8B-Instruct"],
        "ports": [{"containerPort": 8000}],
        "resources": {"limits": {"nvidia.com/gpu": "1"}}
    })
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [flag, file, mode] = &args[..]
        && flag == "--eval"
    {
        return eval(file, mode);
    }
    let [shape, count, layout, mode] = &args[..] else {
        eprintln!("usage: review_memory SHAPE COUNT compact|pretty parse|validate|warn|mutate");
        std::process::exit(2);
    };
    let count: usize = count.parse().expect("COUNT is a number");
    let one = || gpu_container(0);
    let object = match shape.as_str() {
        "containers" => deployment((0..count).map(gpu_container).collect(), json!("")),
        "minimal" => deployment(
            (0..count)
                .map(|i| {
                    json!({"name": format!("c{i}"), "image": "vllm/vllm-openai",
                        "resources": {"limits": {"nvidia.com/gpu": 1}}})
                })
                .collect(),
            json!(""),
        ),
        "numbers" => deployment(vec![one()], json!(vec![0; count])),
        "objects" => deployment(vec![one()], json!(vec![json!({}); count])),
        "strings" => deployment(vec![one()], json!(vec!["a"; count])),
        "keys" => deployment(
            vec![one()],
            Value::Object((0..count).map(|i| (format!("k{i}"), json!(0))).collect()),
        ),
        other => panic!("unknown shape {other}"),
    };
    let review = review_of(object);
    let body = match layout.as_str() {
        "compact" => serde_json::to_vec(&review),
        "pretty" => serde_json::to_vec_pretty(&review),
        other => panic!("unknown layout {other}"),
    }
    .expect("JSON");
    // Evaluated by a fresh process: building the review here left this one's heap grown.
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("review.json");
    std::fs::write(&file, &body).expect("write the review");
    let out = std::process::Command::new(std::env::current_exe().expect("own path"))
        .arg("--eval")
        .arg(&file)
        .arg(mode)
        .output()
        .expect("run the evaluation");
    print!("{shape:<10} {count:>8} {layout:<7} {mode:<8} ");
    print!("{}", String::from_utf8_lossy(&out.stdout));
    eprint!("{}", String::from_utf8_lossy(&out.stderr));
}

fn eval(file: &str, mode: &str) {
    let body = std::fs::read(file).expect("read the review");
    if mode == "engine" {
        // The parse and the engine's findings, no answer.
        let policy = Policy::builtin().expect("built-in policy");
        let before = status_kib("VmRSS:") * 1024 - body.len() as u64;
        std::fs::write("/proc/self/clear_refs", "5").expect("reset VmHWM");
        let mut request = probelint_webhook::admission::parse(&body).expect("parses");
        let object = Value::Object(request.object.take().expect("object"));
        let findings = probelint_policies::evaluate_one(&object, &policy);
        let peak = status_kib("VmHWM:") * 1024;
        println!(
            "{} findings; peak +{:.1} MiB",
            findings.len(),
            peak.saturating_sub(before) as f64 / 1048576.0
        );
        return;
    }
    let mode = match mode {
        "parse" => None,
        "validate" => Some(Mode::Validate),
        "warn" => Some(Mode::Warn),
        "mutate" => Some(Mode::Mutate),
        other => panic!("unknown mode {other}"),
    };
    let policy = Policy::builtin().expect("built-in policy");
    // `WARM=1`: one small review first, so that what the first review of a process sets up
    // once (the engine's tables, the allocator's first pages) is in the baseline, as it is in a
    // serving webhook.
    if std::env::var_os("WARM").is_some() {
        let warm = serde_json::to_vec(&review_of(deployment(vec![gpu_container(0)], json!(""))))
            .expect("JSON");
        let _ = review::admit(&warm, Mode::Mutate, &policy);
        let _ = review::admit(&warm, Mode::Validate, &policy);
    }
    let shape = probelint_webhook::cost::Shape::of(&body);
    let predicted = shape.review_bytes();
    // The body is resident before the review starts, as in the webhook; the peak counts it.
    let before = status_kib("VmRSS:") * 1024 - body.len() as u64;
    // The high-water mark starts again from the present RSS (Linux: 5 to clear_refs).
    std::fs::write("/proc/self/clear_refs", "5").expect("reset VmHWM");
    let start = std::time::Instant::now();
    let answer = match mode {
        // Only the parse into the request (the object as a JSON map).
        None => {
            let request = probelint_webhook::admission::parse(&body).expect("parses");
            let _ = std::hint::black_box(&request);
            Vec::new()
        }
        Some(mode) => review::admit(&body, mode, &policy)
            .expect("parses")
            .review
            .to_json(),
    };
    let elapsed = start.elapsed();
    let peak = status_kib("VmHWM:") * 1024;
    let delta = peak.saturating_sub(before);
    println!(
        "body {} B, {} values, {} members, {} string bytes; peak +{:.1} MiB = {:.1}x body; \
         predicted {:.1} MiB ({:.2}x measured); answer {} B; {:.0} ms",
        body.len(),
        shape.values(),
        shape.members,
        shape.string_bytes,
        delta as f64 / 1048576.0,
        delta as f64 / body.len() as f64,
        predicted as f64 / 1048576.0,
        predicted as f64 / delta.max(1) as f64,
        answer.len(),
        elapsed.as_secs_f64() * 1000.0,
    );
}
