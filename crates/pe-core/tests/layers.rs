//! The layers of `docs/layers.md`, held against pe-core's sources: exact arithmetic, then the
//! description, then the generators, then the front doors, each file naming only its own layer
//! or the ones below it; and no layer of the engine knowing a checkpoint format (that is
//! pe-formats' work).

use std::fs;
use std::path::{Path, PathBuf};

/// The layers, lowest first.
const LAYERS: [&str; 4] = ["exact", "description", "generators", "front doors"];

/// The layer of a source file, by its path under `src/`.
fn layer_of_file(path: &str) -> usize {
    match path {
        p if p.starts_with("exact/") => 0,
        p if p.starts_with("describe/") => 1,
        "rope/config.rs"
        | "rope/configs.rs"
        | "rope/layouts.rs"
        | "rope/types.rs"
        | "rope/query_scale.rs" => 1,
        p if p.starts_with("generate/") || p.starts_with("cuda/") => 2,
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
        | "ColumnLayout"
        | "OddWidth"
        | "PeSpec"
        | "Preset"
        | "DEFAULT_BASE"
        | "RopeConfig"
        | "RopeConfigs"
        | "PairLayout"
        | "MropeSlots"
        | "RopeType"
        | "Dynamic"
        | "LinearScaling"
        | "Llama3"
        | "Longrope"
        | "LongropePolicy"
        | "Proportional"
        | "QueryScale"
        | "NtkAlpha"
        | "Yarn"
        | "DEFAULT_ROPE_THETA" => 1,
        "generate" | "cuda" | "TableBackend" => 2,
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
    let code = code_only(code);
    let mut names = Vec::new();
    for (i, _) in code.match_indices("crate::") {
        names.extend(path_heads(&code[i + "crate::".len()..]));
    }
    for (i, _) in code.match_indices("super::") {
        let modules = path_heads(&code[i + "super::".len()..]);
        // A group's trailing comma leaves an empty entry: no module.
        let modules = modules.into_iter().filter(|m| !m.is_empty() && m != "self");
        names.extend(modules.map(|m| format!("{folder}/{m}")));
    }
    names.retain(|n| !n.is_empty() && n != "self");
    names
}

/// `code` without its comment lines.
fn code_only(code: &str) -> String {
    code.lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
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
    let code = "use crate::{\n    exact::dd,\n    // crate::Ignored\n    generate::{TableBackend, Generator},\n    Error,\n};\nuse super::{tables, types::Yarn};\nlet x = crate::MAX_WIDTH;";
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

/// What `code`, the source of the file `rel` (its path under `src/`), imports from a layer
/// above its own, one line per import; and how many imports it has.
fn violations(rel: &str, code: &str) -> (Vec<String>, usize) {
    let layer = layer_of_file(rel);
    let folder = rel.rsplit_once('/').map_or("", |(dir, _)| dir).to_string();
    let names = names_used(code, &folder);
    let mut wrong = Vec::new();
    for name in &names {
        let target = match name.split_once('/') {
            // `super::x` from a folder: the sibling file, or the folder's own module.
            Some((dir, module)) => layer_of_file(&format!("{dir}/{module}.rs")),
            None => layer_of_name(name),
        };
        if target > layer {
            wrong.push(format!(
                "{rel} ({}) uses {name} ({})",
                LAYERS[layer], LAYERS[target]
            ));
        }
    }
    (wrong, names.len())
}

#[test]
fn a_multi_line_import_pointing_up_is_caught() {
    // A description file reaching the generators and a front door through a group that spans
    // lines and nests, and one reaching a sibling front door through `super::{..}`.
    let code = "use crate::{\n    exact::dd::Dd,\n    generate::{\n        Generator,\n        TableBackend,\n    },\n    Rope,\n};\n";
    assert_eq!(
        violations("describe/spec.rs", code).0,
        [
            "describe/spec.rs (description) uses generate (generators)",
            "describe/spec.rs (description) uses Rope (front doors)",
        ]
    );
    let code = "use super::{\n    types::Yarn,\n    tables::Rope,\n};\n";
    assert_eq!(
        violations("rope/config.rs", code).0,
        ["rope/config.rs (description) uses rope/tables (front doors)"]
    );
    // The same imports pointing down are not.
    let code =
        "use crate::{\n    exact::dd::Dd,\n    describe::{\n        freq::Plan,\n    },\n};\n";
    assert_eq!(violations("generate/cpu.rs", code), (vec![], 2));
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
        let code = fs::read_to_string(root.join(file)).unwrap();
        let (up, imports) = violations(&rel, &code);
        wrong.extend(up);
        checked += imports;
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

/// What a file takes a sine or cosine with, outside the generators: the exact layer's
/// trigonometry, a frequency's `sin_cos`, or candle's and std's `sin` and `cos`.
const TRIGONOMETRY: [&str; 6] = ["trig::", "trig;", "sin_cos(", ".sin()", ".cos()", "::sin("];

/// Every sine and cosine a front door returns comes from the generators (`Generator`): no
/// front-door file takes one itself.
#[test]
fn front_doors_take_no_sine_or_cosine_themselves() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&root, &root, &mut files);
    let mut front_doors = 0;
    let mut wrong = Vec::new();
    for file in &files {
        let rel = file.to_string_lossy().replace('\\', "/");
        if layer_of_file(&rel) != 3 {
            continue;
        }
        front_doors += 1;
        let code = code_only(&fs::read_to_string(root.join(file)).unwrap());
        wrong.extend(
            TRIGONOMETRY
                .iter()
                .filter(|t| code.contains(*t))
                .map(|t| format!("{rel}: {t}")),
        );
    }
    assert!(front_doors > 10, "only {front_doors} front-door files");
    assert!(
        wrong.is_empty(),
        "front doors computing sines or cosines outside the generators:\n{}",
        wrong.join("\n")
    );
}

/// The crates and dependencies only a reader of checkpoint files needs: a JSON parser, a GGUF
/// reader (candle's `gguf_file` lives in candle-core, which the engine needs for tensors, so it
/// is held by the source check below), the format crate itself.
const FORMAT_DEPENDENCIES: [&str; 4] = ["serde_json", "candle-pe-formats", "gguf", "tokenizers"];

/// The names of the `[dependencies]` table of a `Cargo.toml`: the keys of its lines, and of
/// `[dependencies.NAME]` tables; dev- and build-dependencies are not the library's.
fn dependencies(manifest: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut in_table = false;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            let header = line.trim_matches(|c| c == '[' || c == ']').trim();
            in_table = header == "dependencies";
            if let Some(name) = header.strip_prefix("dependencies.") {
                names.push(name.trim().to_string());
            }
            continue;
        }
        if in_table && !line.is_empty() && !line.starts_with('#') {
            if let Some((key, _)) = line.split_once('=') {
                names.push(key.trim().trim_matches('"').to_string());
            }
        }
    }
    names
}

/// The public names a crate exports at its root (`pub use module::{A, B};` and
/// `pub use module::A;` lines of its `lib.rs`), after the format crate's name.
fn format_crate_names(lib_rs: &str) -> Vec<String> {
    let code = code_only(lib_rs);
    let mut names = vec!["candle_pe_formats".to_string()];
    for (i, _) in code.match_indices("pub use ") {
        let rest = &code[i + "pub use ".len()..];
        let item = &rest[..rest.find(';').unwrap_or(rest.len())];
        let leaves = match (item.find('{'), item.rfind('}')) {
            (Some(open), Some(close)) => item[open + 1..close].to_string(),
            _ => item.rsplit("::").next().unwrap_or_default().to_string(),
        };
        names.extend(
            leaves
                .split(',')
                .map(|n| n.trim().rsplit(' ').next().unwrap_or_default().to_string())
                .filter(|n| !n.is_empty()),
        );
    }
    names
}

/// Whether `code` names `word` as a whole identifier.
fn names_word(code: &str, word: &str) -> bool {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    code.match_indices(word).any(|(i, _)| {
        let before = code[..i].chars().next_back().is_none_or(|c| !ident(c));
        let after = code[i + word.len()..]
            .chars()
            .next()
            .is_none_or(|c| !ident(c));
        before && after
    })
}

/// The engine knows no checkpoint format, held two ways: its manifest's `[dependencies]` name
/// no JSON parser, GGUF reader or format crate; and its sources name no public item of the
/// format crate (read from that crate's root re-exports), nor candle's GGUF reader.
#[test]
fn the_engine_depends_on_no_format() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let deps = dependencies(&manifest);
    assert!(deps.iter().any(|d| d == "candle-core"), "read {deps:?}");
    let mut wrong: Vec<String> = deps
        .iter()
        .filter(|d| FORMAT_DEPENDENCIES.iter().any(|f| d.contains(f)))
        .map(|d| format!("Cargo.toml: {d} in [dependencies]"))
        .collect();
    let formats_lib = root.join("../pe-formats/src/lib.rs");
    let own = format_crate_names(&fs::read_to_string(root.join("src/lib.rs")).unwrap());
    // Each crate's `Error` and `Result` are its own: the engine's are not the format's.
    let format_names: Vec<String> = format_crate_names(&fs::read_to_string(formats_lib).unwrap())
        .into_iter()
        .filter(|n| !own[1..].contains(n))
        .collect();
    assert!(
        ["GgufRope", "FromHfConfig", "GgufMeta"]
            .iter()
            .all(|n| format_names.iter().any(|f| f == n)),
        "read {format_names:?}"
    );
    let mut files = Vec::new();
    sources(&root.join("src"), &root.join("src"), &mut files);
    for file in &files {
        let code = code_only(&fs::read_to_string(root.join("src").join(file)).unwrap());
        let rel = file.to_string_lossy().replace('\\', "/");
        let named = format_names.iter().map(String::as_str).chain(["gguf_file"]);
        wrong.extend(
            named
                .filter(|n| names_word(&code, n))
                .map(|n| format!("src/{rel}: {n}")),
        );
    }
    assert!(files.len() > 20, "found only {files:?}");
    assert!(
        wrong.is_empty(),
        "format knowledge in the engine:\n{}",
        wrong.join("\n")
    );
}
