//! The layering docs/ARCHITECTURE.md describes holds: no two modules of a
//! crate name each other, directly or through others (no import cycle).
//! A module is a file; it depends on every module whose path it names
//! (`use crate::a::b`, `crate::a::b::f()`, `super::x`), except its own
//! ancestors and descendants (a facade re-exporting its children, a child
//! using its parent's items). Comments are ignored.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::common;

/// Each crate: its source directory and the files that are not its modules
/// (the binary's files belong to the binary crate, checked apart).
fn crates() -> Vec<(&'static str, PathBuf, Vec<&'static str>)> {
    let repo = common::repo();
    vec![
        ("tokscope (lib)", repo.join("src"), vec!["main.rs", "cli"]),
        ("tokscope (bin)", repo.join("src"), vec!["lib.rs"]),
        ("tokscope-core", repo.join("crates/tokscope-core/src"), vec![]),
        ("tokscope-model", repo.join("crates/tokscope-model/src"), vec![]),
    ]
}

/// Module path of a file below `src` (`a/b.rs` and `a/b/mod.rs` are `a::b`).
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib" | "main")) {
        parts.pop();
    }
    parts.join("::")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Paths named in `code` as `crate::a::b` or `super::a` / `self::a`,
/// resolved against module `module`. Grouped imports (`use crate::{a,
/// b::c}`) name each.
fn named_paths(code: &str, module: &str) -> Vec<Vec<String>> {
    // `self` is the module itself; `super` its parent (for `a/mod.rs` as for `a/b.rs`).
    let self_base: Vec<String> = module.split("::").filter(|s| !s.is_empty()).map(String::from).collect();
    let mut base_of_super = self_base.clone();
    base_of_super.pop();
    let mut out = Vec::new();
    let bytes = code.as_bytes();
    for (start, _) in
        code.match_indices("crate::").chain(code.match_indices("super::")).chain(code.match_indices("self::"))
    {
        if start > 0
            && (bytes[start - 1].is_ascii_alphanumeric() || bytes[start - 1] == b'_' || bytes[start - 1] == b'$')
        {
            continue;
        }
        let (head, rest) = code[start..].split_once("::").unwrap();
        let mut base = match head {
            "crate" => Vec::new(),
            "super" => base_of_super.clone(),
            _ => self_base.clone(),
        };
        let mut rest = rest;
        while let Some(r) = rest.strip_prefix("super::") {
            base.pop();
            rest = r;
        }
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for item in group[..end].split(',') {
                let mut path = base.clone();
                path.extend(item.trim().split("::").map(|s| s.trim().to_string()).filter(|s| !s.is_empty()));
                out.push(path);
            }
            continue;
        }
        let token: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':').collect();
        let mut path = base;
        path.extend(token.split("::").filter(|s| !s.is_empty()).map(String::from));
        out.push(path);
    }
    out
}

/// Without `//` comments (doc comments included) and string-free enough for paths.
fn code_of(text: &str) -> String {
    text.lines().map(|l| l.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n")
}

fn related(a: &str, b: &str) -> bool {
    let under = |x: &str, y: &str| y.is_empty() || x == y || x.starts_with(&format!("{y}::"));
    under(a, b) || under(b, a)
}

fn dependency_graph(src: &Path, skip: &[&str]) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files.retain(|f| {
        let rel = f.strip_prefix(src).unwrap();
        !skip.iter().any(|s| rel.starts_with(s))
    });
    let modules: BTreeSet<String> = files.iter().map(|f| module_of(src, f)).collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in &files {
        let module = module_of(src, file);
        let code = code_of(&std::fs::read_to_string(file).unwrap());
        let edges = graph.entry(module.clone()).or_default();
        for path in named_paths(&code, &module) {
            // The longest prefix of the path that is a module of this crate.
            let target =
                (0..=path.len()).rev().map(|n| path[..n].join("::")).find(|p| modules.contains(p)).unwrap_or_default();
            if !related(&module, &target) {
                edges.insert(target);
            }
        }
    }
    graph
}

/// A cycle in `graph`, if any, as the modules along it.
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(node.to_string(), 1);
        stack.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            match state.get(next).copied().unwrap_or(0) {
                1 => {
                    let at = stack.iter().position(|m| m == next).unwrap();
                    let mut cycle = stack[at..].to_vec();
                    cycle.push(next.clone());
                    return Some(cycle);
                }
                0 => {
                    if let Some(c) = visit(next, graph, state, stack) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        stack.pop();
        state.insert(node.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for node in graph.keys() {
        if state.get(node).copied().unwrap_or(0) == 0 {
            if let Some(c) = visit(node, graph, &mut state, &mut Vec::new()) {
                return Some(c);
            }
        }
    }
    None
}

#[test]
fn no_module_imports_one_that_imports_it_back() {
    for (name, src, skip) in crates() {
        let graph = dependency_graph(&src, &skip);
        assert!(graph.len() > 3, "{name}: no modules found in {}", src.display());
        if let Some(cycle) = find_cycle(&graph) {
            panic!("{name}: an import cycle: {}", cycle.join(" -> "));
        }
    }
}

#[test]
fn the_cycle_finder_finds_a_cycle() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    std::fs::create_dir_all(src.join("a")).unwrap();
    std::fs::write(src.join("lib.rs"), "pub mod a;\npub mod b;\n").unwrap();
    std::fs::write(src.join("a/mod.rs"), "pub mod c;\nuse crate::b::Thing; // crate::z is a comment\n").unwrap();
    std::fs::write(src.join("a/c.rs"), "use super::super::b;\n").unwrap();
    std::fs::write(src.join("b.rs"), "use crate::{x, a::c::f};\n").unwrap();
    let graph = dependency_graph(src, &[]);
    assert_eq!(graph["b"], BTreeSet::from(["a::c".to_string()]));
    assert_eq!(graph["a"], BTreeSet::from(["b".to_string()]));
    let cycle = find_cycle(&graph).expect("a::c -> b -> a::c");
    assert!(cycle.contains(&"a::c".to_string()) && cycle.contains(&"b".to_string()), "{cycle:?}");
}
