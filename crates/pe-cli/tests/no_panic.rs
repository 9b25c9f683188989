//! No file makes `pe` panic: the fixtures' config.json and GGUF files, mutated at random
//! (`pe_testkit::ConfigMutator`, `GgufMutator`: values made extreme, of another type, dropped or
//! taken from another file, the model type or architecture swapped), go through `pe inspect` and
//! `pe rope --config` / `--gguf`. Each either succeeds or fails with one line naming the
//! problem (exit 1); none may panic or be killed.
//!
//! Each input is a process, so the sweep is short: `PE_FUZZ_CASES` sets the number of inputs
//! of each kind (default 120), `PE_TEST_SEED` the seed.

mod common;

use std::io::Cursor;
use std::path::Path;

use candle_core::quantized::gguf_file::{self, Content, Value};
use candle_core::quantized::QTensor;
use candle_core::Device;
use common::{pe, s};
use pe_testkit::{ConfigMutator, GgufMutator};

/// The inputs of each kind, unless `PE_FUZZ_CASES` says otherwise.
const CASES: usize = 120;

fn cases() -> usize {
    std::env::var("PE_FUZZ_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(CASES)
}

/// Runs `pe args` and returns what is wrong with how it ended, if anything: a panic, a kill,
/// or a failure that is not one line.
fn misbehaves(args: &[&str]) -> Option<String> {
    let out = pe(args);
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let wrong = match out.status.code() {
        None => Some("was killed"),
        Some(_) if stderr.contains("panicked") => Some("panicked"),
        Some(0) => None,
        Some(1) if stderr.trim_end().lines().count() == 1 => None,
        Some(_) => Some("failed without one line naming the problem"),
    };
    wrong.map(|w| format!("pe {args:?} {w}: {stderr}"))
}

/// `pe inspect` and `pe rope` (3 positions, into `dir`) on the file at `path`, read as
/// `--config` or `--gguf` (`flag`).
fn run_pe(path: &Path, flag: &str, dir: &Path) -> Vec<String> {
    let out = dir.join("rope.safetensors");
    let rope = ["rope", flag, s(path), "--len", "3", "--out", s(&out)];
    let runs = [vec!["inspect", s(path)], rope.to_vec()];
    runs.iter().filter_map(|args| misbehaves(args)).collect()
}

#[test]
fn no_config_makes_pe_panic() {
    let mutator = ConfigMutator::from_fixtures();
    let mut rng = pe_testkit::seeded_rng("no_config_makes_pe_panic");
    let dir = tempfile::tempdir().unwrap();
    let mut wrong = Vec::new();
    for case in 0..cases() {
        let config = mutator.mutated(&mut rng, case);
        let path = dir.path().join(format!("config{case}.json"));
        std::fs::write(&path, config.to_string()).unwrap();
        for w in run_pe(&path, "--config", dir.path()) {
            wrong.push(format!("{w}\n  on {config}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n\n"));
}

/// `content`'s metadata with the tensors of the file `bytes`, written as a GGUF file.
fn write_gguf(path: &Path, content: &Content, bytes: &[u8]) -> candle_core::Result<()> {
    let mut reader = Cursor::new(bytes);
    let mut tensors: Vec<(String, QTensor)> = Vec::new();
    for name in content.tensor_infos.keys() {
        tensors.push((name.clone(), content.tensor(&mut reader, name, &Device::Cpu)?));
    }
    let metadata: Vec<(&str, &Value)> = content
        .metadata
        .iter()
        .map(|(k, v)| (k.as_str(), v))
        .collect();
    let tensors: Vec<(&str, &QTensor)> = tensors.iter().map(|(k, t)| (k.as_str(), t)).collect();
    let mut file = std::fs::File::create(path)?;
    gguf_file::write(&mut file, &metadata, &tensors)
}

#[test]
fn no_gguf_file_makes_pe_panic() {
    let mutator = GgufMutator::from_fixtures();
    let mut rng = pe_testkit::seeded_rng("no_gguf_file_makes_pe_panic");
    let dir = tempfile::tempdir().unwrap();
    let mut wrong = Vec::new();
    for case in 0..cases() {
        // The metadata mutated; the tensors as written (the readers' own sweep mutates those).
        let (file, content) = mutator.mutated(&mut rng, case, false);
        let original = &mutator.files()[file];
        let path = dir.path().join(format!("model{case}.gguf"));
        if write_gguf(&path, &content, &original.bytes).is_err() {
            continue;
        }
        for w in run_pe(&path, "--gguf", dir.path()) {
            let mut meta: Vec<_> = content.metadata.iter().collect();
            meta.sort_by(|a, b| a.0.cmp(b.0));
            wrong.push(format!("{w}\n  on {} mutated: {meta:?}", original.name));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n\n"));
}

/// The files the sweeps found panicking, each now read: they hold whatever the seed.
#[test]
fn files_that_panicked_are_read() {
    let dir = tempfile::tempdir().unwrap();
    // A context of u64::MAX positions: inspect's angle errors took one past it.
    let name = "llama31_8b_rope.gguf";
    let bytes = std::fs::read(pe_testkit::fixture("gguf").join(name)).unwrap();
    let mut content = Content::read(&mut Cursor::new(&bytes)).unwrap();
    let context = Value::U64(u64::MAX);
    content
        .metadata
        .insert("llama.context_length".into(), context);
    let path = dir.path().join(name);
    write_gguf(&path, &content, &bytes).unwrap();
    let out = common::pe_ok(&["inspect", s(&path)]);
    let report = String::from_utf8(out.stdout).unwrap();
    assert!(report.contains(&u64::MAX.to_string()), "{report}");
}
