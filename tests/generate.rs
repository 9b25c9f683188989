//! `examples/generate.rs`'s command line (`pe_models::generate_cli`) on the llama31 fixture: the
//! ids it prints are the greedy ids transformers recorded (`decode.generated_ids`), and bad flags
//! are errors naming them.

use std::path::PathBuf;

use anyhow::Result;
use candle_core::{DType, Device};
use clap::Parser;
use pe_models::generate_cli::{run, Args};

/// The model the example runs without `--model`.
fn default_model() -> PathBuf {
    pe_testkit::fixture("models/llama31")
}

/// Runs the example's command line with `flags`, returns its stdout.
fn run_with(flags: &[&str]) -> Result<String> {
    let args = Args::try_parse_from(std::iter::once("generate").chain(flags.iter().copied()))?;
    let mut out = vec![];
    run(&args, &default_model(), &mut out)?;
    Ok(String::from_utf8(out)?)
}

/// The numbers of the `ids:` line.
fn printed_ids(stdout: &str) -> Vec<i64> {
    let line = stdout.lines().find_map(|l| l.strip_prefix("ids:")).unwrap();
    line.split_whitespace()
        .map(|t| t.parse().unwrap())
        .collect()
}

fn recorded(key: &str) -> Result<Vec<i64>> {
    let path = default_model().join("outputs.safetensors");
    let tensors = candle_core::safetensors::load(path, &Device::Cpu)?;
    Ok(tensors[key]
        .to_dtype(DType::I64)?
        .flatten_all()?
        .to_vec1()?)
}

#[test]
fn prints_transformers_greedy_ids() -> Result<()> {
    let prompt: Vec<String> = recorded("prefill.input_ids")?
        .iter()
        .map(i64::to_string)
        .collect();
    let want = recorded("decode.generated_ids")?;
    let n = want.len().to_string();
    let stdout = run_with(&["--prompt-ids", &prompt.join(","), "--max-new", &n])?;
    assert_eq!(printed_ids(&stdout), want, "{stdout}");
    assert!(stdout.contains("tokens/s"), "{stdout}");
    // Nothing to generate: an empty line, no error.
    assert!(printed_ids(&run_with(&["--prompt-ids", "", "--max-new", "4"])?).is_empty());
    assert!(printed_ids(&run_with(&["--prompt-ids", "1,2", "--max-new", "0"])?).is_empty());
    // --eos ends the line at the first id it names; "" never stops early.
    let eos = want[3].to_string();
    let stdout = run_with(&["--prompt-ids", &prompt.join(","), "--eos", &eos])?;
    let first = want.iter().position(|&id| id == want[3]).unwrap();
    assert_eq!(printed_ids(&stdout), want[..=first], "{stdout}");
    let stdout = run_with(&[
        "--prompt-ids",
        &prompt.join(","),
        "--max-new",
        &n,
        "--eos",
        "",
    ])?;
    assert_eq!(printed_ids(&stdout), want, "{stdout}");
    Ok(())
}

#[test]
fn bad_flags_are_named() {
    let err = |flags: &[&str]| format!("{:#}", run_with(flags).unwrap_err());
    let e = err(&["--prompt-ids", "1,x"]);
    assert!(e.contains("--prompt-ids") && e.contains("\"x\""), "{e}");
    let e = err(&["--prompt-ids", "1", "--eos", "2,-1"]);
    assert!(e.contains("--eos") && e.contains("\"-1\""), "{e}");
    let e = err(&["--prompt-ids", "1", "--device", "tpu"]);
    assert!(e.contains("--device") && e.contains("\"tpu\""), "{e}");
    let e = err(&["--prompt-ids", "1", "--device", "cuda:x"]);
    assert!(e.contains("--device") && e.contains("ordinal \"x\""), "{e}");
    if !cfg!(feature = "cuda") {
        let e = err(&["--prompt-ids", "1", "--device", "cuda:1"]);
        assert!(e.contains("--device cuda:1"), "{e}");
    }
    let e = err(&["--prompt-ids", "1", "--dtype", "f64"]);
    assert!(e.contains("--dtype") && e.contains("f64"), "{e}");
    let e = err(&["--prompt-ids", "1", "--model", "/no/such/folder"]);
    assert!(
        e.contains("--model /no/such/folder") && e.contains("not a folder"),
        "{e}"
    );
    let e = err(&["--prompt-ids", "1,128"]);
    assert!(
        e.contains("--prompt-ids") && e.contains("prompt id 128"),
        "{e}"
    );
}
