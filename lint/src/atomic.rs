//! Writing files so that an interrupted run never leaves one half-written: write a temporary
//! file beside the target, flush it to disk, then rename it over the target.

use std::io::Write;
use std::path::Path;

/// Writes `path` atomically with the bytes `fill` produces.
pub fn write_with(
    path: &Path,
    fill: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let dir = match path.parent() {
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
    if let Ok(meta) = std::fs::metadata(path) {
        temp.as_file().set_permissions(meta.permissions())?;
    }
    temp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// Writes `bytes` to `path` atomically.
pub fn write(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_with(path, |out| out.write_all(bytes))
}
