//! `oci-image`: writes a release image (probelint's CLI or webhook) as an OCI image layout
//! archive, with no Docker daemon and no image builder: the executable (with the shared
//! libraries it loads, when it is not static) in an otherwise empty root filesystem, for one or
//! more platforms. The same writer as the node suite's images ([`probelint_cluster::Image`]), so
//! the same inputs give the same bytes.
//!
//! ```text
//! oci-image --reference ghcr.io/probelint/probelint-webhook:0.1.0 \
//!     --binary amd64=target/x86_64-unknown-linux-musl/release/probelint-webhook \
//!     --binary arm64=target/aarch64-unknown-linux-musl/release/probelint-webhook \
//!     --at /usr/local/bin/probelint-webhook --user 65532:65532 \
//!     --label org.opencontainers.image.version=0.1.0 --out target/images/probelint-webhook.tar
//! ```
//!
//! `scripts/build-images.sh` runs it for both images; the release workflow pushes the archives
//! with `skopeo copy --all oci-archive:FILE docker://REFERENCE`.

use std::path::PathBuf;
use std::process::ExitCode;

use probelint_cluster::{Image, multi_platform_archive};

const USAGE: &str = "usage: oci-image --reference REPO:TAG --binary ARCH=PATH... --at IMAGE_PATH \
[--user UID:GID] [--label KEY=VALUE]... [--file HOST_PATH=IMAGE_PATH]... --out FILE";

struct Args {
    reference: String,
    binaries: Vec<(String, PathBuf)>,
    at: String,
    user: Option<String>,
    labels: Vec<(String, String)>,
    files: Vec<(PathBuf, String)>,
    out: PathBuf,
}

fn main() -> ExitCode {
    match parse(std::env::args().skip(1)).and_then(|args| build(&args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("oci-image: {message}");
            ExitCode::from(2)
        }
    }
}

fn parse(mut words: impl Iterator<Item = String>) -> Result<Args, String> {
    let (mut reference, mut at, mut user, mut out) = (None, None, None, None);
    let (mut binaries, mut labels, mut files) = (Vec::new(), Vec::new(), Vec::new());
    while let Some(flag) = words.next() {
        if flag == "--help" || flag == "-h" {
            return Err(USAGE.to_owned());
        }
        let value = words
            .next()
            .ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))?;
        let pair = |what: &str| {
            value
                .split_once('=')
                .map(|(a, b)| (a.to_owned(), b.to_owned()))
                .ok_or_else(|| format!("{flag} {value:?}: expected {what}"))
        };
        match flag.as_str() {
            "--reference" => reference = Some(value.clone()),
            "--at" => at = Some(value.clone()),
            "--user" => user = Some(value.clone()),
            "--out" => out = Some(PathBuf::from(&value)),
            "--binary" => {
                let (arch, path) = pair("ARCH=PATH")?;
                binaries.push((arch, PathBuf::from(path)));
            }
            "--label" => labels.push(pair("KEY=VALUE")?),
            "--file" => {
                let (from, to) = pair("HOST_PATH=IMAGE_PATH")?;
                files.push((PathBuf::from(from), to));
            }
            _ => return Err(format!("unknown flag {flag}\n{USAGE}")),
        }
    }
    let missing = |name: &str| format!("{name} is required\n{USAGE}");
    if binaries.is_empty() {
        return Err(missing("--binary"));
    }
    Ok(Args {
        reference: reference.ok_or_else(|| missing("--reference"))?,
        binaries,
        at: at.ok_or_else(|| missing("--at"))?,
        user,
        labels,
        files,
        out: out.ok_or_else(|| missing("--out"))?,
    })
}

fn build(args: &Args) -> Result<(), String> {
    let mut images = Vec::new();
    for (architecture, binary) in &args.binaries {
        let mut image = Image::new(&args.reference);
        image
            .architecture(architecture)
            .executable_with_libraries(binary, &args.at)?
            .entrypoint(&[&args.at]);
        for (from, to) in &args.files {
            image.copy(from, to)?;
        }
        if let Some(user) = &args.user {
            image.user(user);
        }
        for (key, value) in &args.labels {
            image.label(key, value);
        }
        images.push(image);
    }
    let archive = multi_platform_archive(&args.reference, &images)?;
    if let Some(parent) = args.out.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
    }
    std::fs::write(&args.out, &archive)
        .map_err(|e| format!("cannot write {}: {e}", args.out.display()))?;
    let platforms: Vec<String> = args
        .binaries
        .iter()
        .map(|(arch, _)| format!("linux/{arch}"))
        .collect();
    eprintln!(
        "oci-image: wrote {} ({} for {}, {} bytes)",
        args.out.display(),
        args.reference,
        platforms.join(", "),
        archive.len()
    );
    Ok(())
}
