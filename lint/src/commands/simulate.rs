//! `probelint simulate FILE`: predict, from the manifest alone, what the kubelet will do to each
//! accelerator container while its model loads (restarts, first-ready time, the timeline), and
//! what a rollout or a node drain of the workload looks like.

use super::ConfigArgs;
use crate::error::{Error, UsageError};
use probelint_policies::simulate::backoff::{
    MEASURED_PROBE_LEAD_SECONDS, MEASURED_RESTART_LATENCY_SECONDS, NodeSettings,
};
use probelint_policies::simulate::fleet::{self, Budget, FleetOutcome, PodStartup, Rollout};
use probelint_policies::simulate::{
    LoadingServer, Outcome, Scenario, Spread, assumptions, scenario_for_pod, secs, simulate, spread,
};
use probelint_policies::{Analysis, ContainerContext};
use probelint_yaml::load::Limits;
use serde_json::{Value, json};
use std::fmt::Write as _;
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// A manifest file, or `-` for standard input.
    #[arg(value_name = "FILE")]
    pub file: String,
    /// Model load time (default: probelint.io/model-load-seconds, else the policy's).
    #[arg(long, value_name = "SECONDS")]
    pub load_seconds: Option<f64>,
    /// Simulate this container (default: every accelerator container).
    #[arg(long, value_name = "NAME")]
    pub container: Option<String>,
    /// Cluster time to simulate, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 1800.0)]
    pub duration: f64,
    /// The server binds its port only after loading (default: it accepts TCP while loading).
    #[arg(long)]
    pub port_opens_after_load: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t = SimulateFormat::Human)]
    pub format: SimulateFormat,
    #[command(flatten)]
    pub config: ConfigArgs,
    #[command(flatten)]
    pub model: ModelArgs,
}

/// `simulate --format`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum SimulateFormat {
    Human,
    Json,
}

/// Which scenario to run.
#[derive(Copy, Clone, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ScenarioKind {
    /// One pod: probes, restarts, first Ready.
    Pod,
    /// A RollingUpdate of the Deployment to a revision whose pods load as simulated.
    Rollout,
    /// `kubectl drain` of a node running the workload's pods, under its PodDisruptionBudget.
    Drain,
    /// The node running the workload's pods is lost: its pods are evicted after the node
    /// controller's grace period and their toleration of the unreachable taint, then replaced.
    NodeLoss,
}

/// What the server does while its model loads.
#[derive(Copy, Clone, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LoadingServerArg {
    /// The port opens only once loaded.
    Refuses,
    /// The port accepts; HTTP answers errors at once (the default).
    Unavailable,
    /// The port accepts; HTTP holds each request until loaded (a failed check takes timeoutSeconds).
    Holds,
}

/// The model's inputs beyond the manifest (`probelint simulate --help` lists them).
#[derive(Clone, Debug, clap::Args)]
pub struct ModelArgs {
    /// pod, rollout (a Deployment's RollingUpdate), drain (a node drain under the PDB) or
    /// node-loss (the node goes away; its pods are replaced after the eviction timeout).
    #[arg(long, value_enum, default_value_t = ScenarioKind::Pod)]
    pub scenario: ScenarioKind,
    /// Seconds from the pod's start to its container's first start (scheduling, image pull,
    /// volume attach, init containers), which the model does not know; default 0.
    #[arg(long, value_name = "SECONDS", default_value_t = 0.0)]
    pub start_offset: f64,
    /// What the server does with probes while loading.
    #[arg(long, value_enum, default_value_t = LoadingServerArg::Unavailable)]
    pub loading_server: LoadingServerArg,
    /// Seconds the server takes to exit on SIGTERM (bounded by the grace period).
    #[arg(long, value_name = "SECONDS", default_value_t = 0.0)]
    pub exit_seconds: f64,
    /// The node's crashLoopBackOff.maxContainerRestartPeriod (KubeletCrashLoopBackOffMax).
    #[arg(long, value_name = "SECONDS")]
    pub max_container_restart_period: Option<f64>,
    /// The node runs the ReduceDefaultCrashLoopBackOffDecay gate (back-off 1 s doubling to 60 s).
    #[arg(long)]
    pub reduced_crashloop_decay: bool,
    /// Seconds from the pod's probe workers' start to its container's start: the probes tick
    /// this long before each period of the container's life (default: as measured on a real
    /// node).
    #[arg(long, value_name = "SECONDS", default_value_t = MEASURED_PROBE_LEAD_SECONDS)]
    pub probe_lead: f64,
    /// Seconds from a killed container's stop to its next start, when no back-off holds it
    /// (default: as measured on a real node).
    #[arg(long, value_name = "SECONDS", default_value_t = MEASURED_RESTART_LATENCY_SECONDS)]
    pub restart_latency: f64,
    /// Drain, node-loss: how many of the workload's pods run on the node (default: all).
    #[arg(long, value_name = "N")]
    pub pods_on_node: Option<u32>,
    /// Node-loss: the kube-controller-manager's --node-monitor-grace-period, from the node's
    /// last heartbeat to its pods marked NotReady and the node tainted unreachable.
    #[arg(long, value_name = "SECONDS", default_value_t = fleet::NODE_MONITOR_GRACE_SECONDS)]
    pub node_monitor_grace_period: f64,
    /// Also draw the timeline, as written and as mutated by probelint, into FILE (SVG).
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
}

impl Default for ModelArgs {
    fn default() -> Self {
        ModelArgs {
            scenario: ScenarioKind::Pod,
            start_offset: 0.0,
            loading_server: LoadingServerArg::Unavailable,
            exit_seconds: 0.0,
            max_container_restart_period: None,
            reduced_crashloop_decay: false,
            probe_lead: MEASURED_PROBE_LEAD_SECONDS,
            restart_latency: MEASURED_RESTART_LATENCY_SECONDS,
            pods_on_node: None,
            node_monitor_grace_period: fleet::NODE_MONITOR_GRACE_SECONDS,
            svg: None,
        }
    }
}

impl ModelArgs {
    fn check(&self) -> Result<(), UsageError> {
        let seconds = |name: &'static str, v: f64| {
            if v.is_finite() && v >= 0.0 {
                Ok(())
            } else {
                Err(UsageError::Seconds(name))
            }
        };
        seconds("--start-offset", self.start_offset)?;
        seconds("--exit-seconds", self.exit_seconds)?;
        seconds("--probe-lead", self.probe_lead)?;
        seconds("--restart-latency", self.restart_latency)?;
        seconds(
            "--node-monitor-grace-period",
            self.node_monitor_grace_period,
        )?;
        if let Some(m) = self.max_container_restart_period
            && !(m.is_finite() && (1.0..=300.0).contains(&m))
        {
            // The kubelet's configuration validation accepts 1 s to 300 s.
            return Err(UsageError::MaxRestartPeriod);
        }
        Ok(())
    }

    fn node(&self) -> NodeSettings {
        let mut node = NodeSettings {
            probe_lead: self.probe_lead,
            restart_latency: self.restart_latency,
            ..NodeSettings::default()
        };
        if self.reduced_crashloop_decay {
            node = node.reduced_decay();
        }
        if let Some(max) = self.max_container_restart_period {
            node = node.max_restart_period(max);
        }
        node
    }
}

/// One simulated container.
struct Run {
    object: probelint_policies::ObjectRef,
    container: String,
    load: f64,
    scenario: Scenario,
    outcome: Outcome,
    spread: Spread,
    notes: Vec<String>,
    /// Where `load` comes from: `--load-seconds`, or the engine's load time and its arithmetic.
    load_from: String,
    warnings: Vec<String>,
    fleet: Option<FleetOutcome>,
    /// The same container after probelint's mutation, when that changes it.
    mutated: Option<(Outcome, Option<FleetOutcome>)>,
}

/// Runs the subcommand; exit 0 when something was simulated.
///
/// # Errors
///
/// Usage errors, a policy that cannot be used, a file that cannot be read or parsed or holds
/// no container to simulate, a scenario the workload cannot run, and output that cannot be
/// written.
pub fn run(req: &Args) -> Result<u8, Error> {
    if !(req.duration.is_finite() && req.duration > 0.0) {
        return Err(UsageError::Duration.into());
    }
    if req
        .load_seconds
        .is_some_and(|l| !(l.is_finite() && l >= 0.0))
    {
        return Err(UsageError::Seconds("--load-seconds").into());
    }
    req.model.check()?;
    // Before anything is read or written: the picture may not replace the manifest (or the
    // policy), named directly or through a link.
    // (A picture that does not exist yet replaces nothing; one that cannot be written is
    // reported when it is written.)
    if let Some(svg) = req.model.svg.as_deref().filter(|p| p.exists()) {
        let inputs: Vec<crate::input::Input> = (req.file != "-")
            .then(|| crate::input::Input::File(std::path::PathBuf::from(&req.file)))
            .into_iter()
            .collect();
        let writes = crate::overlap::Writes {
            flag: "--svg",
            outputs: vec![svg],
            stdout: false,
        };
        crate::overlap::check(&writes, &inputs, req.config.path().as_deref())?;
    }
    let policy = req.config.load()?;
    let limits = Limits::default();
    // Through the one loader: a `kind: List` gives its items, as `check` and `mutate` see them.
    let (name, objects) = crate::load::one_manifest(&req.file, &limits)?;
    let analysis = Analysis::new(&objects, &policy);
    let server = if req.port_opens_after_load {
        LoadingServer::Refuses
    } else {
        match req.model.loading_server {
            LoadingServerArg::Refuses => LoadingServer::Refuses,
            LoadingServerArg::Unavailable => LoadingServer::Unavailable,
            LoadingServerArg::Holds => LoadingServer::Holds,
        }
    };

    let mut runs = Vec::new();
    for cx in analysis.containers() {
        let selected = match req.container.as_deref() {
            Some(name) => &*cx.container.name == name,
            None => cx.container.is_accelerated(),
        };
        if !selected {
            continue;
        }
        // Where the load time comes from: --load-seconds, else the slow end of the engine's
        // (declared, estimated from the manifest, or the policy default), said in a note: a
        // container that survives the slow end survives every load of the range.
        let (load, load_from) = match req.load_seconds {
            Some(seconds) => (seconds, "given with --load-seconds".to_owned()),
            None => {
                let engine = &cx.container.load;
                let end = if engine.is_point() {
                    String::new()
                } else {
                    format!(
                        "; simulated at its slow end, {} s (--load-seconds {} tries the fast end)",
                        engine.slow, engine.fast
                    )
                };
                (
                    engine.slow,
                    format!("model load {}{end}", engine.explained()),
                )
            }
        };
        let configure = |mut s: Scenario| {
            s.server = server;
            s.node = req.model.node();
            s.start_offset = req.model.start_offset;
            s.kill.exit_after_sigterm = req.model.exit_seconds;
            s
        };
        let scenario = configure(scenario_for_pod(cx.pod, cx.container, load, req.duration));
        let outcome = simulate(&scenario);
        let mut warnings = Vec::new();
        if cx
            .pod
            .value
            .get("initContainers")
            .and_then(Value::as_array)
            .is_some_and(|a| !a.is_empty())
            && req.model.start_offset == 0.0
        {
            warnings.push(
                "the pod has init containers: their run time (and image pulls, scheduling) is not \
                 in these times; pass --start-offset SECONDS"
                    .to_owned(),
            );
        }
        let fleet = fleet_of(req, &objects, &cx, &outcome)?;
        // The same container as probelint's mutating webhook would leave it.
        let mutated = mutated_object(cx.workload.object, &policy).and_then(|fixed| {
            let fixed = [fixed];
            let again = Analysis::new(&fixed, &policy);
            let m = again.containers().find(|m| {
                m.container.name == cx.container.name && m.pod.pointer == cx.pod.pointer
            })?;
            let s = configure(scenario_for_pod(m.pod, m.container, load, req.duration));
            let o = simulate(&s);
            let f = fleet_of(req, &objects, &m, &o).ok().flatten();
            Some((o, f))
        });
        runs.push(Run {
            object: probelint_policies::ObjectRef::clone(&cx.workload.object_ref),
            container: cx.container.name.to_string(),
            load,
            spread: spread(&scenario),
            notes: assumptions(cx.container),
            scenario,
            outcome,
            load_from,
            warnings,
            fleet,
            mutated,
        });
    }
    if runs.is_empty() {
        let what = match req.container.as_deref() {
            Some(container) => format!("no container named {container:?}"),
            None => {
                "no accelerator container to simulate (use --container NAME for others)".to_owned()
            }
        };
        return Err(Error::Nothing { name, what });
    }

    if let Some(path) = &req.model.svg {
        let mut panels = Vec::new();
        for r in &runs {
            panels.push(crate::simulate_svg::Panel {
                title: format!("{} {:?}: as written", r.object, r.container),
                outcome: &r.outcome,
                fleet: r.fleet.as_ref(),
                knows_load: true,
            });
            if let Some((o, f)) = &r.mutated {
                panels.push(crate::simulate_svg::Panel {
                    title: format!("{} {:?}: as mutated by probelint", r.object, r.container),
                    outcome: o,
                    fleet: f.as_ref(),
                    knows_load: true,
                });
            }
        }
        let svg = crate::simulate_svg::render(&panels, req.duration).map_err(Error::Draw)?;
        crate::atomic::write(path, svg.as_bytes()).map_err(|error| Error::Picture {
            path: path.display().to_string(),
            error,
        })?;
    }

    let text = if req.format == SimulateFormat::Json {
        let containers: Vec<Value> = runs.iter().map(|r| json_of(r, req)).collect();
        serde_json::to_string_pretty(&json!({ "containers": containers }))? + "\n"
    } else {
        let mut text = String::new();
        for r in &runs {
            human(&mut text, r, req);
        }
        text
    };
    super::print(&text)?;
    Ok(0)
}

/// The object after the mutating webhook's safe fixes; `None` when they change nothing.
fn mutated_object(object: &Value, policy: &probelint_policies::Policy) -> Option<Value> {
    let m = probelint_policies::mutate(object, policy);
    if m.patch.0.is_empty() {
        return None;
    }
    let mut fixed = object.clone();
    json_patch::patch(&mut fixed, &m.patch.0).ok()?;
    Some(fixed)
}

/// The rollout, drain or node loss of the container's workload, when asked for.
fn fleet_of(
    req: &Args,
    objects: &[Value],
    cx: &ContainerContext<'_, '_>,
    outcome: &Outcome,
) -> Result<Option<FleetOutcome>, Error> {
    let object = cx.workload.object;
    let kind = object.get("kind").and_then(Value::as_str).unwrap_or("");
    let pod = PodStartup::from_outcome(outcome);
    // A rollout's or drain's new pods start at the offset too: times are from their creation.
    let horizon = req.duration.max(7200.0);
    match req.model.scenario {
        ScenarioKind::Pod => Ok(None),
        ScenarioKind::Rollout => {
            if kind != "Deployment" {
                return Err(Error::Scenario(format!(
                    "{}: --scenario rollout needs a Deployment (this is a {kind})",
                    cx.workload.object_ref
                )));
            }
            let r = Rollout::from_deployment(object)
                .map_err(|e| Error::Scenario(format!("{}: {e}", cx.workload.object_ref)))?;
            Ok(Some(fleet::rollout(&r, &pod, horizon)))
        }
        ScenarioKind::Drain => {
            let replicas = replicas(object, &cx.workload.object_ref)?;
            // The labels of the pods this container runs in, as the PDB rules read them.
            let labels = cx.pod.labels;
            let namespace = object.pointer("/metadata/namespace");
            let pdb = objects.iter().find(|o| {
                o.get("kind").and_then(Value::as_str) == Some("PodDisruptionBudget")
                    && o.pointer("/metadata/namespace") == namespace
                    && Budget::selects(o, labels)
            });
            let budget = pdb
                .map(|p| Budget::from_pdb(p, replicas))
                .transpose()
                .map_err(|e| Error::Scenario(format!("PodDisruptionBudget: {e}")))?;
            let on_node = req.model.pods_on_node.unwrap_or(replicas);
            Ok(Some(fleet::drain(replicas, on_node, budget, &pod, horizon)))
        }
        ScenarioKind::NodeLoss => {
            // Only a ReplicaSet replaces a pod whose deletion no kubelet confirms: a bare Pod is
            // never replaced, a StatefulSet waits for the confirmation.
            if !matches!(kind, "Deployment" | "ReplicaSet" | "ReplicationController") {
                return Err(Error::Scenario(format!(
                    "{}: --scenario node-loss needs a Deployment, ReplicaSet or \
                     ReplicationController (this is a {kind}: {})",
                    cx.workload.object_ref,
                    match kind {
                        "StatefulSet" => {
                            "a StatefulSet recreates a pod only once its deletion is confirmed, \
                             which the lost node's kubelet never does; that is not modelled"
                        }
                        "Pod" => "a bare Pod is never replaced",
                        _ => "its controller's replacement of a lost pod is not modelled",
                    }
                )));
            }
            let replicas = replicas(object, &cx.workload.object_ref)?;
            let loss =
                fleet::NodeLoss::from_pod_spec(cx.pod.value, req.model.node_monitor_grace_period);
            let on_node = req.model.pods_on_node.unwrap_or(replicas);
            Ok(Some(fleet::node_loss(
                replicas, on_node, &loss, &pod, horizon,
            )))
        }
    }
}

/// Where a node timing comes from: the default is what the node suite measured.
fn measured(value: f64, default: f64) -> &'static str {
    if value == default {
        ", as measured on a real node"
    } else {
        ""
    }
}

fn kubelet_assumed(s: &Scenario) -> Vec<String> {
    vec![
        format!(
            "times are seconds since the pod's start: its container's first start{}; scheduling, \
             image pull, volume attach and init containers are not modelled",
            if s.start_offset > 0.0 {
                format!(" is at {} s (--start-offset)", secs(s.start_offset))
            } else {
                " is 0 (--start-offset to add pull and init time)".to_owned()
            }
        ),
        format!(
            "probe ticks fall {} s before each period from the pod's start (--probe-lead{}); \
             the range below runs other phases",
            secs(s.node.probe_lead),
            measured(s.node.probe_lead, MEASURED_PROBE_LEAD_SECONDS)
        ),
        format!(
            "a restart starts {} s after the container stops or its back-off ends \
             (--restart-latency{})",
            secs(s.node.restart_latency),
            measured(s.node.restart_latency, MEASURED_RESTART_LATENCY_SECONDS)
        ),
        s.node.describe(),
        format!("the server {}", s.server.describe()),
        format!(
            "a kill: preStop {} s, then SIGTERM; the server exits after {} s; grace {} s",
            secs(s.kill.pre_stop),
            secs(s.kill.exit_after_sigterm),
            secs(s.kill.grace)
        ),
    ]
}

fn spread_line(sp: &Spread, duration: f64) -> String {
    let range = |a: f64, b: f64| {
        if (a - b).abs() < 1e-6 {
            format!("{} s", secs(a))
        } else {
            // The latest is just under a tick (phase 0.999): shown rounded down.
            format!("{}–{} s", secs(a), secs((b * 10.0).floor() / 10.0))
        }
    };
    let mut parts = vec![if sp.restarts_min == sp.restarts_max {
        format!("{} restarts", sp.restarts_min)
    } else {
        format!("{}–{} restarts", sp.restarts_min, sp.restarts_max)
    }];
    if let (Some(a), Some(b)) = (sp.first_kill_earliest, sp.first_kill_latest) {
        parts.push(format!("first kill at {}", range(a, b)));
    }
    match (sp.first_ready_earliest, sp.first_ready_latest) {
        (Some(a), Some(b)) if sp.ready_runs == sp.samples => {
            parts.push(format!("first Ready at {}", range(a, b)));
        }
        (Some(a), Some(b)) => parts.push(format!(
            "first Ready at {} in {} of them, never within {} s in the others",
            range(a, b),
            sp.ready_runs,
            secs(duration)
        )),
        _ => parts.push(format!("never Ready within {} s", secs(duration))),
    }
    format!(
        "over {} probe phases and retry jitters: {}",
        sp.samples,
        parts.join("; ")
    )
}

fn summary(o: &Outcome, duration: f64) -> String {
    let ready = match o.first_ready_seconds {
        Some(t) => format!("first Ready at {} s", secs(t)),
        None => format!("never Ready within {} s", secs(duration)),
    };
    let traffic = if o.ready_while_loading_seconds > 0.0 {
        format!(
            "; Ready for {} s before its model was loaded (requests fail)",
            secs(o.ready_while_loading_seconds)
        )
    } else {
        String::new()
    };
    format!(
        "{} restart{} (restartCount), {ready}{traffic}",
        o.restarts,
        if o.restarts == 1 { "" } else { "s" }
    )
}

fn human(out: &mut String, r: &Run, req: &Args) {
    let o = &r.outcome;
    let _ = writeln!(
        out,
        "{}, container {:?} (model load {} s, {} s simulated)",
        r.object,
        r.container,
        secs(r.load),
        secs(req.duration)
    );
    for a in kubelet_assumed(&r.scenario) {
        let _ = writeln!(out, "  kubelet: {a}");
    }
    for a in std::iter::once(&r.load_from).chain(&r.notes) {
        let _ = writeln!(out, "  note: {a}");
    }
    for w in &r.warnings {
        let _ = writeln!(out, "  warning: {w}");
    }
    let _ = writeln!(out, "  {:>7}  {:<9}  {:<7}  event", "t", "probe", "result");
    for t in &o.transitions {
        let _ = writeln!(
            out,
            "  {:>5} s  {:<9}  {:<7}  {}",
            secs(t.t),
            t.subject,
            t.result,
            t.event
        );
    }
    let _ = writeln!(out, "  => {}", summary(o, req.duration));
    let _ = writeln!(out, "     {}", spread_line(&r.spread, req.duration));
    if let Some((m, _)) = &r.mutated {
        let _ = writeln!(
            out,
            "     as mutated by probelint: {}",
            summary(m, req.duration)
        );
    }
    if let Some(f) = &r.fleet {
        fleet_human(out, f, r.mutated.as_ref().and_then(|(_, f)| f.as_ref()));
    }
    let _ = writeln!(out);
}

fn fleet_line(f: &FleetOutcome) -> String {
    let done = match f.done_seconds {
        Some(t) => format!("done in {} s", secs(t)),
        None => format!("not done within {} s", secs(f.horizon_seconds)),
    };
    let mut line = if f.lowest_serving >= f.replicas {
        format!("{done}; serving capacity never below {} pods", f.replicas)
    } else {
        format!(
            "{done}; lowest serving capacity {} of {} pods, for {} s",
            f.lowest_serving,
            f.replicas,
            secs(f.lowest_serving_seconds)
        )
    };
    if let Some(t) = f.progress_deadline_exceeded_seconds {
        let _ = write!(line, "; ProgressDeadlineExceeded at {} s", secs(t));
    }
    if f.scenario == "drain" && f.evictions_refused > 0 {
        let _ = write!(
            line,
            "; {} evictions refused by the PDB",
            f.evictions_refused
        );
    }
    line
}

fn fleet_human(out: &mut String, f: &FleetOutcome, mutated: Option<&FleetOutcome>) {
    let _ = writeln!(
        out,
        "  {} (seconds since it began, {} s simulated; a new pod not Ready within the simulated \
         time of one pod counts as never Ready):",
        f.scenario,
        secs(f.horizon_seconds)
    );
    for (t, e) in &f.events {
        let _ = writeln!(out, "  {:>5} s  {e}", secs(*t));
    }
    let _ = writeln!(out, "  {:>7}  available  serving  old  new", "t");
    for p in &f.points {
        let _ = writeln!(
            out,
            "  {:>5} s  {:>9}  {:>7}  {:>3}  {:>3}",
            secs(p.t),
            p.available,
            p.serving,
            p.old,
            p.new
        );
    }
    let _ = writeln!(out, "  => {} {}", f.scenario, fleet_line(f));
    if let Some(m) = mutated {
        let _ = writeln!(out, "     as mutated by probelint: {}", fleet_line(m));
    }
}

fn json_of(r: &Run, req: &Args) -> Value {
    let o = &r.outcome;
    let mut v = json!({
        "object": r.object,
        "container": r.container,
        "load_seconds": r.load,
        "load_from": r.load_from,
        "time_zero": "the pod's start; the container first starts at start_offset_seconds \
                      (scheduling, image pull, init containers not modelled)",
        "start_offset_seconds": r.scenario.start_offset,
        "kubelet": {
            "backoff": r.scenario.node,
            "loading_server": r.scenario.server,
            "kill": r.scenario.kill,
            "probe_phase": "0: the probe workers' first tick, backoff.probe_lead seconds \
                            before time 0 (the pod's start), on a whole second of the wall clock; \
                            see spread",
        },
        "duration_seconds": r.scenario.duration,
        "assumptions": r.notes,
        "warnings": r.warnings,
        "restarts": o.restarts,
        "first_ready_seconds": o.first_ready_seconds,
        "ready_while_loading_seconds": o.ready_while_loading_seconds,
        "spread": r.spread,
        "transitions": o.transitions,
    });
    if let Some((m, mf)) = &r.mutated {
        v["mutated"] = json!({
            "restarts": m.restarts,
            "first_ready_seconds": m.first_ready_seconds,
            "ready_while_loading_seconds": m.ready_while_loading_seconds,
            "rollout_or_drain": mf,
        });
    }
    if let Some(f) = &r.fleet {
        v[f.scenario] = serde_json::to_value(f).unwrap_or(Value::Null);
    }
    let _ = req;
    v
}

/// `spec.replicas` of a workload: 1 for a Pod, or a workload whose replicas default to 1.
fn replicas(object: &Value, at: &probelint_policies::ObjectRef) -> Result<u32, Error> {
    match object.pointer("/spec/replicas") {
        None | Some(Value::Null) => Ok(1),
        Some(v) => v
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .ok_or_else(|| Error::Scenario(format!("{at}: spec.replicas: {v}"))),
    }
}
