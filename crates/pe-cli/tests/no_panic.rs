//! No file makes `pe` panic: the fixtures' config.json and GGUF files, mutated at random
//! (`pe_testkit::ConfigMutator`, `GgufMutator`: values made extreme, of another type, dropped or
//! taken from another file, the model type or architecture swapped), go through `pe inspect` and
//! `pe rope --config` / `--gguf`. Each either succeeds or fails with one line naming the
//! problem (exit 1, or 2 for a command line clap refuses); none may panic or be killed.
//!
//! And no command line makes `pe` panic: small valid command lines of every subcommand, a flag's
//! value made hostile (zero, negative, not a number, past the integer types, an odd list), a
//! flag dropped, added from another command or given twice.
//!
//! Each input is a process, so the sweeps are short: `PE_FUZZ_CASES` sets the number of inputs
//! of each kind (default 120), `PE_TEST_SEED` the seed.

mod common;

use std::io::Cursor;
use std::path::Path;

use candle_core::quantized::gguf_file::{self, Content, Value};
use candle_core::quantized::QTensor;
use candle_core::Device;
use common::{pe, s};
use pe_testkit::{ConfigMutator, GgufMutator};
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::Rng;

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
        // 2: a command line clap refuses; 1: anything else.
        Some(1 | 2) if stderr.trim_end().lines().count() == 1 => None,
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
        tensors.push((
            name.clone(),
            content.tensor(&mut reader, name, &Device::Cpu)?,
        ));
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

/// Small, valid command lines of every subcommand that takes flags (`OUT` is the output
/// folder); the flag sweep mutates them.
const COMMANDS: &[&str] = &[
    "table --preset whisper --width 8 --len 5 --dtype f16 --out OUT/t.npy",
    "table --preset marian --width 6 --len 3 --offset 2147483640 --dtype bf16 --out OUT/t.safetensors",
    "table --preset vaswani --width 5 --positions 0,5,9 --out OUT/t.csv",
    "table --preset stable-diffusion --width 8 --timesteps -1.5,0.5,999.5 --out OUT/t.npy",
    "table --preset vaswani --width 8 --len 4 --base 100 --layout sin-cos --angle-scale 2 --out OUT/t.npy",
    "plot --preset fairseq --width 8 --len 6 --out OUT/p.png",
    "plot --preset vaswani --width 8 --len 6 --kind similarity --out OUT/p.png",
    "plot grid --width 8 --grid 2,3 --pair 1 --out OUT/g.png",
    "rope --head-dim 8 --rope-theta 500000 --len 4 --out OUT/r.safetensors llama3 --factor 8 --low-freq-factor 1 --high-freq-factor 4 --original-max-position-embeddings 8192",
    "rope --head-dim 8 --len 3 --offset 100 --dtype bf16 --out OUT/r.safetensors yarn --factor 4 --original-max-position-embeddings 32",
    "rope --head-dim 8 --positions 0,7,2 --out OUT/r.safetensors linear --factor 2",
    "rope --head-dim 6 --rotary-dim 4 --len 2 --out OUT/r.safetensors dynamic --factor 2",
    "rope-nd --axes-dim 2,2,4 --rope-theta 10000 --grid 2,2,2 --out OUT/n.safetensors",
    "rope-nd --split-spectrum 8 --rope-theta 10000 --grid 2,3 --out OUT/n.safetensors",
    "rope-nd --family wan --head-dim 12 --grid 1,2,2 --out OUT/n.safetensors",
    "grid --width 8 --grid 2,3 --base-size 4 --out OUT/g.npy",
    "alibi --heads 3 --len 4 --out OUT/a.npy",
    "alibi --heads 5 --max-bias 4 --out OUT/a.safetensors",
];

/// Values where command lines go wrong: zero, negatives, fractions, not numbers, the edges of
/// the integer types, empty and odd lists, unknown names.
const HOSTILE: &[&str] = &[
    "0",
    "1",
    "-1",
    "2",
    "3",
    "7",
    "1.5",
    "-0",
    "1e308",
    "-1e308",
    "1e-320",
    "nan",
    "inf",
    "-inf",
    "2147483647",
    "2147483648",
    "4294967296",
    "9223372036854775807",
    "18446744073709551615",
    "18446744073709551616",
    "",
    " ",
    "abc",
    "1,2",
    "1,,2",
    ",",
    "0,0",
    "1,2,3,4",
    "-1,5",
    "4294967296,2",
    "2,2,2",
    "f16",
    "bf16",
    "u8",
    "nope",
    "sin-cos",
];

/// One mutation of a command line: a flag's value made hostile, a flag dropped, a flag of
/// another command added (with its value or a hostile one), or a flag given twice.
fn mutate_args(rng: &mut StdRng, args: &mut Vec<String>) {
    let flags: Vec<usize> = (0..args.len())
        .filter(|&i| args[i].starts_with("--") && i + 1 < args.len())
        .collect();
    let Some(&i) = flags.choose(rng) else {
        return;
    };
    match rng.random_range(0..5) {
        0 | 1 => args[i + 1] = HOSTILE.choose(rng).unwrap().to_string(),
        2 => {
            // Never the output: a command without one fails for want of it, always.
            if args[i] != "--out" {
                args.drain(i..i + 2);
            }
        }
        3 => {
            let other: Vec<&str> = COMMANDS.choose(rng).unwrap().split(' ').collect();
            let j = rng.random_range(0..other.len());
            if other[j].starts_with("--") && j + 1 < other.len() && other[j] != "--out" {
                let value = if rng.random_bool(0.5) {
                    other[j + 1]
                } else {
                    HOSTILE.choose(rng).unwrap()
                };
                args.insert(i, value.to_string());
                args.insert(i, other[j].to_string());
            }
        }
        _ => {
            let (flag, value) = (args[i].clone(), args[i + 1].clone());
            args.extend([flag, value]);
        }
    }
}

#[test]
fn no_command_line_makes_pe_panic() {
    let mut rng = pe_testkit::seeded_rng("no_command_line_makes_pe_panic");
    let dir = tempfile::tempdir().unwrap();
    let mut wrong = Vec::new();
    for _ in 0..cases() {
        let line = COMMANDS.choose(&mut rng).unwrap();
        let line = line.replace("OUT", s(dir.path()));
        let mut args: Vec<String> = line.split(' ').map(String::from).collect();
        for _ in 0..rng.random_range(1..=3) {
            mutate_args(&mut rng, &mut args);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        wrong.extend(misbehaves(&args));
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n\n"));
}
