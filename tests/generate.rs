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
    // The rope override flags, on the default model (a config.json: transformers' rules).
    for (flags, named) in [
        (&["--rope-scale", "nan"][..], "--rope-scale"),
        (
            &[
                "--rope-scaling",
                "linear",
                "--rope-scale",
                "2",
                "--yarn-beta-fast",
                "4",
            ],
            "--yarn-beta-fast",
        ),
        (
            &[
                "--rope-scaling",
                "yarn",
                "--rope-scale",
                "2",
                "--yarn-orig-ctx",
                "3000000000",
            ],
            "--yarn-orig-ctx",
        ),
        (&["--rope-freq-base", "-5"], "--rope-freq-base"),
    ] {
        let mut all = vec!["--prompt-ids", "1"];
        all.extend(flags);
        let e = err(&all);
        assert!(e.contains(named), "{flags:?}: {e}");
    }
    let e = err(&["--prompt-ids", "1,128"]);
    assert!(
        e.contains("--prompt-ids") && e.contains("prompt id 128"),
        "{e}"
    );
}

/// The example's bad-input suite: each case exits with its code (2 for a bad command line, 1
/// for anything else), with one line on stderr holding every fragment, a flag first. `MODEL/x`
/// is a copy of the fixture spoiled as [`spoiled_models`] says.
#[test]
fn every_bad_input_is_one_line_naming_its_flag() -> Result<()> {
    let cases: &[(&str, u8, &[&str])] = &[
        ("--max-new -1", 2, &["--max-new", "-1"]),
        (
            "--prompt-ids 1 --max-new 18446744073709551616",
            2,
            &["--max-new"],
        ),
        ("--prompt-ids a,b", 2, &["--prompt-ids", "\"a\""]),
        ("--prompt-ids -1", 2, &["--prompt-ids", "\"-1\""]),
        ("--prompt-ids 1 --eos x", 2, &["--eos", "\"x\""]),
        (
            "--prompt-ids 1 --position-offset -1",
            2,
            &["--position-offset", "-1"],
        ),
        ("--prompt-ids 1 --dtype f8", 2, &["--dtype", "f8"]),
        ("--prompt-ids 1 --device tpu", 2, &["--device", "tpu"]),
        ("--prompt-ids 1 --frobnicate", 2, &["--frobnicate"]),
        ("--prompt-ids 1 --sink 4", 2, &["--window"]),
        ("--prompt-ids 1 --sink 4 --window 0", 1, &["--window", "0"]),
        ("--prompt-ids 1 --keep 99999999", 1, &["--keep 99999999"]),
        (
            "--prompt-ids 1 --sink 2 --window 4 --sink-positions up",
            2,
            &["--sink-positions", "up"],
        ),
        (
            "--prompt-ids 1 --keep 2 --sink 2 --window 4",
            2,
            &["--keep", "--sink"],
        ),
        ("--max-new 3", 2, &["--prompt-ids"]),
        ("--prompt-ids 1,128", 1, &["--prompt-ids", "128"]),
        (
            "--prompt-ids 1 --position-offset 2147483647 --max-new 2",
            1,
            &["--position-offset", "2147483647"],
        ),
        (
            "--prompt-ids 1 --max-new 18446744073709551615",
            1,
            &["--max-new", "18446744073709551615"],
        ),
        (
            "--prompt-ids 1 --model /no/such/folder",
            1,
            &["--model /no/such/folder"],
        ),
        // A file that is not GGUF: the flag takes a folder or a GGUF file (it said "unknown
        // magic 0x20200a7b").
        (
            "--prompt-ids 1 --model MODEL/no_weights/config.json",
            1,
            &[
                "--model MODEL/no_weights/config.json: not a GGUF file",
                "a checkpoint folder (with config.json and model.safetensors) or a GGUF file",
                "its folder, MODEL/no_weights,",
            ],
        ),
        (
            "--prompt-ids 1 --model MODEL/empty.gguf",
            1,
            &[
                "--model MODEL/empty.gguf: not a GGUF file",
                "a checkpoint folder",
            ],
        ),
        (
            "--prompt-ids 1 --model MODEL/vocab_zero",
            1,
            &["--model", "vocab_size", "0"],
        ),
        (
            "--prompt-ids 1 --model MODEL/vocab_small",
            1,
            &["--model", "embed_tokens", "[100, 64]"],
        ),
        (
            "--prompt-ids 1 --model MODEL/config_array",
            1,
            &["--model", "JSON object"],
        ),
        (
            "--prompt-ids 1 --model MODEL/config_deep",
            1,
            &["--model", "config.json"],
        ),
        (
            "--prompt-ids 1 --model MODEL/config_not_utf8",
            1,
            &["--model", "config.json"],
        ),
        (
            "--prompt-ids 1 --model MODEL/heads_string",
            1,
            &["--model", "num_attention_heads"],
        ),
        (
            "--prompt-ids 1 --model MODEL/no_weights",
            1,
            &["--model", "model.safetensors"],
        ),
        (
            "--prompt-ids 1 --model MODEL/weights_truncated",
            1,
            &["--model", "model.safetensors"],
        ),
        (
            "--prompt-ids 1 --model MODEL/weights_huge_header",
            1,
            &["--model", "model.safetensors"],
        ),
        (
            "--prompt-ids 1 --model MODEL/weights_garbage",
            1,
            &["--model", "model.safetensors"],
        ),
        (
            "--prompt-ids 1 --model MODEL/eos_string",
            1,
            &["--model", "eos_token_id", "a token id or a list"],
        ),
    ];
    let models = tempfile::tempdir()?;
    spoiled_models(models.path())?;
    let mut failures = vec![];
    for (line, code, expected) in cases {
        let at = |text: &str| text.replace("MODEL", models.path().to_str().unwrap());
        let line = at(line);
        let argv = std::iter::once("generate").chain(line.split_whitespace());
        let (mut out, mut err) = (vec![], vec![]);
        let exit = pe_models::generate_cli::main_with(argv, &default_model(), &mut out, &mut err);
        let err = String::from_utf8_lossy(&err);
        let ok = exit == std::process::ExitCode::from(*code)
            && err.trim_end().lines().count() == 1
            && !err.contains("backtrace")
            && expected.iter().all(|f| err.contains(&at(f)));
        if !ok {
            failures.push(format!("generate {line}: {exit:?}, want {code}: {err}"));
        }
    }
    eprintln!("generate: {} bad inputs", cases.len());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    Ok(())
}

/// Copies of the fixture under `dir`, each spoiled in one way its name says.
fn spoiled_models(dir: &std::path::Path) -> Result<()> {
    let fixture = default_model();
    let config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture.join("config.json"))?)?;
    let with = |field: &str, value: serde_json::Value| {
        let mut c = config.clone();
        c[field] = value;
        c.to_string().into_bytes()
    };
    let weights = std::fs::read(fixture.join("model.safetensors"))?;
    let mut huge_header = weights.clone();
    huge_header[..8].copy_from_slice(&(1u64 << 40).to_le_bytes());
    let spoiled: Vec<(&str, &str, Vec<u8>)> = vec![
        ("vocab_zero", "config.json", with("vocab_size", 0.into())),
        ("vocab_small", "config.json", with("vocab_size", 100.into())),
        ("config_array", "config.json", b"[1, 2]".to_vec()),
        (
            "config_deep",
            "config.json",
            "[".repeat(100_000).into_bytes(),
        ),
        (
            "config_not_utf8",
            "config.json",
            b"{\"vocab_size\": \xff}".to_vec(),
        ),
        (
            "heads_string",
            "config.json",
            with("num_attention_heads", "4".into()),
        ),
        ("no_weights", "model.safetensors", vec![]),
        (
            "weights_truncated",
            "model.safetensors",
            weights[..weights.len() / 2].to_vec(),
        ),
        ("weights_huge_header", "model.safetensors", huge_header),
        (
            "weights_garbage",
            "model.safetensors",
            b"\x01\x02 not safetensors".to_vec(),
        ),
        (
            "eos_string",
            "generation_config.json",
            br#"{"eos_token_id": "two"}"#.to_vec(),
        ),
    ];
    std::fs::write(dir.join("empty.gguf"), b"")?;
    for (name, file, bytes) in spoiled {
        let model = dir.join(name);
        std::fs::create_dir(&model)?;
        for f in ["config.json", "model.safetensors"] {
            std::fs::copy(fixture.join(f), model.join(f))?;
        }
        match (name, bytes.is_empty()) {
            ("no_weights", _) => std::fs::remove_file(model.join(file))?,
            _ => std::fs::write(model.join(file), bytes)?,
        }
    }
    Ok(())
}
