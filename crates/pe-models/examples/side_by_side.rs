//! pe-models' `LlamaFamily` next to candle-transformers' Llama on the llama31 fixture (a tiny
//! random Llama 3.1: llama3 rope scaling, rope_theta 500,000): the distance of each to the
//! logits transformers 5.23 recorded, at short and at far positions, and the decode speed.
//!
//! ```text
//! cargo run --release -p pe-models --example side_by_side            # markdown
//! cargo run --release -p pe-models --example side_by_side -- --json  # the same numbers
//! ```
//!
//! Both models read the same `config.json` and `model.safetensors`; candle-transformers'
//! `LlamaConfig` knows only the pre-5.0 keys `rope_theta` and `rope_scaling`, so the
//! `rope_parameters` block of the file is passed to it under those names.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use candle_core::{DType, Device, IndexOp, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::llama as ct;
use pe_models::{greedy, LlamaFamily};
use serde_json::{json, Value};

/// Accuracy and decode speed of pe-models and candle-transformers on the llama31 fixture.
#[derive(clap::Parser, Debug)]
struct Args {
    /// Print the numbers as JSON instead of markdown tables
    #[arg(long)]
    json: bool,
    /// Timing rounds per model (interleaved; medians reported)
    #[arg(long, value_name = "N", default_value_t = 9, value_parser = clap::value_parser!(u32).range(1..))]
    rounds: u32,
    /// New tokens per timing round (the first from the prefill, the rest decode steps)
    #[arg(long, value_name = "N", default_value_t = 129, value_parser = clap::value_parser!(u32).range(2..))]
    tokens: u32,
}

fn fixture() -> PathBuf {
    pe_testkit::fixture("models/llama31")
}

/// candle-transformers' config from the same `config.json`, with a rope table of `rows` rows.
fn ct_config(path: &Path, rows: usize) -> Result<ct::Config> {
    let text = std::fs::read_to_string(path).with_context(|| format!("{}", path.display()))?;
    let mut json: Value = serde_json::from_str(&text)?;
    // transformers 5 writes the rope under `rope_parameters`; without the old keys
    // candle-transformers would silently use rope_theta 10,000 and no llama3 scaling.
    if let Some(rope) = json.get("rope_parameters").cloned() {
        let kind = rope["rope_type"].as_str().unwrap_or("default");
        if !matches!(kind, "default" | "llama3") {
            bail!(
                "{}: rope_type {kind:?}: candle-transformers' Llama has only default and llama3",
                path.display()
            )
        }
        json["rope_theta"] = rope["rope_theta"].clone();
        if kind == "llama3" {
            json["rope_scaling"] = rope;
        }
    }
    let cfg: ct::LlamaConfig = serde_json::from_value(json)
        .with_context(|| format!("{}: as candle-transformers' LlamaConfig", path.display()))?;
    let mut cfg = cfg.into_config(false);
    cfg.max_position_embeddings = cfg.max_position_embeddings.max(rows);
    Ok(cfg)
}

/// candle-transformers' logits at every prompt token, `(1, seq, vocab)`. Its `forward` returns
/// the last token's logits, and its causal mask for several tokens assumes they follow
/// `index_pos` cached ones, so the prompt goes one token at a time through its KV cache (the
/// same attention as a causal prefill).
fn ct_logits(model: &ct::Llama, cfg: &ct::Config, ids: &[u32], first: usize) -> Result<Tensor> {
    let dev = Device::Cpu;
    let mut cache = ct::Cache::new(true, DType::F32, cfg, &dev)?;
    let mut rows = vec![];
    for (t, &id) in ids.iter().enumerate() {
        rows.push(model.forward(&Tensor::new(&[[id]], &dev)?, first + t, &mut cache)?);
    }
    Ok(Tensor::stack(&rows, 1)?)
}

/// candle-transformers' greedy generation of `tokens` ids after `prompt` at positions 0..,
/// timed as [`greedy`] times ours: (ids, prefill, decode).
fn ct_greedy(
    model: &ct::Llama,
    cfg: &ct::Config,
    prompt: &[u32],
    tokens: usize,
) -> Result<(Vec<u32>, Duration, Duration)> {
    let dev = Device::Cpu;
    let mut cache = ct::Cache::new(true, DType::F32, cfg, &dev)?;
    let pick = |logits: Tensor| -> Result<u32> { Ok(logits.i(0)?.argmax(0)?.to_scalar()?) };
    let start = Instant::now();
    let mut next =
        pick(model.forward(&Tensor::new(prompt, &dev)?.unsqueeze(0)?, 0, &mut cache)?)?;
    let prefill = start.elapsed();
    let mut ids = vec![next];
    let start = Instant::now();
    for pos in prompt.len()..prompt.len() + tokens - 1 {
        next = pick(model.forward(&Tensor::new(&[[next]], &dev)?, pos, &mut cache)?)?;
        ids.push(next);
    }
    Ok((ids, prefill, start.elapsed()))
}

fn max_diff(a: &Tensor, b: &Tensor) -> Result<f64> {
    let d = (a.to_dtype(DType::F64)? - b.to_dtype(DType::F64)?)?.abs()?;
    Ok(d.flatten_all()?.max(0)?.to_scalar::<f64>()?)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// One row of the accuracy table.
struct Row {
    first: usize,
    call: String,
    /// Max |diff| to transformers' logits of the same call: (ours, candle-transformers).
    vs_same: (f64, f64),
    /// Max |diff| to transformers' prefill logits (positions 0..): (ours, candle-transformers).
    vs_prefill: (f64, f64),
    /// transformers' far logits against its own prefill ones.
    tf_drift: f64,
}

fn main() -> std::process::ExitCode {
    let (mut out, mut err) = (std::io::stdout(), std::io::stderr());
    match candle_pe_cli::parse_args::<Args>("side_by_side", std::env::args_os(), &mut out, &mut err)
    {
        Ok(args) => candle_pe_cli::finish("side_by_side", compare(&args), &mut err),
        Err(code) => code,
    }
}

fn compare(args: &Args) -> Result<()> {
    let dir = fixture();
    let dev = Device::Cpu;
    let outputs: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("outputs.json"))?)?;
    let rec = candle_core::safetensors::load(dir.join("outputs.safetensors"), &dev)?;
    let get = |k: &str| {
        rec.get(k)
            .cloned()
            .with_context(|| format!("outputs.safetensors: no {k}"))
    };
    let prompt: Vec<u32> = get("prefill.input_ids")?
        .to_dtype(DType::U32)?
        .flatten_all()?
        .to_vec1()?;
    let tf_prefill = get("prefill.logits")?;

    // The calls: prefill at 0.., then each far prefill of the fixture.
    let mut calls = vec![("prefill".to_string(), 0usize)];
    for call in outputs["calls"].as_array().context("outputs.json: calls")? {
        let name = call["name"].as_str().context("outputs.json: call name")?;
        if name.starts_with("far") {
            let pos: Vec<u32> = get(&format!("{name}.position_ids"))?
                .to_dtype(DType::U32)?
                .flatten_all()?
                .to_vec1()?;
            let first = pos.first().context("outputs.json: empty far call")?;
            calls.push((name.to_string(), *first as usize));
        }
    }
    let rows_needed = calls.iter().map(|c| c.1).max().unwrap_or(0) + prompt.len();
    let cfg = ct_config(
        &dir.join("config.json"),
        rows_needed.max(prompt.len() + args.tokens as usize),
    )?;
    let weights = dir.join("model.safetensors");
    // SAFETY: the fixture is mapped read-only and not changed while the model lives.
    let vb = unsafe { VarBuilder::from_mmaped_safetensors(&[&weights], DType::F32, &dev)? };
    let theirs = ct::Llama::load(vb, &cfg)?;
    let mut ours = LlamaFamily::from_dir(&dir, DType::F32, &dev)?;

    let mut rows = vec![];
    for (call, first) in &calls {
        ours.clear_cache();
        let end = (*first + prompt.len()) as u32;
        let pos = Tensor::arange(*first as u32, end, &dev)?.unsqueeze(0)?;
        let a = ours.forward(
            &Tensor::new(prompt.as_slice(), &dev)?.unsqueeze(0)?,
            &pos,
            None,
        )?;
        let b = ct_logits(&theirs, &cfg, &prompt, *first)?;
        let tf = get(&format!("{call}.logits"))?;
        rows.push(Row {
            first: *first,
            call: call.clone(),
            vs_same: (max_diff(&a, &tf)?, max_diff(&b, &tf)?),
            vs_prefill: (max_diff(&a, &tf_prefill)?, max_diff(&b, &tf_prefill)?),
            tf_drift: max_diff(&tf, &tf_prefill)?,
        });
    }

    // Decode speed: interleaved rounds, the order alternating, medians.
    let tokens = args.tokens as usize;
    let (mut ours_rates, mut ct_rates, mut ours_pre, mut ct_pre) = (vec![], vec![], vec![], vec![]);
    // ours / candle-transformers decode rate of each round: its two runs are back to back, so
    // a change of the machine's load between rounds cancels out.
    let mut ratios = vec![];
    let mut same_ids = true;
    for round in 0..args.rounds {
        let mut run_ours = || -> Result<Vec<u32>> {
            let g = greedy(&mut ours, &prompt, 0, tokens, &[], |_| {})?;
            ours_rates.push(g.decode_tokens_per_second());
            ours_pre.push(g.prefill_tokens_per_second());
            Ok(g.ids)
        };
        let mut run_ct = || -> Result<Vec<u32>> {
            let (ids, prefill, decode) = ct_greedy(&theirs, &cfg, &prompt, tokens)?;
            ct_rates.push((tokens - 1) as f64 / decode.as_secs_f64());
            ct_pre.push(prompt.len() as f64 / prefill.as_secs_f64());
            Ok(ids)
        };
        let (a, b) = match round % 2 {
            0 => (run_ours()?, run_ct()?),
            _ => {
                let b = run_ct()?;
                (run_ours()?, b)
            }
        };
        same_ids &= a == b;
        ratios.push(ours_rates[ours_rates.len() - 1] / ct_rates[ct_rates.len() - 1]);
    }
    // The median of the rounds' ratios (not the ratio of the medians).
    let ratio = median(ratios);
    let speed = (
        median(ours_pre),
        median(ct_pre),
        median(ours_rates),
        median(ct_rates),
    );

    if args.json {
        let acc: Vec<Value> = rows
            .iter()
            .map(|r| {
                json!({
                    "call": r.call, "first_position": r.first,
                    "vs_transformers_same_call": {"pe_models": r.vs_same.0, "candle_transformers": r.vs_same.1},
                    "vs_transformers_prefill": {"pe_models": r.vs_prefill.0, "candle_transformers": r.vs_prefill.1},
                    "transformers_drift_vs_prefill": r.tf_drift,
                })
            })
            .collect();
        let out = json!({
            "fixture": "llama31", "dtype": "f32", "device": "cpu",
            "accuracy_max_abs_logit_diff": acc,
            "speed": {
                "rounds": args.rounds, "prompt_tokens": prompt.len(), "decode_steps": tokens - 1,
                "prefill_tokens_per_s_median": {"pe_models": speed.0, "candle_transformers": speed.1},
                "decode_tokens_per_s_median": {"pe_models": speed.2, "candle_transformers": speed.3},
                "decode_ratio_median": ratio,
                "same_greedy_ids": same_ids,
            },
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }

    println!("## Max |logit difference| to transformers 5.23 (llama31 fixture, f32, CPU)\n");
    println!("| prompt positions | pe-models vs tf, same positions | candle-transformers vs tf, same positions | pe-models vs tf at 0..11 (exact) | candle-transformers vs tf at 0..11 (exact) | tf's own drift from its 0..11 |");
    println!("|---|---|---|---|---|---|");
    for r in &rows {
        let span = format!("{}..{}", r.first, r.first + prompt.len() - 1);
        println!(
            "| {span} | {:.1e} | {:.1e} | {:.1e} | {:.1e} | {:.1e} |",
            r.vs_same.0, r.vs_same.1, r.vs_prefill.0, r.vs_prefill.1, r.tf_drift
        );
    }
    println!(
        "\nRope turns a query and a key by angles whose difference depends only on their \
         position difference, so the exact logits of a prompt at positions P..P+11 are its \
         logits at 0..11: transformers' prefill logits are the reference at every offset \
         (columns 4 and 5). transformers builds its angles in f32 (inv_freq and \
         `position * inv_freq` rounded to f32), so its own far logits drift from that \
         reference (last column). candle-transformers builds its cos/sin tables the same f32 \
         way: it reproduces transformers' far logits, drift included (columns 3 and 5), where \
         pe-models' exact angles give the reference (column 4) and differ from transformers' \
         far logits by its drift (column 2). candle-transformers' logits at every prompt \
         token come from feeding the prompt one token at a time through its KV cache (its \
         forward returns the last token's logits only)."
    );
    println!(
        "\n## Speed (greedy, batch 1, {}-token prompt, {} decode steps, median of {} interleaved rounds)\n",
        prompt.len(),
        tokens - 1,
        args.rounds
    );
    println!("| model | prefill tokens/s | decode tokens/s |");
    println!("|---|---|---|");
    println!(
        "| pe-models `LlamaFamily` | {:.0} | {:.0} |",
        speed.0, speed.2
    );
    println!(
        "| candle-transformers `llama::Llama` | {:.0} | {:.0} |",
        speed.1, speed.3
    );
    println!(
        "\nDecode tokens/s, pe-models over candle-transformers (median of the rounds' ratios; \
         above 1 when pe-models is faster):\n\ndecode ours/candle-transformers: {ratio:.3}"
    );
    println!(
        "\nSame greedy ids from both models in every round: {}.",
        if same_ids { "yes" } else { "no" }
    );
    Ok(())
}
