//! TLS material and the policy, read from files and reloaded when they change.
//!
//! Kubernetes updates a mounted Secret or ConfigMap by writing a new timestamped directory and
//! atomically renaming a `..data` symlink onto it; `tls.crt` is itself a symlink through
//! `..data`. A watch on the file would follow the old inode and miss that, so we watch the
//! *directories* that hold the files, debounce the burst of events, and compare contents: a
//! change of any kind leads to a reload, and a reload that changes nothing is not counted.
//! A periodic re-read backs up the watch (inotify can run out of watches, or miss an event on a
//! network filesystem).
//!
//! A reload that fails keeps what is being served: a half-written certificate, a certificate
//! that has expired or is not valid yet, or an invalid policy never takes the webhook down. The
//! failure is logged, counted and shown by `/readyz`.

use crate::metrics::Metrics;
use crate::state::AppState;
use notify::event::AccessKind;
use notify::{EventKind, RecursiveMode, Watcher as _};
use probelint_policies::{Policy, PolicyError};
use rustls::ServerConfig;
use rustls::server::WebPkiClientVerifier;
use rustls_pki_types::pem;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, SystemTime};
use tokio::sync::mpsc;

/// Quiet time after the last file event before reloading: a Secret update is a burst of events
/// (new directory, files, symlink swap, cleanup of the old directory).
const DEBOUNCE: Duration = Duration::from_millis(200);
/// How often the files are re-read even without an event.
const POLL_INTERVAL: Duration = Duration::from_secs(30);
/// First retry after a failed reload (doubling up to [`POLL_INTERVAL`]): a certificate read
/// between the writes of its two files is retried at once.
const RETRY_INTERVAL: Duration = Duration::from_millis(500);

/// The rustls configuration new connections are accepted with; a reload swaps it, connections
/// already open keep theirs.
pub struct TlsConfig {
    current: RwLock<Arc<ServerConfig>>,
}

impl TlsConfig {
    fn new(config: Arc<ServerConfig>) -> TlsConfig {
        TlsConfig {
            current: RwLock::new(config),
        }
    }

    pub fn current(&self) -> Arc<ServerConfig> {
        Arc::clone(&self.current.read().unwrap_or_else(PoisonError::into_inner))
    }

    fn set(&self, config: Arc<ServerConfig>) {
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = config;
    }
}

/// The validity period of a serving certificate, in seconds since the Unix epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Validity {
    pub not_before: i64,
    pub not_after: i64,
}

impl Validity {
    /// Reads the validity of the first certificate of a chain (the serving certificate).
    fn of(cert: &CertificateDer<'_>) -> Result<Validity, X509Error> {
        let (_, parsed) = x509_parser::parse_x509_certificate(cert.as_ref())?;
        let validity = parsed.validity();
        Ok(Validity {
            not_before: validity.not_before.timestamp(),
            not_after: validity.not_after.timestamp(),
        })
    }

    /// Why the certificate cannot be served at `now`, if it cannot. The apiserver refuses a
    /// certificate outside its validity period, so serving it would fail every handshake.
    fn refusal(&self, now: i64) -> Option<Refusal> {
        if now < self.not_before {
            Some(Refusal::NotYetValid {
                validity: *self,
                now,
            })
        } else if now > self.not_after {
            Some(Refusal::Expired { validity: *self })
        } else {
            None
        }
    }
}

/// Why a certificate cannot be served now: it is outside its validity period.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error(
        "the certificate is not valid yet: valid from {} (in {} s) to {}",
        utc(validity.not_before),
        validity.not_before - now,
        utc(validity.not_after)
    )]
    NotYetValid { validity: Validity, now: i64 },
    #[error(
        "the certificate expired at {} (valid from {})",
        utc(validity.not_after),
        utc(validity.not_before)
    )]
    Expired { validity: Validity },
}

/// What x509-parser reports about a certificate it cannot read.
type X509Error = x509_parser::nom::Err<x509_parser::error::X509Error>;

fn unix_now() -> i64 {
    match SystemTime::now().duration_since(SystemTime::UNIX_EPOCH) {
        Ok(since) => since.as_secs() as i64,
        Err(before) => -(before.duration().as_secs() as i64),
    }
}

/// `2026-11-30T12:00:00Z` for a Unix time (the proleptic Gregorian calendar, UTC).
pub fn utc(unix: i64) -> String {
    let days = unix.div_euclid(86_400);
    let secs = unix.rem_euclid(86_400);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

/// Why the TLS files cannot be served: each names the file (or the pair) and what is wrong
/// with it. Shown by `/readyz` and logged; at startup, fatal.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file cannot be read (missing, unreadable).
    #[error("cannot read {}: {error}", path.display())]
    Read {
        path: PathBuf,
        error: std::io::Error,
    },
    /// The certificate file holds a PEM section that cannot be decoded.
    #[error("{}: {error}", path.display())]
    CertificatePem { path: PathBuf, error: pem::Error },
    /// The certificate file holds no certificate.
    #[error("{}: no PEM certificate (-----BEGIN CERTIFICATE-----) found", path.display())]
    NoCertificate { path: PathBuf },
    /// The serving certificate (the chain's first) is not X.509 that can be read.
    #[error("{}: not a readable X.509 certificate: {error}", path.display())]
    Unreadable { path: PathBuf, error: X509Error },
    /// The serving certificate is outside its validity period.
    #[error("{}: {refusal}", path.display())]
    OutOfValidity { path: PathBuf, refusal: Refusal },
    /// The key file holds no private key rustls can use.
    #[error("{}: no usable PEM private key: {error}", path.display())]
    Key { path: PathBuf, error: pem::Error },
    /// rustls refuses the protocol versions (a build without TLS 1.2 or 1.3).
    #[error("TLS configuration: {0}")]
    Protocols(rustls::Error),
    /// The client CA bundle holds a PEM section that cannot be decoded.
    #[error("{}: {error}", path.display())]
    ClientCaPem { path: PathBuf, error: pem::Error },
    /// rustls refuses a certificate of the client CA bundle as a trust anchor.
    #[error("{}: {error}", path.display())]
    ClientCa { path: PathBuf, error: rustls::Error },
    /// The client CA bundle holds no certificate.
    #[error("{}: no PEM certificate found", path.display())]
    NoClientCa { path: PathBuf },
    /// No client-certificate verifier can be built from the client CA bundle.
    #[error("{}: {error}", path.display())]
    ClientVerifier {
        path: PathBuf,
        error: rustls::server::VerifierBuilderError,
    },
    /// The key does not go with the certificate (or rustls refuses the pair).
    #[error("{} and {}: {error}", cert.display(), key.display())]
    Pair {
        cert: PathBuf,
        key: PathBuf,
        error: rustls::Error,
    },
}

impl TlsError {
    /// When the files hold a certificate that is not valid yet: the Unix time it can be served
    /// from (unchanged files are tried again then).
    fn valid_from(&self) -> Option<i64> {
        match self {
            TlsError::OutOfValidity {
                refusal: Refusal::NotYetValid { validity, .. },
                ..
            } => Some(validity.not_before),
            _ => None,
        }
    }
}

/// Why a policy file cannot be enforced. Shown by `/readyz` and logged; at startup, fatal.
#[derive(Debug, thiserror::Error)]
pub enum PolicyFileError {
    #[error("cannot read {}: {error}", path.display())]
    Read {
        path: PathBuf,
        error: std::io::Error,
    },
    /// The file is not a valid policy. The YAML layer calls the text `<input>` in its
    /// snippet's `-->` line: the file's path replaces it there.
    #[error("{}: {}", path.display(), in_file(path, error))]
    Invalid { path: PathBuf, error: PolicyError },
}

/// A policy file's error as shown, with the file's path in place of `<input>`.
fn in_file(path: &Path, error: &PolicyError) -> String {
    error
        .to_string()
        .replace("--> <input>:", &format!("--> {}:", path.display()))
}

/// Why the files cannot be watched for changes (fatal at startup).
#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    #[error("cannot listen for SIGHUP: {0}")]
    Hangup(std::io::Error),
    /// The file watcher (inotify) cannot be started.
    #[error("cannot watch files: {0}")]
    Watcher(notify::Error),
    /// A directory that holds a certificate, key, CA or policy file cannot be watched.
    #[error("cannot watch {}: {error}", dir.display())]
    Directory { dir: PathBuf, error: notify::Error },
}

/// Why the webhook cannot load its files at startup.
#[derive(Debug, thiserror::Error)]
pub enum StartupError {
    #[error(transparent)]
    Tls(TlsError),
    /// At startup there is no previous certificate to keep serving.
    #[error("{0}; refusing to start without a valid certificate")]
    InvalidCertificate(TlsError),
    #[error(transparent)]
    Policy(#[from] PolicyFileError),
    #[error("built-in policy: {0}")]
    BuiltinPolicy(PolicyError),
}

impl From<TlsError> for StartupError {
    fn from(error: TlsError) -> Self {
        match error {
            TlsError::OutOfValidity { .. } => StartupError::InvalidCertificate(error),
            error => StartupError::Tls(error),
        }
    }
}

/// Where the TLS material lives.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
    /// CA bundle for client certificates; when set, clients without a certificate signed by it
    /// are refused during the handshake.
    pub client_ca: Option<PathBuf>,
}

/// The bytes of the TLS files, compared to tell whether a reload is needed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct TlsBytes {
    cert: Vec<u8>,
    key: Vec<u8>,
    client_ca: Option<Vec<u8>>,
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|error| TlsError::Read {
        path: path.to_owned(),
        error,
    })
}

impl TlsFiles {
    fn read(&self) -> Result<TlsBytes, TlsError> {
        Ok(TlsBytes {
            cert: read(&self.cert)?,
            key: read(&self.key)?,
            client_ca: self.client_ca.as_deref().map(read).transpose()?,
        })
    }

    /// Builds the rustls configuration: TLS 1.3 and 1.2 only, ring as the one crypto provider,
    /// HTTP/2 and HTTP/1.1 offered by ALPN, and client-certificate verification when a client
    /// CA is configured.
    fn server_config(&self, bytes: &TlsBytes) -> Result<(Arc<ServerConfig>, Validity), TlsError> {
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&bytes.cert)
            .collect::<Result<_, _>>()
            .map_err(|error| TlsError::CertificatePem {
                path: self.cert.clone(),
                error,
            })?;
        if certs.is_empty() {
            return Err(TlsError::NoCertificate {
                path: self.cert.clone(),
            });
        }
        let validity = Validity::of(&certs[0]).map_err(|error| TlsError::Unreadable {
            path: self.cert.clone(),
            error,
        })?;
        if let Some(refusal) = validity.refusal(unix_now()) {
            return Err(TlsError::OutOfValidity {
                path: self.cert.clone(),
                refusal,
            });
        }
        let key = PrivateKeyDer::from_pem_slice(&bytes.key).map_err(|error| TlsError::Key {
            path: self.key.clone(),
            error,
        })?;

        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
            .map_err(TlsError::Protocols)?;
        let builder = match (&self.client_ca, &bytes.client_ca) {
            (Some(path), Some(pem)) => {
                let mut roots = rustls::RootCertStore::empty();
                for cert in CertificateDer::pem_slice_iter(pem) {
                    let cert = cert.map_err(|error| TlsError::ClientCaPem {
                        path: path.clone(),
                        error,
                    })?;
                    roots.add(cert).map_err(|error| TlsError::ClientCa {
                        path: path.clone(),
                        error,
                    })?;
                }
                if roots.is_empty() {
                    return Err(TlsError::NoClientCa { path: path.clone() });
                }
                let verifier = WebPkiClientVerifier::builder_with_provider(roots.into(), provider)
                    .build()
                    .map_err(|error| TlsError::ClientVerifier {
                        path: path.clone(),
                        error,
                    })?;
                builder.with_client_cert_verifier(verifier)
            }
            _ => builder.with_no_client_auth(),
        };
        // rustls checks that the key belongs to the certificate: a reload that reads a new
        // certificate next to the old key fails here instead of serving a broken pair.
        let mut config = builder
            .with_single_cert(certs, key)
            .map_err(|error| TlsError::Pair {
                cert: self.cert.clone(),
                key: self.key.clone(),
                error,
            })?;
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok((Arc::new(config), validity))
    }
}

/// Parses a policy file (the CLI's `.probelint.yaml` format).
fn load_policy(path: &Path, text: &str) -> Result<Policy, PolicyFileError> {
    Policy::with_user_yaml(text).map_err(|error| PolicyFileError::Invalid {
        path: path.to_owned(),
        error,
    })
}

fn read_text(path: &Path) -> Result<String, PolicyFileError> {
    std::fs::read_to_string(path).map_err(|error| PolicyFileError::Read {
        path: path.to_owned(),
        error,
    })
}

/// Watches the files and swaps in what they hold.
pub struct Reloader {
    state: Arc<AppState>,
    tls: Arc<TlsConfig>,
    files: TlsFiles,
    policy_path: Option<PathBuf>,
    /// What the last TLS attempt read, and whether it failed: unchanged bad files are not
    /// retried (and logged) again and again.
    tls_seen: TlsBytes,
    tls_failed: bool,
    /// The files on disk hold a certificate that becomes valid at this Unix time: unchanged,
    /// they are tried again then.
    tls_valid_from: Option<i64>,
    /// The validity of the certificate being served.
    served: Validity,
    /// Whether the expiry of the served certificate has been reported.
    served_expired: bool,
    policy_seen: Option<String>,
    policy_failed: bool,
}

impl Reloader {
    /// Loads the TLS material and the policy once. Any error is fatal: at startup there is no
    /// last good configuration to fall back on. That includes a certificate outside its
    /// validity period: serving it would fail every handshake while `/readyz` said ready,
    /// where exiting shows the reason in the pod's status and logs (and a restart picks up the
    /// renewed certificate).
    pub fn load(
        files: TlsFiles,
        policy_path: Option<PathBuf>,
        state: Arc<AppState>,
    ) -> Result<(Self, Arc<TlsConfig>), StartupError> {
        let tls_seen = files.read().map_err(StartupError::Tls)?;
        let (config, served) = files.server_config(&tls_seen)?;
        let tls = Arc::new(TlsConfig::new(config));
        state.metrics.set_certificate_expiry(served.not_after);
        tracing::info!(
            cert = %files.cert.display(),
            not_before = %utc(served.not_before),
            not_after = %utc(served.not_after),
            "serving certificate loaded"
        );
        let policy_seen = match &policy_path {
            Some(path) => {
                let text = read_text(path)?;
                state.set_policy(load_policy(path, &text)?, path.display().to_string());
                Some(text)
            }
            None => {
                let policy = Policy::builtin().map_err(StartupError::BuiltinPolicy)?;
                state.set_policy(policy, "built-in".to_owned());
                None
            }
        };
        let reloader = Reloader {
            state,
            tls: tls.clone(),
            files,
            policy_path,
            tls_seen,
            tls_failed: false,
            tls_valid_from: None,
            served,
            served_expired: false,
            policy_seen,
            policy_failed: false,
        };
        Ok((reloader, tls))
    }

    /// Starts watching the directories of every file and reloading on change.
    pub fn spawn(self) -> Result<(), WatchError> {
        let (tx, rx) = mpsc::unbounded_channel();
        // SIGHUP re-reads the files at once, as daemons do (its default action would kill the
        // process outright, without draining the reviews in flight).
        let mut hangup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
            .map_err(WatchError::Hangup)?;
        let on_hangup = tx.clone();
        tokio::spawn(async move {
            while hangup.recv().await.is_some() {
                tracing::info!("SIGHUP: re-reading the certificate and the policy");
                if on_hangup.send(()).is_err() {
                    return;
                }
            }
        });
        let mut watcher =
            notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
                // Our own reads open the files: those events must not trigger another read.
                if let Ok(event) = event
                    && !matches!(event.kind, EventKind::Access(AccessKind::Open(_)))
                {
                    let _ = tx.send(());
                }
            })
            .map_err(WatchError::Watcher)?;
        let files = [&self.files.cert, &self.files.key]
            .into_iter()
            .chain(self.files.client_ca.as_ref())
            .chain(self.policy_path.as_ref());
        let dirs: BTreeSet<PathBuf> = files
            .map(|f| match f.parent() {
                Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
                _ => PathBuf::from("."),
            })
            .collect();
        for dir in &dirs {
            watcher
                .watch(dir, RecursiveMode::NonRecursive)
                .map_err(|error| WatchError::Directory {
                    dir: dir.clone(),
                    error,
                })?;
            tracing::info!(dir = %dir.display(), "watching for certificate and policy changes");
        }
        tokio::spawn(self.run(rx, watcher));
        Ok(())
    }

    async fn run(
        mut self,
        mut events: mpsc::UnboundedReceiver<()>,
        _watcher: notify::RecommendedWatcher,
    ) {
        let mut wait = POLL_INTERVAL;
        loop {
            tokio::select! {
                event = events.recv() => if event.is_none() { return },
                () = tokio::time::sleep(wait) => {}
            }
            while let Ok(Some(())) = tokio::time::timeout(DEBOUNCE, events.recv()).await {}
            let tls_ok = self.reload_tls();
            let policy_ok = self.reload_policy();
            self.check_served_expiry();
            wait = if tls_ok && policy_ok {
                POLL_INTERVAL
            } else if wait == POLL_INTERVAL {
                RETRY_INTERVAL
            } else {
                (wait * 2).min(POLL_INTERVAL)
            };
        }
    }

    /// Returns false while the files on disk cannot be served.
    fn reload_tls(&mut self) -> bool {
        let bytes = match self.files.read() {
            Ok(bytes) => bytes,
            Err(e) => {
                self.tls_error(e);
                return false;
            }
        };
        if bytes == self.tls_seen {
            let now_valid = self.tls_valid_from.is_some_and(|from| unix_now() >= from);
            if !now_valid {
                return !self.tls_failed;
            }
        }
        self.tls_seen = bytes;
        match self.files.server_config(&self.tls_seen) {
            Ok((config, validity)) => {
                self.tls.set(config);
                self.tls_failed = false;
                self.tls_valid_from = None;
                self.served = validity;
                self.served_expired = false;
                self.state.set_served_certificate_expired(None);
                self.state.set_tls_error(None);
                self.state
                    .metrics
                    .set_certificate_expiry(validity.not_after);
                self.state.metrics.set_certificate_files_refused(false);
                Metrics::reload(&self.state.metrics.certificate_reloads, true);
                tracing::info!(
                    cert = %self.files.cert.display(),
                    not_before = %utc(validity.not_before),
                    not_after = %utc(validity.not_after),
                    "reloaded the TLS certificate"
                );
                true
            }
            Err(e) => {
                self.tls_error(e);
                false
            }
        }
    }

    fn tls_error(&mut self, error: TlsError) {
        self.tls_failed = true;
        self.tls_valid_from = error.valid_from();
        Metrics::reload(&self.state.metrics.certificate_reloads, false);
        self.state.metrics.set_certificate_files_refused(true);
        // An error, not a warning: the certificate on disk is what cert-manager (or the operator)
        // meant to serve, and the one still served will expire in its turn.
        tracing::error!(
            %error,
            served_not_after = %utc(self.served.not_after),
            "TLS reload refused; still serving the previous certificate"
        );
        self.state.set_tls_error(Some(error.to_string()));
    }

    /// Says so, once, when the certificate being served expires with no valid one on disk.
    fn check_served_expiry(&mut self) {
        let expired = unix_now() > self.served.not_after;
        if expired && !self.served_expired {
            tracing::error!(
                cert = %self.files.cert.display(),
                not_after = %utc(self.served.not_after),
                "the served TLS certificate has expired and no valid replacement is on disk: \
                 the apiserver refuses every handshake"
            );
        }
        if expired != self.served_expired {
            self.state
                .set_served_certificate_expired(expired.then(|| utc(self.served.not_after)));
        }
        self.served_expired = expired;
    }

    fn reload_policy(&mut self) -> bool {
        let Some(path) = &self.policy_path else {
            return true;
        };
        let text = match read_text(path) {
            Ok(text) => text,
            Err(e) => {
                self.policy_error(e);
                return false;
            }
        };
        if self.policy_seen.as_ref() == Some(&text) {
            return !self.policy_failed;
        }
        let loaded = load_policy(path, &text);
        self.policy_seen = Some(text);
        match loaded {
            Ok(policy) => {
                let version = policy.version.clone();
                self.state.set_policy(policy, path.display().to_string());
                self.policy_failed = false;
                Metrics::reload(&self.state.metrics.policy_reloads, true);
                tracing::info!(policy = %path.display(), %version, "reloaded the policy");
                true
            }
            Err(e) => {
                self.policy_error(e);
                false
            }
        }
    }

    fn policy_error(&mut self, error: PolicyFileError) {
        self.policy_failed = true;
        Metrics::reload(&self.state.metrics.policy_reloads, false);
        tracing::error!(%error, "policy reload failed; still enforcing the last good policy");
        self.state.set_policy_error(error.to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_policy_error_names_the_file_not_input() {
        let path = Path::new("/etc/probelint/policy.yaml");
        let Err(error) = load_policy(path, "rules:\n  no-such-rule: error\nunknownKey: 1\n") else {
            panic!("an invalid policy loaded");
        };
        let error = error.to_string();
        assert!(error.starts_with("/etc/probelint/policy.yaml: "), "{error}");
        assert!(!error.contains("<input>"), "{error}");
    }

    #[test]
    fn utc_formats_unix_times() {
        assert_eq!(utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(utc(1_796_083_199), "2026-11-30T23:59:59Z");
        assert_eq!(utc(-1), "1969-12-31T23:59:59Z");
    }

    #[test]
    fn a_certificate_is_refused_outside_its_validity_period() {
        let validity = Validity {
            not_before: 1_000,
            not_after: 2_000,
        };
        assert_eq!(validity.refusal(1_000), None);
        assert_eq!(validity.refusal(2_000), None);
        let early = validity.refusal(999).expect("not valid yet").to_string();
        assert!(
            early.starts_with(
                "the certificate is not valid yet: valid from 1970-01-01T00:16:40Z (in 1 s)"
            ),
            "{early}"
        );
        let late = validity.refusal(2_001).expect("expired").to_string();
        assert!(
            late.starts_with("the certificate expired at 1970-01-01T00:33:20Z"),
            "{late}"
        );
    }
}
