//! The crate's rooms (`src/lib.rs`'s map) hold: no two source files import each other. Each
//! file's `crate::`, `super::` and `self::` paths, and the paths into the modules it declares,
//! are resolved to the file that defines what they name (an item re-exported at the root to
//! the file of its module); a file's unit tests (`#[cfg(test)] mod tests`) are not its
//! imports.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

/// The `.rs` files under `dir`, as paths relative to `root` with `/` separators.
fn sources(root: &Path, dir: &Path, out: &mut Vec<String>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(root, &path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let rel = path.strip_prefix(root).unwrap().to_string_lossy();
            out.push(rel.replace('\\', "/"));
        }
    }
}

/// The module path of a file: `llama/mod.rs` is `llama`, `llama/gguf.rs` `llama::gguf`.
fn module_of(file: &str) -> Vec<String> {
    let mut parts: Vec<String> = file
        .trim_end_matches(".rs")
        .split('/')
        .map(String::from)
        .collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
        parts.pop();
    }
    parts
}

/// The code of a file without its comments, string contents and unit tests.
fn code_only(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod ") {
        Some(i) => &text[..i],
        None => text,
    };
    let mut out = String::new();
    for line in text.lines() {
        if line.trim_start().starts_with("//") {
            continue;
        }
        let mut in_string = false;
        let mut prev = ' ';
        for c in line.chars() {
            if c == '"' && prev != '\\' {
                in_string = !in_string;
            } else if !in_string {
                out.push(c);
            }
            prev = if prev == '\\' { ' ' } else { c };
        }
        out.push('\n');
    }
    out
}

/// The paths that `rest` (the text after `crate::` or the like) names, brace groups expanded:
/// `a::{b, c::d}` is `a::b` and `a::c::d`.
fn paths(prefix: Vec<String>, rest: &str) -> Vec<Vec<String>> {
    let rest = rest.trim_start();
    if let Some(inner) = rest.strip_prefix('{') {
        let (mut depth, mut parts, mut part) = (0, vec![], String::new());
        for c in inner.chars() {
            match c {
                '}' if depth == 0 => break,
                ',' if depth == 0 => parts.push(std::mem::take(&mut part)),
                _ => {
                    depth += (c == '{') as i32 - (c == '}') as i32;
                    part.push(c);
                }
            }
        }
        parts.push(part);
        let parts = parts.iter().filter(|p| !p.trim().is_empty());
        return parts.flat_map(|p| paths(prefix.clone(), p)).collect();
    }
    let end = rest
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(rest.len());
    if end == 0 {
        return vec![prefix];
    }
    let mut path = prefix;
    path.push(rest[..end].to_string());
    match rest[end..].strip_prefix("::") {
        Some(more) => paths(path, more),
        None => vec![path],
    }
}

#[test]
fn no_two_files_import_each_other() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = vec![];
    sources(&root, &root, &mut files);
    let modules: BTreeMap<Vec<String>, String> =
        files.iter().map(|f| (module_of(f), f.clone())).collect();
    // What the root re-exports: `pub use a::b::{X, Y}` puts X and Y in a::b.
    let lib = code_only(&fs::read_to_string(root.join("lib.rs")).unwrap());
    let mut exported = BTreeMap::new();
    for (i, _) in lib.match_indices("pub use ") {
        for path in paths(vec![], &lib[i + "pub use ".len()..]) {
            if let Some((name, module)) = path.split_last() {
                exported.insert(name.clone(), module.to_vec());
            }
        }
    }
    let resolve = |path: &[String]| -> Option<&String> {
        let path = match path.first().and_then(|n| exported.get(n)) {
            Some(module) if !modules.contains_key(&path[..1]) => module.clone(),
            _ => path.to_vec(),
        };
        (1..=path.len()).rev().find_map(|k| modules.get(&path[..k]))
    };
    let mut imports: BTreeMap<&String, BTreeSet<&String>> = BTreeMap::new();
    for file in files.iter().filter(|f| f.as_str() != "lib.rs") {
        let code = code_only(&fs::read_to_string(root.join(file)).unwrap());
        let here = module_of(file);
        let parent = here[..here.len().saturating_sub(1)].to_vec();
        let mut bases = vec![
            ("crate::".to_string(), vec![]),
            ("super::".into(), parent),
            ("self::".into(), here.clone()),
        ];
        for line in code.lines() {
            let words: Vec<&str> = line.split_whitespace().collect();
            if let Some(i) = words.iter().position(|w| *w == "mod") {
                if let Some(name) = words.get(i + 1).and_then(|w| w.strip_suffix(';')) {
                    let mut child = here.clone();
                    child.push(name.to_string());
                    bases.push((format!("{name}::"), child));
                }
            }
        }
        let deps = imports.entry(file).or_default();
        for (word, base) in &bases {
            for (i, _) in code.match_indices(word.as_str()) {
                let before = code[..i].chars().last().unwrap_or(' ');
                if before.is_alphanumeric() || before == '_' || before == ':' {
                    continue;
                }
                let mut base = base.clone();
                let mut rest = &code[i + word.len()..];
                while let Some(more) = rest.strip_prefix("super::") {
                    base.pop();
                    rest = more;
                }
                for path in paths(base, rest) {
                    if let Some(target) = resolve(&path).filter(|t| *t != file) {
                        deps.insert(target);
                    }
                }
            }
        }
    }
    let mut pairs = vec![];
    for (a, deps) in &imports {
        for b in deps {
            if a < b && imports.get(b).is_some_and(|d| d.contains(a)) {
                pairs.push(format!("{a} <-> {b}"));
            }
        }
    }
    assert!(pairs.is_empty(), "files that import each other: {pairs:?}");
    // The check sees imports: the decoder reaches its family rows.
    assert!(imports[&"llama/config.rs".to_string()].contains(&"llama/family.rs".to_string()));
}
