//! What the kubelet did, read back from the API: one `kubectl get pods --watch` for every
//! scenario's pods, each arm's history of pod objects, and its Events at the end. Times are the
//! API's (container `startedAt`, the Ready condition's `lastTransitionTime`, `finishedAt`, in
//! whole seconds), counted from the container's first start, as `simulate` counts them.

use probelint_cluster::Cluster;
use serde_json::Value;
use std::collections::HashMap;
use std::io::{BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

/// How long a pod may take to start its container (image unpacked, sandbox, network).
const START_TIMEOUT: Duration = Duration::from_secs(120);

/// Probe failures reported as `Unhealthy` Events, by probe (each Event's `count` included).
#[derive(Debug, Default, Clone)]
pub struct Unhealthy {
    pub startup: u64,
    pub readiness: u64,
    pub liveness: u64,
}

/// One arm as the API saw it.
#[derive(Debug, Default)]
pub struct Observed {
    /// The container's `restartCount` at the end of the window.
    pub restarts: u32,
    /// Seconds from the first start to the first Ready condition.
    pub first_ready: Option<f64>,
    /// Ready → NotReady transitions after the first Ready (seconds).
    pub not_ready: Vec<f64>,
    /// When a run of the container ended (seconds), with its reason and exit code.
    pub terminations: Vec<(f64, String)>,
    pub unhealthy: Unhealthy,
    /// First time (seconds) of each kind of probe failure Event: `Readiness`, `Liveness`, ….
    pub first_failure: HashMap<String, f64>,
    pub requests_sent: u64,
    pub requests_failed: u64,
    /// Everything above, in time order, for the log.
    pub timeline: Vec<(f64, String)>,
    /// The container's first start, Unix seconds.
    pub origin: f64,
}

type History = Arc<Mutex<HashMap<String, Vec<Value>>>>;

/// The watch on every scenario's pods.
pub struct Observer {
    history: History,
    child: Mutex<Child>,
    cluster: &'static Cluster,
}

impl Drop for Observer {
    fn drop(&mut self) {
        let mut child = self.child.lock().unwrap_or_else(|e| e.into_inner());
        let _ = child.kill();
        let _ = child.wait();
    }
}

impl Observer {
    /// Starts `kubectl get pods -A -l LABEL --watch -o json`; every object it prints is kept,
    /// by the pod's `label` value.
    pub fn start(cluster: &'static Cluster, label: &str) -> Observer {
        let mut child = cluster
            .kubectl()
            .args([
                "get",
                "pods",
                "--all-namespaces",
                "-l",
                label,
                "--watch",
                "-o",
                "json",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run kubectl: {e}"));
        let stdout = child.stdout.take().expect("kubectl's stdout");
        let history: History = Arc::default();
        let sink = Arc::clone(&history);
        let label = label.to_owned();
        std::thread::spawn(move || {
            let stream =
                serde_json::Deserializer::from_reader(BufReader::new(stdout)).into_iter::<Value>();
            for value in stream.map_while(Result::ok) {
                let items = match value["kind"].as_str() {
                    Some("List") => value["items"].as_array().cloned().unwrap_or_default(),
                    _ => vec![value],
                };
                for pod in items {
                    if let Some(id) = pod["metadata"]["labels"][&label].as_str() {
                        let mut history = sink.lock().unwrap_or_else(|e| e.into_inner());
                        history.entry(id.to_owned()).or_default().push(pod.clone());
                    }
                }
            }
        });
        Observer {
            history,
            child: Mutex::new(child),
            cluster,
        }
    }

    fn pods(&self, id: &str) -> Vec<Value> {
        let history = self.history.lock().unwrap_or_else(|e| e.into_inner());
        history.get(id).cloned().unwrap_or_default()
    }

    /// Follows arm `id` (in namespace `ns`) for `duration` seconds from its container's first
    /// start, sending a request a second to the pod while the API says it is Ready when
    /// `traffic`; then reads what happened from the pod's history and the namespace's Events
    /// (read at once: an Event's `count` goes on growing after the window).
    pub fn follow(&self, ns: &str, id: &str, duration: f64, traffic: bool) -> Observed {
        let waiting = Instant::now();
        let origin = loop {
            if let Some(origin) = first_start(&self.pods(id)) {
                break origin;
            }
            assert!(
                waiting.elapsed() < START_TIMEOUT,
                "{id} (namespace {ns}): no container started within {START_TIMEOUT:?}; last \
                 pod status: {:#}",
                self.pods(id)
                    .last()
                    .map(|p| p["status"].clone())
                    .unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(200));
        };
        let mut observed = Observed {
            origin,
            ..Observed::default()
        };
        let mut next_request = Instant::now();
        while unix_now() < origin + duration {
            if traffic && Instant::now() >= next_request {
                next_request += Duration::from_secs(1);
                let pods = self.pods(id);
                if let Some(ip) = pods.last().and_then(ready_ip) {
                    observed.requests_sent += 1;
                    if !infer(&ip) {
                        observed.requests_failed += 1;
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        // Only what the API said within the window counts.
        observed.read_events(self.cluster, ns);
        let pods = self.pods(id);
        summarize(&mut observed, &pods, origin + duration);
        observed
    }
}

impl Observed {
    /// Adds the namespace's `Unhealthy`, `Killing` and `BackOff` Events (reason, count, first
    /// time), read when the window ends.
    fn read_events(&mut self, cluster: &Cluster, ns: &str) {
        let events = cluster.get_json(&["-n", ns, "get", "events"]);
        for event in events["items"].as_array().into_iter().flatten() {
            let reason = event["reason"].as_str().unwrap_or_default();
            let message = event["message"].as_str().unwrap_or_default();
            let count = event["count"].as_u64().unwrap_or(1);
            let first = ["firstTimestamp", "eventTime"]
                .iter()
                .find_map(|f| event[*f].as_str().and_then(parse_time))
                .map(|t| t - self.origin);
            match reason {
                "Unhealthy" => {
                    let probe = message.split_whitespace().next().unwrap_or_default();
                    match probe {
                        "Startup" => self.unhealthy.startup += count,
                        "Readiness" => self.unhealthy.readiness += count,
                        "Liveness" => self.unhealthy.liveness += count,
                        _ => {}
                    }
                    if let Some(t) = first {
                        let entry = self.first_failure.entry(probe.to_owned()).or_insert(t);
                        *entry = entry.min(t);
                        self.timeline
                            .push((t, format!("Event Unhealthy ×{count} (first): {message}")));
                    }
                }
                "Killing" | "BackOff" => {
                    if let Some(t) = first {
                        self.timeline
                            .push((t, format!("Event {reason} ×{count} (first): {message}")));
                    }
                }
                _ => {}
            }
        }
        self.timeline.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
}

/// The earliest container start the pod's history shows (Unix seconds).
fn first_start(pods: &[Value]) -> Option<f64> {
    pods.iter()
        .filter_map(|pod| {
            let status = &pod["status"]["containerStatuses"][0];
            [
                &status["state"]["running"]["startedAt"],
                &status["lastState"]["terminated"]["startedAt"],
                &status["state"]["terminated"]["startedAt"],
            ]
            .iter()
            .filter_map(|v| v.as_str().and_then(parse_time))
            .reduce(f64::min)
        })
        .reduce(f64::min)
}

/// The pod's IP when its Ready condition is True.
fn ready_ip(pod: &Value) -> Option<String> {
    let ready = pod["status"]["conditions"]
        .as_array()?
        .iter()
        .any(|c| c["type"] == "Ready" && c["status"] == "True");
    ready
        .then(|| pod["status"]["podIP"].as_str().map(str::to_owned))
        .flatten()
}

/// One `POST /v1/infer` (the recorded input) to the pod: whether it answered 200 within 5 s.
fn infer(ip: &str) -> bool {
    let Ok(address) = format!("{ip}:8080").parse::<SocketAddr>() else {
        return false;
    };
    let Ok(mut stream) = TcpStream::connect_timeout(&address, Duration::from_secs(5)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let request = format!(
        "POST /v1/infer HTTP/1.1\r\nHost: {ip}\r\nContent-Type: application/json\r\n\
         Content-Length: 2\r\nConnection: close\r\n\r\n{{}}"
    );
    if stream.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut response = Vec::new();
    let _ = stream.take(64 * 1024).read_to_end(&mut response);
    response.starts_with(b"HTTP/1.1 200")
}

/// Restarts, Ready transitions and terminations from the pod objects received before `end`.
fn summarize(observed: &mut Observed, pods: &[Value], end: f64) {
    let origin = observed.origin;
    let mut ready_transitions: Vec<(f64, bool)> = Vec::new();
    let mut starts: Vec<f64> = Vec::new();
    for pod in pods {
        let status = &pod["status"]["containerStatuses"][0];
        let ready = pod["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["type"] == "Ready");
        if let Some(ready) = ready
            && let Some(t) = ready["lastTransitionTime"].as_str().and_then(parse_time)
        {
            let transition = (t, ready["status"] == "True");
            if t <= end && !ready_transitions.contains(&transition) {
                ready_transitions.push(transition);
            }
        }
        for started in [
            &status["state"]["running"]["startedAt"],
            &status["lastState"]["terminated"]["startedAt"],
        ] {
            if let Some(t) = started.as_str().and_then(parse_time)
                && t <= end
                && !starts.contains(&t)
            {
                starts.push(t);
            }
        }
        let terminated = &status["lastState"]["terminated"];
        if let Some(t) = terminated["finishedAt"].as_str().and_then(parse_time)
            && t <= end
        {
            let what = format!(
                "container ended: {} (exit {})",
                terminated["reason"].as_str().unwrap_or("?"),
                terminated["exitCode"]
            );
            if !observed.terminations.iter().any(|(s, _)| *s == t - origin) {
                observed.terminations.push((t - origin, what));
            }
        }
        if let Some(count) = status["restartCount"].as_u64() {
            // The count as of the last object that starts no run after the window.
            let run_started = status["state"]["running"]["startedAt"]
                .as_str()
                .and_then(parse_time);
            if run_started.is_none_or(|t| t <= end) {
                observed.restarts = u32::try_from(count).unwrap_or(u32::MAX);
            }
        }
    }
    ready_transitions.sort_by(|a, b| a.0.total_cmp(&b.0));
    starts.sort_by(f64::total_cmp);
    observed.first_ready = ready_transitions
        .iter()
        .find(|(_, ready)| *ready)
        .map(|(t, _)| t - origin);
    if let Some(first) = observed.first_ready {
        observed.not_ready = ready_transitions
            .iter()
            .filter(|(t, ready)| !*ready && t - origin > first)
            .map(|(t, _)| t - origin)
            .collect();
    }
    for t in &starts {
        observed
            .timeline
            .push((t - origin, "container started".to_owned()));
    }
    for (t, ready) in &ready_transitions {
        let what = if *ready { "Ready" } else { "NotReady" };
        observed
            .timeline
            .push((t - origin, format!("condition {what}")));
    }
    for (t, what) in &observed.terminations {
        observed.timeline.push((*t, what.clone()));
    }
    observed.timeline.sort_by(|a, b| a.0.total_cmp(&b.0));
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// An RFC 3339 UTC time as the API writes it (`2026-12-01T11:44:54Z`, optionally with a
/// fraction), in Unix seconds.
pub fn parse_time(text: &str) -> Option<f64> {
    let text = text.strip_suffix('Z')?;
    let (date, time) = text.split_once('T')?;
    let mut date = date.split('-').map(|p| p.parse::<i64>());
    let (y, m, d) = (date.next()?.ok()?, date.next()?.ok()?, date.next()?.ok()?);
    let mut time = time.split(':');
    let (h, min) = (
        time.next()?.parse::<i64>().ok()?,
        time.next()?.parse::<i64>().ok()?,
    );
    let s = time.next()?.parse::<f64>().ok()?;
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some((days * 86_400 + h * 3_600 + min * 60) as f64 + s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_times_are_unix_seconds() {
        assert_eq!(parse_time("1970-01-01T00:00:00Z"), Some(0.0));
        assert_eq!(parse_time("2026-12-01T11:44:54Z"), Some(1_796_125_494.0));
        assert_eq!(parse_time("2024-02-29T23:59:59.5Z"), Some(1_709_251_199.5));
        assert_eq!(parse_time("2026-12-01 11:44:54"), None);
    }

    #[test]
    fn the_summary_reads_restarts_and_ready_transitions_within_the_window() {
        let pod = |restarts: u64, started: &str, ready: (&str, &str)| {
            serde_json::json!({"status": {
                "conditions": [{"type": "Ready", "status": ready.0, "lastTransitionTime": ready.1}],
                "containerStatuses": [{"restartCount": restarts,
                    "state": {"running": {"startedAt": started}}}]}})
        };
        let pods = [
            pod(0, "2026-12-01T10:00:00Z", ("False", "2026-12-01T10:00:00Z")),
            pod(0, "2026-12-01T10:00:00Z", ("True", "2026-12-01T10:00:12Z")),
            pod(0, "2026-12-01T10:00:00Z", ("False", "2026-12-01T10:00:50Z")),
            pod(1, "2026-12-01T10:02:00Z", ("False", "2026-12-01T10:00:50Z")),
        ];
        let origin = first_start(&pods).unwrap();
        let mut observed = Observed {
            origin,
            ..Observed::default()
        };
        summarize(&mut observed, &pods, origin + 100.0);
        assert_eq!(observed.first_ready, Some(12.0));
        assert_eq!(observed.not_ready, vec![50.0]);
        assert_eq!(
            observed.restarts, 0,
            "the restart at 120 s is after the window"
        );
    }
}
