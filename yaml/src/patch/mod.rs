//! `probelint --fix`: applying JSON Patch fixes to manifest text without re-serialising it.
//!
//! # Why splice text
//!
//! A developer's manifest carries comments, key order, quoting, blank lines and other
//! documents that a fix has no business touching; dumping the patched object back as YAML
//! would lose all of them and make the diff unreadable. So, like zizmor, this module never
//! re-serialises a file: it finds each node a patch operation touches through the YAML layer's
//! [`Locations`](crate::load::Locations), computes byte ranges, and splices in new text
//! indented like its siblings. Everything it does not change stays byte-for-byte.
//!
//! # Why verify
//!
//! Splicing YAML by hand has corners (flow vs block style, indentless sequences, anchors,
//! YAML 1.1 scalars such as `on` or `0644`). Instead of trusting every corner, [`apply`] reads
//! its own output back after each operation and at the end, and compares it with what
//! `json_patch::patch` makes of the original object. A fix that would not read back as exactly
//! the patched object is refused with a [`TextFixError`] naming the operation; the caller then
//! leaves the file alone. A wrong fix is worse than no fix.
//!
//! # What is supported
//!
//! `add`, `remove`, `replace` (plus `move`, `copy` and `test`, built from those) on mapping
//! entries and sequence items, in block style, flow style and JSON files, with CRLF line
//! endings and files without a final newline:
//!
//! - a new key goes after the mapping's last entry (after the line that ends it, so a trailing
//!   comment stays on its line and the blank lines and comments before the next sibling stay
//!   before it), indented like its siblings; nested content uses the file's indentation step
//!   and its style of sequences under a key (indented or indentless);
//! - `replace` of a scalar changes only the scalar's bytes; a collection is rewritten in its
//!   own style (block or flow);
//! - `remove` takes a block entry's lines (key through value, with a comment on the same line)
//!   or a flow entry with one comma; the last entry of a block collection leaves `{}` / `[]`;
//! - `remove` directly followed by `add` of a key to the same block mapping (`tcpSocket` →
//!   `httpGet`) writes the new entry where the old one was, so the diff reads as a swap;
//! - `add` to an empty `{}` / `[]` under a block key opens it up in block style;
//! - strings are quoted when YAML 1.1 would read them as something else (`"on"`, `"8080"`),
//!   keys and strings are double-quoted in JSON files.
//!
//! Refused, each by the code named (a [`TextFixError`] that says why and what to do):
//!
//! - anything written through an anchor, alias or merge key, since editing it would change other
//!   places: `view::refuse_shared`, which `add`, `remove` and `replace` call before any edit;
//! - adding inside an empty value (`readinessProbe:` with nothing after it is `null`, and the
//!   patch does not apply): `expected_documents`, when `json_patch` refuses the operation, before
//!   any text is touched;
//! - nested block sequences that share a line (`- - x`): `add::add_item`;
//! - the document root itself: `add::add`, `remove::remove`, `replace::replace` (the pointer has
//!   no parent, `view::split_pointer`);
//! - a document that needs a `%YAML`/`%TAG` directive of the file to read the same: [`apply`],
//!   when the document's region does not parse alone or reads as something else;
//! - whatever would not read back as the patched object (a keep-chomped `|+` scalar that owns
//!   the blank lines after it, for one): `Region::commit` after each step, and [`apply`] once
//!   more over the whole file.

mod add;
mod layout;
mod remove;
mod render;
mod replace;
mod scan;
mod schedule;
mod view;

#[cfg(test)]
mod tests;

use json_patch::jsonptr::PointerBuf;
use json_patch::{
    AddOperation, CopyOperation, MoveOperation, PatchOperation, RemoveOperation, ReplaceOperation,
    TestOperation,
};
use serde_json::Value;

use crate::load::{Document, Limits, parse_stream};
use schedule::Unit;
use view::{Edit, View};

/// One object's patch: which document of the file, where the object is inside it, and the
/// operations (RFC 6902, paths relative to the object, as the rule engine produces them).
#[derive(Debug, Clone)]
pub struct ObjectPatch<'a> {
    /// Index of the document among those [`parse_stream`] returns for the file (empty
    /// documents are not counted).
    pub document: usize,
    /// JSON Pointer of the object inside its document: `""` for a whole document, `/items/3`
    /// for an item of a `kind: List`.
    pub prefix: String,
    /// The operations, applied in order.
    pub ops: &'a [PatchOperation],
}

/// Why a file could not be fixed. Nothing was written when this is returned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.describe())]
pub struct TextFixError {
    /// The document (index among those [`parse_stream`] returns) of the failing operation.
    pub document: Option<usize>,
    /// The 1-based line where that document starts.
    pub line: Option<usize>,
    /// The failing operation, e.g. `add /spec/template/spec/containers/0/startupProbe`, with
    /// the object's prefix included.
    pub operation: Option<String>,
    /// What went wrong, and what to do about it.
    pub reason: String,
}

impl TextFixError {
    fn file(reason: impl Into<String>) -> Self {
        TextFixError {
            document: None,
            line: None,
            operation: None,
            reason: reason.into(),
        }
    }

    fn describe(&self) -> String {
        match (&self.operation, self.line) {
            (Some(op), Some(line)) => format!(
                "cannot apply `{op}` in the document at line {line}: {}",
                self.reason
            ),
            (Some(op), None) => format!("cannot apply `{op}`: {}", self.reason),
            (None, Some(line)) => format!("the document at line {line}: {}", self.reason),
            (None, None) => self.reason.clone(),
        }
    }
}

/// Applies `patches` to the manifest `text` and returns the new text, in which everything the
/// operations do not change is kept byte-for-byte.
///
/// Patches are applied in order, and each patch's operations in order, as `json_patch::patch`
/// would apply them to each object. The result is guaranteed to parse, with `limits`, into the
/// same documents as `text`, except that each patched object equals the original with its
/// operations applied.
///
/// # Errors
///
/// When `text` does not parse, a patch names a document that is not there, an operation does
/// not apply to its object, touches text shared through an anchor, or has a shape this module
/// cannot write (see the module documentation), or when the edited text would not read back
/// as the patched objects.
pub fn apply(
    text: &str,
    patches: &[ObjectPatch<'_>],
    limits: &Limits,
) -> Result<String, TextFixError> {
    let documents = parse_stream(text.as_bytes(), limits).map_err(|e| {
        TextFixError::file(format!(
            "the file does not parse, so it cannot be fixed: {e}"
        ))
    })?;
    let expected = expected_documents(&documents, patches)?;
    // Each document is edited and re-read on its own, so that a file of a thousand objects
    // costs a thousand small parses, not a thousand parses of the whole file. Its region runs
    // from the start of its `---` line to the next one's (the first from the file's start).
    // Later documents go first: their edits then never move an earlier region.
    let mut bounds: Vec<usize> = documents
        .iter()
        .enumerate()
        .map(|(i, d)| {
            if i == 0 {
                0
            } else {
                scan::line_start(text, d.locations.document_start().start)
            }
        })
        .collect();
    bounds.push(text.len());
    let mut order: Vec<&ObjectPatch<'_>> = patches.iter().collect();
    order.sort_by_key(|p| std::cmp::Reverse(p.document));
    // The edited regions, last first; the file is put together once at the end, so that a file
    // of many documents is not copied once per document.
    let mut edited: Vec<(usize, usize, String)> = Vec::new();
    let newline = scan::newline(text);
    for group in order.chunk_by(|a, b| a.document == b.document) {
        let Some(first) = group.first() else { continue };
        let document = first.document;
        let line = documents.get(document).map(|d| d.line);
        let file_error = |reason: String| TextFixError {
            document: Some(document),
            line,
            operation: None,
            reason,
        };
        let (Some(&start), Some(&end)) = (bounds.get(document), bounds.get(document + 1)) else {
            return Err(file_error("the document is not in the file".to_owned()));
        };
        let region_text = text
            .get(start..end)
            .ok_or_else(|| file_error("the document's text could not be cut out".to_owned()))?;
        let mut region = Region::parse(region_text.to_owned(), limits, newline).map_err(|_| {
            file_error(
                "the document does not parse on its own (a `%YAML` or `%TAG` directive before \
                 its `---`?); fix it by hand"
                    .to_owned(),
            )
        })?;
        let original = documents.get(document).map(|d| &d.value);
        if original.is_none_or(|v| !same_json(&region.document.value, v)) {
            return Err(file_error(
                "the document does not read the same on its own (a `%YAML` or `%TAG` \
                 directive?); fix it by hand"
                    .to_owned(),
            ));
        }
        region
            .apply_all(group)
            .map_err(|(patch, i, reason)| TextFixError {
                document: Some(document),
                line,
                operation: patch.ops.get(i).map(|op| describe_op(&patch.prefix, op)),
                reason,
            })?;
        edited.push((start, end, region.text));
    }
    let mut out =
        String::with_capacity(text.len() + edited.iter().map(|(_, _, t)| t.len()).sum::<usize>());
    let mut pos = 0;
    for (start, end, region) in edited.iter().rev() {
        out.push_str(text.get(pos..*start).unwrap_or_default());
        out.push_str(region);
        pos = *end;
    }
    out.push_str(text.get(pos..).unwrap_or_default());
    // Every operation was checked as it went; this checks the whole file once more, including
    // the documents no patch names.
    let intact = parse_stream(out.as_bytes(), limits).is_ok_and(|docs| {
        docs.len() == expected.len()
            && docs
                .iter()
                .zip(&expected)
                .all(|(d, e)| same_json(&d.value, e))
    });
    if !intact {
        return Err(TextFixError::file(
            "the fixed text does not read back as the patched objects (a probelint bug; please \
             report it with the file); the file was left unchanged",
        ));
    }
    Ok(out)
}

/// What each document must read as after the patches: the original values with every
/// operation applied by `json_patch`, the reference this module's text edits are held to.
fn expected_documents(
    documents: &[Document],
    patches: &[ObjectPatch<'_>],
) -> Result<Vec<Value>, TextFixError> {
    let mut values: Vec<Value> = documents.iter().map(|d| d.value.clone()).collect();
    for patch in patches {
        let line = documents.get(patch.document).map(|d| d.line);
        let value = values.get_mut(patch.document).ok_or_else(|| TextFixError {
            document: Some(patch.document),
            line: None,
            operation: None,
            reason: format!(
                "the patch is for document {} but the file has {} document(s)",
                patch.document + 1,
                documents.len()
            ),
        })?;
        for (i, op) in patch.ops.iter().enumerate() {
            let error = |reason: String| TextFixError {
                document: Some(patch.document),
                line,
                operation: Some(describe_op(&patch.prefix, op)),
                reason,
            };
            let full = prefixed(&patch.prefix, op).map_err(error)?;
            // `patch` leaves the value as it was when it fails, so it can be looked at.
            if let Err(e) = json_patch::patch(value, std::slice::from_ref(&full)) {
                // `readinessProbe:` with nothing after it is null: say so, it is the usual cause.
                let null_parent = view::split_pointer(full.path().as_str())
                    .filter(|(parent, _)| value.pointer(parent).is_some_and(Value::is_null));
                return Err(error(match null_parent {
                    Some((parent, _)) => format!(
                        "`{parent}` is empty (a key with nothing after it is null), so nothing \
                         can be added inside it; write it out by hand"
                    ),
                    None => format!(
                        "operation {} of the patch does not apply to the object ({} at `{}`)",
                        i + 1,
                        e.kind,
                        e.path
                    ),
                }));
            }
        }
    }
    Ok(values)
}

/// One document's text (its region of the file, offsets relative to it) as it reads now.
struct Region<'l> {
    text: String,
    document: Document,
    limits: &'l Limits,
    newline: &'static str,
    /// The document's layout before any edit.
    layout: view::DocumentLayout,
}

impl<'l> Region<'l> {
    /// Reads a region, which must hold exactly one document.
    fn parse(text: String, limits: &'l Limits, newline: &'static str) -> Result<Self, String> {
        let document = Self::read(&text, limits)?;
        let layout = layout::document_layout(&View {
            text: &text,
            locations: &document.locations,
            value: &document.value,
            newline,
            layout: &view::DocumentLayout::default(),
        });
        Ok(Region {
            text,
            document,
            limits,
            newline,
            layout,
        })
    }

    fn read(text: &str, limits: &Limits) -> Result<Document, String> {
        let mut documents = parse_stream(text.as_bytes(), limits).map_err(|e| {
            format!("the edited text would not parse ({e}); this layout is not supported, edit it by hand")
        })?;
        match (documents.pop(), documents.is_empty()) {
            (Some(document), true) => Ok(document),
            _ => Err(
                "the edited text would not be one document any more; edit it by hand".to_owned(),
            ),
        }
    }

    fn view(&self) -> View<'_> {
        View {
            text: &self.text,
            locations: &self.document.locations,
            value: &self.document.value,
            newline: self.newline,
            layout: &self.layout,
        }
    }

    fn current(&self) -> &Value {
        &self.document.value
    }

    /// Applies every operation of `group` (one document's patches), level by level (see
    /// [`schedule`]): each level's operations as one batch of edits read back once, or, when
    /// a batch does not work out, one at a time, as the operations would be applied in order.
    /// The error names the operation that could not be applied.
    fn apply_all<'p>(
        &mut self,
        group: &[&'p ObjectPatch<'p>],
    ) -> Result<(), (&'p ObjectPatch<'p>, usize, String)> {
        let mut deferred: Vec<Unit<'p>> = Vec::new();
        for level in schedule::levels(group) {
            let mut units = std::mem::take(&mut deferred);
            units.extend(level);
            if units.len() > 1
                && let Some(later) = self.batch(&units)
            {
                deferred = later;
                continue;
            }
            for unit in units {
                let mut i = unit.op;
                let end = unit.op + if unit.pair { 2 } else { 1 };
                while i < end {
                    i += self
                        .step(unit.patch, i)
                        .map_err(|reason| (unit.patch, i, reason))?;
                }
            }
        }
        Ok(())
    }

    /// Writes `units`, whose anchors are independent, as edits of the same text, applied and
    /// read back at once. `None` when that does not work out (nothing is changed then); else
    /// the `add`s of pairs that could not be written as a swap, for the next level.
    fn batch<'p>(&mut self, units: &[Unit<'p>]) -> Option<Vec<Unit<'p>>> {
        let view = self.view();
        let mut edits = Vec::new();
        let mut ops = Vec::with_capacity(units.len());
        let mut later = Vec::new();
        for unit in units {
            let op = prefixed(&unit.patch.prefix, unit.patch.ops.get(unit.op)?).ok()?;
            if unit.pair {
                let added = prefixed(&unit.patch.prefix, unit.patch.ops.get(unit.op + 1)?).ok()?;
                let (PatchOperation::Remove(removed), PatchOperation::Add(add)) = (&op, &added)
                else {
                    return None;
                };
                match replace::swap(&view, removed.path.as_str(), add.path.as_str(), &add.value) {
                    Some(swapped) => {
                        edits.extend(swapped.ok()?);
                        ops.push(op);
                        ops.push(added);
                    }
                    None => {
                        edits.extend(remove::remove(&view, removed.path.as_str()).ok()?);
                        ops.push(op);
                        later.push(Unit {
                            patch: unit.patch,
                            op: unit.op + 1,
                            pair: false,
                        });
                    }
                }
                continue;
            }
            match &op {
                PatchOperation::Add(o) => {
                    edits.extend(add::add(&view, o.path.as_str(), &o.value).ok()?)
                }
                PatchOperation::Remove(o) => {
                    edits.extend(remove::remove(&view, o.path.as_str()).ok()?)
                }
                PatchOperation::Replace(o) => {
                    edits.extend(replace::replace(&view, o.path.as_str(), &o.value).ok()?);
                }
                PatchOperation::Test(_) => {}
                PatchOperation::Move(_) | PatchOperation::Copy(_) => return None,
            }
            ops.push(op);
        }
        let expected = patched(self.current(), &ops).ok()?;
        self.commit(edits, &expected).ok()?;
        #[cfg(test)]
        tests::BATCHED.with(|b| b.set(b.get() + units.len()));
        Some(later)
    }

    /// Applies operation `i` of `patch` (and the next one too when the two form a swap);
    /// returns how many operations it used.
    fn step(&mut self, patch: &ObjectPatch<'_>, i: usize) -> Result<usize, String> {
        let op = patch.ops.get(i).ok_or("no such operation")?;
        let op = prefixed(&patch.prefix, op)?;
        if let PatchOperation::Remove(removed) = &op
            && let Some(next) = patch.ops.get(i + 1)
            && let PatchOperation::Add(added) = prefixed(&patch.prefix, next)?
            && let Some(edits) = replace::swap(
                &self.view(),
                removed.path.as_str(),
                added.path.as_str(),
                &added.value,
            )
        {
            let both = [op.clone(), PatchOperation::Add(added)];
            let expected = patched(self.current(), &both)?;
            self.commit(edits?, &expected)?;
            return Ok(2);
        }
        let expected = patched(self.current(), std::slice::from_ref(&op))?;
        match &op {
            PatchOperation::Add(o) => {
                let edits = add::add(&self.view(), o.path.as_str(), &o.value)?;
                self.commit(edits, &expected)?;
            }
            PatchOperation::Remove(o) => {
                let edits = remove::remove(&self.view(), o.path.as_str())?;
                self.commit(edits, &expected)?;
            }
            PatchOperation::Replace(o) => {
                let edits = replace::replace(&self.view(), o.path.as_str(), &o.value)?;
                self.commit(edits, &expected)?;
            }
            PatchOperation::Copy(o) => {
                let value = self.value_at(o.from.as_str())?;
                let edits = add::add(&self.view(), o.path.as_str(), &value)?;
                self.commit(edits, &expected)?;
            }
            PatchOperation::Move(o) => {
                if o.from != o.path {
                    let value = self.value_at(o.from.as_str())?;
                    let remove = PatchOperation::Remove(RemoveOperation {
                        path: o.from.clone(),
                    });
                    let between = patched(self.current(), std::slice::from_ref(&remove))?;
                    let edits = remove::remove(&self.view(), o.from.as_str())?;
                    self.commit(edits, &between)?;
                    let edits = add::add(&self.view(), o.path.as_str(), &value)?;
                    self.commit(edits, &expected)?;
                }
            }
            // `patched` above already checked it; a test changes no text.
            PatchOperation::Test(_) => {}
        }
        Ok(1)
    }

    fn value_at(&self, pointer: &str) -> Result<Value, String> {
        self.current()
            .pointer(pointer)
            .cloned()
            .ok_or_else(|| format!("nothing is at `{pointer}`"))
    }

    /// Applies `edits`, reads the text back and keeps it only if it is still one document and
    /// reads as `expected`.
    fn commit(&mut self, edits: Vec<Edit>, expected: &Value) -> Result<(), String> {
        let text = view::apply_edits(&self.text, edits)?;
        let document = Self::read(&text, self.limits)?;
        if !same_json(&document.value, expected) {
            return Err(
                "the edited text would not read back as the patched object; this layout is not \
                 supported, edit it by hand"
                    .to_owned(),
            );
        }
        self.text = text;
        self.document = document;
        Ok(())
    }
}

/// `value` with `ops` applied, or why they do not apply.
fn patched(value: &Value, ops: &[PatchOperation]) -> Result<Value, String> {
    let mut value = value.clone();
    json_patch::patch(&mut value, ops).map_err(|e| {
        format!(
            "the operation does not apply to the object ({} at `{}`)",
            e.kind, e.path
        )
    })?;
    Ok(value)
}

/// `op` with its paths made relative to the document: `prefix` + path.
fn prefixed(prefix: &str, op: &PatchOperation) -> Result<PatchOperation, String> {
    let join = |p: &json_patch::jsonptr::Pointer| {
        PointerBuf::parse(format!("{prefix}{}", p.as_str()))
            .map_err(|e| format!("`{prefix}` is not a JSON Pointer prefix: {e}"))
    };
    Ok(match op {
        PatchOperation::Add(o) => PatchOperation::Add(AddOperation {
            path: join(&o.path)?,
            value: o.value.clone(),
        }),
        PatchOperation::Remove(o) => PatchOperation::Remove(RemoveOperation {
            path: join(&o.path)?,
        }),
        PatchOperation::Replace(o) => PatchOperation::Replace(ReplaceOperation {
            path: join(&o.path)?,
            value: o.value.clone(),
        }),
        PatchOperation::Move(o) => PatchOperation::Move(MoveOperation {
            from: join(&o.from)?,
            path: join(&o.path)?,
        }),
        PatchOperation::Copy(o) => PatchOperation::Copy(CopyOperation {
            from: join(&o.from)?,
            path: join(&o.path)?,
        }),
        PatchOperation::Test(o) => PatchOperation::Test(TestOperation {
            path: join(&o.path)?,
            value: o.value.clone(),
        }),
    })
}

/// `add /items/0/spec/...`: the operation as a person reads it in an error message.
fn describe_op(prefix: &str, op: &PatchOperation) -> String {
    let name = match op {
        PatchOperation::Add(_) => "add",
        PatchOperation::Remove(_) => "remove",
        PatchOperation::Replace(_) => "replace",
        PatchOperation::Move(_) => "move",
        PatchOperation::Copy(_) => "copy",
        PatchOperation::Test(_) => "test",
    };
    let path = format!("{prefix}{}", op.path().as_str());
    if path.is_empty() {
        format!("{name} (the whole document)")
    } else {
        format!("{name} {path}")
    }
}

/// JSON equality as Kubernetes sees it: `10.0` and `10` are the same number (Go's
/// `json.Marshal` writes integral floats as integers, and the YAML layer follows it), and key
/// order does not matter. Walks with an explicit stack, so depth costs no Rust stack.
fn same_json(a: &Value, b: &Value) -> bool {
    let mut stack = vec![(a, b)];
    while let Some((a, b)) = stack.pop() {
        match (a, b) {
            (Value::Object(x), Value::Object(y)) => {
                if x.len() != y.len() {
                    return false;
                }
                for (k, v) in x {
                    let Some(w) = y.get(k) else { return false };
                    stack.push((v, w));
                }
            }
            (Value::Array(x), Value::Array(y)) => {
                if x.len() != y.len() {
                    return false;
                }
                stack.extend(x.iter().zip(y));
            }
            (Value::Number(x), Value::Number(y)) => {
                // Exact unless a float is involved; then as Go compares after decoding.
                let equal = x == y
                    || ((x.is_f64() || y.is_f64())
                        && x.as_f64().is_some()
                        && x.as_f64() == y.as_f64());
                if !equal {
                    return false;
                }
            }
            _ => {
                if a != b {
                    return false;
                }
            }
        }
    }
    true
}
