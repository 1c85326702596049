//! Kubernetes' own reading of a manifest file, as the reference that probelint-yaml is tested
//! against: a small Go program (`go/main.go`) that decodes a stream the way `kubectl apply -f`
//! does (apimachinery's `YAMLOrJSONDecoder` over sigs.k8s.io/yaml, pinned in `go/go.mod`), run
//! as one long-lived process that answers many inputs ([`Reference`]), and the comparison of its
//! answer with probelint-yaml's ([`ours`], [`disagreement`]).
//!
//! The program is built with `go build` once per machine and source into
//! `<target>/k8s/yaml-reference-<versions>-<hash>/`, with the control plane's build helpers
//! ([`probelint_cluster::go_build_with`]). Tests that use it are tier 2 (`#[ignore = "e2e: ..."]`):
//! they need Go and, for the first build, the Go module proxy; without Go they fail with what to
//! install.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
#[cfg(feature = "build")]
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use probelint_yaml::load::{Limits, YamlErrorKind, parse_stream_partial};
use serde_json::Value;

/// The Go module of the reference decoder, relative to this crate.
pub const GO_MODULE: &str = "go";

/// The modules whose versions decide how a manifest reads; part of the cache key.
#[cfg(feature = "build")]
const PINNED: [&str; 2] = ["k8s.io/apimachinery", "sigs.k8s.io/yaml"];

#[cfg(feature = "build")]
/// The path of the built reference decoder, built first when this machine has not built this
/// source at these versions.
///
/// # Errors
///
/// Go is missing (the message says what to install), or the build fails.
pub fn binary() -> Result<PathBuf, String> {
    let module = Path::new(env!("CARGO_MANIFEST_DIR")).join(GO_MODULE);
    let versions = PINNED
        .iter()
        .map(|path| probelint_cluster::required_version(&module, path))
        .collect::<Result<Vec<_>, _>>()?;
    // The program's own source is part of the key: an edit to it must not reuse an old build.
    let mut hash = Fnv::default();
    for file in ["main.go", "go.mod", "go.sum"] {
        let path = module.join(file);
        let bytes =
            std::fs::read(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        hash.write(&bytes);
    }
    let cache = probelint_cluster::target_dir().join("k8s");
    let dir = cache.join(format!(
        "yaml-reference-apimachinery-{}-yaml-{}-{:016x}",
        versions[0], versions[1], hash.0
    ));
    let binary = dir.join("yaml-reference");
    if binary.is_file() {
        return Ok(binary);
    }
    let _lock = probelint_cluster::build_lock(&cache, ".yaml-reference.lock")?;
    if binary.is_file() {
        return Ok(binary);
    }
    probelint_cluster::require_tool("go", &["version"])?;
    let staging = cache.join(format!(".building-yaml-reference-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir_all(&staging)
        .map_err(|e| format!("cannot create {}: {e}", staging.display()))?;
    probelint_cluster::go_build_with(
        &module,
        &staging.join("yaml-reference").display().to_string(),
        "",
        &["."],
        false,
        "",
    )?;
    probelint_cluster::install_staged(&staging, &dir)?;
    Ok(binary)
}

/// 64-bit FNV-1a, enough to tell one source from another.
#[cfg(feature = "build")]
struct Fnv(u64);

#[cfg(feature = "build")]
impl Default for Fnv {
    fn default() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

#[cfg(feature = "build")]
impl Fnv {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

/// What Kubernetes makes of a stream.
#[derive(Debug, Clone, PartialEq)]
pub struct Theirs {
    /// Each object kubectl would send, in order (empty and `null` documents skipped), as the
    /// JSON it converts the document to.
    pub documents: Vec<Value>,
    /// The error that ends the stream for kubectl, if any; the documents before it are sent.
    pub error: Option<String>,
    /// The 1-based line of the file that `error` points at, where it names one: the reference
    /// turns go-yaml's line (within kubectl's piece of the stream, counted from 0 by its parser
    /// and from 1 by its scanner) into the file's line. `None` for a JSON stream, a key or value
    /// with no JSON form, and no error.
    pub error_line: Option<usize>,
    /// Strict decoding's refusals (duplicate keys): the 1-based index of the document among
    /// those kubectl's YAMLReader cuts (empty ones included), and the error.
    pub strict: Vec<(usize, String)>,
}

/// The reference decoder, running: one process answers every [`Reference::decode`].
pub struct Reference {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Reference {
    /// Builds the decoder if needed ([`binary`]) and starts it.
    ///
    /// # Errors
    ///
    /// It cannot be built or started.
    #[cfg(feature = "build")]
    pub fn start() -> Result<Reference, String> {
        Reference::start_at(&binary()?)
    }

    /// Starts the decoder built at `binary`.
    ///
    /// # Errors
    ///
    /// It cannot be started.
    pub fn start_at(binary: &Path) -> Result<Reference, String> {
        let mut child = Command::new(binary)
            .arg("-serve")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", binary.display()))?;
        let stdin = child.stdin.take().ok_or("no stdin")?;
        let stdout = BufReader::new(child.stdout.take().ok_or("no stdout")?);
        Ok(Reference {
            child,
            stdin,
            stdout,
        })
    }

    /// What Kubernetes reads in `input`.
    ///
    /// # Errors
    ///
    /// The process died or answered something else than its protocol.
    pub fn decode(&mut self, input: &[u8]) -> Result<Theirs, String> {
        let io = |e: std::io::Error| format!("yaml-reference: {e}");
        writeln!(self.stdin, "{}", input.len()).map_err(io)?;
        self.stdin.write_all(input).map_err(io)?;
        self.stdin.flush().map_err(io)?;
        let mut line = String::new();
        self.stdout.read_line(&mut line).map_err(io)?;
        let answer: Value = serde_json::from_str(&line)
            .map_err(|e| format!("yaml-reference answered {line:?}: {e}"))?;
        let documents = match answer.get("documents") {
            Some(Value::Array(documents)) => documents.clone(),
            _ => return Err(format!("yaml-reference answered {line:?}")),
        };
        let error = answer
            .get("error")
            .and_then(Value::as_str)
            .filter(|e| !e.is_empty())
            .map(str::to_owned);
        let error_line = answer
            .get("error_line")
            .and_then(Value::as_u64)
            .and_then(|line| usize::try_from(line).ok())
            .filter(|&line| line > 0 && error.is_some());
        let strict = answer
            .get("strict")
            .and_then(Value::as_array)
            .map(|all| {
                all.iter()
                    .map(|s| {
                        let document = s.get("document").and_then(Value::as_u64).unwrap_or(0);
                        let error = s.get("error").and_then(Value::as_str).unwrap_or("");
                        (usize::try_from(document).unwrap_or(0), error.to_owned())
                    })
                    .collect()
            })
            .unwrap_or_default();
        Ok(Theirs {
            documents,
            error,
            error_line,
            strict,
        })
    }
}

impl Drop for Reference {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What probelint-yaml makes of a stream, reduced to what Kubernetes also says.
#[derive(Debug, Clone, PartialEq)]
pub struct Ours {
    /// The documents read before the first error (the values the engine is given).
    pub documents: Vec<Value>,
    /// The first error, rendered `line L, column C: message`.
    pub error: Option<String>,
    /// The 1-based line of that error.
    pub error_line: Option<usize>,
}

/// probelint-yaml's reading of `input`, with the default limits. Lines kubectl reads as
/// separators where YAML does not are not errors (the documents are split as kubectl splits
/// them), so they are left out.
#[must_use]
pub fn ours(input: &[u8]) -> Ours {
    let stream = parse_stream_partial(input, &Limits::default());
    let error = stream
        .error
        .filter(|e| e.kind != YamlErrorKind::SeparatorDiffers);
    Ours {
        documents: stream.documents.into_iter().map(|d| d.value).collect(),
        error_line: error.as_ref().map(|e| e.line),
        error: error.map(|e| e.to_string()),
    }
}

/// How the two readings of one input differ, when they do: the same documents (the same JSON
/// values, in order, up to the first error) and an error on both sides or on neither.
#[must_use]
pub fn disagreement(ours: &Ours, theirs: &Theirs) -> Option<String> {
    let documents_differ = ours.documents != theirs.documents;
    let errors_differ = ours.error.is_some() != theirs.error.is_some();
    if !documents_differ && !errors_differ {
        return None;
    }
    let mut text = String::new();
    if documents_differ {
        let first = ours
            .documents
            .iter()
            .zip(&theirs.documents)
            .position(|(a, b)| a != b)
            .unwrap_or(ours.documents.len().min(theirs.documents.len()));
        text.push_str(&format!(
            "documents: probelint read {}, Kubernetes {}; first difference at document {}:\n  \
             probelint:  {}\n  Kubernetes: {}\n",
            ours.documents.len(),
            theirs.documents.len(),
            first + 1,
            ours.documents
                .get(first)
                .map_or_else(|| "(none)".to_owned(), Value::to_string),
            theirs
                .documents
                .get(first)
                .map_or_else(|| "(none)".to_owned(), Value::to_string),
        ));
    }
    text.push_str(&format!(
        "errors: probelint {}; Kubernetes {}",
        ours.error.as_deref().unwrap_or("none"),
        theirs.error.as_deref().unwrap_or("none"),
    ));
    Some(text)
}

/// Where both readings fail but at different lines, when Kubernetes' error names one: what a
/// user who runs both sees as two places for one mistake.
#[must_use]
pub fn line_disagreement(ours: &Ours, theirs: &Theirs) -> Option<String> {
    let (Some(line), Some(their_line)) = (ours.error_line, theirs.error_line) else {
        return None;
    };
    (line != their_line).then(|| {
        format!(
            "error lines: probelint {line} ({}), Kubernetes {their_line} ({})",
            ours.error.as_deref().unwrap_or(""),
            theirs.error.as_deref().unwrap_or(""),
        )
    })
}
