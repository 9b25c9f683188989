//! `greedy` on the llama31 fixture: transformers' greedy ids at any first position (exact rope
//! sees only position differences), the stop at end-of-sequence ids and where they are read,
//! sharded checkpoints, and errors naming the bad input.

use std::collections::HashMap;
use std::path::PathBuf;

use anyhow::Result;
use candle_core::{DType, Device, Tensor};
use pe_models::{eos_token_ids, greedy, LlamaFamily};

fn fixture() -> PathBuf {
    pe_testkit::fixture("models/llama31")
}

fn recorded(key: &str) -> Result<Vec<u32>> {
    recorded_in(&fixture(), key)
}

fn recorded_in(dir: &std::path::Path, key: &str) -> Result<Vec<u32>> {
    let tensors = candle_core::safetensors::load(dir.join("outputs.safetensors"), &Device::Cpu)?;
    Ok(tensors[key]
        .to_dtype(DType::U32)?
        .flatten_all()?
        .to_vec1()?)
}

/// The fixture's prompt and the 9 ids transformers' greedy decoding generated after it.
fn prompt_and_greedy_ids() -> Result<(Vec<u32>, Vec<u32>)> {
    Ok((
        recorded("prefill.input_ids")?,
        recorded("decode.generated_ids")?,
    ))
}

fn model(dir: &std::path::Path) -> Result<LlamaFamily> {
    LlamaFamily::from_dir(dir, DType::F32, &Device::Cpu)
}

/// The ids of transformers' `generate(do_sample=False)` at positions 0.., and the same ids
/// with the prompt at 20,000 and 131,000 (transformers' own far logits drift by up to 3.9e-3
/// there, against a top-2 margin of 2e-2 in the llama31 fixture, 5e-2 in qwen3 and 3.2 in
/// gemma3).
#[test]
fn greedy_ids_match_transformers_at_any_offset() -> Result<()> {
    for name in ["llama31", "qwen3", "gemma3", "smollm3"] {
        let dir = pe_testkit::fixture(&format!("models/{name}"));
        let prompt = recorded_in(&dir, "prefill.input_ids")?;
        let want = recorded_in(&dir, "decode.generated_ids")?;
        greedy_ids_at_offsets(model(&dir)?, &prompt, &want, name)?;
    }
    Ok(())
}

fn greedy_ids_at_offsets(
    mut model: LlamaFamily,
    prompt: &[u32],
    want: &[u32],
    name: &str,
) -> Result<()> {
    for offset in [0, 20_000, 131_000] {
        let mut seen = vec![];
        let out = greedy(&mut model, prompt, offset, want.len(), &[], |id| {
            seen.push(id)
        })?;
        assert_eq!(out.ids, want, "{name} at first position {offset}");
        assert_eq!(seen, want, "{name}: on_token at first position {offset}");
        assert_eq!(model.cached_len(), prompt.len() + want.len() - 1);
    }
    Ok(())
}

/// The `generate` example's command line on the NoPE models (SmolLM3, Llama 4) and the
/// query-scaled ones (Ministral 3, Llama 4's NoPE layer): transformers' greedy ids, at positions
/// 0.. and 20,000.. (where the query scale makes other ids than at 0).
#[test]
fn generate_cli_prints_transformers_ids_for_nope_and_query_scale_models() -> Result<()> {
    use clap::Parser;
    use pe_models::generate_cli::{run, Args};

    let cases = [
        ("smollm3", "0", "decode.generated_ids"),
        ("smollm3", "20000", "decode.generated_ids"),
        ("ministral3", "0", "decode.generated_ids"),
        ("ministral3", "20000", "far20000_decode.generated_ids"),
        ("llama4", "0", "decode.generated_ids"),
        ("llama4", "20000", "far20000_decode.generated_ids"),
    ];
    for (name, offset, key) in cases {
        let dir = pe_testkit::fixture(&format!("models/{name}"));
        let prompt: Vec<String> = recorded_in(&dir, "prefill.input_ids")?
            .iter()
            .map(u32::to_string)
            .collect();
        let want = recorded_in(&dir, key)?;
        let n = want.len().to_string();
        let flags = [
            "generate",
            "--model",
            dir.to_str().unwrap(),
            "--prompt-ids",
            &prompt.join(","),
            "--max-new",
            &n,
            "--position-offset",
            offset,
            "--eos",
            "",
        ];
        let mut out = vec![];
        run(&Args::try_parse_from(flags)?, &fixture(), &mut out)?;
        let stdout = String::from_utf8(out)?;
        let line = stdout.lines().find_map(|l| l.strip_prefix("ids:")).unwrap();
        let got: Vec<u32> = line
            .split_whitespace()
            .map(|t| t.parse().unwrap())
            .collect();
        assert_eq!(got, want, "{name} at {offset}: {stdout}");
    }
    Ok(())
}

/// An end-of-sequence id ends the output where it is picked; ids never picked change nothing.
#[test]
fn greedy_stops_at_an_eos_id() -> Result<()> {
    let (prompt, want) = prompt_and_greedy_ids()?;
    let mut model = model(&fixture())?;
    for stop in [0, 1, 4, want.len() - 1] {
        let first = want.iter().position(|&id| id == want[stop]).unwrap();
        let mut seen = vec![];
        let out = greedy(
            &mut model,
            &prompt,
            0,
            want.len(),
            &[999, want[stop]],
            |id| seen.push(id),
        )?;
        assert_eq!(out.ids, want[..=first], "eos {}", want[stop]);
        assert_eq!(seen, out.ids);
        assert!(out.ended_at_eos);
        // The eos id is picked, never fed.
        assert_eq!(model.cached_len(), prompt.len() + first);
    }
    let never: Vec<u32> = (0..128).filter(|id| !want.contains(id)).collect();
    let out = greedy(&mut model, &prompt, 0, want.len(), &never, |_| {})?;
    assert_eq!(out.ids, want);
    assert!(!out.ended_at_eos);
    Ok(())
}

/// `eos_token_id` as transformers' `generate` reads it: generation_config.json first, one id
/// or a list, absent or null for none, anything else an error naming the file and field.
#[test]
fn eos_ids_are_read_like_transformers() -> Result<()> {
    assert_eq!(eos_token_ids(fixture())?, [2]);
    let dir = tempfile::tempdir()?;
    let write = |file: &str, json: serde_json::Value| {
        std::fs::write(dir.path().join(file), json.to_string()).unwrap()
    };
    write("config.json", serde_json::json!({"eos_token_id": [7, 8]}));
    assert_eq!(eos_token_ids(dir.path())?, [7, 8]);
    write(
        "generation_config.json",
        serde_json::json!({"do_sample": false}),
    );
    assert_eq!(
        eos_token_ids(dir.path())?,
        [7, 8],
        "falls back to config.json"
    );
    write(
        "generation_config.json",
        serde_json::json!({"eos_token_id": 9}),
    );
    assert_eq!(eos_token_ids(dir.path())?, [9]);
    write(
        "generation_config.json",
        serde_json::json!({"eos_token_id": null}),
    );
    write("config.json", serde_json::json!({}));
    assert!(eos_token_ids(dir.path())?.is_empty());
    write("config.json", serde_json::json!({"eos_token_id": "x"}));
    let e = format!("{:#}", eos_token_ids(dir.path()).unwrap_err());
    assert!(
        e.contains("config.json: config field eos_token_id") && e.contains("\"x\""),
        "{e}"
    );
    std::fs::remove_file(dir.path().join("config.json"))?;
    let e = format!("{:#}", eos_token_ids(dir.path()).unwrap_err());
    assert!(
        e.contains("cannot read") && e.contains("config.json"),
        "{e}"
    );
    Ok(())
}

#[test]
fn empty_prompt_and_no_new_tokens_generate_nothing() -> Result<()> {
    let mut model = model(&fixture())?;
    assert!(greedy(&mut model, &[], 0, 5, &[], |_| {})?.ids.is_empty());
    let out = greedy(&mut model, &[1, 2], 0, 0, &[], |_| {})?;
    assert!(out.ids.is_empty());
    assert_eq!(out.decode_tokens_per_second(), 0.0);
    assert_eq!(
        out.prefill_tokens_per_second(),
        0.0,
        "the prefill did not run"
    );
    Ok(())
}

#[test]
fn bad_input_is_named() -> Result<()> {
    let mut model = model(&fixture())?;
    let e = greedy(&mut model, &[1, 128], 0, 1, &[], |_| {})
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("prompt id 128 (index 1)") && e.contains("128"),
        "{e}"
    );
    let e = greedy(&mut model, &[1, 2], (1 << 31) - 3, 3, &[], |_| {})
        .unwrap_err()
        .to_string();
    assert!(e.contains("2147483645") && e.contains("2147483648"), "{e}");
    // The last fed position may be 2^31 - 1.
    greedy(&mut model, &[1, 2], (1 << 31) - 3, 2, &[], |_| {})?;
    // A count past any position is refused before anything is reserved for it (it was a
    // capacity-overflow panic).
    let e = greedy(&mut model, &[1, 2], 0, usize::MAX, &[], |_| {})
        .unwrap_err()
        .to_string();
    assert!(e.contains("18446744073709551615 new tokens"), "{e}");

    let dir = tempfile::tempdir()?;
    let e = format!("{:#}", model_err(dir.path().join("missing")));
    assert!(e.contains("missing: not a folder"), "{e}");
    std::fs::copy(
        fixture().join("config.json"),
        dir.path().join("config.json"),
    )?;
    let e = format!("{:#}", model_err(dir.path().to_path_buf()));
    assert!(
        e.contains("no model.safetensors nor model.safetensors.index.json"),
        "{e}"
    );
    Ok(())
}

fn model_err(dir: PathBuf) -> anyhow::Error {
    model(&dir).unwrap_err()
}

/// The fixture's weights split over two shards and an index give the same model.
#[test]
fn sharded_checkpoint_loads() -> Result<()> {
    let dir = tempfile::tempdir()?;
    std::fs::copy(
        fixture().join("config.json"),
        dir.path().join("config.json"),
    )?;
    let weights =
        candle_core::safetensors::load(fixture().join("model.safetensors"), &Device::Cpu)?;
    let mut shards: [HashMap<String, Tensor>; 2] = Default::default();
    let mut map = serde_json::Map::new();
    for (i, (name, t)) in weights.into_iter().enumerate() {
        let file = format!("model-{:05}-of-00002.safetensors", i % 2 + 1);
        map.insert(name.clone(), file.into());
        shards[i % 2].insert(name, t);
    }
    for (i, shard) in shards.iter().enumerate() {
        let file = format!("model-{:05}-of-00002.safetensors", i + 1);
        candle_core::safetensors::save(shard, dir.path().join(file))?;
    }
    let index = serde_json::json!({ "metadata": {}, "weight_map": map });
    std::fs::write(
        dir.path().join("model.safetensors.index.json"),
        index.to_string(),
    )?;

    let prompt = recorded("prefill.input_ids")?;
    let want = greedy(&mut model(&fixture())?, &prompt, 0, 4, &[], |_| {})?.ids;
    assert_eq!(
        greedy(&mut model(dir.path())?, &prompt, 0, 4, &[], |_| {})?.ids,
        want
    );

    // A shard the index names but the folder lacks.
    std::fs::remove_file(dir.path().join("model-00002-of-00002.safetensors"))?;
    let e = format!("{:#}", model_err(dir.path().to_path_buf()));
    assert!(
        e.contains("model-00002-of-00002.safetensors, which is not in"),
        "{e}"
    );
    Ok(())
}

/// `generate --help` names every GGUF architecture the decoder reads: the list comes from the
/// family rows (gemma3 and qwen3 were once left out of a hand-written one).
#[test]
fn help_lists_every_gguf_architecture() {
    use clap::CommandFactory;
    let help = pe_models::generate_cli::Args::command()
        .render_help()
        .to_string();
    let archs: Vec<&str> = pe_models::FAMILIES
        .iter()
        .filter_map(|f| f.gguf_architecture)
        .collect();
    assert!(archs.contains(&"gemma3") && archs.contains(&"qwen3"));
    for arch in archs {
        assert!(help.contains(arch), "{arch} missing from:\n{help}");
    }
}
