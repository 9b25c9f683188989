//! The layers of `docs/layers.md`, held against the imports of pe-core's sources: exact
//! arithmetic, then the description, then the generators, then the front doors, each file
//! naming only its own layer or the ones below it.

use std::fs;
use std::path::{Path, PathBuf};

/// The layers, lowest first.
const LAYERS: [&str; 4] = ["exact", "description", "generators", "front doors"];

/// The layer of a source file, by its path under `src/`.
fn layer_of_file(path: &str) -> usize {
    match path {
        p if p.starts_with("exact/") => 0,
        p if p.starts_with("describe/") => 1,
        "rope/config.rs" | "rope/types.rs" | "rope/query_scale.rs" | "rope/gguf.rs" => 1,
        p if p.starts_with("generate/") => 2,
        _ => 3,
    }
}

/// The layer of what `crate::NAME` (a module or an item re-exported at the root) names.
fn layer_of_name(name: &str) -> usize {
    match name {
        "exact" => 0,
        "describe"
        | "Error"
        | "Result"
        | "MAX_POSITION"
        | "MAX_WIDTH"
        | "MAX_ANGLE"
        | "Column"
        | "padding_aware_positions"
        | "Frequencies"
        | "Layout"
        | "OddWidth"
        | "PeSpec"
        | "Preset"
        | "DEFAULT_BASE"
        | "ConfigFields"
        | "RopeConfig"
        | "RopeConfigs"
        | "RopeType"
        | "Dynamic"
        | "Linear"
        | "Llama3"
        | "Longrope"
        | "LongropePolicy"
        | "Proportional"
        | "QueryScale"
        | "NtkAlpha"
        | "Yarn"
        | "DEFAULT_ROPE_THETA"
        | "GgufRope"
        | "PairLayout"
        | "FreqFactors"
        | "ValueSource" => 1,
        "generate" | "Backend" => 2,
        _ => 3,
    }
}

/// The `.rs` files under `dir`, as paths relative to `root`.
fn sources(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(root, &path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path.strip_prefix(root).unwrap().to_path_buf());
        }
    }
}

/// The names that code (not comments) reaches as `crate::NAME` or `crate::{A, B::c, ..}`, and
/// as `super::NAME` or `super::{a, b}` (resolved against the file's folder); a brace group may
/// span lines and nest.
fn names_used(code: &str, folder: &str) -> Vec<String> {
    let code: String = code
        .lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let mut names = Vec::new();
    for (i, _) in code.match_indices("crate::") {
        names.extend(path_heads(&code[i + "crate::".len()..]));
    }
    for (i, _) in code.match_indices("super::") {
        let modules = path_heads(&code[i + "super::".len()..]);
        names.extend(modules.into_iter().map(|m| format!("{folder}/{m}")));
    }
    names.retain(|n| !n.is_empty() && n != "self");
    names
}

/// The first segment of each path that `rest` (what follows `crate::` or `super::`) names:
/// one identifier, or each top-level entry of a `{...}` group.
fn path_heads(rest: &str) -> Vec<String> {
    let ident = |s: &str| -> String {
        s.trim_start()
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    let Some(group) = rest.strip_prefix('{') else {
        return vec![ident(rest)];
    };
    let (mut depth, mut entries, mut from) = (0usize, Vec::new(), 0);
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                entries.push(&group[from..i]);
                break;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                entries.push(&group[from..i]);
                from = i + 1;
            }
            _ => {}
        }
    }
    entries.into_iter().map(ident).collect()
}

#[test]
fn the_reader_sees_multi_line_and_nested_groups() {
    let code = "use crate::{\n    exact::dd,\n    // crate::Ignored\n    generate::{Backend, Generator},\n    Error,\n};\nuse super::{tables, types::Yarn};\nlet x = crate::MAX_WIDTH;";
    assert_eq!(
        names_used(code, "rope"),
        [
            "exact",
            "generate",
            "Error",
            "MAX_WIDTH",
            "rope/tables",
            "rope/types"
        ]
    );
}

#[test]
fn every_import_points_to_its_own_layer_or_below() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&root, &root, &mut files);
    assert!(files.len() > 20, "found only {files:?}");
    let mut checked = 0;
    let mut wrong = Vec::new();
    for file in &files {
        let rel = file.to_string_lossy().replace('\\', "/");
        let layer = layer_of_file(&rel);
        let folder = rel.rsplit_once('/').map_or("", |(dir, _)| dir).to_string();
        let code = fs::read_to_string(root.join(file)).unwrap();
        for name in names_used(&code, &folder) {
            let target = match name.split_once('/') {
                // `super::x` from a folder: the sibling file, or the folder's own module.
                Some((dir, module)) => layer_of_file(&format!("{dir}/{module}.rs")),
                None => layer_of_name(&name),
            };
            checked += 1;
            if target > layer {
                wrong.push(format!(
                    "{rel} ({}) uses {name} ({})",
                    LAYERS[layer], LAYERS[target]
                ));
            }
        }
    }
    assert!(
        checked > 50,
        "only {checked} imports found: is the parser broken?"
    );
    assert!(
        wrong.is_empty(),
        "imports against the layers:\n{}",
        wrong.join("\n")
    );
}
