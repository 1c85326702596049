//! What the probe knows about each server beyond the engine's table (`KNOWN_SERVERS`: paths,
//! ports, which path generates): how to send it a one-token inference, which of its Prometheus
//! metrics show work waiting and work done, and which 200 answers still mean "not ready". Every
//! fact names the source it was read in; `docs/probe-helper.md` repeats them per server.

/// Metrics from which `live` tells a wedged server from a busy one.
pub struct ProgressMetrics {
    /// Gauges of requests running or waiting: work is in flight when their sum is above zero.
    pub work: &'static [&'static str],
    /// Counters that advance while the engine works: progress is any rise of their sum.
    pub progress: &'static [&'static str],
    /// When the counters advance (said in a stall message, so a reader can size `--window`).
    pub advances: &'static str,
    pub source: &'static str,
}

pub fn progress_metrics(server_id: &str) -> Option<&'static ProgressMetrics> {
    match server_id {
        "vllm" => Some(&VLLM),
        "sglang" => Some(&SGLANG),
        "tgi" => Some(&TGI),
        _ => None,
    }
}

const VLLM: ProgressMetrics = ProgressMetrics {
    work: &["vllm:num_requests_running", "vllm:num_requests_waiting"],
    progress: &["vllm:generation_tokens_total", "vllm:prompt_tokens_total"],
    advances: "every engine step",
    source: "vllm-project/vllm@005a810b vllm/v1/metrics/loggers.py (PrometheusStatLogger.record)",
};

const SGLANG: ProgressMetrics = ProgressMetrics {
    work: &["sglang:num_running_reqs", "sglang:num_queue_reqs"],
    progress: &[
        "sglang:generation_tokens_total",
        "sglang:prompt_tokens_total",
    ],
    advances: "when a request finishes",
    source: "sgl-project/sglang python/sglang/srt/metrics/collector.py \
             (observe_one_finished_request); needs --enable-metrics",
};

const TGI: ProgressMetrics = ProgressMetrics {
    work: &["tgi_queue_size", "tgi_batch_current_size"],
    progress: &["tgi_batch_inference_success"],
    advances: "every prefill and decode step",
    source: "huggingface/text-generation-inference@db931fcf backends/v3/src/backend.rs:170,349-375, \
             backends/v3/src/queue.rs:143-158",
};

/// vLLM's sleep state as a gauge, 1 per awake engine: seen in a newer `vllm/v1/metrics/loggers.py`
/// in the code index (`gauge_engine_sleep_state`, labels `sleep_state` = `awake`,
/// `weights_offloaded`, `discard_all`) but not at an upstream commit read here. So it is only
/// trusted one way: a sum of exactly 0 means every engine sleeps; absent means nothing.
pub const VLLM_AWAKE: &str = r#"vllm:engine_sleep_state{sleep_state="awake"}"#;

/// The cheap path `live` falls back to when a server's metrics are off: one that answers while
/// the HTTP server runs and never generates.
pub fn cheap_live_path(server_id: &str, table_live_path: &'static str) -> &'static str {
    match server_id {
        // SGLang's /health is /health_generate; /ping is an unconditional 200
        // (sgl-project/sglang@0025436e python/sglang/srt/entrypoints/http_server.py).
        "sglang" => "/ping",
        _ => table_live_path,
    }
}

/// The smoke inference: path and body, one token, greedy. `None` when the server's API needs the
/// model's own input (KServe v2: an `--smoke-body` must say it).
pub fn smoke_request(server_id: &str, model: Option<&str>) -> Option<(String, String)> {
    let model_field = model
        .map(|m| format!(r#","model":{}"#, serde_json::Value::from(m)))
        .unwrap_or_default();
    match server_id {
        // TGI's native API (huggingface/text-generation-inference router/src/server.rs).
        "tgi" => Some((
            "/generate".into(),
            r#"{"inputs":"1","parameters":{"max_new_tokens":1,"do_sample":false}}"#.into(),
        )),
        // KServe v2 inference: the body is the model's own tensors, so only the user knows it.
        "triton" | "kserve" | "mlserver" => None,
        // OpenAI-compatible completions; `model` routes llama.cpp's router and picks a served
        // model where several are.
        _ => Some((
            "/v1/completions".into(),
            format!(r#"{{"prompt":"1","max_tokens":1,"temperature":0{model_field}}}"#),
        )),
    }
}

/// The v2 protocol's per-model paths (kserve@aaac4e29 docs/predict-api/v2/required_api.md).
pub fn speaks_v2(server_id: &str) -> bool {
    matches!(server_id, "triton" | "kserve" | "mlserver")
}

/// Dynamo's frontend `/health`: its docs (ai-dynamo/dynamo@0b71cf84
/// docs/observability/health-checks.md) show HTTP 200 with `"status": "unhealthy"` and
/// `"instances": []` before a worker registers; its code answers 503 `"unhealthy"`
/// (lib/llm/src/http/service/health.rs @10a620bf) or 503 `"not_ready"` until discovery is done
/// and then 200 `"healthy"`, with the registered `instances` (same file @0ab2b3f5). Read the
/// same way in all three: ready when `status` is `healthy` and, where listed, some instance is.
pub fn dynamo_health(body: &str) -> Result<String, String> {
    let v: serde_json::Value =
        serde_json::from_str(body).map_err(|e| format!("body is not JSON ({e})"))?;
    let status = v.get("status").and_then(|s| s.as_str()).unwrap_or("");
    if status != "healthy" {
        return Err(format!("body says status {status:?}, not \"healthy\""));
    }
    match v.get("instances").and_then(|i| i.as_array()) {
        Some(list) if list.is_empty() => Err("body lists no worker instances".into()),
        Some(list) => Ok(format!("{} worker instance(s) registered", list.len())),
        None => Ok("status healthy".into()),
    }
}

/// llama.cpp's router mode (no `--model`): `/health` describes the router, not a model.
/// `GET /props` says `"role": "router"`, and `GET /models` lists each model with
/// `status.value` `loaded`, `loading`, `unloaded`, `sleeping`, …
/// (ggml-org/llama.cpp@00dd0816 tools/server/server-models.cpp, `get_router_props`,
/// `get_router_models`).
pub fn is_llama_router(props_body: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(props_body)
        .ok()
        .and_then(|v| v.get("role")?.as_str().map(|r| r == "router"))
        .unwrap_or(false)
}

/// From a router's `/models`: Ok with the loaded model's name, or Err naming what each is doing.
pub fn llama_router_loaded(models_body: &str, want: Option<&str>) -> Result<String, String> {
    let v: serde_json::Value = serde_json::from_str(models_body)
        .map_err(|e| format!("router /models is not JSON ({e})"))?;
    let list = v
        .get("data")
        .and_then(|d| d.as_array())
        .ok_or("router /models has no data list")?;
    let mut states = Vec::new();
    for m in list {
        let id = m.get("id").and_then(|i| i.as_str()).unwrap_or("?");
        let state = m
            .pointer("/status/value")
            .and_then(|s| s.as_str())
            .unwrap_or("?");
        let aliases: Vec<&str> = m
            .get("aliases")
            .and_then(|a| a.as_array())
            .map(|a| a.iter().filter_map(|x| x.as_str()).collect())
            .unwrap_or_default();
        let wanted = want.is_none_or(|w| w == id || aliases.contains(&w));
        if wanted && state == "loaded" {
            return Ok(format!("router has model {id} loaded"));
        }
        if wanted {
            states.push(format!("{id} {state}"));
        }
    }
    Err(match (want, states.is_empty()) {
        (Some(w), true) => format!("router lists no model {w:?}"),
        (None, true) => "router lists no models".into(),
        _ => format!("router has no model loaded ({})", states.join(", ")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dynamo_200_unhealthy_and_empty_instances_are_not_ready() {
        let doc = r#"{"instances":[],"message":"No endpoints available","status":"unhealthy"}"#;
        assert!(dynamo_health(doc).unwrap_err().contains("\"unhealthy\""));
        let new_empty = r#"{"status":"healthy","instances":[],"endpoints":[]}"#;
        assert_eq!(
            dynamo_health(new_empty).unwrap_err(),
            "body lists no worker instances"
        );
        let ok = r#"{"status":"healthy","instances":[{"endpoint":"generate"}]}"#;
        assert!(dynamo_health(ok).is_ok());
        assert!(dynamo_health("<html>").is_err());
    }

    #[test]
    fn llama_router_needs_the_wanted_model_loaded() {
        let body = r#"{"object":"list","data":[
            {"id":"a","aliases":["alpha"],"status":{"value":"unloaded"}},
            {"id":"b","aliases":[],"status":{"value":"loaded","args":[]}}]}"#;
        assert!(llama_router_loaded(body, None).is_ok());
        assert!(llama_router_loaded(body, Some("b")).is_ok());
        assert_eq!(
            llama_router_loaded(body, Some("alpha")).unwrap_err(),
            "router has no model loaded (a unloaded)"
        );
        assert!(llama_router_loaded(body, Some("c")).is_err());
        assert!(is_llama_router(r#"{"role":"router","max_instances":4}"#));
        assert!(!is_llama_router(r#"{"model_path":"/m.gguf"}"#));
    }

    #[test]
    fn smoke_bodies_name_the_model_only_when_asked() {
        let (path, body) = smoke_request("vllm", None).unwrap();
        assert_eq!(path, "/v1/completions");
        assert!(!body.contains("model"));
        let (_, body) = smoke_request("llama-cpp", Some("q\"8")).unwrap();
        assert!(body.ends_with(r#","model":"q\"8"}"#), "{body}");
        assert!(smoke_request("triton", Some("m")).is_none());
    }
}
