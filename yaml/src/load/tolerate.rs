//! What go-yaml (and so kubectl) reads that saphyr-parser refuses, rewritten for the parser
//! into text of the same meaning.
//!
//! saphyr-parser follows the YAML spec's indentation rule inside flow collections and quoted
//! scalars: a continuation line must be indented past the enclosing block's indentation.
//! go-yaml does not check it, and manifests rely on that (`args: [ "vllm serve …"` with the
//! `]` at column 0, published in vendors' vLLM examples). saphyr also refuses tabs as the
//! separation after a `:` (`key:<TAB>value`) and as the indentation of a flow collection's
//! continuation lines, which go-yaml reads as blanks. saphyr's upstream fix for the first is
//! still an open pull request (saphyr-rs/saphyr#101, #108), so the text is rewritten before
//! parsing instead ([`tolerate`]):
//!
//! - a continuation line of a flow collection or a quoted scalar that starts left of the
//!   construct's opening `[`, `{` or quote gets spaces inserted before it, up to that column;
//!   the leading blanks of such a line are excluded from the content by both YAML and go-yaml
//!   (line folding strips them), so the value is the same;
//! - tabs there, and the tabs right after a `:` indicator, become spaces (same length).
//!
//! Where go-yaml refuses a tab that saphyr reads as a blank, the first such tab is
//! [`Tolerated::refused`], for the caller to refuse as kubectl does: after a block sequence's `-`
//! (`-<TAB>b`), and before a line's first token or on a blank or comment line in the block
//! context ("found character that cannot start any token": go-yaml skips a tab only where a
//! simple key cannot start); in the indentation of a line after a plain scalar, left of the
//! column of the innermost block collection around it, in a flow collection or not ("found a
//! tab character that violates indentation"); and in a block scalar's indentation ("found a tab
//! character where an indentation space is expected").
//!
//! Inserted spaces shift the parser's positions; [`Rewritten::original`] maps them back, so
//! every location stays the file's own. Text inside block scalars, comments and quoted
//! scalars' own lines is never touched.

/// A run of spaces inserted into the parser's text.
#[derive(Debug, Clone, Copy)]
struct Insert {
    /// Parser character index of the first inserted space.
    start: usize,
    /// Parser character index just past the run (the original character that follows it).
    end: usize,
    /// Spaces inserted up to and including this run.
    total: usize,
}

/// The text the parser reads, and how its positions map back.
#[derive(Debug, Default)]
pub(super) struct Rewritten {
    pub(super) text: String,
    inserts: Vec<Insert>,
}

impl Rewritten {
    /// The character index in the original text of the parser's character `index` (an
    /// inserted space maps to the character it was inserted before).
    pub(super) fn original(&self, index: usize) -> usize {
        let at = self.inserts.partition_point(|run| run.end <= index);
        let before = at.checked_sub(1).map_or(0, |i| self.inserts[i].total);
        match self.inserts.get(at) {
            Some(run) if run.start <= index => run.end - run.total,
            _ => index - before,
        }
    }
}

/// What the scanner is inside of, carried from line to line.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Open {
    /// Block context; `block_scalar` holds the indentation of a `|`/`>` header's line while
    /// its content lines go by, `plain` the column from which a line continues the plain
    /// scalar the last line ended inside (one past its block collection's: a `[` there is
    /// text, not a flow collection).
    Block {
        block_scalar: Option<usize>,
        plain: Option<usize>,
    },
    /// A flow collection, `depth` brackets deep, the outermost opened at `column`.
    Flow { depth: usize, column: usize },
    /// A quoted scalar opened at `column` with `quote`; `flow` is the flow state around it.
    Quoted {
        quote: u8,
        column: usize,
        flow: Option<(usize, usize)>,
    },
}

/// What [`tolerate`] makes of a text.
#[derive(Debug, Default)]
pub(super) struct Tolerated {
    /// The parser's text, where go-yaml reads what saphyr would refuse; `None` when the text
    /// needs nothing (nearly always).
    pub(super) rewritten: Option<Rewritten>,
    /// The first tab go-yaml refuses where saphyr reads a blank: its byte offset in the text,
    /// and kubectl's message.
    pub(super) refused: Option<(usize, &'static str)>,
}

/// The parser's text for `text` (see [`Tolerated`]).
pub(super) fn tolerate(text: &str) -> Tolerated {
    let bytes = text.as_bytes();
    // Nothing to do without a tab, or a flow collection or quoted scalar that spans lines.
    if memchr::memchr3(b'\t', b'[', b'{', bytes).is_none()
        && memchr::memchr2(b'"', b'\'', bytes).is_none()
    {
        return Tolerated::default();
    }
    let mut out = Out::new(text);
    out.ascii = text.is_ascii();
    let mut open = Open::Block {
        block_scalar: None,
        plain: None,
    };
    let mut line_start = 0usize;
    // (byte, char index) counted up to so far, for the char index of a line that gets spaces.
    let ascii = out.ascii;
    let mut counted = (0usize, 0usize);
    while line_start < bytes.len() {
        let line_end =
            memchr::memchr(b'\n', &bytes[line_start..]).map_or(bytes.len(), |i| line_start + i);
        let line = &bytes[line_start..line_end];
        let lead = line
            .iter()
            .take_while(|&&b| b == b' ' || b == b'\t')
            .count();
        let blank = line[lead..].iter().all(|&b| b == b'\r');
        if line.starts_with(b"---") || line.starts_with(b"...") {
            open = Open::Block {
                block_scalar: None,
                plain: None,
            };
            out.block_indent = None;
            // A marker alone (or with a comment) is no scalar for a later line to go on with.
            let rest = line[3..].trim_ascii_start();
            if rest.is_empty() || (rest.len() < line.len() - 3 && rest[0] == b'#') {
                line_start = line_end + 1;
                continue;
            }
        }
        open = match open {
            Open::Block {
                block_scalar: Some(header),
                ..
            } if blank || lead > header || line[..lead].contains(&b'\t') => {
                out.block_scalar_line(line_start, line);
                open
            }
            // A blank line changes nothing in the block context (a plain scalar goes on
            // after it).
            Open::Block { plain, .. } if blank => {
                out.leading_tabs(line_start, &line[..lead], plain);
                open
            }
            Open::Block { plain, .. } => {
                out.leading_tabs(line_start, &line[..lead], plain);
                scan_line(
                    &mut out,
                    line_start,
                    line,
                    lead,
                    Open::Block {
                        block_scalar: None,
                        plain: None,
                    },
                    plain.is_some_and(|from| lead >= from),
                )
            }
            Open::Flow { column, .. } | Open::Quoted { column, .. } => {
                // A continuation line: its leading blanks are no part of the content.
                let required = match open {
                    Open::Quoted {
                        flow: Some((_, flow_column)),
                        ..
                    } => flow_column.min(column),
                    _ => column,
                };
                if !blank && lead < required {
                    let index = if ascii {
                        line_start
                    } else {
                        counted.1 += char_count(&bytes[counted.0..line_start]);
                        counted.0 = line_start;
                        counted.1
                    };
                    out.insert_spaces(line_start, index, required - lead);
                }
                for (i, &b) in line[..lead].iter().enumerate() {
                    if b == b'\t' {
                        // go-yaml's scanner, going on with a plain scalar past a line break,
                        // refuses a tab left of the block indentation (plus one).
                        if out.plain_ended_line && out.flow_indent.is_some_and(|indent| i <= indent)
                        {
                            out.refuse(
                                line_start + i,
                                "kubectl refuses a tab in the indentation of a line that \
                                 continues a plain scalar inside a flow collection (yaml: \"found \
                                 a tab character that violates indentation\"); indent it with \
                                 spaces, or end the scalar with a `,` first",
                            );
                        }
                        out.replace_with_space(line_start + i);
                    }
                }
                scan_line(&mut out, line_start, line, lead, open, false)
            }
        };
        line_start = line_end + 1;
    }
    out.finish()
}

fn char_count(bytes: &[u8]) -> usize {
    bytes.iter().filter(|&&b| b & 0xc0 != 0x80).count()
}

/// Scans one line from its first non-blank byte, from state `open`; returns the state after it.
fn scan_line(
    out: &mut Out<'_>,
    line_start: usize,
    line: &[u8],
    lead: usize,
    mut open: Open,
    continues_plain: bool,
) -> Open {
    let mut at = lead;
    // A token may start here: after blanks or an indicator.
    let mut token_start = !continues_plain;
    // Inside a plain scalar of the block context.
    let mut plain = continues_plain;
    // The column of the node being written in the block context (its first property or its
    // text), which becomes a block mapping's column when a `:` follows it.
    let mut key_column: Option<usize> = None;
    // (byte, column) counted up to so far: `at` only grows, so columns cost one pass a line.
    let mut counted = (0usize, 0usize);
    let mut column_of = |at: usize| {
        counted.1 += char_count(&line[counted.0..at]);
        counted.0 = at;
        counted.1
    };
    // Whether the line ends inside a plain scalar of a flow collection: blanks keep it, a
    // comment ends it.
    if !matches!(open, Open::Flow { .. }) || lead < line.len() {
        out.plain_ended_line = false;
    }
    // A `#` right after the token just read: go-yaml reads a comment there, YAML text.
    let mut glued = false;
    while at < line.len() {
        // Inside a quoted scalar only its quote and `\` matter, inside a plain one only `:`
        // and `#`: jump to the next of those.
        let jump = match open {
            Open::Quoted { quote, .. } => memchr::memchr2(quote, b'\\', &line[at..]),
            Open::Block { .. } if plain => memchr::memchr2(b':', b'#', &line[at..]),
            _ => Some(0),
        };
        let Some(jump) = jump else {
            break;
        };
        at += jump;
        let b = line[at];
        let next = line.get(at + 1).copied();
        let blank_next = next.is_none_or(|n| matches!(n, b' ' | b'\t' | b'\r'));
        match open {
            Open::Quoted {
                quote,
                column: _,
                flow,
            } => {
                if b == b'\\' && quote == b'"' {
                    at += 2;
                    continue;
                }
                if b == quote {
                    if quote == b'\'' && next == Some(b'\'') {
                        at += 2;
                        continue;
                    }
                    open = match flow {
                        Some((depth, column)) => Open::Flow { depth, column },
                        None => Open::Block {
                            block_scalar: None,
                            plain: None,
                        },
                    };
                    token_start = false;
                    plain = false;
                    glued = next == Some(b'#');
                }
            }
            _ if b == b'#' && (at == 0 || matches!(line[at - 1], b' ' | b'\t')) => {
                out.plain_ended_line = false;
                return open;
            }
            // After a key on the same line only: go-yaml refuses the tab after a `:` that
            // starts its line (the value of a `?` complex key).
            _ if b == b':' && next == Some(b'\t') && at > lead => {
                if matches!(open, Open::Block { .. })
                    && let Some(key) = key_column.take()
                {
                    out.block_indent = Some(key);
                }
                let mut tab = at + 1;
                while line.get(tab) == Some(&b'\t') {
                    out.replace_with_space(line_start + tab);
                    tab += 1;
                }
                token_start = true;
                plain = false;
            }
            Open::Flow {
                depth,
                column: outer,
            } => {
                if !matches!(b, b' ' | b'\t' | b'\r') {
                    out.plain_ended_line = false;
                }
                glued = matches!(b, b'[' | b'{' | b']' | b'}' | b',') && next == Some(b'#');
                match b {
                    b'[' | b'{' => {
                        open = Open::Flow {
                            depth: depth + 1,
                            column: outer,
                        };
                        token_start = true;
                    }
                    b']' | b'}' => {
                        open = if depth <= 1 {
                            Open::Block {
                                block_scalar: None,
                                plain: None,
                            }
                        } else {
                            Open::Flow {
                                depth: depth - 1,
                                column: outer,
                            }
                        };
                        token_start = false;
                    }
                    b',' => token_start = true,
                    b' ' | b'\t' => token_start = true,
                    b':' if blank_next || matches!(next, Some(b',' | b']' | b'}')) => {
                        token_start = true;
                    }
                    b'"' | b'\'' if token_start => {
                        open = Open::Quoted {
                            // Inside a flow collection, its own column is the one that counts.
                            quote: b,
                            column: outer,
                            flow: Some((depth, outer)),
                        };
                    }
                    // The `\r` of a `\r\n` ends the line, as a blank would.
                    b'\r' => {}
                    _ => {
                        token_start = false;
                        out.plain_ended_line = true;
                    }
                }
            }
            Open::Block { .. } => match b {
                b' ' | b'\t' => token_start = true,
                b':' if blank_next => {
                    token_start = true;
                    plain = false;
                    if let Some(key) = key_column.take() {
                        out.block_indent = Some(key);
                    }
                }
                b'-' | b'?' if token_start && !plain && blank_next => {
                    token_start = true;
                    key_column = None;
                    out.block_indent = Some(column_of(at));
                    // go-yaml skips a tab only where a simple key cannot start: not after `-`.
                    let blanks = line[at + 1..]
                        .iter()
                        .take_while(|&&c| c == b' ' || c == b'\t');
                    if b == b'-'
                        && let Some(tab) = blanks.clone().position(|&c| c == b'\t')
                    {
                        out.refuse(
                            line_start + at + 1 + tab,
                            "kubectl refuses a tab after a block sequence's `-` (yaml: \"found \
                             character that cannot start any token\"); write spaces after the `-`",
                        );
                    }
                }
                b'"' | b'\'' if token_start && !plain => {
                    let column = column_of(at);
                    key_column.get_or_insert(column);
                    open = Open::Quoted {
                        quote: b,
                        column,
                        flow: None,
                    };
                }
                b'[' | b'{' if token_start && !plain => {
                    open = Open::Flow {
                        depth: 1,
                        column: column_of(at),
                    };
                    out.flow_indent = out.block_indent;
                    token_start = true;
                    glued = next == Some(b'#');
                }
                b'|' | b'>' if token_start && !plain => {
                    out.block_scalar_header(&line[at + 1..]);
                    return Open::Block {
                        block_scalar: Some(lead),
                        plain: None,
                    };
                }
                b'&' | b'!' if token_start && !plain => {
                    key_column.get_or_insert(column_of(at));
                    token_start = false;
                }
                _ => {
                    if token_start && !matches!(line.get(at.wrapping_sub(1)), Some(b'&' | b'!')) {
                        plain = true;
                        key_column.get_or_insert(column_of(at));
                    }
                    token_start = false;
                }
            },
        }
        at += 1;
        if glued {
            // The rest of the line is a comment, after the blank YAML needs before it.
            out.insert_space_before(line_start + at);
            out.plain_ended_line = false;
            return open;
        }
    }
    match open {
        Open::Block { block_scalar, .. } if plain => Open::Block {
            block_scalar,
            plain: Some(out.block_indent.map_or(0, |indent| indent + 1)),
        },
        _ => open,
    }
}

/// kubectl's refusal of a tab before the first token of a line in the block context, blank
/// lines and comment lines included.
const TAB_STARTS_LINE: &str = "kubectl refuses a tab before the content of a line, or on a blank \
     or comment line, outside flow collections and quoted scalars (yaml: \"found character that \
     cannot start any token\"); YAML indentation must use spaces, not tabs";

/// kubectl's refusal of a tab left of a plain scalar's block, on a line after it.
const TAB_LEFT_OF_PLAIN: &str = "kubectl refuses a tab in the indentation of a line after a plain \
     scalar, left of where that scalar could go on (yaml: \"found a tab character that violates \
     indentation\"); YAML indentation must use spaces, not tabs";

/// kubectl's refusal of a tab in a block scalar's indentation.
const TAB_IN_BLOCK_SCALAR: &str = "kubectl refuses a tab in the indentation of a block scalar's \
     line (yaml: \"found a tab character where an indentation space is expected\"); YAML \
     indentation must use spaces, not tabs";

/// The rewritten text, built only once something changes.
struct Out<'a> {
    text: &'a str,
    rewritten: Option<Rewritten>,
    /// Byte offset of `text` copied so far.
    copied: usize,
    /// go-yaml's block indentation around the open flow collection: the column of the
    /// innermost block collection when it opened (`None` at a document's top level).
    flow_indent: Option<usize>,
    /// The column of the innermost block collection seen so far: the last `-` or `?`
    /// indicator's, or the last mapping key's (where its properties start). What a flow
    /// collection that starts a line is inside of.
    block_indent: Option<usize>,
    /// Whether the last line ended inside a plain scalar of a flow collection.
    plain_ended_line: bool,
    refused: Option<(usize, &'static str)>,
    /// The open block scalar's content indentation, once go-yaml has settled it (from its
    /// header's indicator, or its first line with content).
    scalar_indent: Option<usize>,
    /// While it is not settled: the most leading spaces of its lines so far, and the least it
    /// can be (one past the block collection around it).
    scalar_spaces: (usize, usize),
    /// Whether the text is ASCII (a byte offset is then a character index).
    ascii: bool,
    /// (byte offset, character index) counted up to, for spaces inserted inside lines.
    counted: (usize, usize),
}

impl<'a> Out<'a> {
    fn new(text: &'a str) -> Self {
        Out {
            text,
            rewritten: None,
            copied: 0,
            flow_indent: None,
            block_indent: None,
            plain_ended_line: false,
            refused: None,
            scalar_indent: None,
            scalar_spaces: (0, 1),
            ascii: false,
            counted: (0, 0),
        }
    }

    /// Inserts a space before the byte `byte` inside a line (offsets only grow).
    fn insert_space_before(&mut self, byte: usize) {
        let index = if self.ascii {
            byte
        } else {
            if byte < self.counted.0 {
                self.counted = (0, 0);
            }
            self.counted.1 += char_count(&self.text.as_bytes()[self.counted.0..byte]);
            self.counted.0 = byte;
            self.counted.1
        };
        self.insert_spaces(byte, index, 1);
    }

    /// A block scalar's header (`|`, `>`, then `rest`): go-yaml's content indentation is the
    /// indicator's digit past the block collection around it, or settled by its lines.
    fn block_scalar_header(&mut self, rest: &[u8]) {
        let digit = rest
            .iter()
            .take(2)
            .find(|b| b.is_ascii_digit() && **b != b'0')
            .map(|b| usize::from(b - b'0'));
        self.scalar_indent = digit.map(|d| self.block_indent.map_or(d, |indent| indent + d));
        self.scalar_spaces = (0, self.block_indent.map_or(1, |indent| indent + 1));
    }

    /// One line of an open block scalar: go-yaml eats its indentation spaces and refuses a
    /// tab where it expects one more (`yaml_parser_scan_block_scalar_breaks`).
    fn block_scalar_line(&mut self, line_start: usize, line: &[u8]) {
        let spaces = line.iter().take_while(|&&b| b == b' ').count();
        let tab = line.get(spaces) == Some(&b'\t');
        match self.scalar_indent {
            Some(indent) if spaces < indent && tab => {
                self.refuse(line_start + spaces, TAB_IN_BLOCK_SCALAR)
            }
            Some(_) => {}
            None if tab => self.refuse(line_start + spaces, TAB_IN_BLOCK_SCALAR),
            None => {
                self.scalar_spaces.0 = self.scalar_spaces.0.max(spaces);
                if line.get(spaces).is_some_and(|&b| b != b'\r') {
                    self.scalar_indent = Some(self.scalar_spaces.0.max(self.scalar_spaces.1));
                }
            }
        }
    }

    /// The leading blanks `lead` of a line in the block context (blank or not). go-yaml skips
    /// a tab there only inside a plain scalar that goes on from the last line (`plain`: from
    /// that column on); any other tab is refused.
    fn leading_tabs(&mut self, line_start: usize, lead: &[u8], plain: Option<usize>) {
        let Some(tab) = memchr::memchr(b'\t', lead) else {
            return;
        };
        match plain {
            Some(from) if tab >= from => {}
            Some(_) => self.refuse(line_start + tab, TAB_LEFT_OF_PLAIN),
            None => self.refuse(line_start + tab, TAB_STARTS_LINE),
        }
    }

    /// Keeps the first tab go-yaml refuses.
    fn refuse(&mut self, byte: usize, message: &'static str) {
        self.refused.get_or_insert((byte, message));
    }

    fn upto(&mut self, byte: usize) -> &mut Rewritten {
        let rewritten = self.rewritten.get_or_insert_with(|| Rewritten {
            text: String::with_capacity(self.text.len() + 64),
            inserts: Vec::new(),
        });
        if byte > self.copied {
            rewritten.text.push_str(&self.text[self.copied..byte]);
            self.copied = byte;
        }
        rewritten
    }

    /// Replaces the tab at byte `byte` with a space.
    fn replace_with_space(&mut self, byte: usize) {
        self.upto(byte).text.push(' ');
        self.copied = byte + 1;
    }

    /// Inserts `count` spaces before byte `byte`, character `index` of the original text.
    fn insert_spaces(&mut self, byte: usize, index: usize, count: usize) {
        let rewritten = self.upto(byte);
        let before = rewritten.inserts.last().map_or(0, |run| run.total);
        let start = index + before;
        rewritten.text.extend(std::iter::repeat_n(' ', count));
        rewritten.inserts.push(Insert {
            start,
            end: start + count,
            total: before + count,
        });
    }

    fn finish(mut self) -> Tolerated {
        let refused = self.refused;
        if self.rewritten.is_none() {
            return Tolerated {
                rewritten: None,
                refused,
            };
        }
        let len = self.text.len();
        let mut rewritten = std::mem::take(self.upto(len));
        rewritten.text.shrink_to_fit();
        Tolerated {
            rewritten: Some(rewritten),
            refused,
        }
    }
}
