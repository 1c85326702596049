//! Container images built on this machine with no registry and no image builder: a root
//! filesystem assembled from local files, written as an OCI image layout in a tar archive (the
//! format `ctr images import` reads), one uncompressed layer.
//!
//! The archive is byte-for-byte reproducible: entries sorted, owner 0, mtime 0, so the same
//! files give the same image digest, and an import of an unchanged image is a no-op.
//!
//! The release images are written the same way (`src/bin/oci-image.rs`, run by
//! `scripts/build-images.sh`): one [`Image`] per platform, joined by [`multi_platform_archive`]
//! into an image index that `skopeo copy --all oci-archive:…` pushes to a registry.

use ring::digest::{SHA256, digest};
use serde_json::json;
use std::collections::BTreeMap;
use std::path::{Component, Path};

/// One file of the image's root filesystem.
struct Entry {
    contents: Vec<u8>,
    mode: u32,
}

/// An image to write: its name, its files, and the process it runs.
pub struct Image {
    /// The reference the kubelet asks containerd for (`probelint.test/reference-server:<tag>`);
    /// pods name it with `imagePullPolicy: Never`.
    pub name: String,
    files: BTreeMap<String, Entry>,
    entrypoint: Vec<String>,
    cmd: Vec<String>,
    user: Option<String>,
    env: Vec<String>,
    /// The OCI `architecture` (`amd64`, `arm64`).
    architecture: String,
    /// The image config's `Labels` (`org.opencontainers.image.*`).
    labels: BTreeMap<String, String>,
}

/// One image's blobs (layer, config, manifest) and the descriptor of its manifest.
struct Written {
    blobs: Vec<(String, Vec<u8>)>,
    manifest: serde_json::Value,
}

impl Image {
    pub fn new(name: &str) -> Image {
        Image {
            name: name.to_owned(),
            files: BTreeMap::new(),
            entrypoint: Vec::new(),
            cmd: Vec::new(),
            user: None,
            env: vec!["PATH=/usr/local/bin:/usr/bin:/bin".to_owned()],
            architecture: "amd64".to_owned(),
            labels: BTreeMap::new(),
        }
    }

    /// The OCI architecture the image's executables are for (`amd64` unless told).
    pub fn architecture(&mut self, architecture: &str) -> &mut Image {
        architecture.clone_into(&mut self.architecture);
        self
    }

    /// Adds a label to the image config (also an annotation of the manifest).
    pub fn label(&mut self, key: &str, value: &str) -> &mut Image {
        self.labels.insert(key.to_owned(), value.to_owned());
        self
    }

    /// Adds `contents` at the absolute path `at` with permission bits `mode`.
    pub fn file(&mut self, at: &str, contents: Vec<u8>, mode: u32) -> Result<&mut Image, String> {
        let relative = relative(at)?;
        self.files.insert(relative, Entry { contents, mode });
        Ok(self)
    }

    /// Adds the local file `from` at `at`, keeping its permission bits.
    pub fn copy(&mut self, from: &Path, at: &str) -> Result<&mut Image, String> {
        use std::os::unix::fs::PermissionsExt as _;
        let contents =
            std::fs::read(from).map_err(|e| format!("cannot read {}: {e}", from.display()))?;
        let mode = std::fs::metadata(from)
            .map_err(|e| format!("cannot stat {}: {e}", from.display()))?
            .permissions()
            .mode()
            & 0o7777;
        self.file(at, contents, mode)
    }

    /// Adds a dynamically linked executable at `at` together with the shared libraries and the
    /// ELF interpreter it loads on this machine (from `ldd`), each at the path it has here.
    pub fn executable_with_libraries(
        &mut self,
        from: &Path,
        at: &str,
    ) -> Result<&mut Image, String> {
        self.copy(from, at)?;
        for library in shared_libraries(from)? {
            let resolved = std::fs::canonicalize(&library)
                .map_err(|e| format!("cannot resolve {}: {e}", library.display()))?;
            let at = library
                .to_str()
                .ok_or_else(|| format!("{} is not UTF-8", library.display()))?
                .to_owned();
            self.copy(&resolved, &at)?;
        }
        Ok(self)
    }

    pub fn entrypoint(&mut self, args: &[&str]) -> &mut Image {
        self.entrypoint = args.iter().map(|a| (*a).to_owned()).collect();
        self
    }

    pub fn cmd(&mut self, args: &[&str]) -> &mut Image {
        self.cmd = args.iter().map(|a| (*a).to_owned()).collect();
        self
    }

    /// `uid:gid` the process runs as (the image config's `User`).
    pub fn user(&mut self, user: &str) -> &mut Image {
        self.user = Some(user.to_owned());
        self
    }

    /// The OCI image layout archive: `oci-layout`, `index.json` (the manifest annotated with
    /// the image's name, which containerd's importer reads as `io.containerd.image.name`) and the
    /// blobs (the layer, the config, the manifest).
    pub fn archive(&self) -> Result<Vec<u8>, String> {
        let written = self.write()?;
        let mut entry = written.manifest;
        entry["annotations"] = json!({"io.containerd.image.name": self.name});
        layout(&written.blobs, entry)
    }

    /// The layer, the config and the manifest of this image, and its manifest's descriptor.
    fn write(&self) -> Result<Written, String> {
        let layer = self.layer()?;
        let layer_digest = sha256(&layer);
        let mut config = json!({
            "architecture": self.architecture,
            "os": "linux",
            "config": {
                "Env": self.env,
                "Entrypoint": self.entrypoint,
                "Cmd": self.cmd,
                "WorkingDir": "/",
            },
            "rootfs": {"type": "layers", "diff_ids": [layer_digest]},
        });
        if let Some(user) = &self.user {
            config["config"]["User"] = json!(user);
        }
        if !self.labels.is_empty() {
            config["config"]["Labels"] = json!(self.labels);
        }
        let config = serde_json::to_vec(&config).map_err(|e| e.to_string())?;
        let config_digest = sha256(&config);
        let mut manifest = json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {
                "mediaType": "application/vnd.oci.image.config.v1+json",
                "digest": config_digest,
                "size": config.len(),
            },
            "layers": [{
                "mediaType": "application/vnd.oci.image.layer.v1.tar",
                "digest": layer_digest,
                "size": layer.len(),
            }],
        });
        if !self.labels.is_empty() {
            manifest["annotations"] = json!(self.labels);
        }
        let manifest = serde_json::to_vec(&manifest).map_err(|e| e.to_string())?;
        let manifest_digest = sha256(&manifest);
        let descriptor = json!({
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": manifest_digest,
            "size": manifest.len(),
            "platform": {"architecture": self.architecture, "os": "linux"},
        });
        Ok(Written {
            blobs: vec![
                (layer_digest, layer),
                (config_digest, config),
                (manifest_digest, manifest),
            ],
            manifest: descriptor,
        })
    }

    /// The root filesystem as one tar layer: every parent directory, then the files.
    fn layer(&self) -> Result<Vec<u8>, String> {
        let mut directories = std::collections::BTreeSet::new();
        for path in self.files.keys() {
            let mut parent = Path::new(path).parent();
            while let Some(p) = parent.filter(|p| !p.as_os_str().is_empty()) {
                directories.insert(p.to_string_lossy().into_owned());
                parent = p.parent();
            }
        }
        let mut tar = Tar::default();
        // Sorted, so a directory comes before what it holds.
        for directory in &directories {
            tar.directory(directory)?;
        }
        for (path, entry) in &self.files {
            tar.file(path, &entry.contents, entry.mode)?;
        }
        Ok(tar.finish())
    }
}

/// One image for several platforms, as an OCI image layout archive: `index.json` names one image
/// index (annotated with `reference`, the tag, as `org.opencontainers.image.ref.name`), which
/// lists each platform's manifest. `skopeo copy --all oci-archive:FILE docker://REPO:TAG` pushes
/// all of them under one tag; a registry then serves each node its own platform.
pub fn multi_platform_archive(reference: &str, images: &[Image]) -> Result<Vec<u8>, String> {
    let mut platforms = std::collections::BTreeSet::new();
    let mut blobs = Vec::new();
    let mut manifests = Vec::new();
    for image in images {
        if !platforms.insert(image.architecture.clone()) {
            return Err(format!(
                "two images for linux/{} in one index",
                image.architecture
            ));
        }
        let written = image.write()?;
        blobs.extend(written.blobs);
        manifests.push(written.manifest);
    }
    if manifests.is_empty() {
        return Err("an image index needs at least one image".to_owned());
    }
    let index = serde_json::to_vec(&json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": manifests,
    }))
    .map_err(|e| e.to_string())?;
    let index_digest = sha256(&index);
    let entry = json!({
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "digest": index_digest,
        "size": index.len(),
        "annotations": {
            "org.opencontainers.image.ref.name": reference,
            "io.containerd.image.name": reference,
        },
    });
    blobs.push((index_digest, index));
    layout(&blobs, entry)
}

/// The archive of an OCI image layout: the blobs (each once), `index.json` with its one entry,
/// and `oci-layout`.
fn layout(blobs: &[(String, Vec<u8>)], entry: serde_json::Value) -> Result<Vec<u8>, String> {
    let index = serde_json::to_vec(&json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [entry],
    }))
    .map_err(|e| e.to_string())?;
    let mut tar = Tar::default();
    tar.directory("blobs")?;
    tar.directory("blobs/sha256")?;
    let mut seen = std::collections::BTreeSet::new();
    for (digest, bytes) in blobs {
        if seen.insert(digest) {
            let path = format!("blobs/sha256/{}", digest.trim_start_matches("sha256:"));
            tar.file(&path, bytes, 0o644)?;
        }
    }
    tar.file("index.json", &index, 0o644)?;
    tar.file("oci-layout", br#"{"imageLayoutVersion":"1.0.0"}"#, 0o644)?;
    Ok(tar.finish())
}

/// `sha256:<hex>` of `bytes`.
fn sha256(bytes: &[u8]) -> String {
    let hash = digest(&SHA256, bytes);
    let hex: String = hash.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// `at` without its leading `/`, refusing `..` and relative paths.
fn relative(at: &str) -> Result<String, String> {
    let path = Path::new(at);
    if !path.is_absolute()
        || path
            .components()
            .any(|c| !matches!(c, Component::RootDir | Component::Normal(_)))
    {
        return Err(format!(
            "{at:?}: an image path must be absolute, with no `..`"
        ));
    }
    Ok(at.trim_start_matches('/').to_owned())
}

/// The shared libraries and interpreter `ldd` says `binary` loads (absolute paths).
fn shared_libraries(binary: &Path) -> Result<Vec<std::path::PathBuf>, String> {
    let out = std::process::Command::new("ldd")
        .arg(binary)
        .output()
        .map_err(|e| format!("cannot run ldd: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        // A static executable: `ldd` says "not a dynamic executable" and fails.
        return if text.contains("not a dynamic")
            || String::from_utf8_lossy(&out.stderr).contains("not a dynamic")
        {
            Ok(Vec::new())
        } else {
            Err(format!(
                "ldd {} failed ({}): {}",
                binary.display(),
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ))
        };
    }
    let mut libraries = Vec::new();
    for line in text.lines() {
        // `libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x…)`, or `/lib64/ld-linux-x86-64.so.2 (0x…)`.
        let path = match line.split_once("=>") {
            Some((_, right)) => right.split_whitespace().next(),
            None => line.split_whitespace().next(),
        };
        if let Some(path) = path.filter(|p| p.starts_with('/')) {
            libraries.push(std::path::PathBuf::from(path));
        } else if line.contains("not found") {
            return Err(format!("{}: {}", binary.display(), line.trim()));
        }
    }
    Ok(libraries)
}

/// A ustar archive writer: regular files and directories, owner root, mtime 0.
#[derive(Default)]
struct Tar {
    out: Vec<u8>,
}

impl Tar {
    fn directory(&mut self, path: &str) -> Result<(), String> {
        self.header(&format!("{path}/"), 0, 0o755, b'5')
    }

    fn file(&mut self, path: &str, contents: &[u8], mode: u32) -> Result<(), String> {
        self.header(path, contents.len() as u64, mode, b'0')?;
        self.out.extend_from_slice(contents);
        let padding = (512 - contents.len() % 512) % 512;
        self.out.extend(std::iter::repeat_n(0, padding));
        Ok(())
    }

    fn header(&mut self, path: &str, size: u64, mode: u32, kind: u8) -> Result<(), String> {
        let mut header = [0u8; 512];
        // ustar splits a long path into a prefix (155 bytes) and a name (100 bytes) at a `/`.
        let (prefix, name) = if path.len() <= 100 {
            ("", path)
        } else {
            let split = path[..path.len().min(156)]
                .rfind('/')
                .filter(|&i| path.len() - i - 1 <= 100 && i <= 155)
                .ok_or_else(|| format!("{path:?} is too long for a tar entry"))?;
            (&path[..split], &path[split + 1..])
        };
        let octal = |field: &mut [u8], value: u64| {
            let text = format!("{value:0width$o}", width = field.len() - 1);
            field[..text.len()].copy_from_slice(text.as_bytes());
        };
        header[..name.len()].copy_from_slice(name.as_bytes());
        octal(&mut header[100..108], u64::from(mode));
        octal(&mut header[108..116], 0);
        octal(&mut header[116..124], 0);
        octal(&mut header[124..136], size);
        octal(&mut header[136..148], 0);
        header[156] = kind;
        header[257..263].copy_from_slice(b"ustar\0");
        header[263..265].copy_from_slice(b"00");
        header[345..345 + prefix.len()].copy_from_slice(prefix.as_bytes());
        // The checksum is computed with its own field as spaces.
        header[148..156].copy_from_slice(b"        ");
        let sum: u64 = header.iter().map(|&b| u64::from(b)).sum();
        let text = format!("{sum:06o}\0 ");
        header[148..156].copy_from_slice(text.as_bytes());
        self.out.extend_from_slice(&header);
        Ok(())
    }

    fn finish(mut self) -> Vec<u8> {
        // Two zero blocks end the archive.
        self.out.extend(std::iter::repeat_n(0, 1024));
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listing(archive: &[u8]) -> String {
        let dir = std::env::temp_dir().join(format!("probelint-image-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("a.tar");
        std::fs::write(&path, archive).unwrap();
        let out = std::process::Command::new("tar")
            .arg("-tvf")
            .arg(&path)
            .output()
            .unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    }

    #[test]
    fn the_archive_is_an_oci_layout_that_tar_reads_and_is_reproducible() {
        let mut image = Image::new("probelint.test/example:1");
        image
            .file("/usr/local/bin/tool", b"#!/bin/true\n".to_vec(), 0o755)
            .unwrap()
            .file(
                &format!("/models/{}weights", "deep/".repeat(30)),
                vec![7; 600],
                0o644,
            )
            .unwrap()
            .entrypoint(&["/usr/local/bin/tool"])
            .user("65532:65532");
        let archive = image.archive().unwrap();
        assert_eq!(archive, image.archive().unwrap(), "same files, same bytes");
        let listed = listing(&archive);
        assert!(listed.contains(" index.json"), "{listed}");
        assert!(listed.contains(" oci-layout"), "{listed}");
        assert_eq!(listed.matches("blobs/sha256/").count(), 4, "{listed}");

        let layer = image.layer().unwrap();
        let listed = listing(&layer);
        assert!(listed.contains("-rwxr-xr-x 0/0"), "{listed}");
        assert!(listed.contains("usr/local/bin/tool"), "{listed}");
        assert!(
            listed.contains("deep/deep/weights"),
            "a path longer than 100 bytes: {listed}"
        );
        assert!(listed.contains("drwxr-xr-x 0/0"), "{listed}");
    }

    /// `name` inside the tar `archive`.
    fn member(archive: &[u8], name: &str) -> Vec<u8> {
        let dir =
            std::env::temp_dir().join(format!("probelint-image-member-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("a.tar");
        std::fs::write(&path, archive).unwrap();
        let out = std::process::Command::new("tar")
            .arg("-xOf")
            .arg(&path)
            .arg(name)
            .output()
            .unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        assert!(out.status.success(), "{name}: {out:?}");
        out.stdout
    }

    #[test]
    fn a_multi_platform_archive_is_one_tagged_index_of_each_platform() {
        let image = |arch: &str| {
            let mut image = Image::new("ghcr.io/probelint/probelint:1.2.3");
            image
                .file("/usr/local/bin/probelint", arch.as_bytes().to_vec(), 0o755)
                .unwrap()
                .entrypoint(&["/usr/local/bin/probelint"])
                .architecture(arch)
                .label("org.opencontainers.image.version", "1.2.3");
            image
        };
        let images = [image("amd64"), image("arm64")];
        let archive = multi_platform_archive("ghcr.io/probelint/probelint:1.2.3", &images).unwrap();
        assert_eq!(
            archive,
            multi_platform_archive("ghcr.io/probelint/probelint:1.2.3", &images).unwrap(),
            "same files, same bytes"
        );
        let top: serde_json::Value =
            serde_json::from_slice(&member(&archive, "index.json")).unwrap();
        let entry = &top["manifests"][0];
        assert_eq!(top["manifests"].as_array().unwrap().len(), 1, "{top}");
        assert_eq!(
            entry["annotations"]["org.opencontainers.image.ref.name"],
            "ghcr.io/probelint/probelint:1.2.3"
        );
        assert_eq!(
            entry["mediaType"],
            "application/vnd.oci.image.index.v1+json"
        );
        let blob = |digest: &serde_json::Value| {
            let name = format!(
                "blobs/sha256/{}",
                digest.as_str().unwrap().trim_start_matches("sha256:")
            );
            let bytes = member(&archive, &name);
            assert_eq!(sha256(&bytes), digest.as_str().unwrap(), "{name}");
            serde_json::from_slice::<serde_json::Value>(&bytes).unwrap()
        };
        let index = blob(&entry["digest"]);
        let platforms: Vec<&str> = index["manifests"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["platform"]["architecture"].as_str().unwrap())
            .collect();
        assert_eq!(platforms, ["amd64", "arm64"]);
        let manifest = blob(&index["manifests"][1]["digest"]);
        let config = blob(&manifest["config"]["digest"]);
        assert_eq!(config["architecture"], "arm64");
        assert_eq!(
            config["config"]["Labels"]["org.opencontainers.image.version"],
            "1.2.3"
        );

        let error = multi_platform_archive("x:1", &[image("amd64"), image("amd64")]).err();
        assert!(error.is_some_and(|e| e.contains("two images for linux/amd64")));
        assert!(multi_platform_archive("x:1", &[]).is_err());
    }

    #[test]
    fn a_path_that_escapes_the_root_is_refused() {
        let mut image = Image::new("probelint.test/example:1");
        let error = image.file("/a/../../etc/passwd", Vec::new(), 0o644).err();
        assert!(error.is_some_and(|e| e.contains("no `..`")));
        assert!(image.file("relative", Vec::new(), 0o644).is_err());
    }
}
