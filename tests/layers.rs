//! The crate's modules depend one way: each uses only the layers below it.
//!
//! This reads `src/` and collects, for every top-level module, the other
//! top-level modules its (non-test) code names through `crate::`. The
//! graph must have no cycle, nothing may import `cli` (the binary's
//! front end) or `daemon` but `cli`, and each module may only reach the
//! layers the README's Layout table gives it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Layer of each top-level module (README, "Layout").
const LAYERS: &[(&str, u8)] = &[
    ("error", 0),
    ("fsio", 0),
    ("names", 0),
    ("wire", 0),
    ("timer", 0),
    ("netio", 0),
    ("stats", 0),
    ("plan", 1),
    ("config", 2),
    ("preflight", 2),
    ("engine", 3),
    ("report", 3),
    ("observe", 3),
    ("target", 4),
    ("statuscmd", 4),
    ("verdict", 4),
    ("merge", 4),
    ("html", 4),
    ("daemon", 5),
    ("cli", 5),
];

fn layer(module: &str) -> u8 {
    LAYERS
        .iter()
        .find(|(m, _)| *m == module)
        .map(|(_, l)| *l)
        .unwrap_or_else(|| panic!("module {module} has no layer in tests/layers.rs (and the README's Layout)"))
}

/// The module's code without its `#[cfg(test)] mod tests` block.
fn without_tests(text: &str) -> &str {
    text.split("#[cfg(test)]\nmod tests").next().unwrap_or(text)
}

/// Top-level modules named as `crate::NAME` or inside `crate::{...}`.
fn uses(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = text;
    while let Some(i) = rest.find("crate::") {
        rest = &rest[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for item in group[..end].split(',') {
                let name: String = item
                    .trim()
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                out.insert(name);
            }
        } else {
            let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            out.insert(name);
        }
    }
    out
}

fn collect(dir: &Path, src: &Path, graph: &mut BTreeMap<String, BTreeSet<String>>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            collect(&path, src, graph);
            continue;
        }
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let rel = path.strip_prefix(src).unwrap();
        let top = rel.components().next().unwrap().as_os_str().to_string_lossy();
        let module = top.trim_end_matches(".rs").to_string();
        if module == "lib" || module == "main" {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let names = uses(without_tests(&text));
        let entry = graph.entry(module.clone()).or_default();
        for name in names {
            // Items re-exported at the crate root (`crate::Error`, ...).
            if name != module && name.chars().next().is_some_and(|c| c.is_lowercase()) && name != "run" {
                entry.insert(name);
            }
        }
    }
}

#[test]
fn modules_depend_one_way() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut graph = BTreeMap::new();
    collect(&src, &src, &mut graph);
    assert!(graph.len() >= 12, "read too few modules: {graph:?}");
    let mut wrong = Vec::new();
    for (module, deps) in &graph {
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
    // Same-layer imports are allowed only without a cycle.
    fn visit(n: &str, graph: &BTreeMap<String, BTreeSet<String>>, path: &mut Vec<String>, done: &mut BTreeSet<String>) {
        if let Some(i) = path.iter().position(|p| p == n) {
            panic!("import cycle: {:?}", &path[i..]);
        }
        if !done.insert(n.to_string()) {
            return;
        }
        path.push(n.to_string());
        for d in graph.get(n).into_iter().flatten() {
            visit(d, graph, path, done);
        }
        path.pop();
    }
    let mut done = BTreeSet::new();
    for module in graph.keys() {
        visit(module, &graph, &mut Vec::new(), &mut done);
    }
}

#[test]
fn the_checker_sees_grouped_and_plain_imports() {
    let names = uses("use crate::{Error, preflight};\nlet x = crate::wire::headers::scan(h);");
    assert!(names.contains("preflight") && names.contains("wire") && names.contains("Error"));
}
