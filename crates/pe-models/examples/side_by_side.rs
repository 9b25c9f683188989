//! pe-models' `LlamaFamily` next to candle-transformers' models on the fixtures it has a
//! counterpart for: `llama31` (Llama 3.1: llama3 rope scaling, rope_theta 500,000) against
//! `llama::Llama`, `qwen3` (qk-norm, rope_theta 1e6) against `qwen3::ModelForCausalLM`, and
//! `gemma3` (sliding layers at theta 1e4, global layers linear x8 at theta 1e6) against
//! `gemma3::Model`: the distance of each to the logits transformers 5.23 recorded, at short
//! and at far positions, and the decode speed.
//!
//! ```text
//! cargo run --release -p pe-models --example side_by_side            # markdown, every fixture
//! cargo run --release -p pe-models --example side_by_side -- --fixture gemma3 --json
//! ```
//!
//! Both models read the same `config.json` and `model.safetensors`; candle-transformers'
//! configs know only the pre-5.0 keys (`rope_theta`, `rope_scaling`, `rope_local_base_freq`,
//! `sliding_window_pattern`), so the file's `rope_parameters` and `layer_types` are passed to
//! them under those names (what they cannot express, Gemma 3's global scaling, they ignore).

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::gemma3 as ctg;
use candle_transformers::models::llama as ct;
use candle_transformers::models::qwen3 as ctq;
use pe_models::{greedy, LlamaFamily};
use serde_json::{json, Value};

/// Accuracy and decode speed of pe-models and candle-transformers on the model fixtures.
#[derive(clap::Parser, Debug)]
struct Args {
    /// The fixtures to compare [default: all of llama31, qwen3, gemma3]
    #[arg(long, value_name = "NAME", value_parser = ["llama31", "qwen3", "gemma3"])]
    fixture: Vec<String>,
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

/// candle-transformers' model of a fixture, with its KV cache.
enum Theirs {
    Llama(Box<(ct::Llama, ct::Config, ct::Cache)>),
    Qwen3(ctq::ModelForCausalLM),
    Gemma3(ctg::Model),
}

impl Theirs {
    /// The model of fixture `name` in `dir`, its rope tables `rows` long.
    fn load(name: &str, dir: &Path, rows: usize) -> Result<Self> {
        let path = dir.join("config.json");
        let text = std::fs::read_to_string(&path).with_context(|| format!("{}", path.display()))?;
        let mut json: Value = serde_json::from_str(&text)?;
        let rope = json["rope_parameters"].clone();
        let weights = dir.join("model.safetensors");
        let dev = Device::Cpu;
        // SAFETY: the fixture is mapped read-only and not changed while the model lives.
        let vb = unsafe { VarBuilder::from_mmaped_safetensors(&[&weights], DType::F32, &dev)? };
        let named = |what: &str| format!("{}: as candle-transformers' {what}", path.display());
        match name {
            "llama31" => {
                // Without the old keys candle-transformers would silently use rope_theta
                // 10,000 and no llama3 scaling.
                json["rope_theta"] = rope["rope_theta"].clone();
                json["rope_scaling"] = rope;
                let cfg: ct::LlamaConfig =
                    serde_json::from_value(json).with_context(|| named("LlamaConfig"))?;
                let mut cfg = cfg.into_config(false);
                cfg.max_position_embeddings = cfg.max_position_embeddings.max(rows);
                let cache = ct::Cache::new(true, DType::F32, &cfg, &dev)?;
                Ok(Theirs::Llama(Box::new((
                    ct::Llama::load(vb, &cfg)?,
                    cfg,
                    cache,
                ))))
            }
            "qwen3" => {
                json["rope_theta"] = rope["rope_theta"].clone();
                json["max_position_embeddings"] = rows.max(40960).into();
                let cfg: ctq::Config =
                    serde_json::from_value(json).with_context(|| named("qwen3::Config"))?;
                Ok(Theirs::Qwen3(ctq::ModelForCausalLM::new(&cfg, vb)?))
            }
            "gemma3" => {
                json["rope_theta"] = rope["full_attention"]["rope_theta"].clone();
                json["rope_local_base_freq"] = rope["sliding_attention"]["rope_theta"].clone();
                // The fixture's layer types, sliding then full, are a pattern of 2.
                json["sliding_window_pattern"] = 2.into();
                json["max_position_embeddings"] = rows.max(131072).into();
                let cfg: ctg::Config =
                    serde_json::from_value(json).with_context(|| named("gemma3::Config"))?;
                Ok(Theirs::Gemma3(ctg::Model::new(false, &cfg, vb)?))
            }
            other => bail!("no candle-transformers counterpart for fixture {other}"),
        }
    }

    /// Empties the KV cache.
    fn clear(&mut self) -> Result<()> {
        match self {
            Theirs::Llama(llama) => {
                llama.2 = ct::Cache::new(true, DType::F32, &llama.1, &Device::Cpu)?
            }
            Theirs::Qwen3(m) => m.clear_kv_cache(),
            Theirs::Gemma3(m) => m.clear_kv_cache(),
        }
        Ok(())
    }

    /// The logits `(vocab,)` of the last of `ids`, which follow `offset` cached tokens.
    fn forward(&mut self, ids: &[u32], offset: usize) -> Result<Tensor> {
        let input = Tensor::new(ids, &Device::Cpu)?.unsqueeze(0)?;
        let logits = match self {
            Theirs::Llama(llama) => {
                let (m, _, cache) = &mut **llama;
                m.forward(&input, offset, cache)?
            }
            Theirs::Qwen3(m) => m.forward(&input, offset)?,
            Theirs::Gemma3(m) => m.forward(&input, offset)?,
        };
        Ok(logits.flatten_all()?)
    }

    /// The logits at every prompt token, `(1, seq, vocab)`, the prompt at `first..`. Their
    /// `forward` returns the last token's logits, and their causal masks for several tokens
    /// assume they follow `offset` cached ones, so the prompt goes one token at a time through
    /// the KV cache (the same attention as a causal prefill).
    fn logits(&mut self, ids: &[u32], first: usize) -> Result<Tensor> {
        self.clear()?;
        let rows = (0..ids.len())
            .map(|t| self.forward(&ids[t..t + 1], first + t))
            .collect::<Result<Vec<_>>>()?;
        Ok(Tensor::stack(&rows, 0)?.unsqueeze(0)?)
    }

    /// Greedy generation of `tokens` ids after `prompt` at positions 0.., timed as [`greedy`]
    /// times ours: (ids, prefill, decode). The prompt goes in one forward, or with
    /// `one_at_a_time` a token per forward (for a model that fails on several tokens).
    fn greedy(
        &mut self,
        prompt: &[u32],
        tokens: usize,
        one_at_a_time: bool,
    ) -> Result<(Vec<u32>, Duration, Duration)> {
        self.clear()?;
        let pick = |logits: Tensor| -> Result<u32> { Ok(logits.argmax(0)?.to_scalar()?) };
        let start = Instant::now();
        let last = match one_at_a_time {
            false => self.forward(prompt, 0)?,
            true => self.logits(prompt, 0)?.squeeze(0)?.get(prompt.len() - 1)?,
        };
        let mut next = pick(last)?;
        let prefill = start.elapsed();
        let mut ids = vec![next];
        let start = Instant::now();
        for pos in prompt.len()..prompt.len() + tokens - 1 {
            next = pick(self.forward(&[next], pos)?)?;
            ids.push(next);
        }
        Ok((ids, prefill, start.elapsed()))
    }
}

/// A candle-transformers distance, or why there is none.
fn cell(v: Option<f64>) -> String {
    v.map_or("cannot run".into(), |v| format!("{v:.1e}"))
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
    /// Max |diff| to transformers' logits of the same call: (ours, candle-transformers, when
    /// it runs).
    vs_same: (f64, Option<f64>),
    /// Max |diff| to transformers' prefill logits (positions 0..): (ours, candle-transformers).
    vs_prefill: (f64, Option<f64>),
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

/// What one fixture measured.
struct Measured {
    name: String,
    prompt_len: usize,
    rows: Vec<Row>,
    /// Median prefill and decode tokens/s: (ours, candle-transformers) each.
    prefill: (f64, Option<f64>),
    decode: (f64, Option<f64>),
    /// The median of the rounds' decode ratios, ours over candle-transformers.
    ratio: Option<f64>,
    same_ids: Option<bool>,
    /// Why candle-transformers could not run the fixture, if it could not.
    ct_error: Option<String>,
    /// Why candle-transformers could not take the prompt in one forward (its prefill then
    /// goes a token at a time), if it could not.
    ct_prefill_error: Option<String>,
}

fn compare(args: &Args) -> Result<()> {
    let names = match args.fixture.is_empty() {
        true => vec!["llama31".to_string(), "qwen3".into(), "gemma3".into()],
        false => args.fixture.clone(),
    };
    let measured = names
        .iter()
        .map(|name| measure(name, args))
        .collect::<Result<Vec<_>>>()?;
    match args.json {
        true => println!(
            "{}",
            serde_json::to_string_pretty(&as_json(&measured, args))?
        ),
        false => print_markdown(&measured, args),
    }
    Ok(())
}

fn measure(name: &str, args: &Args) -> Result<Measured> {
    let dir = pe_testkit::fixture(&format!("models/{name}"));
    let dev = Device::Cpu;
    let outputs: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("outputs.json"))?)?;
    let rec = candle_core::safetensors::load(dir.join("outputs.safetensors"), &dev)?;
    let get = |k: &str| {
        rec.get(k)
            .cloned()
            .with_context(|| format!("{name}/outputs.safetensors: no {k}"))
    };
    let prompt: Vec<u32> = get("prefill.input_ids")?
        .to_dtype(DType::U32)?
        .flatten_all()?
        .to_vec1()?;
    let tf_prefill = get("prefill.logits")?;

    // The calls: prefill at 0.., then each far prefill of the fixture.
    let mut calls = vec![("prefill".to_string(), 0usize)];
    for call in outputs["calls"].as_array().context("outputs.json: calls")? {
        let call = call["name"].as_str().context("outputs.json: call name")?;
        if call.starts_with("far") {
            let pos: Vec<u32> = get(&format!("{call}.position_ids"))?
                .to_dtype(DType::U32)?
                .flatten_all()?
                .to_vec1()?;
            let first = pos.first().context("outputs.json: empty far call")?;
            calls.push((call.to_string(), *first as usize));
        }
    }
    let rows_needed = calls.iter().map(|c| c.1).max().unwrap_or(0) + prompt.len();
    let rows_needed = rows_needed.max(prompt.len() + args.tokens as usize);
    let mut theirs = Theirs::load(name, &dir, rows_needed)?;
    let mut ours = LlamaFamily::from_dir(&dir, DType::F32, &dev)?;

    // candle-transformers may fail on a checkpoint transformers runs: its error is reported.
    let ct_error = theirs
        .logits(&prompt, 0)
        .err()
        .map(|e| candle_pe_cli::error_line(&e));
    let ct_prefill_error = match ct_error {
        None => theirs.greedy(&prompt, 2, false).err(),
        Some(_) => None,
    };
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
        let b = match ct_error {
            None => Some(theirs.logits(&prompt, *first)?),
            Some(_) => None,
        };
        let tf = get(&format!("{call}.logits"))?;
        let theirs_vs = |reference: &Tensor| b.as_ref().map(|b| max_diff(b, reference)).transpose();
        rows.push(Row {
            first: *first,
            call: call.clone(),
            vs_same: (max_diff(&a, &tf)?, theirs_vs(&tf)?),
            vs_prefill: (max_diff(&a, &tf_prefill)?, theirs_vs(&tf_prefill)?),
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
        let runs = ct_error.is_none();
        let one_at_a_time = ct_prefill_error.is_some();
        let mut run_ct = || -> Result<Vec<u32>> {
            if !runs {
                return Ok(vec![]);
            }
            let (ids, prefill, decode) = theirs.greedy(&prompt, tokens, one_at_a_time)?;
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
        if let (Some(o), Some(c)) = (ours_rates.last(), ct_rates.last()) {
            ratios.push(o / c);
        }
    }
    let runs = ct_error.is_none();
    let ct_prefill_error = ct_prefill_error.map(|e| candle_pe_cli::error_line(&e));
    Ok(Measured {
        name: name.to_string(),
        prompt_len: prompt.len(),
        rows,
        prefill: (median(ours_pre), runs.then(|| median(ct_pre))),
        decode: (median(ours_rates), runs.then(|| median(ct_rates))),
        // The median of the rounds' ratios (not the ratio of the medians).
        ratio: runs.then(|| median(ratios)),
        same_ids: runs.then_some(same_ids),
        ct_error,
        ct_prefill_error,
    })
}

fn as_json(measured: &[Measured], args: &Args) -> Value {
    let fixtures: Vec<Value> = measured
        .iter()
        .map(|m| {
            let acc: Vec<Value> = m
                .rows
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
            json!({
                "fixture": m.name, "dtype": "f32", "device": "cpu",
                "candle_transformers_error": m.ct_error,
                "candle_transformers_prefill_error": m.ct_prefill_error,
                "accuracy_max_abs_logit_diff": acc,
                "speed": {
                    "rounds": args.rounds, "prompt_tokens": m.prompt_len,
                    "decode_steps": args.tokens - 1,
                    "prefill_tokens_per_s_median": {"pe_models": m.prefill.0, "candle_transformers": m.prefill.1},
                    "decode_tokens_per_s_median": {"pe_models": m.decode.0, "candle_transformers": m.decode.1},
                    "decode_ratio_median": m.ratio,
                    "same_greedy_ids": m.same_ids,
                },
            })
        })
        .collect();
    json!({ "fixtures": fixtures })
}

fn print_markdown(measured: &[Measured], args: &Args) {
    println!("## Max |logit difference| to transformers 5.23 (f32, CPU)\n");
    println!("| fixture | prompt positions | pe-models vs tf, same positions | candle-transformers vs tf, same positions | pe-models vs tf at 0..11 (exact) | candle-transformers vs tf at 0..11 (exact) | tf's own drift from its 0..11 |");
    println!("|---|---|---|---|---|---|---|");
    for m in measured {
        for r in &m.rows {
            let span = format!("{}..{}", r.first, r.first + m.prompt_len - 1);
            println!(
                "| {} | {span} | {:.1e} | {} | {:.1e} | {} | {:.1e} |",
                m.name,
                r.vs_same.0,
                cell(r.vs_same.1),
                r.vs_prefill.0,
                cell(r.vs_prefill.1),
                r.tf_drift
            );
        }
    }
    println!(
        "\nRope turns a query and a key by angles whose difference depends only on their \
         position difference, so the exact logits of a prompt at positions P..P+11 are its \
         logits at 0..11: transformers' prefill logits are the reference at every offset \
         (columns 5 and 6). transformers builds its angles in f32 (inv_freq and \
         `position * inv_freq` rounded to f32), so its own far logits drift from that \
         reference (last column). candle-transformers builds its cos/sin tables the same f32 \
         way, so where its rope is right it reproduces transformers' far logits, drift \
         included; on gemma3 it gives the global layers no x8 scaling, and is off at every \
         position. candle-transformers' logits at every prompt token come from feeding the \
         prompt one token at a time through its KV cache (its forward returns the last \
         token's logits only)."
    );
    println!(
        "\n## Speed (greedy, batch 1, {} decode steps, median of {} interleaved rounds)\n",
        args.tokens - 1,
        args.rounds
    );
    println!("| fixture | pe-models prefill tokens/s | candle-transformers prefill tokens/s | pe-models decode tokens/s | candle-transformers decode tokens/s | decode ours/candle-transformers | same greedy ids |");
    println!("|---|---|---|---|---|---|---|");
    for m in measured {
        let rate = |v: Option<f64>| v.map_or("cannot run".into(), |v| format!("{v:.0}"));
        println!(
            "| {} | {:.0} | {} | {:.0} | {} | {} | {} |",
            m.name,
            m.prefill.0,
            rate(m.prefill.1),
            m.decode.0,
            rate(m.decode.1),
            m.ratio.map_or("-".into(), |r| format!("{r:.3}")),
            match m.same_ids {
                Some(true) => "yes",
                Some(false) => "no",
                None => "-",
            }
        );
    }
    for m in measured {
        if let Some(e) = &m.ct_error {
            println!("\ncandle-transformers cannot run {}: {e}", m.name);
        }
        if let Some(e) = &m.ct_prefill_error {
            println!(
                "\ncandle-transformers cannot take {}'s prompt in one forward ({e}); its \
                 prefill above fed the prompt one token at a time.",
                m.name
            );
        }
    }
    println!(
        "\nThe ratio is the median of the rounds' ratios (each round runs both models back to \
         back), above 1 when pe-models is faster."
    );
}
