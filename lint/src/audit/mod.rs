//! `probelint audit`: the workloads a live cluster runs, judged by the same engine and policy as
//! `probelint PATH`, each finding beside what the cluster has already seen of it (restarts, last
//! terminations, the kubelet's probe-failure Events, time from start to Ready).
//!
//! Read-only and polite: `list` only (paginated, [`PAGE`] objects a request), a client-side
//! timeout on every request, one request per kind for the whole scope.
//!
//! Bounded against an apiserver (or a proxy in front of it) that misbehaves: each page must be
//! answered whole within `--request-timeout` (not only between reads: a slow drip ends), an
//! answer is read up to [`MAX_ANSWER_BYTES`], a list stops after [`MAX_PAGES`] pages or at a
//! `continue` token seen before (each is reported for its kind, and the rest is audited), and
//! the whole run ends within `--deadline` ([`RUN_DEADLINE`] by default). A kind the user may not
//! list is reported (which verb on which resource, in which namespace) and the rest is audited;
//! an unreachable cluster or rejected credentials stop the run with what to do.
//!
//! Pods whose controller is listed give their evidence as they are read and are dropped
//! (`evidence::Streamed`): memory follows what is kept, not the pods read. Built-in kinds are
//! read typed (k8s-openapi); the custom resources model serving runs on
//! (LeaderWorkerSet, KServe, Ray, NIM, Knative, Argo Rollouts, JobSet) and the policy's own
//! `workloads` are found through discovery and read as dynamic objects.

mod error;
pub mod evidence;
pub mod render;
pub mod timeline;

pub use error::AuditError;
use evidence::{Support, WorkloadEvidence};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{Event, Pod, ReplicationController};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::discovery::{Discovery, Scope as ApiScope, verbs};
use kube::{Client, Config};
use probelint_policies::{Finding, ObjectRef, Policy, evaluate_cross, evaluate_object};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::fmt::Debug;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Objects per list request: kubectl's chunk size.
pub const PAGE: u32 = 500;
/// Pages one list may take: 500,000 objects of a kind, far past any cluster's (the scalability
/// envelope is 150,000 pods), short of a list that never ends.
pub const MAX_PAGES: usize = 1_000;
/// The most one answer may hold. A page of 500 Pods is tens of MB at most (~44 KB a Pod with
/// managedFields; 256 KB would take an object's whole last-applied annotation); what passes
/// this is refused for its kind, not read further into memory.
pub const MAX_ANSWER_BYTES: usize = 128 * 1024 * 1024;
/// The whole audit, discovery to report, ends within this by default (`--deadline`): past it,
/// the run stops and says so.
pub const RUN_DEADLINE: Duration = Duration::from_secs(15 * 60);

/// The custom resources model serving runs on, by API group, that the engine judges. Listed
/// when the cluster serves them; reported as skipped (with `--verbose`) when it does not.
const SERVING_CRDS: &[(&str, &str)] = &[
    ("leaderworkerset.x-k8s.io", "LeaderWorkerSet"),
    ("serving.kserve.io", "InferenceService"),
    ("serving.kserve.io", "LLMInferenceService"),
    ("serving.kserve.io", "ServingRuntime"),
    ("serving.kserve.io", "ClusterServingRuntime"),
    ("ray.io", "RayService"),
    ("ray.io", "RayCluster"),
    ("ray.io", "RayJob"),
    ("apps.nvidia.com", "NIMService"),
    ("serving.knative.dev", "Service"),
    ("argoproj.io", "Rollout"),
    ("jobset.x-k8s.io", "JobSet"),
];

/// The groups whose kinds are read typed; discovery never lists them again as dynamic objects.
const TYPED_GROUPS: &[&str] = &[
    "",
    "apps",
    "batch",
    "autoscaling",
    "policy",
    "events.k8s.io",
];

/// What the user asked for.
pub struct Request<'a> {
    pub kubeconfig: Option<&'a Path>,
    pub context: Option<&'a str>,
    /// `None` with `all_namespaces` false: the context's namespace, as kubectl.
    pub namespace: Option<&'a str>,
    pub all_namespaces: bool,
    pub selector: Option<&'a str>,
    pub request_timeout: Duration,
    /// The whole run's limit (`--deadline`).
    pub deadline: Duration,
    /// Draw each workload's timeline (`--timeline`): also list the Events it reads.
    pub timeline: bool,
    /// The user's price of a GPU-hour (`--gpu-hour-cost`), in their currency.
    pub gpu_hour_cost: Option<f64>,
    /// The audit's clock (seconds since the epoch): where a timeline's axis ends.
    pub now: i64,
}

/// Which namespaces were audited.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    All,
    Namespace(String),
}

/// One finding, named by its cluster coordinates, with what the evidence says about it.
#[derive(Debug, Clone)]
pub struct AuditFinding {
    pub finding: Finding,
    /// `Deployment/ns/name`.
    pub coordinates: String,
    pub support: Support,
}

/// A judged workload: what its pods have been through, and how many findings it has.
#[derive(Debug, Clone)]
pub struct AuditedWorkload {
    pub object: ObjectRef,
    pub coordinates: String,
    pub evidence: WorkloadEvidence,
    pub findings: usize,
    /// Findings the evidence bears out.
    pub supported: usize,
    /// What its probes cost (GPU time lost to kills, first Ready against the prediction).
    pub cost: timeline::Cost,
    /// With `--timeline`: its pods on one axis, the prediction beside them.
    pub timeline: Option<timeline::Timeline>,
}

/// A request that failed without stopping the audit (a forbidden kind, a list that broke off).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListError {
    /// `deployments.apps`, `events`.
    pub resource: String,
    /// `None`: all namespaces (or a cluster-scoped resource).
    pub namespace: Option<String>,
    pub message: String,
}

/// Something deliberately not audited, and why (`--verbose` lists them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    pub what: String,
    pub reason: String,
}

/// The whole result of an audit.
#[derive(Debug, Clone)]
pub struct Audit {
    /// The apiserver's URL.
    pub server: String,
    /// The apiserver's version (`v1.34.4`), which the version-dependent rules judge by.
    pub version: Option<String>,
    /// The kubeconfig context, or `in-cluster`.
    pub context: String,
    pub scope: Scope,
    /// Objects judged (workloads, HPAs, PDBs).
    pub objects: usize,
    /// Sorted by coordinates, then container, then rule.
    pub findings: Vec<AuditFinding>,
    /// Ranked: most restarts caused by probes first, then most restarts, then most findings.
    pub workloads: Vec<AuditedWorkload>,
    pub errors: Vec<ListError>,
    pub skipped: Vec<Skipped>,
    /// `--gpu-hour-cost`, for the report to name its unit.
    pub gpu_hour_cost: Option<f64>,
}

impl Audit {
    pub fn active(&self) -> impl Iterator<Item = &AuditFinding> {
        self.findings.iter().filter(|f| !f.finding.is_suppressed())
    }
}

/// Runs an audit to the end. `Err` only when nothing can be audited: no configuration, an
/// unreachable cluster, rejected credentials.
pub fn run(request: &Request<'_>, policy: &Policy) -> Result<Audit, AuditError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(AuditError::Runtime)?;
    runtime.block_on(async {
        match tokio::time::timeout(request.deadline, audit(request, policy)).await {
            Ok(result) => result,
            Err(_) => Err(AuditError::Deadline(request.deadline)),
        }
    })
}

/// Where the client configuration came from, for messages.
enum Origin {
    File(PathBuf),
    Env(String),
    InCluster,
}

/// Loads the client configuration the way kubectl does: `--kubeconfig`, else `KUBECONFIG`
/// (several paths merged), else `~/.kube/config`, else the pod's service account.
async fn load_config(request: &Request<'_>) -> Result<(Config, String), AuditError> {
    let options = KubeConfigOptions {
        context: request.context.map(str::to_owned),
        cluster: None,
        user: None,
    };
    let home_config = std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".kube/config"));
    let env = std::env::var("KUBECONFIG").ok().filter(|v| !v.is_empty());
    let origin = match (request.kubeconfig, &env, &home_config) {
        (Some(path), _, _) => Origin::File(path.to_owned()),
        (None, Some(env), _) => Origin::Env(env.clone()),
        (None, None, Some(home)) if home.exists() => Origin::File(home.clone()),
        _ if std::env::var_os("KUBERNETES_SERVICE_HOST").is_some() => Origin::InCluster,
        _ => {
            return Err(AuditError::NoKubeconfig);
        }
    };
    let context_name = |kubeconfig: &Kubeconfig| {
        request
            .context
            .map(str::to_owned)
            .or_else(|| kubeconfig.current_context.clone())
            .unwrap_or_default()
    };
    match origin {
        Origin::File(path) => {
            let kubeconfig = match Kubeconfig::read_from(&path) {
                Ok(kubeconfig) => kubeconfig,
                Err(error) => return Err(AuditError::ReadKubeconfig { path, error }),
            };
            let name = context_name(&kubeconfig);
            let config = match Config::from_custom_kubeconfig(kubeconfig, &options).await {
                Ok(config) => config,
                Err(error) => return Err(AuditError::Kubeconfig { path, error }),
            };
            Ok((config, name))
        }
        Origin::Env(paths) => {
            let kubeconfig = match Kubeconfig::from_env() {
                Ok(Some(kubeconfig)) => kubeconfig,
                Ok(None) => return Err(AuditError::KubeconfigEnvEmpty { paths }),
                Err(error) => return Err(AuditError::ReadKubeconfigEnv { paths, error }),
            };
            let name = context_name(&kubeconfig);
            let config = match Config::from_custom_kubeconfig(kubeconfig, &options).await {
                Ok(config) => config,
                Err(error) => return Err(AuditError::KubeconfigEnv { paths, error }),
            };
            Ok((config, name))
        }
        Origin::InCluster => {
            if let Some(context) = request.context {
                return Err(AuditError::ContextWithoutKubeconfig {
                    context: context.to_owned(),
                });
            }
            let config = Config::incluster().map_err(AuditError::InCluster)?;
            Ok((config, "in-cluster".to_owned()))
        }
    }
}

/// An error and its causes, `outer: inner: innermost`, without repeating a cause an outer
/// message already quotes.
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// Why a request failed, in a user's words: either the audit carries on without it, or nothing
/// more can be asked of this cluster.
enum Failure {
    /// 404: the cluster does not serve the resource.
    Missing,
    /// Reported; the audit carries on.
    Partial(String),
    /// Unreachable, timed out, or credentials rejected.
    Fatal(AuditError),
}

fn classify(error: &kube::Error, what: &str, server: &str) -> Failure {
    match error {
        kube::Error::Api(status) if status.code == 404 => Failure::Missing,
        kube::Error::Api(status) if status.code == 401 => {
            Failure::Fatal(AuditError::Unauthorized {
                server: server.to_owned(),
                message: status.message.clone(),
            })
        }
        kube::Error::Api(status) if status.code == 403 => Failure::Partial(format!(
            "forbidden: {} (the audit needs `list` on it; see the ClusterRole in the README)",
            status.message
        )),
        kube::Error::Api(status) => Failure::Partial(format!(
            "{what}: the apiserver answered {} {}: {}",
            status.code, status.reason, status.message
        )),
        kube::Error::SerdeError(e) => Failure::Partial(format!("{what}: unreadable answer: {e}")),
        other if chain(other).contains("length limit exceeded") => Failure::Partial(format!(
            "{what}: the answer is larger than {} MiB (length limit exceeded); not read further",
            MAX_ANSWER_BYTES / (1024 * 1024)
        )),
        other => {
            let detail = chain(other);
            let detail = detail.trim_start_matches("ServiceError: ");
            let what = if detail.contains("deadline has elapsed") {
                format!("no answer within --request-timeout ({detail})")
            } else {
                detail.to_owned()
            };
            Failure::Fatal(AuditError::Unreachable {
                server: server.to_owned(),
                what,
            })
        }
    }
}

/// An apiserver answer, read up to [`MAX_ANSWER_BYTES`] (past it, reading fails with "length
/// limit exceeded").
fn limit_answer<B>(response: http::Response<B>) -> http::Response<http_body_util::Limited<B>> {
    response.map(|body| http_body_util::Limited::new(body, MAX_ANSWER_BYTES))
}

/// Why a list stopped.
#[derive(Debug)]
enum ListFailure {
    Kube(kube::Error),
    /// The apiserver did not finish a page within the request timeout.
    Slow {
        page: usize,
        timeout: Duration,
    },
    /// A `continue` token came back that this list had already followed.
    Loop {
        page: usize,
    },
    /// More than [`MAX_PAGES`] pages.
    Endless,
}

/// Lists every object of `api` matching `params`, a page at a time, as the JSON the engine
/// reads (typed objects serialise their apiVersion and kind; managedFields are dropped: no rule
/// reads them and they are the bulk of each object). Each page's items are read one by one
/// from its answer and handed to `keep` ([`PageSeed`]): a page of 500 is never held as 500
/// objects, only as its text. Each page must come whole within `timeout`; the list stops at a
/// `continue` token seen before and after [`MAX_PAGES`] pages.
async fn list_all<K>(
    api: &Api<K>,
    client: &Client,
    params: &ListParams,
    timeout: Duration,
    keep: &mut dyn FnMut(Value) -> Option<Value>,
) -> Result<Vec<Value>, ListFailure>
where
    K: kube::Resource + Clone + DeserializeOwned + Debug + Serialize,
{
    let mut out = Vec::new();
    let mut params = params.clone().limit(PAGE);
    let mut seen = std::collections::HashSet::new();
    for page_number in 1..=MAX_PAGES {
        let mut request = kube::core::Request::new(api.resource_url())
            .list(&params)
            .map_err(|e| ListFailure::Kube(kube::Error::BuildRequest(e)))?;
        request.extensions_mut().insert("list");
        // The text as kube's own `list` reads it (API errors become `kube::Error::Api`).
        let text = tokio::time::timeout(timeout, client.request_text(request))
            .await
            .map_err(|_| ListFailure::Slow {
                page: page_number,
                timeout,
            })?
            .map_err(ListFailure::Kube)?;
        let token = serde::de::DeserializeSeed::deserialize(
            PageSeed::<K> {
                keep: &mut *keep,
                out: &mut out,
                item: std::marker::PhantomData,
            },
            &mut serde_json::Deserializer::from_str(&text),
        )
        .map_err(|e| ListFailure::Kube(kube::Error::SerdeError(e)))?;
        match token {
            Some(token) if !token.is_empty() => {
                if !seen.insert(token.clone()) {
                    return Err(ListFailure::Loop { page: page_number });
                }
                params = params.continue_token(&token);
            }
            _ => return Ok(out),
        }
    }
    Err(ListFailure::Endless)
}

/// One list answer read item by item: each of `items` is read as `K`, turned into the engine's
/// JSON without its managedFields and given to `keep`, whose answer is added to `out`; the
/// value is the page's `continue` token. Memory follows what `keep` keeps, not the page.
struct PageSeed<'a, K> {
    keep: &'a mut dyn FnMut(Value) -> Option<Value>,
    out: &'a mut Vec<Value>,
    item: std::marker::PhantomData<K>,
}

impl<'de, K: DeserializeOwned + Serialize> serde::de::DeserializeSeed<'de> for PageSeed<'_, K> {
    type Value = Option<String>;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de, K: DeserializeOwned + Serialize> serde::de::Visitor<'de> for PageSeed<'_, K> {
    type Value = Option<String>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a list answer (metadata and items)")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut token = None;
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            match key.as_ref() {
                "metadata" => {
                    let meta: k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta =
                        map.next_value()?;
                    token = meta.continue_;
                }
                "items" => map.next_value_seed(ItemsSeed::<K> {
                    keep: &mut *self.keep,
                    out: &mut *self.out,
                    item: std::marker::PhantomData,
                })?,
                _ => {
                    map.next_value::<serde::de::IgnoredAny>()?;
                }
            }
        }
        Ok(token)
    }
}

/// The `items` of a list answer, for [`PageSeed`] (`null`: none).
struct ItemsSeed<'a, K> {
    keep: &'a mut dyn FnMut(Value) -> Option<Value>,
    out: &'a mut Vec<Value>,
    item: std::marker::PhantomData<K>,
}

impl<'de, K: DeserializeOwned + Serialize> serde::de::DeserializeSeed<'de> for ItemsSeed<'_, K> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, K: DeserializeOwned + Serialize> serde::de::Visitor<'de> for ItemsSeed<'_, K> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a list's items")
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(item) = seq.next_element::<K>()? {
            let mut value = serde_json::to_value(&item).map_err(serde::de::Error::custom)?;
            drop(item);
            if let Some(meta) = value.get_mut("metadata").and_then(Value::as_object_mut) {
                meta.remove("managedFields");
            }
            self.out.extend((self.keep)(value));
        }
        Ok(())
    }
}

/// A built-in namespaced kind the audit lists typed (k8s-openapi).
trait Typed:
    kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
    + Clone
    + DeserializeOwned
    + Debug
    + Serialize
{
}

impl<K> Typed for K where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + DeserializeOwned
        + Debug
        + Serialize
{
}

/// The context of one audit: the client, the scope, and what has gone wrong so far.
struct Lister<'a> {
    client: Client,
    server: String,
    /// `--request-timeout`: for each page, whole.
    timeout: Duration,
    scope: &'a Scope,
    errors: Vec<ListError>,
    skipped: Vec<Skipped>,
}

impl Lister<'_> {
    fn namespace(&self) -> Option<String> {
        match self.scope {
            Scope::All => None,
            Scope::Namespace(ns) => Some(ns.clone()),
        }
    }

    /// Records a failed list; `Err` when the audit cannot go on.
    fn failed(&mut self, resource: &str, error: &ListFailure) -> Result<(), AuditError> {
        let failure = match error {
            ListFailure::Kube(error) => classify(error, &format!("list {resource}"), &self.server),
            ListFailure::Slow { page, timeout } => Failure::Partial(format!(
                "list {resource}: page {page} did not arrive whole within --request-timeout \
                 ({} s); stopped listing it",
                timeout.as_secs_f64()
            )),
            ListFailure::Loop { page } => Failure::Partial(format!(
                "list {resource}: page {page} sent a continue token already followed (a \
                 broken apiserver or proxy would list forever); stopped listing it"
            )),
            ListFailure::Endless => Failure::Partial(format!(
                "list {resource}: more than {MAX_PAGES} pages of {PAGE}; stopped listing it \
                 (audit one namespace at a time, -n, or with a --selector)"
            )),
        };
        match failure {
            Failure::Missing => {
                self.skipped.push(Skipped {
                    what: resource.to_owned(),
                    reason: "this cluster does not serve it".to_owned(),
                });
                Ok(())
            }
            Failure::Partial(message) => {
                self.errors.push(ListError {
                    resource: resource.to_owned(),
                    namespace: self.namespace(),
                    message,
                });
                Ok(())
            }
            Failure::Fatal(error) => Err(error),
        }
    }

    async fn typed<K>(
        &mut self,
        resource: &str,
        params: &ListParams,
    ) -> Result<Vec<Value>, AuditError>
    where
        K: Typed,
    {
        self.typed_keeping::<K>(resource, params, &mut Some).await
    }

    /// [`Self::typed`], keeping of each object what `keep` returns, as it is read (`None`:
    /// nothing), so that a long list is never held whole.
    async fn typed_keeping<K>(
        &mut self,
        resource: &str,
        params: &ListParams,
        keep: &mut dyn FnMut(Value) -> Option<Value>,
    ) -> Result<Vec<Value>, AuditError>
    where
        K: Typed,
    {
        let api: Api<K> = match self.scope {
            Scope::All => Api::all(self.client.clone()),
            Scope::Namespace(ns) => Api::namespaced(self.client.clone(), ns),
        };
        match list_all(&api, &self.client, params, self.timeout, keep).await {
            Ok(items) => Ok(items),
            Err(e) => self.failed(resource, &e).map(|()| Vec::new()),
        }
    }

    async fn dynamic(
        &mut self,
        resource: &ApiResource,
        scope: &ApiScope,
        params: &ListParams,
    ) -> Result<Vec<Value>, AuditError> {
        let api: Api<DynamicObject> = match (scope, self.scope) {
            (ApiScope::Namespaced, Scope::Namespace(ns)) => {
                Api::namespaced_with(self.client.clone(), ns, resource)
            }
            _ => Api::all_with(self.client.clone(), resource),
        };
        let name = if resource.group.is_empty() {
            resource.plural.clone()
        } else {
            format!("{}.{}", resource.plural, resource.group)
        };
        match list_all(&api, &self.client, params, self.timeout, &mut Some).await {
            Ok(mut items) => {
                // List items of custom resources carry their type; set it where one does not.
                for item in &mut items {
                    if let Some(map) = item.as_object_mut() {
                        map.entry("apiVersion")
                            .or_insert_with(|| Value::String(resource.api_version.clone()));
                        map.entry("kind")
                            .or_insert_with(|| Value::String(resource.kind.clone()));
                    }
                }
                Ok(items)
            }
            Err(e) => self.failed(&name, &e).map(|()| Vec::new()),
        }
    }
}

async fn audit(request: &Request<'_>, policy: &Policy) -> Result<Audit, AuditError> {
    let (mut config, context) = load_config(request).await?;
    let server = config
        .cluster_url
        .to_string()
        .trim_end_matches('/')
        .to_owned();
    config.connect_timeout = Some(request.request_timeout.min(Duration::from_secs(10)));
    config.read_timeout = Some(request.request_timeout);
    config.write_timeout = Some(request.request_timeout);
    let scope = if request.all_namespaces {
        Scope::All
    } else {
        Scope::Namespace(
            request
                .namespace
                .map(str::to_owned)
                .unwrap_or_else(|| config.default_namespace.clone()),
        )
    };
    let client = match kube::client::ClientBuilder::try_from(config) {
        Ok(builder) => builder,
        Err(error) => {
            return Err(AuditError::Client {
                server: server.clone(),
                error,
            });
        }
    }
    .with_layer(&tower::util::MapResponseLayer::new(limit_answer))
    .build();

    // Discovery first: any authenticated user may read it, so it is where an unreachable
    // cluster or a rejected credential shows, before anything is listed.
    let discovery = match Discovery::new(client.clone()).run_aggregated().await {
        Ok(d) => d,
        Err(kube::Error::Api(status)) if status.code != 401 => Discovery::new(client.clone())
            .run()
            .await
            .map_err(|e| fatal(&e, &server))?,
        Err(e) => return Err(fatal(&e, &server)),
    };

    // The objects run on this cluster: its version, not the policy's oldest supported one, is
    // what the version-dependent rules (gRPC probes) must judge by.
    let mut policy = policy.clone();
    let version = match client.apiserver_version().await {
        Ok(info) => {
            let number = |s: &str| {
                s.trim_end_matches(|c: char| !c.is_ascii_digit())
                    .parse()
                    .ok()
            };
            if let (Some(major), Some(minor)) = (number(&info.major), number(&info.minor)) {
                policy.kubernetes_version =
                    probelint_policies::KubernetesVersion::new(major, minor);
            }
            Some(info.git_version)
        }
        Err(e) => match classify(&e, "get /version", &server) {
            Failure::Fatal(error) => return Err(error),
            _ => None,
        },
    };
    let policy = &policy;
    let mut lister = Lister {
        client,
        server: server.clone(),
        timeout: request.request_timeout,
        scope: &scope,
        errors: Vec::new(),
        skipped: Vec::new(),
    };
    let workload_params = match request.selector {
        Some(s) => ListParams::default().labels(s),
        None => ListParams::default(),
    };
    let all = ListParams::default();

    let mut objects: Vec<Value> = Vec::new();
    objects.extend(
        lister
            .typed::<Deployment>("deployments.apps", &workload_params)
            .await?,
    );
    objects.extend(
        lister
            .typed::<StatefulSet>("statefulsets.apps", &workload_params)
            .await?,
    );
    objects.extend(
        lister
            .typed::<DaemonSet>("daemonsets.apps", &workload_params)
            .await?,
    );
    objects.extend(
        lister
            .typed::<ReplicaSet>("replicasets.apps", &workload_params)
            .await?,
    );
    objects.extend(
        lister
            .typed::<ReplicationController>("replicationcontrollers", &workload_params)
            .await?,
    );
    objects.extend(lister.typed::<Job>("jobs.batch", &workload_params).await?);
    objects.extend(
        lister
            .typed::<CronJob>("cronjobs.batch", &workload_params)
            .await?,
    );
    for (resource, caps) in serving_resources(&discovery, policy, &mut lister.skipped) {
        if !caps.supports_operation(verbs::LIST) {
            continue;
        }
        objects.extend(
            lister
                .dynamic(&resource, &caps.scope, &workload_params)
                .await?,
        );
    }
    // Every pod of the scope, for evidence; with a selector, the bare pods it selects are
    // also judged. A pod whose controller is a listed workload is judged through it: its
    // evidence is taken as it is read and the pod dropped, so that memory follows what is kept.
    let workload_refs: Vec<&Value> = objects.iter().collect();
    let judged_workloads = evidence::owners(&workload_refs, &std::collections::HashSet::new());
    let judged_by_uid: std::collections::HashMap<String, usize> = objects
        .iter()
        .enumerate()
        .filter_map(|(i, o)| {
            let uid = o.pointer("/metadata/uid").and_then(Value::as_str)?;
            Some((uid.to_owned(), judged_workloads[i]))
        })
        .collect();
    let mut streamed = evidence::Streamed::new(!request.timeline);
    let mut streamed_skips: Vec<Skipped> = Vec::new();
    let mut keep_pod = |pod: Value| match evidence::controller_of(&pod)
        .and_then(|owner| judged_by_uid.get(owner))
    {
        Some(&workload) => {
            streamed.add(workload, &pod);
            streamed_skips.push(Skipped {
                what: evidence::coordinates(&ObjectRef::from_object(&pod)),
                reason: format!(
                    "judged as part of {}",
                    evidence::coordinates(&ObjectRef::from_object(&objects[workload]))
                ),
            });
            None
        }
        None => Some(pod),
    };
    let pods = lister
        .typed_keeping::<Pod>("pods", &all, &mut keep_pod)
        .await?;
    let mut selected_uids = std::collections::HashSet::new();
    let selected_pods: Option<std::collections::HashSet<String>> = match request.selector {
        Some(_) => {
            lister
                .typed_keeping::<Pod>("pods", &workload_params, &mut |pod| {
                    if let Some(uid) = pod.pointer("/metadata/uid").and_then(Value::as_str) {
                        selected_uids.insert(uid.to_owned());
                    }
                    None
                })
                .await?;
            Some(selected_uids)
        }
        None => None,
    };
    let first_pod = objects.len();
    objects.extend(pods);
    let mut related = lister
        .typed::<HorizontalPodAutoscaler>("horizontalpodautoscalers.autoscaling", &all)
        .await?;
    related.extend(
        lister
            .typed::<PodDisruptionBudget>("poddisruptionbudgets.policy", &all)
            .await?,
    );
    let mut events = lister
        .typed::<Event>(
            "events",
            &ListParams::default().fields("involvedObject.kind=Pod,reason=Unhealthy"),
        )
        .await?;
    events.extend(
        lister
            .typed::<Event>(
                "events",
                &ListParams::default().fields("involvedObject.kind=Pod,reason=Killing"),
            )
            .await?,
    );
    // A timeline also reads scheduling, pulls, starts and back-offs: one list per reason, as
    // above, so that no other Event of the cluster is read.
    if request.timeline {
        for reason in timeline::TIMELINE_REASONS {
            events.extend(
                lister
                    .typed::<Event>(
                        "events",
                        &ListParams::default()
                            .fields(&format!("involvedObject.kind=Pod,reason={reason}")),
                    )
                    .await?,
            );
        }
    }
    let Lister {
        mut errors,
        mut skipped,
        ..
    } = lister;
    errors.dedup();
    skipped.extend(streamed_skips);

    let refs: Vec<&Value> = objects.iter().collect();
    let judged = evidence::owners(&refs, &streamed.workloads());
    let mut evidence = evidence::collect(&refs, &judged, &events, streamed);

    let mut findings: Vec<Finding> = Vec::new();
    let mut facts = Vec::new();
    let mut judged_count = 0;
    let mut workloads: Vec<usize> = Vec::new();
    for (i, object) in objects.iter().enumerate() {
        if judged[i] != i {
            let owner = ObjectRef::from_object(&objects[judged[i]]);
            skipped.push(Skipped {
                what: evidence::coordinates(&ObjectRef::from_object(object)),
                reason: format!("judged as part of {}", evidence::coordinates(&owner)),
            });
            continue;
        }
        if i >= first_pod
            && let Some(selected) = &selected_pods
            && !object
                .pointer("/metadata/uid")
                .and_then(Value::as_str)
                .is_some_and(|u| selected.contains(u))
        {
            continue;
        }
        judged_count += 1;
        workloads.push(i);
        let evaluation = evaluate_object(object, i, policy);
        findings.extend(evaluation.findings);
        facts.extend(evaluation.facts);
    }
    for (j, object) in related.iter().enumerate() {
        judged_count += 1;
        let evaluation = evaluate_object(object, objects.len() + j, policy);
        findings.extend(evaluation.findings);
        facts.extend(evaluation.facts);
    }
    facts.sort_by_key(|f| f.index);
    findings.extend(evaluate_cross(&facts, policy));

    // The load time the engine judged each container by, for the readiness evidence.
    let mut loads: std::collections::HashMap<(usize, String), f64> = Default::default();
    for &i in &workloads {
        let analysed = probelint_policies::Workload::analyse(i, &objects[i], policy);
        for spec in &analysed.pod_specs {
            // A load the manifest shows (never the policy's guess): its fast end, since a pod
            // Ready sooner cannot have loaded its model.
            for container in spec
                .containers
                .iter()
                .filter(|c| c.is_accelerated() && c.load.is_evidence())
            {
                let load = loads.entry((i, container.name.to_string())).or_default();
                *load = load.max(container.load.fast);
            }
        }
    }
    let mut audited: std::collections::HashMap<usize, AuditedWorkload> = workloads
        .iter()
        .map(|&i| {
            let object = ObjectRef::from_object(&objects[i]);
            let evidence = evidence.remove(&i).unwrap_or_default();
            let (cost, timeline) = costed(
                &objects[i],
                &evidence,
                policy,
                request.timeline,
                request.gpu_hour_cost,
                request.now,
            );
            (
                i,
                AuditedWorkload {
                    coordinates: evidence::coordinates(&object),
                    object,
                    evidence,
                    findings: 0,
                    supported: 0,
                    cost,
                    timeline,
                },
            )
        })
        .collect();
    let mut located: Vec<AuditFinding> = findings
        .into_iter()
        .map(|finding| {
            let workload = audited.get_mut(&finding.object_index);
            let load = finding
                .container
                .clone()
                .and_then(|c| loads.get(&(finding.object_index, c.to_string())).copied());
            let support = evidence::support(&finding, workload.as_ref().map(|w| &w.evidence), load);
            if let Some(w) = workload
                && !finding.is_suppressed()
            {
                w.findings += 1;
                w.supported += usize::from(matches!(support, Support::Observed(_)));
            }
            AuditFinding {
                coordinates: evidence::coordinates(&finding.object),
                finding,
                support,
            }
        })
        .collect();
    let mut ranked: Vec<AuditedWorkload> = audited
        .into_values()
        .filter(|w| w.findings > 0 || w.evidence.restarts() > 0)
        .collect();
    // GPU time lost first (what --gpu-hour-cost prices: the same order in money), then the
    // restarts probes caused.
    let rank_key = |w: &AuditedWorkload| {
        (
            std::cmp::Reverse((w.cost.gpu_seconds_lost * 1000.0) as u64),
            std::cmp::Reverse(w.evidence.probe_restarts()),
            std::cmp::Reverse(w.evidence.restarts()),
            std::cmp::Reverse(w.findings),
            w.coordinates.clone(),
        )
    };
    ranked.sort_by_cached_key(rank_key);
    // Findings in the ranking's order: the workload its probes hurt most comes first; objects
    // outside the ranking (HPAs, PDBs) after, by name.
    let rank: std::collections::HashMap<&str, usize> = ranked
        .iter()
        .enumerate()
        .map(|(i, w)| (w.coordinates.as_str(), i))
        .collect();
    located.sort_by_cached_key(|f| {
        (
            rank.get(f.coordinates.as_str())
                .copied()
                .unwrap_or(usize::MAX),
            f.coordinates.clone(),
            f.finding.container.clone(),
            f.finding.rule.clone(),
            f.finding.pointer.clone(),
        )
    });
    skipped.sort_by(|a, b| (&a.what, &a.reason).cmp(&(&b.what, &b.reason)));
    Ok(Audit {
        server,
        version,
        context,
        scope,
        objects: judged_count,
        findings: located,
        workloads: ranked,
        errors,
        skipped,
        gpu_hour_cost: request.gpu_hour_cost,
    })
}

/// The longest a prediction beside a timeline simulates: a pod running for weeks is compared
/// over its first hours, where its load and its probes' storms are.
const PREDICTION_HORIZON_SECONDS: f64 = 6.0 * 3600.0;

/// A workload's cost and (with `--timeline`) its timeline, with `simulate`'s prediction for the
/// stored manifest: the first accelerator container's, aligned on the first pod's creation.
pub(crate) fn costed(
    object: &Value,
    evidence: &WorkloadEvidence,
    policy: &Policy,
    with_timeline: bool,
    gpu_hour_cost: Option<f64>,
    now: i64,
) -> (timeline::Cost, Option<timeline::Timeline>) {
    // Rows only when asked for: built for every workload of a large cluster, their marks
    // would cost more than the records they are drawn from.
    let (zero, end, rows) = if with_timeline {
        timeline::rows(&evidence.records, now)
    } else {
        let zero = evidence
            .records
            .iter()
            .filter_map(|p| p.created)
            .min()
            .unwrap_or(now);
        (zero, (now - zero).max(0) as f64, Vec::new())
    };
    let first = evidence
        .records
        .iter()
        .min_by(|a, b| (a.created, &a.name).cmp(&(b.created, &b.name)));
    let creation_on_axis = first
        .and_then(|p| p.created)
        .map_or(0.0, |c| (c - zero) as f64);
    let analysed = probelint_policies::Workload::analyse(0, object, policy);
    let mut predictions = Vec::new();
    for spec in &analysed.pod_specs {
        for container in spec.containers.iter().filter(|c| c.is_accelerated()) {
            let (offset, offset_from) = first
                .map(|p| first_start(p, &container.name))
                .unwrap_or((0.0, "no pod to take it from".to_owned()));
            let load = &container.load;
            // Drawn over the window observed, so that restarts compare; its first Ready is
            // looked for over half an hour at least, for a pod audited early in its load.
            let window = (end - creation_on_axis)
                .max(offset + 1.0)
                .min(PREDICTION_HORIZON_SECONDS);
            let predict = |duration: f64| {
                let mut scenario = probelint_policies::simulate::scenario_for_pod(
                    spec, container, load.slow, duration,
                );
                scenario.server = probelint_policies::simulate::loading_server_of(container);
                scenario.start_offset = offset;
                probelint_policies::simulate::simulate(&scenario)
            };
            let outcome = predict(window);
            let first_ready = match outcome.first_ready_seconds {
                Some(t) => Some(t),
                None if window < 1800.0 => predict(1800.0).first_ready_seconds,
                None => None,
            };
            let load_from = if load.is_point() {
                format!("model load {}", load.explained())
            } else {
                format!("model load {}; at its slow end", load.explained())
            };
            predictions.push(timeline::Prediction::new(
                container.name.to_string(),
                load.slow,
                load_from,
                creation_on_axis,
                format!(
                    "the first pod's creation; its container's first start {} s later ({offset_from})",
                    probelint_policies::simulate::secs(offset)
                ),
                outcome,
                first_ready,
            ));
        }
    }
    let group =
        (object.get("kind").and_then(Value::as_str) == Some("LeaderWorkerSet")).then(|| {
            let template = object.pointer("/spec/leaderWorkerTemplate");
            timeline::Group {
                size: template
                    .and_then(|t| t.get("size"))
                    .and_then(Value::as_u64)
                    .unwrap_or(1),
                recreates: template
                    .and_then(|t| t.get("restartPolicy"))
                    .and_then(Value::as_str)
                    .unwrap_or("RecreateGroupOnPodRestart")
                    == "RecreateGroupOnPodRestart",
            }
        });
    let predicted_ready = predictions
        .first()
        .and_then(|p| p.first_ready_seconds)
        .map(|t| t - creation_on_axis);
    let cost = timeline::cost(
        &evidence.records,
        &|r| policy.is_accelerator_resource(r),
        group,
        predicted_ready,
        gpu_hour_cost,
    );
    let timeline = with_timeline.then(|| timeline::Timeline {
        zero: timeline::rfc3339(zero),
        end_seconds: end,
        rows,
        predictions,
    });
    (cost, timeline)
}

/// Seconds from `pod`'s creation to `container`'s first start, and where that comes from: the
/// status holds the first start only while there have been at most one restart; after more,
/// a `Started` Event that counts every start.
fn first_start(pod: &timeline::PodRecord, container: &str) -> (f64, String) {
    let Some(c) = pod.containers.iter().find(|c| c.name == container) else {
        return (
            0.0,
            "the container is not in the pod's status: taken as 0".to_owned(),
        );
    };
    let from_created = |t: i64| pod.created.map(|c| (t - c).max(0) as f64);
    let started = match c.restarts {
        0 => c.current.as_ref().and_then(|r| r.started),
        1 => c.last.as_ref().and_then(|r| r.started),
        _ => None,
    };
    if let Some(s) = started.and_then(from_created) {
        return (s, format!("the pod's status, pod {}", pod.name));
    }
    let event = pod
        .events
        .iter()
        .filter(|e| e.reason == "Started" && e.container.as_deref() == Some(container))
        .filter(|e| e.uid.is_none() || e.uid == pod.uid)
        .find(|e| e.count > c.restarts);
    match event.and_then(|e| e.first).and_then(from_created) {
        Some(s) => (
            s,
            format!("the Started Event's firstTimestamp, pod {}", pod.name),
        ),
        None => (
            0.0,
            format!(
                "not recorded for pod {} (only its last two runs are in the status and its                  Events have expired): taken as 0",
                pod.name
            ),
        ),
    }
}

fn fatal(error: &kube::Error, server: &str) -> AuditError {
    match classify(error, "discovery", server) {
        Failure::Fatal(error) => error,
        Failure::Partial(message) => AuditError::Discovery { message },
        Failure::Missing => AuditError::NoDiscovery {
            server: server.to_owned(),
        },
    }
}

/// The custom resources to list: the serving CRDs the cluster serves, and the policy's
/// `workloads`. Serving CRDs it does not serve are recorded as skipped.
fn serving_resources(
    discovery: &Discovery,
    policy: &Policy,
    skipped: &mut Vec<Skipped>,
) -> Vec<(ApiResource, kube::discovery::ApiCapabilities)> {
    let mut out: Vec<(ApiResource, kube::discovery::ApiCapabilities)> = Vec::new();
    for group in discovery.groups() {
        if TYPED_GROUPS.contains(&group.name()) {
            continue;
        }
        for (resource, caps) in group.recommended_resources() {
            let known = SERVING_CRDS
                .iter()
                .any(|(g, k)| *g == resource.group && *k == resource.kind);
            let custom = policy
                .workloads
                .iter()
                .any(|w| w.matches(&resource.api_version, &resource.kind));
            if known || custom {
                out.push((resource, caps));
            }
        }
    }
    for (group, kind) in SERVING_CRDS {
        if !out
            .iter()
            .any(|(r, _)| r.group == *group && r.kind == *kind)
        {
            skipped.push(Skipped {
                what: format!("{kind} ({group})"),
                reason: "this cluster does not serve it".to_owned(),
            });
        }
    }
    out.sort_by(|a, b| (&a.0.group, &a.0.kind).cmp(&(&b.0.group, &b.0.kind)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_page(
        text: &str,
        keep: &mut dyn FnMut(Value) -> Option<Value>,
    ) -> (Vec<Value>, Option<String>) {
        let mut out = Vec::new();
        let token = serde::de::DeserializeSeed::deserialize(
            PageSeed::<Pod> {
                keep,
                out: &mut out,
                item: std::marker::PhantomData,
            },
            &mut serde_json::Deserializer::from_str(text),
        )
        .unwrap();
        (out, token)
    }

    /// A page is handed over item by item, whatever the order of its keys (a proxy may put
    /// `metadata` last), each item as the engine reads it (its kind set, no managedFields); what
    /// `keep` drops is not kept, and the continue token is read.
    #[test]
    fn a_page_is_read_item_by_item_with_its_continue_token() {
        let text = r#"{"kind": "PodList", "apiVersion": "v1", "items": [
            {"metadata": {"name": "a", "managedFields": [{"manager": "kubelet"}]}},
            {"metadata": {"name": "b"}}, {"metadata": {"name": "c"}}],
            "extra": {"ignored": [1, 2]}, "metadata": {"continue": "next", "resourceVersion": "7"}}"#;
        let mut seen = Vec::new();
        let (kept, token) = read_page(text, &mut |pod| {
            seen.push(pod["metadata"]["name"].as_str().unwrap().to_owned());
            (pod["metadata"]["name"] != "b").then_some(pod)
        });
        assert_eq!(seen, ["a", "b", "c"]);
        assert_eq!(token.as_deref(), Some("next"));
        assert_eq!(kept.len(), 2);
        assert_eq!(kept[0]["kind"], "Pod");
        assert_eq!(kept[0]["apiVersion"], "v1");
        assert!(
            kept[0]["metadata"].get("managedFields").is_none(),
            "{:#}",
            kept[0]
        );

        let (kept, token) = read_page(r#"{"items": null, "metadata": {}}"#, &mut Some);
        assert!(kept.is_empty());
        assert_eq!(token, None);
    }
}
