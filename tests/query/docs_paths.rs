//! Every repository path that `README.md` and `docs/*.md` name exists, so a
//! file that moves takes its references with it. A path is a word that starts
//! with one of the repository's top-level folders (`src/`, `docs/`, ...), in
//! backticks, a link or plain text; a file in a module table of
//! docs/ARCHITECTURE.md (relative to the crate's source folder the line above
//! the table names); or a relative link. `:line`, `::test` and `#anchor`
//! suffixes are dropped; words with placeholders (`<table>`, `*`, `{a,b}`,
//! `$DIR`) are not paths.

use std::path::Path;

/// The folders a repository path starts with.
const ROOTS: &[&str] = &[
    "src/",
    "crates/",
    "tests/",
    "sql/",
    "schemas/",
    "sample_logs/",
    "bench/",
    "docs/",
    "config/",
    "fuzz/",
    "examples/",
    ".ci/",
];

/// Characters that end a word: a path never holds them.
const DELIMITERS: &[char] = &['`', '(', ')', '[', ']', ',', ';', '"', '\'', '|', '='];

/// Characters of a placeholder: a word holding one names many paths or none.
const PLACEHOLDERS: &[char] = &['<', '>', '*', '{', '}', '$'];

#[test]
fn every_path_the_docs_name_exists() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut missing = Vec::new();
    for doc in docs(repo) {
        let text = std::fs::read_to_string(repo.join(&doc)).unwrap_or_else(|e| panic!("{doc}: {e}"));
        for (line, path) in named_paths(&doc, &text) {
            if !repo.join(&path).exists() {
                missing.push(format!("{doc}:{line}: {path}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "{} path(s) the docs name are not in the repository (moved? fix the reference):\n  {}",
        missing.len(),
        missing.join("\n  ")
    );
}

/// `README.md` and every `docs/*.md`, relative to the repository root.
fn docs(repo: &Path) -> Vec<String> {
    let mut docs: Vec<String> = std::fs::read_dir(repo.join("docs"))
        .expect("docs/ exists")
        .map(|e| e.expect("readable docs/").file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".md"))
        .map(|name| format!("docs/{name}"))
        .collect();
    docs.sort();
    docs.insert(0, "README.md".to_string());
    docs
}

/// `(line number, path relative to the repository root)` of every path `text` names.
fn named_paths(doc: &str, text: &str) -> Vec<(usize, String)> {
    let folder = Path::new(doc).parent().unwrap_or(Path::new(""));
    let mut found = Vec::new();
    let mut module_root: Option<String> = None;
    for (i, line) in text.lines().enumerate() {
        let number = i + 1;
        if let Some(root) = module_table_root(line) {
            module_root = Some(root);
            continue;
        }
        if line.starts_with('|') {
            if let Some(root) = &module_root {
                found.extend(module_cell_paths(line).into_iter().map(|p| (number, format!("{root}{p}"))));
            }
        } else if !line.trim().is_empty() {
            module_root = None;
        }
        let words = line.split(|c: char| c.is_whitespace() || DELIMITERS.contains(&c));
        found.extend(words.filter_map(repository_path).map(|p| (number, p)));
        for target in relative_link_targets(line) {
            found.push((number, folder.join(target).to_string_lossy().into_owned()));
        }
    }
    // A link such as `[cli](docs/cli.md)` in README.md is a word and a link: report it once.
    found.sort();
    found.dedup();
    found
}

/// A word read as a repository path: `./` and suffixes dropped, `None` when
/// it starts with no known folder or holds a placeholder.
fn repository_path(word: &str) -> Option<String> {
    let word = word.strip_prefix("./").unwrap_or(word);
    if !ROOTS.iter().any(|root| word.starts_with(root)) {
        return None;
    }
    let path = word.split([':', '#']).next().unwrap_or(word);
    let path = path.trim_end_matches(['.', ',', ';', ':', '!', '?']);
    (!path.contains(PLACEHOLDERS)).then(|| path.to_string())
}

/// The source folder a module table's files are relative to, from the line
/// that introduces the table: `` `tokscope` (`src/`): ``.
fn module_table_root(line: &str) -> Option<String> {
    let (_, folder) = line.trim_end().strip_suffix("`):")?.rsplit_once("(`")?;
    let is_root = folder.ends_with('/') && ROOTS.iter().any(|root| folder.starts_with(root));
    is_root.then(|| folder.to_string())
}

/// The files a module table row names in its first cell, relative to the
/// table's folder: `` `cli/ingest.rs`, `query.rs` `` is `cli/ingest.rs` and
/// `cli/query.rs` (a bare name is in the folder of the cell's first name).
fn module_cell_paths(row: &str) -> Vec<String> {
    let Some(cell) = row.split('|').nth(1) else { return Vec::new() };
    let names: Vec<&str> = cell.split('`').skip(1).step_by(2).collect();
    let Some(first) = names.first() else { return Vec::new() };
    let folder = &first[..first.rfind('/').map_or(0, |i| i + 1)];
    names.iter().map(|name| if name.contains('/') { name.to_string() } else { format!("{folder}{name}") }).collect()
}

/// Targets of markdown links `[text](target)` that are files beside the doc
/// (no URL, no bare `#anchor`), without their anchor.
fn relative_link_targets(line: &str) -> Vec<&str> {
    line.match_indices("](")
        .filter_map(|(i, _)| {
            let rest = &line[i + 2..];
            let target = &rest[..rest.find(')')?];
            let target = target.split('#').next().unwrap_or(target);
            let is_file = !target.is_empty() && !target.contains("://") && !target.starts_with("mailto:");
            (is_file && !target.contains(char::is_whitespace)).then_some(target)
        })
        .collect()
}
