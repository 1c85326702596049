//! The one error type of the YAML layer.

use std::fmt;

/// What went wrong, so that callers can react (exit codes, SARIF rule ids, "skip binary files")
/// without matching on message text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum YamlErrorKind {
    /// The YAML parser rejected the text (bad indentation, tabs, unclosed quotes, ...).
    Syntax,
    /// The file is not UTF-8 (or is UTF-16/UTF-32, which Kubernetes tools do not read either).
    NotUtf8,
    /// The file contains NUL bytes: almost certainly not a text file.
    BinaryFile,
    /// The file is larger than [`Limits::max_file_bytes`](super::Limits::max_file_bytes).
    TooLarge,
    /// Collections are nested deeper than [`Limits::max_depth`](super::Limits::max_depth).
    TooDeep,
    /// More documents than [`Limits::max_documents`](super::Limits::max_documents).
    TooManyDocuments,
    /// More nodes than [`Limits::max_nodes`](super::Limits::max_nodes), counting alias
    /// expansions: the signature of an alias bomb ("billion laughs").
    TooManyNodes,
    /// The same key twice in one mapping: not an error, reported in
    /// [`Stream::divergences`](super::Stream::divergences); the value written last is read, as
    /// kubectl reads it.
    DuplicateKey,
    /// A mapping key that Kubernetes cannot turn into a JSON object key (null, a collection,
    /// an unsigned integer above `i64::MAX`).
    InvalidKey,
    /// A scalar that cannot become JSON or does not match its explicit tag (`.inf`, `.nan`,
    /// `!!int abc`, bad `!!binary`).
    InvalidValue,
    /// A merge key (`<<`) whose value is not a mapping or a sequence of mappings.
    InvalidMerge,
    /// An alias that refers to a node containing it, or to an anchor of another document.
    Alias,
    /// A line starting with `---` followed by more than spaces and a comment: kubectl
    /// (apimachinery's `YAMLReader`) refuses the stream, whatever YAML makes of it.
    InvalidSeparator,
    /// A line kubectl reads as a document separator where YAML reads text (`---#`): not an
    /// error, reported in [`Stream::divergences`](super::Stream::divergences).
    SeparatorDiffers,
    /// A document after a document end marker (`...`) with no `---` before it, which kubectl
    /// never reads: not an error, reported in
    /// [`Stream::divergences`](super::Stream::divergences), and the document is left out.
    AfterDocumentEnd,
}

/// An error with the position (1-based line and character column) where it was found.
///
/// `Display` renders as `line 3, column 5: message`, ready to be prefixed with the file name.
/// Errors about the whole file (too large) point at line 1, column 1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct YamlError {
    /// What kind of problem this is.
    pub kind: YamlErrorKind,
    /// A sentence saying what happened and, where we can tell, what to do about it.
    pub message: String,
    /// 1-based line.
    pub line: usize,
    /// 1-based column, counted in characters (not bytes).
    pub column: usize,
    /// Byte offset into the file, for tools that underline source text.
    pub offset: usize,
}

impl fmt::Display for YamlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "line {}, column {}: {}",
            self.line, self.column, self.message
        )
    }
}

impl std::error::Error for YamlError {}
