//! Reading an input with limits: a regular file of bounded size, or standard input.

use super::discover::Input;
use crate::atomic::FileStamp;
use crate::error::ReadError;
use probelint_yaml::load::Limits;
use std::io::Read;
use std::path::PathBuf;

/// Where a source's bytes come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// A file on disk, by the path it was found under.
    File(PathBuf),
    /// Standard input (`-`).
    Stdin,
    /// The output of `kubectl kustomize DIR` (`--kustomize`).
    Rendered { dir: PathBuf },
}

impl From<&Input> for Origin {
    fn from(input: &Input) -> Self {
        match input {
            Input::Stdin => Origin::Stdin,
            Input::File(path) => Origin::File(path.clone()),
        }
    }
}

impl Origin {
    /// The file to rewrite for `--fix`; `None` for text that has no file of its own.
    #[must_use]
    pub fn path(&self) -> Option<&std::path::Path> {
        match self {
            Origin::File(path) => Some(path),
            Origin::Stdin | Origin::Rendered { .. } => None,
        }
    }
}

/// A source to lint: its name in output and its bytes (or why they could not be read).
pub struct Source {
    pub name: String,
    pub origin: Origin,
    pub bytes: Result<Vec<u8>, ReadError>,
    /// What the file was when `bytes` were read (a file read from disk), so that `--fix` can
    /// tell whether it changed before replacing it.
    pub stamp: Option<FileStamp>,
}

impl Source {
    /// Text that was never on disk (tests, fuzzing), linted as a file named `name`.
    #[must_use]
    pub fn in_memory(name: &str, bytes: Vec<u8>) -> Self {
        Source {
            name: name.to_owned(),
            origin: Origin::File(name.into()),
            bytes: Ok(bytes),
            stamp: None,
        }
    }
}

/// Reads an input, refusing files over the size limit before reading them.
pub fn read_input(input: &Input, limits: &Limits) -> Source {
    let name = input.display_name();
    let (bytes, stamp) = match input {
        Input::Stdin => (
            match read_capped(std::io::stdin().lock(), limits.max_file_bytes, 0) {
                Ok(Some(bytes)) => Ok(bytes),
                Ok(None) => Err(ReadError::StdinTooLong(limits.max_file_bytes)),
                Err(e) => Err(ReadError::Stdin(e)),
            },
            None,
        ),
        Input::File(path) => match read_file(path, limits.max_file_bytes) {
            Ok((bytes, stamp)) => (Ok(bytes), Some(stamp)),
            Err(e) => (Err(e), None),
        },
    };
    Source {
        name,
        origin: Origin::from(input),
        bytes,
        stamp,
    }
}

/// Reads a regular file of at most `max` bytes. Anything else is refused before it is opened:
/// opening a named pipe without a writer would block the whole run forever, and a device may
/// never end. The file is opened without blocking (`O_NONBLOCK`) and its type checked again on
/// the open file, so that a path swapped for a pipe or a device between the two is refused too.
/// A file over the limit is refused by its size, without reading it; the `take` still
/// bounds a file that grows while it is read. The stamp is the open file's, taken after reading.
pub fn read_file(path: &std::path::Path, max: usize) -> Result<(Vec<u8>, FileStamp), ReadError> {
    let meta = std::fs::metadata(path).map_err(ReadError::File)?;
    if !meta.is_file() {
        return Err(ReadError::NotAFile(file_kind(&meta.file_type())));
    }
    if meta.len() > max as u64 {
        return Err(ReadError::TooLarge {
            size: meta.len(),
            max,
        });
    }
    let mut file = open_nonblocking(path).map_err(ReadError::File)?;
    let opened = file.metadata().map_err(ReadError::File)?;
    if !opened.is_file() {
        return Err(ReadError::NotAFile(file_kind(&opened.file_type())));
    }
    let read = read_capped(&mut file, max, opened.len() as usize)
        .and_then(|bytes| Ok((bytes, FileStamp::of(&file.metadata()?))));
    match read {
        Ok((Some(bytes), stamp)) => Ok((bytes, stamp)),
        // It grew while it was read.
        Ok((None, _)) => Err(ReadError::Grew(max)),
        Err(e) => Err(ReadError::File(e)),
    }
}

/// Opens `path` for reading without waiting for a writer (a FIFO) or a device (`O_NONBLOCK`;
/// it changes nothing for a regular file's reads).
fn open_nonblocking(path: &std::path::Path) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.custom_flags(libc::O_NONBLOCK);
    }
    options.open(path)
}

/// Reads at most `max` bytes; `None` when there is more. The byte past the limit is read on
/// its own, so the buffer never grows past `max` (a stream one byte too long would otherwise
/// double it). `expected` (a file's size) sizes the buffer up front.
pub fn read_capped(
    mut reader: impl Read,
    max: usize,
    expected: usize,
) -> std::io::Result<Option<Vec<u8>>> {
    let mut buf = Vec::new();
    buf.try_reserve_exact(expected.min(max))
        .map_err(|_| std::io::ErrorKind::OutOfMemory)?;
    (&mut reader).take(max as u64).read_to_end(&mut buf)?;
    if buf.len() < max {
        return Ok(Some(buf));
    }
    let mut one = [0u8; 1];
    loop {
        match reader.read(&mut one) {
            Ok(0) => return Ok(Some(buf)),
            Ok(_) => return Ok(None),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

fn file_kind(kind: &std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if kind.is_fifo() {
            return "a named pipe";
        }
        if kind.is_socket() {
            return "a socket";
        }
        if kind.is_char_device() || kind.is_block_device() {
            return "a device";
        }
    }
    if kind.is_dir() {
        "a directory"
    } else {
        "not a file"
    }
}

/// Something to lint: a source already in memory, or an input still to be read (read by the
/// worker that parses it, so reading is as parallel as parsing).
pub enum Pending {
    Source(Source),
    Input(Input),
}

impl From<Source> for Pending {
    fn from(source: Source) -> Self {
        Pending::Source(source)
    }
}

impl From<Input> for Pending {
    fn from(input: Input) -> Self {
        Pending::Input(input)
    }
}

impl Pending {
    /// The source, reading it first if it is still an input.
    #[must_use]
    pub fn read(self, limits: &Limits) -> Source {
        match self {
            Pending::Source(source) => source,
            Pending::Input(input) => read_input(&input, limits),
        }
    }
}
