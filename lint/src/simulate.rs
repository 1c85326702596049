//! `probelint simulate FILE`: predict, from the manifest alone, what the kubelet will do to each
//! accelerator container while its model loads (restarts, first-ready time, the timeline).

use crate::inputs::Input;
use crate::lint::read_input;
use crate::yaml::{self, Limits};
use probelint_policies::engine::Analysis;
use probelint_policies::simulate::{Outcome, assumptions, scenario_for, simulate};
use serde_json::{Value, json};
use std::fmt::Write as _;
use std::io::Write;
use std::path::{Path, PathBuf};

/// What the user asked for.
pub struct Request<'a> {
    pub file: &'a str,
    pub load_seconds: Option<f64>,
    pub container: Option<&'a str>,
    pub duration: f64,
    pub json: bool,
    pub port_opens_after_load: bool,
    pub config: Option<&'a Path>,
}

/// Runs the subcommand; exit 0 when something was simulated.
pub fn run(req: &Request<'_>) -> Result<u8, String> {
    if !(req.duration.is_finite() && req.duration > 0.0) {
        return Err("--duration must be a positive number of seconds".to_owned());
    }
    if req
        .load_seconds
        .is_some_and(|l| !(l.is_finite() && l >= 0.0))
    {
        return Err("--load-seconds must be a number of seconds ≥ 0".to_owned());
    }
    let policy = crate::config::load_or_discover(req.config)?;
    let limits = Limits::default();
    let input = if req.file == "-" {
        Input::Stdin
    } else {
        Input::File(PathBuf::from(req.file))
    };
    let source = read_input(&input, &limits);
    let bytes = source.bytes.map_err(|e| format!("{}: {e}", source.name))?;
    let objects: Vec<Value> = yaml::parse_stream(&bytes, &limits)
        .map_err(|e| format!("{}: {e}", source.name))?
        .into_iter()
        .map(|d| d.value)
        .collect();
    let analysis = Analysis::new(&objects, &policy);

    let mut results = Vec::new();
    for cx in analysis.containers() {
        let selected = match req.container {
            Some(name) => cx.container.name == name,
            None => cx.container.is_accelerated(),
        };
        if !selected {
            continue;
        }
        // Where the load time comes from: --load-seconds, else the engine's (declared, estimated
        // from the manifest, or the policy default), said in a note.
        let (load, load_from) = match req.load_seconds {
            Some(seconds) => (seconds, "given with --load-seconds".to_owned()),
            None => (
                cx.container.load.seconds,
                format!("model load {}", cx.container.load.explained()),
            ),
        };
        let mut scenario = scenario_for(cx.container, load, req.duration);
        scenario.port_open_during_load = !req.port_opens_after_load;
        let outcome = simulate(&scenario);
        results.push((
            cx.workload.object_ref.clone(),
            cx.container.name.clone(),
            load,
            outcome,
            assumptions(cx.container),
            load_from,
        ));
    }
    if results.is_empty() {
        return Err(match req.container {
            Some(name) => format!("{}: no container named {name:?}", source.name),
            None => format!(
                "{}: no accelerator container to simulate (use --container NAME for others)",
                source.name
            ),
        });
    }

    let text = if req.json {
        let containers: Vec<Value> = results
            .iter()
            .map(|(object, container, load, o, assumed, load_from)| {
                json!({
                    "object": object,
                    "container": container,
                    "load_seconds": load,
                    "load_from": load_from,
                    "assumptions": assumed,
                    "restarts": o.restarts,
                    "first_ready_seconds": o.first_ready_seconds,
                    "ready_while_loading_seconds": o.ready_while_loading_seconds,
                    "transitions": o.transitions,
                })
            })
            .collect();
        serde_json::to_string_pretty(&json!({ "containers": containers }))
            .map_err(|e| e.to_string())?
            + "\n"
    } else {
        let mut text = String::new();
        for (object, container, load, outcome, assumed, load_from) in &results {
            human(
                &mut text,
                &object.to_string(),
                container,
                (*load, req.duration),
                std::iter::once(load_from).chain(assumed),
                outcome,
            );
        }
        text
    };
    std::io::stdout()
        .lock()
        .write_all(text.as_bytes())
        .map_err(|e| format!("cannot write output: {e}"))?;
    Ok(0)
}

fn human(
    out: &mut String,
    object: &str,
    container: &str,
    (load, duration): (f64, f64),
    notes: impl Iterator<Item = impl std::fmt::Display>,
    o: &Outcome,
) {
    let _ = writeln!(
        out,
        "{object}, container {container:?} (model load {load} s, {duration} s simulated)"
    );
    for note in notes {
        let _ = writeln!(out, "  note: {note}");
    }
    let _ = writeln!(out, "  {:>7}  {:<9}  {:<7}  event", "t", "probe", "result");
    for t in &o.transitions {
        let _ = writeln!(
            out,
            "  {:>5} s  {:<9}  {:<7}  {}",
            t.t, t.probe, t.result, t.event
        );
    }
    let ready = match o.first_ready_seconds {
        Some(t) => format!("first Ready at {t} s"),
        None => format!("never Ready within {duration} s"),
    };
    let traffic = if o.ready_while_loading_seconds > 0.0 {
        format!(
            "; Ready for {} s before its model was loaded (requests fail)",
            o.ready_while_loading_seconds
        )
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        "  => {} restart{}, {ready}{traffic}\n",
        o.restarts,
        if o.restarts == 1 { "" } else { "s" }
    );
}
