//! Why a gRPC schema, method, message or metadata was refused: one variant
//! per kind of bad input, each with the text an operator acts on. They
//! all end the run with exit 2 before anything opens
//! (`From<SchemaError> for crate::Error`).

use std::path::PathBuf;

/// Bad gRPC input, found while the plan is made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemaError {
    /// A `.proto` file that does not compile, where the compiler said.
    #[error("{file}:{line}:{column}: {reason}")]
    Compile {
        /// The file on disk (or its name under the import paths).
        file: String,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// The compiler's reason.
        reason: String,
    },
    /// A `.proto` file that does not compile, with no place in it (a
    /// circular import, a file that is not UTF-8).
    #[error("{file}: {reason}")]
    CompileFile {
        /// The file.
        file: String,
        /// The compiler's reason.
        reason: String,
    },
    /// An `import` no import path holds.
    #[error(
        "{file}:{line}:{column}: import \"{import}\" not found (searched {}); add the directory \
         that holds it with --import-path",
        searched_list(searched)
    )]
    ImportNotFound {
        /// The importing file.
        file: String,
        /// 1-based line of the import.
        line: usize,
        /// 1-based column.
        column: usize,
        /// The name imported.
        import: String,
        /// The import paths searched, in order.
        searched: Vec<PathBuf>,
    },
    /// A `--proto` file that cannot be found or read.
    #[error("--proto {path}: {reason}")]
    ProtoFile {
        /// The path given.
        path: String,
        /// What went wrong.
        reason: String,
    },
    /// A `--protoset` that cannot be read or is not a FileDescriptorSet.
    #[error(
        "--protoset {path}: {reason}; give a serialized FileDescriptorSet (protoc --include_imports \
         --descriptor_set_out=FILE)"
    )]
    Protoset {
        /// The path given.
        path: String,
        /// What went wrong.
        reason: String,
    },
    /// Descriptors from elsewhere (a server's reflection) that do not form
    /// a valid schema.
    #[error("{origin}: the descriptors do not form a valid schema ({reason})")]
    Descriptors {
        /// Where they came from.
        origin: String,
        /// What is wrong.
        reason: String,
    },
    /// A method name that is not `package.Service/Method`.
    #[error("--call {given:?}: give the method as package.Service/Method")]
    MethodName {
        /// The name given.
        given: String,
    },
    /// A method the schema does not have.
    #[error(
        "method {given} is not in the schema{}; {}",
        suggestion.as_ref().map(|s| format!(" (did you mean {s}?)")).unwrap_or_default(),
        methods_list(available)
    )]
    MethodNotFound {
        /// The name given.
        given: String,
        /// The closest method, if one is close.
        suggestion: Option<String>,
        /// Every method of the schema, sorted.
        available: Vec<String>,
    },
    /// A JSON message that does not fit the method's input type.
    #[error("{origin}: {}{reason} (for {message_type})", path_prefix(path))]
    Json {
        /// `--data` or `--data-file FILE`.
        origin: String,
        /// The message type.
        message_type: String,
        /// Where in the JSON (`items[2].name`); empty at the top.
        path: String,
        /// What is wrong there.
        reason: String,
    },
    /// `--data-bin` bytes that are not an encoded message of the type.
    #[error("--data-bin {path}: not an encoded {message_type} ({reason})")]
    Binary {
        /// The file.
        path: String,
        /// The message type.
        message_type: String,
        /// The decoder's reason.
        reason: String,
    },
    /// A file named by a flag that cannot be read.
    #[error("{flag} {path}: cannot read it ({reason})")]
    Read {
        /// The flag (`--data-file`).
        flag: &'static str,
        /// The path.
        path: String,
        /// The error.
        reason: String,
    },
    /// A message over the gRPC length prefix's 4 GiB.
    #[error("the {message_type} message is {len} bytes; a gRPC message must be under 4 GiB")]
    MessageTooLarge {
        /// The type.
        message_type: String,
        /// Its encoded length.
        len: usize,
    },
    /// A `-H` metadata entry that cannot be sent.
    #[error("-H {given:?}: {reason}")]
    Metadata {
        /// The entry as given.
        given: String,
        /// What is wrong and what to do.
        reason: String,
    },
}

fn searched_list(paths: &[PathBuf]) -> String {
    if paths.is_empty() {
        return "no import path".into();
    }
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

fn methods_list(methods: &[String]) -> String {
    if methods.is_empty() {
        "it has no methods".into()
    } else {
        format!("it has: {}", methods.join(", "))
    }
}

fn path_prefix(path: &str) -> String {
    if path.is_empty() {
        String::new()
    } else {
        format!("{path}: ")
    }
}

impl From<SchemaError> for crate::Error {
    fn from(e: SchemaError) -> crate::Error {
        crate::Error::Usage(e.to_string())
    }
}
