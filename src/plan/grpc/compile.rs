//! A schema's descriptors from `.proto` sources (compiled in-process by
//! protox: no `protoc` on the host), from a serialized FileDescriptorSet
//! (`--protoset`), or from descriptors fetched elsewhere (reflection).
//!
//! protox reports a bad file as a miette diagnostic whose label spans the
//! offending text; the span is turned into the file, line and column an
//! editor jumps to, and the file name (relative to an import path) into
//! the path on disk when one of the import paths holds it.

use std::path::{Path, PathBuf};

use miette::Diagnostic as _;
use prost::Message as _;
use prost_reflect::{DescriptorPool, prost_types};

use super::error::SchemaError;

/// Compiles `files` (and every file they import) found through
/// `import_paths`. With no import path, each file's own directory is one,
/// so `--proto dir/a.proto` alone resolves imports beside it, as `protoc`
/// does with `-I` the file's directory.
pub fn compile_protos(files: &[PathBuf], import_paths: &[PathBuf]) -> Result<DescriptorPool, SchemaError> {
    let mut includes: Vec<PathBuf> = import_paths.to_vec();
    if includes.is_empty() {
        for f in files {
            let dir = f
                .parent()
                .filter(|d| !d.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            if !includes.iter().any(|d| d == dir) {
                includes.push(dir.to_path_buf());
            }
        }
    }
    let list = |dirs: &[PathBuf]| {
        dirs.iter()
            .map(|d| d.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    for f in files {
        // Said plainly here rather than in protox's words ("not in any
        // include path"): where the file was looked for, and the fix.
        let under_import_path = !f.is_absolute() && includes.iter().any(|d| d.join(f).is_file());
        if under_import_path {
            continue;
        }
        if !f.is_file() {
            return Err(SchemaError::ProtoFile {
                path: f.display().to_string(),
                reason: format!("no such file (looked for it as given and under {})", list(&includes)),
            });
        }
        let real = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
        if !includes.iter().any(|d| real(f).starts_with(real(d))) {
            return Err(SchemaError::ProtoFile {
                path: f.display().to_string(),
                reason: format!(
                    "not under any import path ({}); add the directory its imports are relative to with \
                     --import-path",
                    list(&includes)
                ),
            });
        }
    }
    let mut compiler = protox::Compiler::new(&includes).map_err(|e| compile_error(&e, files, &includes))?;
    compiler.include_imports(true);
    compiler
        .open_files(files)
        .map_err(|e| compile_error(&e, files, &includes))?;
    Ok(compiler.descriptor_pool())
}

/// The descriptors of a serialized FileDescriptorSet (`--protoset`).
pub fn read_protoset(path: &Path) -> Result<DescriptorPool, SchemaError> {
    let err = |reason: String| SchemaError::Protoset {
        path: path.display().to_string(),
        reason,
    };
    let bytes = std::fs::read(path).map_err(|e| err(format!("cannot read it ({e})")))?;
    if bytes.is_empty() {
        return Err(err("the file is empty".into()));
    }
    let set = prost_types::FileDescriptorSet::decode(&bytes[..])
        .map_err(|e| err(format!("does not parse as a FileDescriptorSet ({e})")))?;
    if set.file.is_empty() {
        return Err(err("it holds no file".into()));
    }
    DescriptorPool::from_file_descriptor_set(set).map_err(|e| err(format!("its files do not link ({e})")))
}

/// The descriptors of `files` (each a serialized FileDescriptorProto, in
/// any order), fetched from `origin` (for messages).
pub fn from_file_protos(origin: &str, files: &[Vec<u8>]) -> Result<DescriptorPool, SchemaError> {
    let err = |reason: String| SchemaError::Descriptors {
        origin: origin.to_string(),
        reason,
    };
    let mut set = prost_types::FileDescriptorSet::default();
    for f in files {
        set.file
            .push(prost_types::FileDescriptorProto::decode(&f[..]).map_err(|e| err(e.to_string()))?);
    }
    DescriptorPool::from_file_descriptor_set(set).map_err(|e| err(e.to_string()))
}

/// A protox error in the words of [`SchemaError`].
fn compile_error(e: &protox::Error, files: &[PathBuf], includes: &[PathBuf]) -> SchemaError {
    let reason = e.to_string();
    let place = place_of(e);
    let file = place
        .as_ref()
        .map(|(name, ..)| name.clone())
        .or_else(|| e.file().map(str::to_string))
        .map(|name| on_disk(&name, includes))
        .unwrap_or_else(|| files.first().map(|f| f.display().to_string()).unwrap_or_default());
    if e.is_file_not_found() {
        // "import 'a/b.proto' not found": the name between the quotes.
        let import = reason.split('\'').nth(1).unwrap_or(&reason).to_string();
        let (line, column) = place.map_or((1, 1), |(_, l, c)| (l, c));
        return SchemaError::ImportNotFound {
            file,
            line,
            column,
            import,
            searched: includes.to_vec(),
        };
    }
    match place {
        Some((_, line, column)) => SchemaError::Compile {
            file,
            line,
            column,
            reason,
        },
        None => SchemaError::CompileFile { file, reason },
    }
}

/// The file name, 1-based line and column of a diagnostic's primary
/// label, else its last (a duplicate's second place is where the error
/// is; its first says what it clashes with).
fn place_of(e: &protox::Error) -> Option<(String, usize, usize)> {
    let labels: Vec<_> = e.labels()?.collect();
    let span = labels.iter().find(|l| l.primary()).or(labels.last())?;
    let code = e.source_code()?;
    let at = code.read_span(span.inner(), 0, 0).ok()?;
    let name = at.name().map(str::to_string).or_else(|| e.file().map(str::to_string))?;
    Some((name, at.line() + 1, at.column() + 1))
}

/// A file's name under the import paths as the path on disk, when one of
/// them holds it.
fn on_disk(name: &str, includes: &[PathBuf]) -> String {
    includes
        .iter()
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .map_or_else(|| name.to_string(), |p| p.display().to_string())
}
