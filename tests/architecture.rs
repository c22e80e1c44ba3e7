//! ARCHITECTURE.md stays true: every `src/…` path it names exists, every `file#name`
//! names something in that file, each folder imports only the crate modules its row of
//! the code map allows (which also keeps the import graph free of cycles: the allowed
//! sets form a layering), and no source file outgrows one responsibility.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
/// Past this a file holds more than one responsibility (STYLE: one per file).
const MAX_LINES: usize = 600;

fn architecture() -> String {
    std::fs::read_to_string(Path::new(ROOT).join("ARCHITECTURE.md")).unwrap()
}

/// Every `src/…` reference in backticks, with its `#name` if it has one.
fn references(text: &str) -> Vec<(String, Option<String>)> {
    let mut out = Vec::new();
    for span in text.split('`').skip(1).step_by(2) {
        if !span.starts_with("src/") {
            continue;
        }
        let (path, name) = match span.split_once('#') {
            Some((p, n)) => (p.to_string(), Some(n.to_string())),
            None => (span.to_string(), None),
        };
        out.push((path, name));
    }
    out
}

fn rust_files(path: &Path) -> Vec<PathBuf> {
    if path.is_file() {
        return vec![path.to_path_buf()];
    }
    let mut out = Vec::new();
    for e in std::fs::read_dir(path).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(rust_files(&p));
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
    out
}

#[test]
fn every_path_and_name_exists() {
    let refs = references(&architecture());
    assert!(refs.len() > 60, "only {} references found", refs.len());
    for (path, name) in refs {
        let p = Path::new(ROOT).join(&path);
        assert!(
            p.exists(),
            "ARCHITECTURE.md names {path}, which does not exist"
        );
        if let Some(name) = name {
            let text = std::fs::read_to_string(&p).unwrap();
            let found = text.match_indices(name.as_str()).any(|(i, _)| {
                let before = text[..i].chars().last();
                let after = text[i + name.len()..].chars().next();
                let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
                !word(before) && !word(after)
            });
            assert!(
                found,
                "ARCHITECTURE.md names {path}#{name}, not found there"
            );
        }
    }
}

/// The crate modules a file refers to (`crate::run::…`), outside comments and the
/// tests at the bottom of the file.
fn crate_imports(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in text.lines() {
        let l = line.trim_start();
        if l.starts_with("#[cfg(test)]") {
            break;
        }
        if l.starts_with("//") {
            continue;
        }
        for (i, _) in l.match_indices("crate::") {
            let rest = &l[i + "crate::".len()..];
            let module: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            // `use crate::{a, b}` is not used in this code base; a bare module name is.
            if !module.is_empty() {
                out.insert(module);
            }
        }
    }
    out
}

#[test]
fn each_folder_imports_only_what_the_code_map_allows() {
    let text = architecture();
    let map = text
        .split("## Code map")
        .nth(1)
        .unwrap()
        .split("\n## ")
        .next()
        .unwrap();
    let mut rows = 0;
    for line in map.lines().filter(|l| l.starts_with("| `src/")) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let path = cells[1].trim_matches('`');
        let allowed_cell = cells[cells.len() - 2];
        if allowed_cell == "everything" {
            continue;
        }
        let own = path
            .trim_start_matches("src/")
            .trim_end_matches('/')
            .trim_end_matches(".rs")
            .to_string();
        let allowed: BTreeSet<String> = allowed_cell
            .split('`')
            .skip(1)
            .step_by(2)
            .map(String::from)
            .chain([own.clone()])
            .collect();
        for file in rust_files(&Path::new(ROOT).join(path)) {
            let imports = crate_imports(&std::fs::read_to_string(&file).unwrap());
            let bad: Vec<&String> = imports.difference(&allowed).collect();
            assert!(
                bad.is_empty(),
                "{} imports {bad:?}, but ARCHITECTURE.md allows {own} only {allowed:?}",
                file.display()
            );
        }
        rows += 1;
    }
    assert!(rows >= 10, "code map rows found: {rows}");
}

#[test]
fn every_module_has_a_row_in_the_code_map() {
    let text = architecture();
    for e in std::fs::read_dir(Path::new(ROOT).join("src")).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().to_string();
        if name == "lib.rs" {
            continue;
        }
        let shown = if name.ends_with(".rs") {
            format!("| `src/{name}`")
        } else {
            format!("| `src/{name}/`")
        };
        assert!(
            text.contains(&shown),
            "src/{name} has no row in the code map"
        );
    }
}

#[test]
fn no_source_file_outgrows_one_responsibility() {
    for file in rust_files(&Path::new(ROOT).join("src")) {
        let n = std::fs::read_to_string(&file).unwrap().lines().count();
        assert!(
            n <= MAX_LINES,
            "{} has {n} lines (> {MAX_LINES}): split it along its seams",
            file.display()
        );
    }
}

#[test]
fn the_import_check_sees_imports() {
    let text = "use crate::run::Run;\n// crate::engine in a comment\nfn f() { crate::units::fmt_us(1.0); }\n#[cfg(test)]\nmod tests { use crate::lab; }\n";
    let got: Vec<String> = crate_imports(text).into_iter().collect();
    assert_eq!(got, ["run", "units"]);
}
