//! Writing files so that an interrupted run never leaves one half-written: write a temporary
//! file beside the target, flush it to disk, then rename it over the target.

use std::io::Write;
use std::path::{Path, PathBuf};

/// Where the bytes must land: the target of a symlink (renaming over the link would replace the
/// link itself), else the path.
fn resolve(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

/// Writes `path` atomically with the bytes `fill` produces. Only regular files (or paths that do
/// not exist yet) are replaced by rename: `--output /dev/stdout`, `/dev/null` or a FIFO are written
/// in place, since renaming over a device would replace the device node with a file.
pub fn write_with(
    path: &Path,
    fill: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let target = resolve(path);
    let existing = std::fs::metadata(&target).ok();
    if existing.as_ref().is_some_and(|m| !m.is_file()) {
        let mut out =
            std::io::BufWriter::new(std::fs::OpenOptions::new().write(true).open(&target)?);
        fill(&mut out)?;
        return out.flush();
    }
    let dir = match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut temp = tempfile::Builder::new()
        .prefix(".probelint-")
        .suffix(".tmp")
        .tempfile_in(dir)?;
    {
        let mut out = std::io::BufWriter::new(temp.as_file_mut());
        fill(&mut out)?;
        out.flush()?;
    }
    temp.as_file().sync_all()?;
    // Keep the target's permissions when replacing it.
    if let Some(meta) = existing {
        temp.as_file().set_permissions(meta.permissions())?;
    }
    temp.persist(&target).map_err(|e| e.error)?;
    Ok(())
}

/// Writes `bytes` to `path` atomically.
pub fn write(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_with(path, |out| out.write_all(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_regular_files_and_keeps_their_mode() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.yaml");
        std::fs::write(&path, "old").unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        }
        write(&path, b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o640);
        }
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1, "no temporary file left");
    }

    #[cfg(unix)]
    #[test]
    fn writes_through_symlinks_and_never_replaces_devices() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.yaml");
        let link = dir.path().join("link.yaml");
        std::fs::write(&real, "old").unwrap();
        std::os::unix::fs::symlink(&real, &link).unwrap();
        write(&link, b"new").unwrap();
        assert!(
            std::fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink(),
            "link kept"
        );
        assert_eq!(std::fs::read_to_string(&real).unwrap(), "new");

        write(Path::new("/dev/null"), b"discarded").unwrap();
        let meta = std::fs::metadata("/dev/null").unwrap();
        use std::os::unix::fs::FileTypeExt;
        assert!(
            meta.file_type().is_char_device(),
            "/dev/null is still a device"
        );
    }
}
