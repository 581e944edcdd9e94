//! The crate's modules depend one way, and its files stay readable.
//!
//! This reads `src/` and collects, for every file, the modules its
//! (non-test) code names through `crate::`, `super::` or `self::` paths.
//! A path from a file to another module is a dependency between the two
//! siblings under their nearest common parent: `netio/stream.rs` naming
//! `super::tls_client::ClientTls` makes `stream` depend on `tls_client`
//! inside `netio`; `engine/worker/io.rs` naming `crate::stats::Delta`
//! makes `engine` depend on `stats` at the top.
//!
//! Checked:
//! * at the top, nothing imports `cli` (the binary's front end) or
//!   `daemon` but `cli`, and each module reaches only the layers the
//!   README's Layout table gives it (same-layer imports without a cycle);
//! * inside every module, its files and submodules form no circle (one of
//!   them holds what the others share instead);
//! * no file in `src/` has more than [`MAX_CODE_LINES`] lines of non-test
//!   code (the code before its `#[cfg(test)] mod tests`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Layer of each top-level module (README, "Layout").
const LAYERS: &[(&str, u8)] = &[
    ("error", 0),
    ("fsio", 0),
    ("heap", 0),
    ("names", 0),
    ("wire", 0),
    ("timer", 0),
    ("netio", 0),
    ("stats", 0),
    ("test_alloc", 0),
    ("plan", 1),
    ("config", 2),
    ("preflight", 2),
    ("reflection", 2),
    ("engine", 3),
    ("report", 3),
    ("observe", 3),
    ("state", 3),
    ("server", 4),
    ("statuscmd", 4),
    ("verdict", 4),
    ("merge", 4),
    ("html", 4),
    ("daemon", 5),
    ("cli", 5),
];

/// Most lines of non-test code in one file.
const MAX_CODE_LINES: usize = 800;

fn layer(module: &str) -> u8 {
    LAYERS
        .iter()
        .find(|(m, _)| *m == module)
        .map(|(_, l)| *l)
        .unwrap_or_else(|| panic!("module {module} has no layer in tests/layers.rs (and the README's Layout)"))
}

/// A module's path from the crate root (`["netio", "stream"]`).
type ModPath = Vec<String>;

/// The file's code without its `#[cfg(test)] mod tests` block.
fn without_tests(text: &str) -> &str {
    text.split("#[cfg(test)]\nmod tests").next().unwrap_or(text)
}

/// The module a file (relative to `src/`) defines: `netio/stream.rs` is
/// `netio::stream`, `netio/mod.rs` is `netio`, `lib.rs` the root.
fn module_of(rel: &str) -> ModPath {
    let mut parts: ModPath = rel.trim_end_matches(".rs").split('/').map(str::to_string).collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib" | "main")) {
        parts.pop();
    }
    parts
}

fn ident(text: &str) -> &str {
    let end = text
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(text.len());
    &text[..end]
}

/// Expands what follows an anchor (`a::b`, `a::{b, c::d}`) into the
/// paths it names.
fn expand(text: &str, prefix: &[String], out: &mut Vec<ModPath>) {
    if let Some(group) = text.strip_prefix('{') {
        let mut depth = 0;
        let mut start = 0;
        for (i, c) in group.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => {
                    expand(group[start..i].trim_start(), prefix, out);
                    return;
                }
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    expand(group[start..i].trim_start(), prefix, out);
                    start = i + 1;
                }
                _ => {}
            }
        }
        return;
    }
    let name = ident(text);
    if name.is_empty() || name == "self" {
        out.push(prefix.to_vec());
        return;
    }
    let mut path = prefix.to_vec();
    path.push(name.to_string());
    match text[name.len()..].strip_prefix("::") {
        Some(rest) => expand(rest, &path, out),
        None => out.push(path),
    }
}

/// Every module path a file in module `here` names through `crate::`,
/// `super::` or `self::` (comments left out), resolved from the root.
fn references(here: &[String], text: &str) -> Vec<ModPath> {
    let code: String = text
        .lines()
        .map(|line| line.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n");
    let mut out = Vec::new();
    for (i, _) in code.match_indices("::") {
        let before = &code[..i];
        let word_start = before
            .rfind(|c: char| !(c.is_alphanumeric() || c == '_'))
            .map_or(0, |j| j + 1);
        let word = &before[word_start..];
        // Only the start of a path: `super::super::x` is read once, from
        // its first `super`.
        if before[..word_start].ends_with("::") {
            continue;
        }
        // `self` in a file `a/b.rs` is `a::b`; `super` is `a`.
        let mut base: ModPath = match word {
            "crate" => Vec::new(),
            "self" | "super" => here.to_vec(),
            _ => continue,
        };
        let mut rest = &code[i + 2..];
        if word == "super" {
            base.pop();
        }
        while let Some(r) = rest.strip_prefix("super::") {
            base.pop();
            rest = r;
        }
        let mut found = Vec::new();
        expand(rest, &[], &mut found);
        for tail in found {
            let mut path = base.clone();
            path.extend(tail);
            out.push(path);
        }
    }
    out
}

/// Dependencies between sibling modules, by their parent: `graphs[parent]
/// [from]` holds the siblings `from` (or anything inside it) names.
type Graphs = BTreeMap<ModPath, BTreeMap<String, BTreeSet<String>>>;

/// Builds [`Graphs`] from `(path relative to src/, text)` pairs.
fn sibling_graphs(files: &[(String, String)]) -> Graphs {
    let modules: BTreeSet<ModPath> = files.iter().map(|(rel, _)| module_of(rel)).collect();
    let mut graphs = Graphs::new();
    for (rel, text) in files {
        let here = module_of(rel);
        if here.is_empty() {
            continue; // lib.rs declares everything
        }
        for target in references(&here, without_tests(text)) {
            let common = here.iter().zip(&target).take_while(|(a, b)| a == b).count();
            if common >= here.len() || common >= target.len() {
                continue; // a module naming itself, a parent or a child
            }
            if !modules.contains(&target[..=common]) {
                continue; // an item of the parent (`super::Session`), not a module
            }
            graphs
                .entry(here[..common].to_vec())
                .or_default()
                .entry(here[common].clone())
                .or_default()
                .insert(target[common].clone());
        }
    }
    graphs
}

/// Every circle in every graph, as `parent: a -> b -> a`.
fn circles(graphs: &Graphs) -> Vec<String> {
    fn visit(
        n: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
        found: &mut Vec<Vec<String>>,
    ) {
        if let Some(i) = path.iter().position(|p| p == n) {
            let mut circle = path[i..].to_vec();
            circle.push(n.to_string());
            found.push(circle);
            return;
        }
        if done.contains(n) {
            return;
        }
        path.push(n.to_string());
        for d in graph.get(n).into_iter().flatten() {
            visit(d, graph, path, done, found);
        }
        path.pop();
        done.insert(n.to_string());
    }
    let mut out = Vec::new();
    for (parent, graph) in graphs {
        let mut done = BTreeSet::new();
        let mut found = Vec::new();
        for module in graph.keys() {
            visit(module, graph, &mut Vec::new(), &mut done, &mut found);
        }
        let parent = if parent.is_empty() {
            "crate".to_string()
        } else {
            parent.join("::")
        };
        out.extend(found.iter().map(|c| format!("{parent}: {}", c.join(" -> "))));
    }
    out
}

/// Lines of non-test code.
fn code_lines(text: &str) -> usize {
    without_tests(text).lines().count()
}

/// Every `.rs` file under `src/`, as (path relative to `src/`, text).
fn read_src() -> Vec<(String, String)> {
    fn walk(dir: &Path, src: &Path, out: &mut Vec<(String, String)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, src, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path.strip_prefix(src).unwrap().to_string_lossy().replace('\\', "/");
                out.push((rel, std::fs::read_to_string(&path).unwrap()));
            }
        }
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut out = Vec::new();
    walk(&src, &src, &mut out);
    out.sort();
    out
}

#[test]
fn modules_depend_one_way() {
    let graphs = sibling_graphs(&read_src());
    let top = &graphs[&Vec::new()];
    assert!(top.len() >= 12, "read too few modules: {top:?}");
    let mut wrong = Vec::new();
    for (module, deps) in top {
        for dep in deps {
            if dep == "cli" || (dep == "daemon" && module != "cli") {
                wrong.push(format!("{module} imports {dep}"));
            } else if layer(dep) > layer(module) {
                wrong.push(format!(
                    "{module} (layer {}) imports {dep} (layer {})",
                    layer(module),
                    layer(dep)
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "imports against the layering: {wrong:#?}");
}

#[test]
fn no_circle_between_modules_or_between_the_files_of_one() {
    let graphs = sibling_graphs(&read_src());
    assert!(
        graphs.contains_key(&vec!["netio".to_string()]),
        "read no file-level dependencies inside netio: {:?}",
        graphs.keys().collect::<Vec<_>>()
    );
    let found = circles(&graphs);
    assert!(
        found.is_empty(),
        "import circles (move what both sides need into a third file): {found:#?}"
    );
}

#[test]
fn no_file_has_more_than_800_lines_of_code() {
    let files = read_src();
    assert!(files.len() > 50, "read too few files: {}", files.len());
    let long: Vec<String> = files
        .iter()
        .map(|(rel, text)| (rel, code_lines(text)))
        .filter(|(_, n)| *n > MAX_CODE_LINES)
        .map(|(rel, n)| format!("src/{rel}: {n} lines of non-test code"))
        .collect();
    assert!(
        long.is_empty(),
        "files over {MAX_CODE_LINES} lines of non-test code (split them by concept): {long:#?}"
    );
}

fn files(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter().map(|(p, t)| (p.to_string(), t.to_string())).collect()
}

#[test]
fn the_checker_sees_grouped_plain_and_relative_paths() {
    let path = |p: &[&str]| p.iter().map(|s| s.to_string()).collect::<ModPath>();
    assert_eq!(module_of("engine/worker/io.rs"), path(&["engine", "worker", "io"]));
    assert_eq!(module_of("engine/worker/mod.rs"), path(&["engine", "worker"]));
    let text = "use crate::{Error, preflight::{a, b::C}};\nuse super::super::stats::Delta;\n\
                let x = crate::wire::headers::scan(h); // crate::cli in a comment\nuse self::inner::Y;";
    let refs = references(&path(&["engine", "worker", "io"]), text);
    let want = [
        path(&["Error"]),
        path(&["preflight", "a"]),
        path(&["preflight", "b", "C"]),
        path(&["engine", "stats", "Delta"]),
        path(&["wire", "headers", "scan"]),
        path(&["engine", "worker", "io", "inner", "Y"]),
    ];
    assert_eq!(refs, want, "comments are not code");
}

#[test]
fn the_checker_fails_on_a_circle_between_two_files_of_a_module() {
    // The circle netio had: stream.rs and tls_client.rs each used the other.
    let circle = files(&[
        ("lib.rs", "mod netio;"),
        ("netio/mod.rs", "mod stream;\nmod tls_client;\npub use stream::Stream;"),
        (
            "netio/stream.rs",
            "use super::tls_client::{ClientTls, MAX_PLAINTEXT_PER_WRITE};\npub enum Stream {}",
        ),
        (
            "netio/tls_client.rs",
            "use super::stream::Session;\npub struct ClientTls;",
        ),
    ]);
    let found = circles(&sibling_graphs(&circle));
    assert!(
        found.iter().any(|c| c == "netio: stream -> tls_client -> stream"),
        "{found:?}"
    );

    // What is shared moved to a third file: no circle, and an item of the
    // parent (`super::Session` re-exported by mod.rs) is not a file.
    let fixed = files(&[
        ("lib.rs", "mod netio;"),
        (
            "netio/mod.rs",
            "mod stream;\nmod tls;\nmod tls_client;\npub use tls::Session;",
        ),
        (
            "netio/stream.rs",
            "use super::tls_client::ClientTls;\nuse super::tls::MAX;",
        ),
        (
            "netio/tls_client.rs",
            "use super::tls::{MAX, Session};\nuse super::Session as S;",
        ),
        ("netio/tls.rs", "pub struct Session;"),
    ]);
    assert_eq!(circles(&sibling_graphs(&fixed)), Vec::<String>::new());

    // A circle through a submodule's files, and a longer one.
    let deep = files(&[
        ("engine/mod.rs", ""),
        ("engine/worker/io.rs", "use crate::engine::control::X;"),
        ("engine/control.rs", "use super::report::Y;"),
        ("engine/report.rs", "use super::worker::Z;"),
        ("engine/worker/mod.rs", ""),
    ]);
    let found = circles(&sibling_graphs(&deep));
    assert_eq!(found, ["engine: control -> report -> worker -> control"], "{found:?}");

    // Test modules are left out.
    let tests_only = files(&[
        ("a/x.rs", "use super::y::A;"),
        (
            "a/y.rs",
            "pub struct A;\n#[cfg(test)]\nmod tests {\n    use super::super::x::B;\n}",
        ),
    ]);
    assert_eq!(circles(&sibling_graphs(&tests_only)), Vec::<String>::new());
}

#[test]
fn the_line_count_stops_at_the_test_module() {
    let text = "fn a() {}\nfn b() {}\n#[cfg(test)]\nmod tests {\n    fn t() {}\n}\n";
    assert_eq!(code_lines(text), 2);
    assert_eq!(code_lines(&"x\n".repeat(MAX_CODE_LINES + 1)), MAX_CODE_LINES + 1);
}
