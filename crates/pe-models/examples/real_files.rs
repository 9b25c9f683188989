//! pe-models' GGUF decoder next to candle-transformers' quantized models and llama.cpp on the
//! real pretrained files people download (`bash scripts/real-models.sh` fetches them):
//! - SmolLM2-135M-Instruct Q4_1 (`llama`) against `quantized_llama::ModelWeights`;
//! - Gemma 3 270M Q4_K_M (`gemma3`) against `quantized_gemma3::ModelWeights`.
//!
//! For each prompt llama.cpp recorded (`crates/pe-testkit/fixtures/real/<file>.json`, written
//! by `scripts/fixtures/real_models.py` with llama-cpp-python), at each first position, both
//! models take the prompt and then llama.cpp's 32 greedy ids one at a time through their KV
//! caches. It prints how many of llama.cpp's ids each one's argmax gives (a step where
//! llama.cpp's own top two are within 0.3 is a near-tie either way may take), the largest
//! difference of its logits to llama.cpp's at llama.cpp's top ten ids, or where it fails; then
//! decode tokens/s of both in interleaved rounds (each first in every other round; medians),
//! prefill tokens/s of a 512-token prompt the same way, and a profile of our decode step.
//!
//! ```text
//! bash scripts/real-models.sh
//! cargo run --release -p pe-models --example real_files                 # both files
//! cargo run --release -p pe-models --example real_files -- --file gemma-3-270m-q4_k_m --rounds 3
//! ```

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use candle_core::quantized::gguf_file::Content;
use candle_core::quantized::QMatMul;
use candle_core::{DType, Device, IndexOp, Module, Tensor};
use candle_transformers::models::quantized_gemma3 as qgemma3;
use candle_transformers::models::quantized_llama as qllama;
use pe_models::{greedy, quantized_matmul, LlamaFamily};
use pe_testkit::race::{median, Case, Race, Rounds, Sampled};
use serde_json::Value;

/// The real files (stems of `<stem>.gguf` and `real/<stem>.json`).
const FILES: [&str; 2] = ["smollm2-135m-instruct-q4_1", "gemma-3-270m-q4_k_m"];

/// llama.cpp's top-2 gap below which a step is a near-tie.
const NEAR_TIE: f64 = 0.3;

/// Real GGUF files: ours, candle-transformers' and llama.cpp's greedy ids and logits, and speed.
#[derive(clap::Parser, Debug)]
struct Args {
    /// The files to compare [default: both]
    #[arg(long, value_name = "STEM", value_parser = FILES)]
    file: Vec<String>,
    /// Timing rounds per model (interleaved; medians reported)
    #[arg(long, value_name = "N", default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    rounds: u32,
    /// Decode steps per timing round
    #[arg(long, value_name = "N", default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..))]
    tokens: u32,
    /// Prompt tokens per prefill timing round (the first recorded prompt, repeated)
    #[arg(long, value_name = "N", default_value_t = 512, value_parser = clap::value_parser!(u32).range(1..=4096))]
    prefill: u32,
}

fn main() -> std::process::ExitCode {
    let (mut out, mut err) = (std::io::stdout(), std::io::stderr());
    match candle_pe_cli::parse_args::<Args>("real_files", std::env::args_os(), &mut out, &mut err) {
        Ok(args) => candle_pe_cli::finish("real_files", run(&args), &mut err),
        Err(code) => code,
    }
}

fn real_model(stem: &str) -> Result<std::path::PathBuf> {
    pe_testkit::real_model_path(&format!("{stem}.gguf")).map_err(anyhow::Error::msg)
}

/// candle-transformers' quantized model of a real file.
enum Theirs {
    Llama(Box<qllama::ModelWeights>),
    Gemma3(Box<qgemma3::ModelWeights>),
}

impl Theirs {
    fn load(stem: &str) -> Result<Self> {
        let path = real_model(stem)?;
        let mut file = std::fs::File::open(&path)?;
        let content = Content::read(&mut file)?;
        let dev = Device::Cpu;
        Ok(match stem.starts_with("gemma") {
            true => Theirs::Gemma3(Box::new(qgemma3::ModelWeights::from_gguf(
                content, &mut file, &dev,
            )?)),
            false => Theirs::Llama(Box::new(qllama::ModelWeights::from_gguf(
                content, &mut file, &dev,
            )?)),
        })
    }

    /// The logits of the last of `ids`, the first at `pos`, appended to the model's KV cache
    /// (which it replaces when `pos` is 0).
    fn step(&mut self, ids: &[u32], pos: usize) -> Result<Tensor> {
        let input = Tensor::new(ids, &Device::Cpu)?.unsqueeze(0)?;
        let logits = match self {
            Theirs::Llama(m) => m.forward(&input, pos)?,
            Theirs::Gemma3(m) => m.forward(&input, pos)?,
        };
        Ok(logits.flatten_all()?)
    }
}

/// Ours, with the same calling convention.
fn our_step(model: &mut LlamaFamily, ids: &[u32], pos: usize) -> Result<Tensor> {
    let dev = Device::Cpu;
    let input = Tensor::new(ids, &dev)?.unsqueeze(0)?;
    let positions: Vec<u32> = (0..ids.len() as u32).map(|i| pos as u32 + i).collect();
    let positions = Tensor::new(positions.as_slice(), &dev)?.unsqueeze(0)?;
    let logits = model.forward(&input, &positions, None)?;
    Ok(logits.i((0, ids.len() - 1))?)
}

/// How one model followed llama.cpp on one run.
#[derive(Default)]
struct Followed {
    /// Steps whose argmax is llama.cpp's id, of the steps.
    same: usize,
    steps: usize,
    /// Steps that differ where llama.cpp's gap is not a near-tie.
    hard: usize,
    max_logit_diff: f64,
    error: Option<String>,
}

impl Followed {
    fn cell(&self) -> String {
        match &self.error {
            Some(e) => format!("fails: {e}"),
            None => format!(
                "{}/{} ids{}, logits within {:.3}",
                self.same,
                self.steps,
                match self.hard {
                    0 => String::new(),
                    n => format!(" ({n} not at a near-tie)"),
                },
                self.max_logit_diff
            ),
        }
    }
}

/// Feeds the prompt then llama.cpp's ids one at a time through `step`, comparing each step's
/// logits with llama.cpp's.
fn follow(
    mut step: impl FnMut(&[u32], usize) -> Result<Tensor>,
    prompt: &[u32],
    run: &Value,
    first: usize,
) -> Followed {
    let theirs: Vec<u32> = run["ids"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_u64())
                .map(|x| x as u32)
                .collect()
        })
        .unwrap_or_default();
    let mut f = Followed::default();
    let mut input = prompt.to_vec();
    let mut pos = first;
    for (i, &id) in theirs.iter().enumerate() {
        let logits =
            match step(&input, pos).and_then(|l| Ok(l.to_dtype(DType::F64)?.to_vec1::<f64>()?)) {
                Ok(l) => l,
                Err(e) => {
                    f.error = Some(e.to_string().lines().next().unwrap_or_default().to_string());
                    return f;
                }
            };
        let top: Vec<(usize, f64)> = run["top"][i]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|p| {
                        (
                            p[0].as_u64().unwrap_or(0) as usize,
                            p[1].as_f64().unwrap_or(0.0),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        let ours = logits
            .iter()
            .enumerate()
            .max_by(|a, b| a.1.total_cmp(b.1))
            .map_or(0, |(i, _)| i as u32);
        f.steps += 1;
        if ours == id {
            f.same += 1;
        } else if top.len() >= 2 && top[0].1 - top[1].1 >= NEAR_TIE {
            f.hard += 1;
        }
        for &(t, logit) in &top {
            f.max_logit_diff = f.max_logit_diff.max((logits[t] - logit).abs());
        }
        pos += input.len();
        input = vec![id];
    }
    f
}

fn run(args: &Args) -> Result<()> {
    let stems: Vec<&str> = match args.file.is_empty() {
        true => FILES.to_vec(),
        false => args.file.iter().map(String::as_str).collect(),
    };
    println!(
        "machine: {}, {} threads\n",
        pe_testkit::cpu_model(),
        pe_testkit::threads()
    );
    for stem in stems {
        compare(stem, args)?;
    }
    Ok(())
}

fn compare(stem: &str, args: &Args) -> Result<()> {
    let path = real_model(stem)?;
    let fixture = pe_testkit::fixture(&format!("real/{stem}.json"));
    let reference: Value = serde_json::from_str(
        &std::fs::read_to_string(&fixture).with_context(|| format!("{}", fixture.display()))?,
    )?;
    let mut ours = LlamaFamily::from_gguf(&path, DType::F32, &Device::Cpu)?;
    let mut theirs = Theirs::load(stem)?;
    println!("## {stem}\n");
    println!("| prompt | first position | pe-models | candle-transformers |");
    println!("|---|---:|---|---|");
    for g in reference["generations"].as_array().context("generations")? {
        let prompt = prompt_ids(g)?;
        let runs = g["llama_cpp"].as_object().context("llama_cpp")?;
        let mut firsts: Vec<usize> = runs.keys().filter_map(|k| k.parse().ok()).collect();
        firsts.sort();
        for first in firsts {
            let run = &runs[&first.to_string()];
            ours.clear_cache();
            let a = follow(
                |ids, pos| our_step(&mut ours, ids, pos),
                &prompt,
                run,
                first,
            );
            let b = follow(|ids, pos| theirs.step(ids, pos), &prompt, run, first);
            println!(
                "| {:?} | {first} | {} | {} |",
                g["prompt"].as_str().unwrap_or_default(),
                a.cell(),
                b.cell()
            );
        }
    }
    speed(stem, &mut ours, &mut theirs, &reference, args)?;
    profile(stem, &mut ours, args)?;
    Ok(())
}

/// A recorded generation's prompt ids.
fn prompt_ids(generation: &Value) -> Result<Vec<u32>> {
    Ok(generation["prompt_ids"]
        .as_array()
        .context("prompt_ids")?
        .iter()
        .filter_map(|x| x.as_u64())
        .map(|x| x as u32)
        .collect())
}

/// Decode tokens/s of both models after the first prompt at 0, then prefill tokens/s of a
/// prompt of `args.prefill` ids at 0, each in interleaved rounds.
fn speed(
    stem: &str,
    ours: &mut LlamaFamily,
    theirs: &mut Theirs,
    reference: &Value,
    args: &Args,
) -> Result<()> {
    let prompt = prompt_ids(&reference["generations"][0])?;
    let n = args.tokens as usize;
    let rate = |t: Duration| n as f64 / t.as_secs_f64();
    let rounds = race(args).sample(vec![
        Sampled::new("pe-models", || {
            ours.clear_cache();
            Ok(rate(decode(
                |ids, pos| our_step(ours, ids, pos),
                &prompt,
                n,
            )?))
        }),
        Sampled::new("candle-transformers", || {
            Ok(rate(decode(|ids, pos| theirs.step(ids, pos), &prompt, n)?))
        }),
    ])?;
    print_speed(stem, &format!("decode {n} tokens"), &rounds, args);
    let long: Vec<u32> = prompt
        .iter()
        .copied()
        .cycle()
        .take(args.prefill as usize)
        .collect();
    let rate = |t: Duration| long.len() as f64 / t.as_secs_f64();
    // Ours as `greedy` runs a prompt (the last position's logits alone, as
    // candle-transformers' and llama.cpp's), timed to its pick of the next token.
    let rounds = race(args).sample(vec![
        Sampled::new("pe-models", || {
            Ok(rate(greedy(ours, &long, 0, 1, &[], |_| {})?.prefill))
        }),
        Sampled::new("candle-transformers", || {
            let start = Instant::now();
            theirs.step(&long, 0)?;
            Ok(rate(start.elapsed()))
        }),
    ])?;
    print_speed(
        stem,
        &format!("prefill {} tokens", long.len()),
        &rounds,
        args,
    );
    Ok(())
}

/// Timing rounds of both models, each first in every other round, so that an order effect
/// cancels.
fn race(args: &Args) -> Race<'static> {
    Race::new(args.rounds as usize).warm_up(false).alternate()
}

/// Tokens/s of both models in `rounds`, and the ratios of the rounds.
fn print_speed(stem: &str, what: &str, rounds: &Rounds, args: &Args) {
    let ratios = rounds.ratios("pe-models", "candle-transformers");
    println!(
        "\n{stem}: {what}, {} interleaved rounds: pe-models {:.1} tokens/s, \
         candle-transformers {:.1} tokens/s, median ratio {:.3} (rounds: {})\n",
        args.rounds,
        rounds.median("pe-models"),
        rounds.median("candle-transformers"),
        median(&ratios),
        ratios
            .iter()
            .map(|r| format!("{r:.3}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
}

/// The time of `n` greedy decode steps after the prompt (the prefill not counted).
fn decode(
    mut step: impl FnMut(&[u32], usize) -> Result<Tensor>,
    prompt: &[u32],
    n: usize,
) -> Result<Duration> {
    let logits = step(prompt, 0)?;
    let mut id = logits.argmax(0)?.to_scalar::<u32>()?;
    let start = Instant::now();
    for pos in prompt.len()..prompt.len() + n {
        let logits = step(&[id], pos)?;
        id = logits.argmax(0)?.to_scalar::<u32>()?;
    }
    Ok(start.elapsed())
}

/// The median of `reps` timings of `f` in seconds, after one warm-up call.
fn time(reps: usize, f: impl FnMut() -> Result<()>) -> Result<f64> {
    let rounds = Race::new(reps).run(vec![Case::new("part", f)])?;
    Ok(rounds.median("part") / 1e3)
}

/// Layer 0's weights of a real file, and the output projection: what one decode step
/// multiplies, per layer.
struct Weights {
    q: QMatMul,
    k: QMatMul,
    v: QMatMul,
    o: QMatMul,
    gate: QMatMul,
    up: QMatMul,
    down: QMatMul,
    output: QMatMul,
}

impl Weights {
    fn read(stem: &str) -> Result<Self> {
        let dev = Device::Cpu;
        let path = real_model(stem)?;
        let mut file = std::fs::File::open(&path)?;
        let content = Content::read(&mut file)?;
        let mut weight = |name: &str| -> Result<QMatMul> {
            Ok(QMatMul::from_qtensor(
                content.tensor(&mut file, name, &dev)?,
            )?)
        };
        let mut layer = |t: &str| weight(&format!("blk.0.{t}.weight"));
        let (q, k, v, o) = (
            layer("attn_q")?,
            layer("attn_k")?,
            layer("attn_v")?,
            layer("attn_output")?,
        );
        let (gate, up, down) = (layer("ffn_gate")?, layer("ffn_up")?, layer("ffn_down")?);
        let output = match content.tensor_infos.contains_key("output.weight") {
            true => weight("output.weight")?,
            false => weight("token_embd.weight")?,
        };
        Ok(Self {
            q,
            k,
            v,
            o,
            gate,
            up,
            down,
            output,
        })
    }
}

/// Where our decode step's time goes: the step, and its parts timed alone with its shapes
/// (layer 0's weights from the file, times the layers, multiplied as the decoder multiplies
/// them, [`quantized_matmul`]; the cache half way through a round).
fn profile(stem: &str, model: &mut LlamaFamily, args: &Args) -> Result<()> {
    let n = args.tokens as usize;
    model.clear_cache();
    let prompt = [1u32, 2, 3, 4, 5, 6, 7, 8];
    let step = decode(|ids, pos| our_step(model, ids, pos), &prompt, n)?.as_secs_f64() / n as f64;
    let cfg = model.config().clone();
    let weights = Weights::read(stem)?;
    let cached = prompt.len() + n / 2;
    let parts = parts(&cfg, &weights, cached)?;
    print_profile(step, cached, &parts);
    Ok(())
}

/// Each part of a decode step and its seconds per step (the layers' parts times the layers).
fn parts(
    cfg: &pe_models::LlamaConfig,
    w: &Weights,
    cached: usize,
) -> Result<[(&'static str, f64); 5]> {
    let dev = Device::Cpu;
    let (h, kvh, d) = (
        cfg.num_attention_heads,
        cfg.num_key_value_heads,
        cfg.head_dim,
    );
    let layers = cfg.num_hidden_layers as f64;
    let x = Tensor::randn(0f32, 1.0, (1, 1, cfg.hidden_size), &dev)?;
    let attn_out = Tensor::randn(0f32, 1.0, (1, 1, h * d), &dev)?;
    let mid = Tensor::randn(0f32, 1.0, (1, 1, cfg.intermediate_size), &dev)?;
    let q = Tensor::randn(0f32, 1.0, (1, h, 1, d), &dev)?;
    let k = Tensor::randn(0f32, 1.0, (1, kvh, 1, d), &dev)?;
    let kt = Tensor::randn(0f32, 1.0, (1, kvh, d, cached), &dev)?;
    let v = Tensor::randn(0f32, 1.0, (1, kvh, cached, d), &dev)?;
    let rotary = candle_pe_nn::RotaryEmbedding::new(cfg.rope.clone())?;
    let at = Tensor::new(&[[cached as u32]], &dev)?;
    let reps = 50;
    let projections = time(reps, || {
        for m in [&w.q, &w.k, &w.v] {
            quantized_matmul(m, &x)?;
        }
        quantized_matmul(&w.o, &attn_out)?;
        Ok(())
    })?;
    let mlp = time(reps, || {
        let g = cfg.hidden_act.forward(&quantized_matmul(&w.gate, &x)?)?;
        let _ = (g * quantized_matmul(&w.up, &x)?)?;
        quantized_matmul(&w.down, &mid)?;
        Ok(())
    })?;
    let rope = time(reps, || {
        rotary.apply(&q, &k, &at)?;
        Ok(())
    })?;
    let attention = time(reps, || {
        let qg = q.reshape((1, kvh, h / kvh, d))?;
        let s = (qg.matmul(&kt)? * 0.125)?;
        let p = candle_nn::ops::softmax_last_dim(&s)?;
        p.matmul(&v)?;
        Ok(())
    })?;
    let output = time(reps, || {
        quantized_matmul(&w.output, &x)?;
        Ok(())
    })?;
    Ok([
        ("q, k, v and o projections", layers * projections),
        ("MLP (gate, up, activation, down)", layers * mlp),
        ("rope (apply_at on q and k)", layers * rope),
        (
            "attention over the cache (scores, softmax, values)",
            layers * attention,
        ),
        ("output projection (vocabulary)", output),
    ])
}

/// The profile's table: each part's ms per step and share of the step, and the rest.
fn print_profile(step: f64, cached: usize, parts: &[(&str, f64)]) {
    println!(
        "profile of one decode step ({:.3} ms, {cached} tokens cached):\n",
        step * 1e3
    );
    println!("| part | ms per step | share |");
    println!("|---|---:|---:|");
    let mut total = 0.0;
    for (name, secs) in parts {
        total += secs;
        println!(
            "| {name} | {:.3} | {:.1}% |",
            secs * 1e3,
            100.0 * secs / step
        );
    }
    println!(
        "| the rest (norms, residuals, embedding, cache appends, argmax) | {:.3} | {:.1}% |\n",
        (step - total) * 1e3,
        100.0 * (step - total) / step
    );
}
