//! The shipped example configs (`examples/*.toml`) are real: `soakd check`
//! accepts each of them and names every workload, it refuses a copy with a
//! misspelled key, every key docs/config.md documents is used by one of
//! them, the docs show them byte for byte (`<!-- include: FILE -->` blocks,
//! refreshed by scripts/sync-docs.sh), and the fuzz seed is the example.
//!
//! Paths are relative to the repository root, which is where cargo runs
//! integration tests; `examples/soak.toml` names its `body_file` relative
//! to itself, so it also works from any other directory.

mod util;

use std::fs;
use std::path::{Path, PathBuf};

use util::{TempDir, soakd};

/// `examples/*.toml`, sorted; panics unless both shipped files are there.
fn example_configs() -> Vec<PathBuf> {
    assert_eq!(
        std::env::current_dir().unwrap(),
        Path::new(env!("CARGO_MANIFEST_DIR")),
        "run from the repository root (cargo test does): the examples name paths relative to it"
    );
    let mut files: Vec<PathBuf> = fs::read_dir("examples")
        .expect("read examples/")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    for shipped in ["examples/soak.toml", "examples/soakd.toml"] {
        assert!(files.iter().any(|f| f == Path::new(shipped)), "{shipped} is missing");
    }
    files
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// The `name` of each `[[workload]]`; every example names all of them, since
/// the name is the `target` label of the metrics.
fn workload_names(path: &Path) -> Vec<String> {
    let doc: toml::Table = toml::from_str(&read(path)).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let workloads = doc
        .get("workload")
        .and_then(toml::Value::as_array)
        .unwrap_or_else(|| panic!("{}: no [[workload]]", path.display()));
    workloads
        .iter()
        .map(|w| {
            w.get("name")
                .and_then(toml::Value::as_str)
                .unwrap_or_else(|| panic!("{}: a workload without a name: {w}", path.display()))
                .to_string()
        })
        .collect()
}

#[test]
fn soakd_check_accepts_every_example_and_names_its_workloads() {
    for file in example_configs() {
        let path = file.to_str().unwrap();
        let out = soakd(&["check", "--config", path]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(0),
            "soakd check --config {path}\n--- stdout ---\n{stdout}--- stderr ---\n{stderr}"
        );
        assert!(
            stdout.contains("\npreflight: ok"),
            "{path}: no preflight verdict in:\n{stdout}"
        );
        let names = workload_names(&file);
        assert!(!names.is_empty());
        for name in &names {
            assert!(
                stdout.contains(&format!("workload {name} -> ")),
                "{path}: workload {name:?} is not in the plan:\n{stdout}"
            );
        }
        let described = stdout.lines().filter(|l| l.starts_with("workload ")).count();
        assert_eq!(
            described,
            names.len(),
            "{path}: the plan has other workloads:\n{stdout}"
        );
    }
}

/// Regression: `soakd check --config examples/soak.toml` worked from the
/// repository root only (`body_file examples/payload.json: cannot read
/// it` anywhere else), because a config file's relative paths were resolved
/// from the working directory. They are relative to the file now, as a
/// requests file's `@body-file` is: every example checks from another
/// directory too, and the plan shows the payload's size.
#[test]
fn examples_check_from_any_working_directory() {
    let elsewhere = TempDir::new("examples-cwd");
    for file in example_configs() {
        let abs = fs::canonicalize(&file).unwrap();
        let child = std::process::Command::new(util::soakd_bin())
            .args(["check", "--config", abs.to_str().unwrap()])
            .current_dir(elsewhere.path())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn soakd");
        let out = util::wait_output(child, 30);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(0),
            "soakd check --config {} from {}: {stderr}",
            abs.display(),
            elsewhere.path().display()
        );
    }
}

/// The test above could pass for a `soakd check` that accepts anything: a
/// copy of each example with `connections` misspelled must exit 2, naming
/// the copy, the line and the key.
#[test]
fn soakd_check_refuses_an_example_with_a_misspelled_key() {
    let dir = TempDir::new("examples");
    for file in example_configs() {
        let text = read(&file);
        let line = text
            .lines()
            .position(|l| l.starts_with("connections = "))
            .unwrap_or_else(|| panic!("{}: no `connections = ` line to misspell", file.display()))
            + 1;
        let broken: String = text
            .lines()
            .enumerate()
            .map(|(i, l)| {
                let l = if i + 1 == line {
                    l.replacen("connections", "conections", 1)
                } else {
                    l.to_string()
                };
                l + "\n"
            })
            .collect();
        assert_ne!(broken, text);
        let copy = dir.path().join(file.file_name().unwrap());
        fs::write(&copy, &broken).unwrap();
        let copy = copy.to_str().unwrap();
        let out = soakd(&["check", "--config", copy]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(2),
            "soakd check --config {copy} (line {line} broken): {stderr}"
        );
        let at = format!("{copy}:{line}:");
        assert!(
            stderr.contains(&at) && stderr.contains("unknown field `conections`"),
            "expected {at} and the unknown key in: {stderr}"
        );
        assert!(!String::from_utf8_lossy(&out.stdout).contains("preflight: ok"));
    }
}

/// Whether `text` assigns `key` somewhere (`key = `, also inside inline
/// tables and in commented-out lines).
fn assigns(text: &str, key: &str) -> bool {
    text.match_indices(key).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + key.len()..].trim_start_matches(' ');
        matches!(before, None | Some(' ' | '\n' | '{' | ',' | '#')) && after.starts_with('=')
    })
}

/// The keys of docs/config.md's tables: the backquoted names in the first
/// column (`` `body` / `body_file` `` gives both).
fn documented_keys() -> Vec<String> {
    let doc = read(Path::new("docs/config.md"));
    let mut keys = Vec::new();
    for row in doc.lines().filter(|l| l.starts_with("| `")) {
        let first = row.split('|').nth(1).unwrap();
        keys.extend(first.split('`').skip(1).step_by(2).map(str::to_string));
    }
    keys.sort();
    keys.dedup();
    keys
}

#[test]
fn every_documented_key_appears_in_an_example() {
    let keys = documented_keys();
    for expected in ["metrics_listen", "url", "body_file", "target_pids", "hold"] {
        assert!(
            keys.iter().any(|k| k == expected),
            "{expected} not read from docs/config.md: {keys:?}"
        );
    }
    let texts: Vec<String> = example_configs().iter().map(|f| read(f)).collect();
    let missing: Vec<&String> = keys.iter().filter(|k| !texts.iter().any(|t| assigns(t, k))).collect();
    assert!(
        missing.is_empty(),
        "keys documented in docs/config.md but used in no examples/*.toml (commented out is fine): {missing:?}"
    );
    // `stages` and `then` are described in prose, not in a table.
    for key in ["stages", "then"] {
        assert!(texts.iter().any(|t| assigns(t, key)), "no example uses {key}");
    }
}

/// One `<!-- include: FILE -->` block of a Markdown file.
struct Include {
    doc: PathBuf,
    line: usize,
    file: String,
    shown: String,
}

const BEGIN: &str = "<!-- include: ";
const END: &str = "<!-- end include -->";

/// The include blocks of every Markdown file of the repository (outside
/// hidden directories and `target`), as scripts/sync-docs.sh finds them.
fn includes() -> Vec<Include> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy();
            if name.starts_with('.') || name == "target" {
                continue;
            }
            if path.is_dir() {
                walk(&path, out);
            } else if name.ends_with(".md") {
                out.push(path);
            }
        }
    }
    let mut docs = Vec::new();
    walk(Path::new("."), &mut docs);
    docs.sort();
    let mut found = Vec::new();
    for doc in docs {
        let text = read(&doc);
        let lines: Vec<&str> = text.split_inclusive('\n').collect();
        let mut i = 0;
        while i < lines.len() {
            let l = lines[i].trim_end_matches('\n');
            if let Some(file) = l.strip_prefix(BEGIN).and_then(|r| r.strip_suffix(" -->")) {
                let end = (i + 1..lines.len())
                    .find(|&j| lines[j].trim_end_matches('\n') == END)
                    .unwrap_or_else(|| panic!("{}:{}: include without `{END}`", doc.display(), i + 1));
                found.push(Include {
                    doc: doc.clone(),
                    line: i + 1,
                    file: file.to_string(),
                    shown: lines[i + 1..end].concat(),
                });
                i = end;
            } else {
                assert!(l != END, "{}:{}: `{END}` without an include", doc.display(), i + 1);
            }
            i += 1;
        }
    }
    found
}

#[test]
fn docs_show_the_example_files_byte_for_byte() {
    let blocks = includes();
    for b in &blocks {
        let text = read(Path::new(&b.file));
        assert!(text.ends_with('\n'), "{}: must end with a newline", b.file);
        let lang = Path::new(&b.file)
            .extension()
            .map_or(String::new(), |x| x.to_string_lossy().into());
        let expected = format!("```{lang}\n{text}```\n");
        assert!(
            b.shown == expected,
            "{}:{}: the copy of {} differs from the file; edit the file and run scripts/sync-docs.sh",
            b.doc.display(),
            b.line,
            b.file
        );
    }
    // Each example is shown somewhere, where a reader looks for it.
    for (doc, file) in [
        ("./docs/config.md", "examples/soak.toml"),
        ("./docs/operating.md", "examples/soakd.toml"),
    ] {
        assert!(
            blocks.iter().any(|b| b.doc == Path::new(doc) && b.file == file),
            "{doc} must show {file} in an include block"
        );
    }
    for file in example_configs() {
        assert!(
            blocks.iter().any(|b| Path::new(&b.file) == file),
            "{} is shown in no doc (add an include block)",
            file.display()
        );
    }
}

/// The fuzzer's config seed is the full example (a symlink, which
/// libFuzzer follows), so the two cannot drift apart.
#[test]
fn the_fuzz_seed_is_the_example() {
    let seed = Path::new("fuzz/seeds/parse_config/full_example.toml");
    assert_eq!(
        fs::read_link(seed).ok(),
        Some(PathBuf::from("../../../examples/soak.toml")),
        "{} must be a symlink to examples/soak.toml",
        seed.display()
    );
    assert_eq!(read(seed), read(Path::new("examples/soak.toml")));
}

/// The body examples/soak.toml sends as JSON is JSON.
#[test]
fn the_example_payload_is_json() {
    let text = read(Path::new("examples/payload.json"));
    serde_json::from_str::<serde_json::Value>(&text).expect("examples/payload.json");
}
