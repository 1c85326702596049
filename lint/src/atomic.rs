//! Writing files so that no run loses one: write a temporary file beside the target, flush it to
//! disk, give it the target's mode and owner, then rename it over the target. An interrupted run
//! leaves the old file or the new one, never half of one.
//!
//! A rename replaces a file whatever the file's own permissions say (only the directory's
//! count), and it replaces whatever is there at that moment. So before renaming, a file is
//! refused when it is read-only or this process may not write it, when its owner cannot be
//! kept, and (for `--fix`) when it is no longer what was read: an edit made while probelint ran
//! stays, and the file is reported instead.

use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// What a file was when it was read: which file (device and inode), its size and modification
/// time. Compared again before the file is replaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileStamp {
    /// Device and inode: the same file through any name, symlink or hard link.
    pub id: FileId,
    pub len: u64,
    pub modified: Option<SystemTime>,
}

/// A file's identity: its device and inode number (`None` off Unix, where names are compared
/// instead).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FileId(Option<(u64, u64)>);

impl FileId {
    #[must_use]
    pub fn of(meta: &std::fs::Metadata) -> Self {
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            FileId(Some((meta.dev(), meta.ino())))
        }
        #[cfg(not(unix))]
        {
            let _ = meta;
            FileId(None)
        }
    }

    /// Whether the platform gave a device and inode.
    #[must_use]
    pub fn is_known(&self) -> bool {
        self.0.is_some()
    }

    /// Whether both are known and the same file.
    #[must_use]
    pub fn same(&self, other: &FileId) -> bool {
        self.0.is_some() && self.0 == other.0
    }
}

impl FileStamp {
    #[must_use]
    pub fn of(meta: &std::fs::Metadata) -> Self {
        FileStamp {
            id: FileId::of(meta),
            len: meta.len(),
            modified: meta.modified().ok(),
        }
    }
}

/// What must still be on disk for `--fix` to replace a file: the bytes it read, and what the
/// file was when it read them.
#[derive(Debug, Clone, Copy)]
pub struct Expected<'a> {
    pub content: &'a [u8],
    pub stamp: Option<FileStamp>,
}

/// Where the bytes must land: the target of a symlink (renaming over the link would replace the
/// link itself), else the path.
fn resolve(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

fn refused(kind: io::ErrorKind, message: String) -> io::Error {
    io::Error::new(kind, message)
}

/// Writes `path` atomically with the bytes `fill` produces (a report: `--output FILE`). Only
/// regular files (or paths that do not exist yet) are replaced by rename: `--output
/// /dev/stdout`, `/dev/null` or a FIFO are written in place, since renaming over a device would
/// replace the device node with a file. An existing file keeps its mode and owner, and a
/// read-only one is refused.
pub fn write_with(
    path: &Path,
    fill: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> io::Result<()> {
    let target = resolve(path);
    let existing = match std::fs::metadata(&target) {
        Ok(meta) => Some(meta),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(e),
    };
    if existing.as_ref().is_some_and(|m| !m.is_file()) {
        let mut out = io::BufWriter::new(std::fs::OpenOptions::new().write(true).open(&target)?);
        fill(&mut out)?;
        return out.flush();
    }
    replace(&target, existing.as_ref(), fill, None)
}

/// Writes `bytes` to `path` atomically, as [`write_with`] does.
pub fn write(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_with(path, |out| out.write_all(bytes))
}

/// Replaces the manifest at `path` with `bytes` (`--fix`), only if it is still exactly what was
/// read (`expected`), it is a regular file this process may write, and its owner can be kept.
///
/// # Errors
///
/// Why the file was left as it is: it vanished, changed since it was read, is read-only, is
/// owned by someone else and this process cannot give the new file to them, or an OS error
/// writing the temporary file beside it.
pub fn replace_expected(path: &Path, bytes: &[u8], expected: Expected<'_>) -> io::Result<()> {
    let target = resolve(path);
    let meta = std::fs::metadata(&target).map_err(|e| {
        if e.kind() == io::ErrorKind::NotFound {
            refused(
                e.kind(),
                "the file no longer exists (deleted or moved while probelint ran); nothing was \
                 written"
                    .to_owned(),
            )
        } else {
            e
        }
    })?;
    if !meta.is_file() {
        return Err(refused(
            io::ErrorKind::InvalidInput,
            "it is no longer a regular file; nothing was written".to_owned(),
        ));
    }
    // The stamp now, so that nothing is written for a file already changed; the bytes are
    // compared just before the rename.
    unchanged(&target, &meta, expected, false)?;
    replace(
        &target,
        Some(&meta),
        |out| out.write_all(bytes),
        Some(expected),
    )
}

/// Refuses when the file on disk is not the one that was read (device, inode, size and
/// modification time), or, with `content`, no longer holds the bytes that were read, which also
/// catches an edit within the clock's resolution.
fn unchanged(
    target: &Path,
    meta: &std::fs::Metadata,
    expected: Expected<'_>,
    content: bool,
) -> io::Result<()> {
    let changed = || {
        refused(
            io::ErrorKind::Other,
            "the file changed on disk after probelint read it, so the fix was not written and \
             the edit is kept; run --fix again"
                .to_owned(),
        )
    };
    if expected
        .stamp
        .is_some_and(|stamp| stamp != FileStamp::of(meta))
        || meta.len() != expected.content.len() as u64
    {
        return Err(changed());
    }
    if !content {
        return Ok(());
    }
    let mut now = Vec::with_capacity(expected.content.len());
    std::fs::File::open(target)?
        .take(expected.content.len() as u64 + 1)
        .read_to_end(&mut now)?;
    if now != expected.content {
        return Err(changed());
    }
    Ok(())
}

/// The temporary file, filled, synced and given the target's mode and owner, renamed over
/// `target`; `expected` is checked once more just before the rename.
fn replace(
    target: &Path,
    existing: Option<&std::fs::Metadata>,
    fill: impl FnOnce(&mut dyn Write) -> io::Result<()>,
    expected: Option<Expected<'_>>,
) -> io::Result<()> {
    let dir = match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if let Some(meta) = existing {
        writable(target, meta)?;
    }
    read_only_directory(dir)?;
    let mut builder = tempfile::Builder::new();
    builder.prefix(".probelint-").suffix(".tmp");
    // A new file gets the mode any program gives one (0666 less the umask), not the temporary
    // file's 0600: a report written for a CI artifact or a teammate must stay readable to them.
    // An existing file keeps its own mode (below).
    #[cfg(unix)]
    if existing.is_none() {
        use std::os::unix::fs::PermissionsExt;
        builder.permissions(std::fs::Permissions::from_mode(0o666));
    }
    let mut temp = builder.tempfile_in(dir).map_err(|e| {
        refused(
            e.kind(),
            format!(
                "cannot create a temporary file in {} to write it: {e}",
                crate::input::display_path(dir)
            ),
        )
    })?;
    {
        let mut out = io::BufWriter::new(temp.as_file_mut());
        fill(&mut out)?;
        out.flush()?;
    }
    if let Some(meta) = existing {
        keep_owner_and_mode(temp.as_file(), meta)?;
    }
    temp.as_file().sync_all()?;
    if let Some(expected) = expected {
        // The last moment before the rename: what is there now must still be what was read.
        let meta = std::fs::metadata(target)?;
        unchanged(target, &meta, expected, true)?;
    }
    temp.persist(target).map_err(|e| e.error)?;
    Ok(())
}

/// Refuses a file nobody may write (`chmod a-w`: a deliberate read-only file, refused even for
/// root, whom the kernel would let write it) and one this process may not write.
fn writable(target: &Path, meta: &std::fs::Metadata) -> io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        use std::os::unix::fs::PermissionsExt;
        let mode = meta.permissions().mode();
        if mode & 0o222 == 0 {
            return Err(refused(
                io::ErrorKind::PermissionDenied,
                format!(
                    "the file is read-only (mode {:04o}), so it is not rewritten; make it \
                     writable (chmod u+w) to fix it",
                    mode & 0o7777
                ),
            ));
        }
        let c_path = std::ffi::CString::new(target.as_os_str().as_bytes())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        // SAFETY: `c_path` is a valid NUL-terminated string that outlives the call; access(2)
        // only reads it.
        if unsafe { libc::access(c_path.as_ptr(), libc::W_OK) } != 0 {
            let e = io::Error::last_os_error();
            return Err(refused(
                e.kind(),
                format!("this user may not write the file: {e}"),
            ));
        }
    }
    #[cfg(not(unix))]
    {
        let _ = target;
        if meta.permissions().readonly() {
            return Err(refused(
                io::ErrorKind::PermissionDenied,
                "the file is read-only, so it is not rewritten".to_owned(),
            ));
        }
    }
    Ok(())
}

/// Refuses a directory nobody may write (`chmod a-w`), where the kernel would still let root
/// create the temporary file.
fn read_only_directory(dir: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if let Ok(meta) = std::fs::metadata(dir)
            && meta.permissions().mode() & 0o222 == 0
        {
            return Err(refused(
                io::ErrorKind::PermissionDenied,
                format!(
                    "its directory {} is read-only (mode {:04o}), so no file is replaced in it",
                    crate::input::display_path(dir),
                    meta.permissions().mode() & 0o7777
                ),
            ));
        }
    }
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
}

/// Gives the new file the old one's owner and mode. The owner first: changing it clears the
/// set-user-ID and set-group-ID bits, which the mode then restores. A file whose owner cannot
/// be kept (someone else's, when not running as root) is refused rather than silently taken
/// over.
fn keep_owner_and_mode(temp: &std::fs::File, meta: &std::fs::Metadata) -> io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let now = temp.metadata()?;
        if (now.uid(), now.gid()) != (meta.uid(), meta.gid()) {
            std::os::unix::fs::fchown(temp, Some(meta.uid()), Some(meta.gid())).map_err(|e| {
                refused(
                    e.kind(),
                    format!(
                        "the file belongs to uid {} gid {}, and the rewritten file could not be \
                         given to them ({e}), so it is not rewritten",
                        meta.uid(),
                        meta.gid()
                    ),
                )
            })?;
        }
    }
    temp.set_permissions(meta.permissions())
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

    #[test]
    fn a_file_that_is_no_longer_what_was_read_is_not_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.yaml");
        std::fs::write(&path, "read: 1\n").unwrap();
        let stamp = FileStamp::of(&std::fs::metadata(&path).unwrap());
        let expected = Expected {
            content: b"read: 1\n",
            stamp: Some(stamp),
        };
        // Same length, same inode, other bytes: only the content comparison sees it.
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .and_then(|mut f| f.write_all(b"edit: 2\n"))
            .unwrap();
        let stamp_now = FileStamp::of(&std::fs::metadata(&path).unwrap());
        let err = replace_expected(
            &path,
            b"fixed\n",
            Expected {
                stamp: Some(stamp_now),
                ..expected
            },
        )
        .unwrap_err();
        assert!(err.to_string().contains("changed on disk"), "{err}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "edit: 2\n");

        std::fs::remove_file(&path).unwrap();
        let err = replace_expected(&path, b"fixed\n", expected).unwrap_err();
        assert!(err.to_string().contains("no longer exists"), "{err}");
        assert!(!path.exists(), "a deleted file is not brought back");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
