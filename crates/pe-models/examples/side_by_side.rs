//! pe-models' `LlamaFamily` next to candle-transformers' models on the fixtures it has a
//! counterpart for, from `config.json` and safetensors:
//! - `llama31` (Llama 3.1: llama3 rope scaling, rope_theta 500,000) against `llama::Llama`;
//! - `qwen3` (qk-norm, rope_theta 1e6) against `qwen3::ModelForCausalLM`;
//! - `gemma3` (sliding layers at theta 1e4, global layers linear x8 at theta 1e6) against
//!   `gemma3::Model`;
//!
//! and from the GGUF files llama.cpp's converter writes (F32 and Q8_0 each):
//! - `llama31_*` and `mistral_*` (llama.cpp writes Mistral as `llama`) against
//!   `quantized_llama::ModelWeights`;
//! - `qwen25_yarn_*` (YaRN x4) against `quantized_qwen2::ModelWeights`;
//! - `phi3_longrope_*` (LongRoPE) against `quantized_phi3::ModelWeights`.
//!
//! It prints the distance of each to the logits transformers 5.24 recorded, with the prompt at
//! positions 0, 4,000 and the fixture's far offsets, and the decode speed of both. For a Q8_0
//! file the reference is transformers with the inputs of its quantized layers rounded to Q8_0
//! blocks, as candle's and llama.cpp's CPU matmuls round them.
//!
//! ```text
//! cargo run --release -p pe-models --example side_by_side            # markdown, every fixture
//! cargo run --release -p pe-models --example side_by_side -- --fixture gemma3 --json
//! ```
//!
//! Both models read the same files. candle-transformers' configs know only the pre-5.0 keys
//! (`rope_theta`, `rope_scaling`, `rope_local_base_freq`, `sliding_window_pattern`), so the
//! file's `rope_parameters` and `layer_types` are passed to them under those names (what they
//! cannot express, Gemma 3's global scaling, they ignore). Their GGUF models read the file
//! as they do in candle's examples.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use candle_core::quantized::gguf_file::Content;
use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_pe_core::Rope;
use candle_pe_formats::GgufMeta;
use candle_transformers::models::gemma3 as ctg;
use candle_transformers::models::llama as ct;
use candle_transformers::models::quantized_llama as qllama;
use candle_transformers::models::quantized_phi3 as qphi3;
use candle_transformers::models::quantized_qwen2 as qqwen2;
use candle_transformers::models::qwen3 as ctq;
use pe_models::{greedy, LlamaFamily};
use pe_testkit::race::{median, Race, Sampled};
use serde_json::{json, Value};

/// The fixtures from `config.json` and safetensors (`models/NAME`).
const MODELS: [&str; 3] = ["llama31", "qwen3", "gemma3"];
/// The fixtures from GGUF files (`gguf/NAME.gguf`).
const GGUFS: [&str; 8] = [
    "llama31_f32",
    "llama31_q8_0",
    "mistral_f32",
    "mistral_q8_0",
    "qwen25_yarn_f32",
    "qwen25_yarn_q8_0",
    "phi3_longrope_f32",
    "phi3_longrope_q8_0",
];

/// Accuracy and decode speed of pe-models and candle-transformers on the model fixtures.
#[derive(clap::Parser, Debug)]
struct Args {
    /// The fixtures to compare [default: all of them]
    #[arg(long, value_name = "NAME", value_parser = MODELS.into_iter().chain(GGUFS).collect::<Vec<_>>())]
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

/// Where a fixture's checkpoint and transformers' recorded calls are.
struct Fixture {
    name: String,
    /// The `models/NAME` folder, or the `gguf/NAME.gguf` file.
    checkpoint: PathBuf,
    /// transformers' calls: their description and their tensors.
    outputs: (PathBuf, PathBuf),
}

impl Fixture {
    fn new(name: &str) -> Self {
        match MODELS.contains(&name) {
            true => {
                let dir = pe_testkit::fixture(&format!("models/{name}"));
                let outputs = (dir.join("outputs.json"), dir.join("outputs.safetensors"));
                Fixture {
                    name: name.into(),
                    checkpoint: dir,
                    outputs,
                }
            }
            false => {
                let at = |ext: &str| pe_testkit::fixture(&format!("gguf/{name}.{ext}"));
                // Both models' CPU matmuls with Q8_0 weights round their inputs to Q8_0
                // blocks, as llama.cpp's do: the reference is transformers doing the same.
                let reference = match name.ends_with("q8_0") {
                    true => format!("gguf/{name}_act"),
                    false => format!("gguf/{name}"),
                };
                let reference = |ext: &str| pe_testkit::fixture(&format!("{reference}.{ext}"));
                let outputs = (reference("json"), reference("safetensors"));
                Fixture {
                    name: name.into(),
                    checkpoint: at("gguf"),
                    outputs,
                }
            }
        }
    }

    fn is_gguf(&self) -> bool {
        self.checkpoint.extension().is_some_and(|e| e == "gguf")
    }

    /// What the checkpoint is stored as: `f32` or the GGUF file's quantization.
    fn weights(&self) -> &str {
        self.name.rsplit_once('_').map_or("f32", |(_, w)| match w {
            "0" => "q8_0",
            w => w,
        })
    }

    fn ours(&self) -> Result<LlamaFamily> {
        match self.is_gguf() {
            true => LlamaFamily::from_gguf(&self.checkpoint, DType::F32, &Device::Cpu),
            false => LlamaFamily::from_dir(&self.checkpoint, DType::F32, &Device::Cpu),
        }
    }
}

/// candle-transformers' model of a fixture, with its KV cache.
enum Theirs {
    Llama(Box<(ct::Llama, ct::Config, ct::Cache)>),
    Qwen3(ctq::ModelForCausalLM),
    Gemma3(ctg::Model),
    QLlama(qllama::ModelWeights),
    QQwen2(qqwen2::ModelWeights),
    /// Its KV cache cannot be emptied: the model is read again from its file.
    QPhi3(Box<qphi3::ModelWeights>, PathBuf),
}

impl Theirs {
    /// The model of `fixture`, its rope tables at least `rows` long where it lets them be set.
    fn load(fixture: &Fixture, rows: usize) -> Result<Self> {
        match fixture.is_gguf() {
            true => Self::load_gguf(&fixture.checkpoint),
            false => Self::load_model(&fixture.name, &fixture.checkpoint, rows),
        }
    }

    /// The GGUF file at `path`, read by the candle-transformers model of its architecture.
    fn load_gguf(path: &Path) -> Result<Self> {
        let dev = Device::Cpu;
        let mut file = std::fs::File::open(path).with_context(|| format!("{}", path.display()))?;
        let content = Content::read(&mut file)?;
        let arch = GgufMeta::new(&content)
            .string("general.architecture")?
            .context("no general.architecture")?
            .to_string();
        Ok(match arch.as_str() {
            "llama" => Theirs::QLlama(qllama::ModelWeights::from_gguf(content, &mut file, &dev)?),
            "qwen2" => Theirs::QQwen2(qqwen2::ModelWeights::from_gguf(content, &mut file, &dev)?),
            "phi3" => {
                let model = qphi3::ModelWeights::from_gguf(false, content, &mut file, &dev)?;
                Theirs::QPhi3(Box::new(model), path.to_path_buf())
            }
            other => bail!(
                "{}: no candle-transformers model for {other}",
                path.display()
            ),
        })
    }

    /// The model of fixture `name` in `dir`, its rope tables `rows` long.
    fn load_model(name: &str, dir: &Path, rows: usize) -> Result<Self> {
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
            Theirs::QLlama(m) => m.clear_kv_cache(),
            Theirs::QQwen2(m) => m.clear_kv_cache(),
            Theirs::QPhi3(_, path) => {
                let path = path.clone();
                *self = Self::load_gguf(&path)?;
            }
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
            Theirs::QLlama(m) => m.forward(&input, offset)?,
            Theirs::QQwen2(m) => m.forward(&input, offset)?,
            Theirs::QPhi3(m, _) => m.forward(&input, offset)?,
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

/// A candle-transformers distance, `cannot run` where there is none.
fn cell(v: Option<f64>) -> String {
    v.map_or("cannot run".into(), |v| format!("{v:.1e}"))
}

fn max_diff(a: &Tensor, b: &Tensor) -> Result<f64> {
    let d = (a.to_dtype(DType::F64)? - b.to_dtype(DType::F64)?)?.abs()?;
    Ok(d.flatten_all()?.max(0)?.to_scalar::<f64>()?)
}

/// One row of the accuracy table: the prompt at positions `first..`.
struct Row {
    first: usize,
    /// Max |diff| to transformers' prefill logits (positions 0.., the exact answer where the
    /// rope's angles depend on positions only through their differences): ours, and
    /// candle-transformers' where it runs. `None` where the frequencies differ from those at
    /// 0.. (LongRoPE's long factors, dynamic NTK past the original context).
    vs_exact: Option<(f64, Option<f64>)>,
    /// Max |diff| to transformers' logits at the same positions, where the fixture recorded
    /// them: ours, and candle-transformers' where it runs.
    vs_same: Option<(f64, Option<f64>)>,
    /// transformers' own logits at these positions against its prefill ones, where recorded.
    tf_drift: Option<f64>,
    /// Why candle-transformers cannot run the prompt at these positions, if it cannot.
    ct_error: Option<String>,
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
    weights: String,
    prompt_len: usize,
    rows: Vec<Row>,
    /// Median prefill and decode tokens/s: (ours, candle-transformers) each.
    prefill: (f64, Option<f64>),
    decode: (f64, Option<f64>),
    /// The median of the rounds' decode ratios, ours over candle-transformers.
    ratio: Option<f64>,
    same_ids: Option<bool>,
    /// Whether the greedy ids start with the ones transformers recorded (its decode call):
    /// ours, and candle-transformers' where it runs; and how many transformers recorded.
    tf_ids: (bool, Option<bool>, usize),
    /// Why candle-transformers could not take the prompt in one forward (its prefill then
    /// goes a token at a time), if it could not.
    ct_prefill_error: Option<String>,
}

fn compare(args: &Args) -> Result<()> {
    let names: Vec<&str> = match args.fixture.is_empty() {
        true => MODELS.into_iter().chain(GGUFS).collect(),
        false => args.fixture.iter().map(String::as_str).collect(),
    };
    let measured = names
        .iter()
        .map(|name| measure(&Fixture::new(name), args))
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

/// The prompt's first positions the table shows besides the fixture's far calls: 0 and 4,000
/// (where every candle-transformers table still reaches).
const OFFSETS: [usize; 2] = [0, 4000];

/// What transformers recorded for a fixture: the prompt, its prefill logits, its greedy ids,
/// and every recorded tensor by name.
struct Recorded {
    path: PathBuf,
    tensors: std::collections::HashMap<String, Tensor>,
    outputs: Value,
    prompt: Vec<u32>,
    prefill: Tensor,
    ids: Vec<u32>,
}

impl Recorded {
    fn load(fixture: &Fixture) -> Result<Self> {
        let (json_path, tensors_path) = &fixture.outputs;
        let text = std::fs::read_to_string(json_path)
            .with_context(|| format!("{}", json_path.display()))?;
        let tensors = candle_core::safetensors::load(tensors_path, &Device::Cpu)?;
        let mut recorded = Recorded {
            path: tensors_path.clone(),
            tensors,
            outputs: serde_json::from_str(&text)?,
            prompt: vec![],
            prefill: Tensor::zeros(0, DType::F32, &Device::Cpu)?,
            ids: vec![],
        };
        recorded.prompt = recorded.ids_of("prefill.input_ids")?;
        recorded.prefill = recorded.get("prefill.logits")?;
        recorded.ids = recorded.ids_of("decode.generated_ids")?;
        Ok(recorded)
    }

    /// The recorded tensor `name`.
    fn get(&self, name: &str) -> Result<Tensor> {
        self.tensors
            .get(name)
            .cloned()
            .with_context(|| format!("{}: no {name}", self.path.display()))
    }

    /// The recorded tensor `name` as u32 ids.
    fn ids_of(&self, name: &str) -> Result<Vec<u32>> {
        Ok(self
            .get(name)?
            .to_dtype(DType::U32)?
            .flatten_all()?
            .to_vec1()?)
    }

    /// The prompt's first positions: 0 and 4,000, then the fixture's far calls, each with the
    /// call transformers recorded there if any.
    fn starts(&self) -> Result<Vec<(usize, Option<String>)>> {
        let mut starts: Vec<(usize, Option<String>)> = OFFSETS
            .iter()
            .map(|&first| (first, (first == 0).then(|| "prefill".to_string())))
            .collect();
        let calls = self.outputs["calls"].as_array().context("outputs: calls")?;
        for call in calls {
            let call = call["name"].as_str().context("outputs: call name")?;
            if call.starts_with("far") {
                let pos = self.ids_of(&format!("{call}.position_ids"))?;
                let first = pos.first().context("outputs: empty far call")?;
                starts.push((*first as usize, Some(call.to_string())));
            }
        }
        Ok(starts)
    }
}

fn measure(fixture: &Fixture, args: &Args) -> Result<Measured> {
    let recorded = Recorded::load(fixture)?;
    let prompt = &recorded.prompt;
    let starts = recorded.starts()?;
    let rows_needed = starts.iter().map(|c| c.0).max().unwrap_or(0) + prompt.len();
    let rows_needed = rows_needed.max(prompt.len() + args.tokens as usize);
    let mut theirs = Theirs::load(fixture, rows_needed)?;
    let mut ours = fixture.ours()?;
    let rows = starts
        .iter()
        .map(|(first, call)| accuracy_row(&recorded, &mut ours, &mut theirs, *first, call))
        .collect::<Result<Vec<_>>>()?;
    // candle-transformers runs the speed rounds when it runs the prompt at 0.., a token at a
    // time if it cannot take it in one forward.
    let runs = rows.first().is_some_and(|r| r.ct_error.is_none());
    let ct_prefill_error = match runs {
        true => theirs.greedy(prompt, 2, false).err(),
        false => None,
    };
    let theirs = runs.then_some(&mut theirs);
    let speed = speed(
        &recorded,
        &mut ours,
        theirs,
        ct_prefill_error.is_some(),
        args,
    )?;
    Ok(Measured {
        name: fixture.name.clone(),
        weights: fixture.weights().to_string(),
        prompt_len: prompt.len(),
        rows,
        prefill: speed.prefill,
        decode: speed.decode,
        ratio: speed.ratio,
        same_ids: speed.same_ids,
        tf_ids: speed.tf_ids,
        ct_prefill_error: ct_prefill_error.map(|e| candle_pe_cli::error_line(&e)),
    })
}

/// The accuracy row of the prompt at positions `first..`, against the call transformers
/// recorded there (`call`) where there is one.
fn accuracy_row(
    recorded: &Recorded,
    ours: &mut LlamaFamily,
    theirs: &mut Theirs,
    first: usize,
    call: &Option<String>,
) -> Result<Row> {
    let dev = Device::Cpu;
    let prompt = &recorded.prompt;
    let tf_prefill = &recorded.prefill;
    // A prompt's logits at P.. equal its logits at 0.. where the frequencies are the same
    // (not past the original context of LongRoPE or dynamic NTK).
    let rope = Rope::new(ours.config().rope.clone())?;
    let relative = |reach: usize| rope.inv_freq(reach) == rope.inv_freq(prompt.len());
    ours.clear_cache();
    let end = (first + prompt.len()) as u32;
    let pos = Tensor::arange(first as u32, end, &dev)?.unsqueeze(0)?;
    let ids = Tensor::new(prompt.as_slice(), &dev)?.unsqueeze(0)?;
    let a = ours.forward(&ids, &pos, None)?;
    // candle-transformers may fail where transformers runs: its error is reported.
    let (b, ct_error) = match theirs.logits(prompt, first) {
        Ok(b) => (Some(b), None),
        Err(e) => (None, Some(candle_pe_cli::error_line(&e))),
    };
    let theirs_vs = |reference: &Tensor| b.as_ref().map(|b| max_diff(b, reference)).transpose();
    let tf = call
        .as_ref()
        .map(|c| recorded.get(&format!("{c}.logits")))
        .transpose()?;
    Ok(Row {
        first,
        vs_exact: match relative(first + prompt.len()) {
            true => Some((max_diff(&a, tf_prefill)?, theirs_vs(tf_prefill)?)),
            false => None,
        },
        vs_same: match &tf {
            Some(tf) => Some((max_diff(&a, tf)?, theirs_vs(tf)?)),
            None => None,
        },
        tf_drift: tf.as_ref().map(|tf| max_diff(tf, tf_prefill)).transpose()?,
        ct_error,
    })
}

/// What the speed rounds measured: median prefill and decode tokens/s (ours,
/// candle-transformers'), the median of the rounds' decode ratios, and the greedy ids'
/// agreement ([`Measured`]'s fields of the same names).
struct Speed {
    prefill: (f64, Option<f64>),
    decode: (f64, Option<f64>),
    ratio: Option<f64>,
    same_ids: Option<bool>,
    tf_ids: (bool, Option<bool>, usize),
}

/// Greedy decode speed in interleaved rounds, the order alternating (candle-transformers
/// `theirs` where it runs; `one_at_a_time` where it takes the prompt a token at a time).
fn speed(
    recorded: &Recorded,
    ours: &mut LlamaFamily,
    theirs: Option<&mut Theirs>,
    one_at_a_time: bool,
    args: &Args,
) -> Result<Speed> {
    let (prompt, tokens) = (&recorded.prompt, args.tokens as usize);
    let runs = theirs.is_some();
    let (mut ours_pre, mut ours_ids, mut ct_pre, mut ct_ids) = (vec![], vec![], vec![], vec![]);
    let mut cases = vec![Sampled::new("pe-models", || {
        let g = greedy(ours, prompt, 0, tokens, &[], |_| {})?;
        ours_pre.push(g.prefill_tokens_per_second());
        ours_ids.push(g.ids.clone());
        Ok(g.decode_tokens_per_second())
    })];
    if let Some(theirs) = theirs {
        let (ct_pre, ct_ids) = (&mut ct_pre, &mut ct_ids);
        cases.push(Sampled::new("candle-transformers", move || {
            let (ids, prefill, decode) = theirs.greedy(prompt, tokens, one_at_a_time)?;
            ct_pre.push(prompt.len() as f64 / prefill.as_secs_f64());
            ct_ids.push(ids);
            Ok((tokens - 1) as f64 / decode.as_secs_f64())
        }));
    }
    let rounds = Race::new(args.rounds as usize)
        .warm_up(false)
        .alternate()
        .sample(cases)?;
    let tf_ids = &recorded.ids;
    let starts_as_tf = |ids: &Vec<u32>| ids.starts_with(&tf_ids[..tf_ids.len().min(tokens)]);
    Ok(Speed {
        prefill: (median(&ours_pre), runs.then(|| median(&ct_pre))),
        decode: (
            rounds.median("pe-models"),
            runs.then(|| rounds.median("candle-transformers")),
        ),
        // The median of the rounds' ratios (not the ratio of the medians).
        ratio: runs.then(|| rounds.ratio("pe-models", "candle-transformers")),
        same_ids: runs.then(|| ours_ids == ct_ids),
        tf_ids: (
            ours_ids.iter().all(starts_as_tf),
            runs.then(|| ct_ids.iter().all(starts_as_tf)),
            tf_ids.len().min(tokens),
        ),
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
                        "first_position": r.first,
                        "vs_transformers_prefill": r.vs_exact.map(|(o, t)| json!({"pe_models": o, "candle_transformers": t})),
                        "vs_transformers_same_positions": r.vs_same.map(|(o, t)| json!({"pe_models": o, "candle_transformers": t})),
                        "transformers_drift_vs_prefill": r.tf_drift,
                        "candle_transformers_error": r.ct_error,
                    })
                })
                .collect();
            json!({
                "fixture": m.name, "weights": m.weights, "compute_dtype": "f32", "device": "cpu",
                "candle_transformers_prefill_error": m.ct_prefill_error,
                "accuracy_max_abs_logit_diff": acc,
                "speed": {
                    "rounds": args.rounds, "prompt_tokens": m.prompt_len,
                    "decode_steps": args.tokens - 1,
                    "prefill_tokens_per_s_median": {"pe_models": m.prefill.0, "candle_transformers": m.prefill.1},
                    "decode_tokens_per_s_median": {"pe_models": m.decode.0, "candle_transformers": m.decode.1},
                    "decode_ratio_median": m.ratio,
                    "same_greedy_ids": m.same_ids,
                    "transformers_greedy_ids": {"count": m.tf_ids.2, "pe_models": m.tf_ids.0, "candle_transformers": m.tf_ids.1},
                },
            })
        })
        .collect();
    json!({ "fixtures": fixtures })
}

fn yes_no(v: Option<bool>) -> &'static str {
    match v {
        Some(true) => "yes",
        Some(false) => "no",
        None => "-",
    }
}

fn print_markdown(measured: &[Measured], args: &Args) {
    print_accuracy(measured);
    print_speed(measured, args);
}

/// The accuracy table, what it means, and where candle-transformers cannot run.
fn print_accuracy(measured: &[Measured]) {
    println!("## Max |logit difference| to transformers 5.24 (f32 compute, CPU)\n");
    println!("| fixture | weights | prompt positions | pe-models vs tf at 0.. (exact) | candle-transformers vs tf at 0.. (exact) | pe-models vs tf, same positions | candle-transformers vs tf, same positions | tf's own drift from its 0.. |");
    println!("|---|---|---|---:|---:|---:|---:|---:|");
    for m in measured {
        for r in &m.rows {
            let span = format!("{}..{}", r.first, r.first + m.prompt_len - 1);
            let exact = match r.vs_exact {
                Some((o, t)) => format!("{o:.1e} | {}", cell(t)),
                None => "n/a | n/a".into(),
            };
            let (same, drift) = match (r.vs_same, r.tf_drift) {
                (Some((o, t)), Some(d)) => (format!("{o:.1e} | {}", cell(t)), format!("{d:.1e}")),
                _ => ("not recorded | not recorded".into(), "-".into()),
            };
            println!(
                "| {} | {} | {span} | {exact} | {same} | {drift} |",
                m.name, m.weights
            );
        }
    }
    println!(
        "\nRope turns a query and a key by angles whose difference depends only on their \
         position difference, so the exact logits of a prompt at positions P.. are its \
         logits at 0..: transformers' prefill logits are the reference at every offset \
         (columns 4 and 5). transformers builds its angles in f32 (inv_freq and \
         `position * inv_freq` rounded to f32), so its own far logits drift from that \
         reference (last column). candle-transformers builds its cos/sin tables the same f32 \
         way, so where its rope is right it reproduces transformers' far logits, drift \
         included. Where the spectrum changes with the positions (LongRoPE's long factors \
         past the original context), the 0.. logits are no reference (n/a) and transformers' \
         logits at the same positions are. The GGUF fixtures' reference is transformers on the file's \
         dequantized weights, for Q8_0 files with the inputs of the quantized layers rounded \
         to Q8_0 blocks as both models' CPU matmuls round them. candle-transformers' logits at every prompt token come from feeding the \
         prompt one token at a time through its KV cache (its forward returns the last \
         token's logits only)."
    );
    let errors: Vec<String> = measured
        .iter()
        .flat_map(|m| {
            m.rows.iter().filter_map(move |r| {
                let e = r.ct_error.as_ref()?;
                Some(format!("- {} at {}..: {e}", m.name, r.first))
            })
        })
        .collect();
    if !errors.is_empty() {
        println!(
            "\nWhere candle-transformers cannot run:\n{}",
            errors.join("\n")
        );
    }
}

/// The speed table and what it means.
fn print_speed(measured: &[Measured], args: &Args) {
    println!(
        "\n## Speed (greedy, batch 1, {} decode steps, median of {} interleaved rounds)\n",
        args.tokens - 1,
        args.rounds
    );
    println!("| fixture | weights | pe-models prefill tokens/s | candle-transformers prefill tokens/s | pe-models decode tokens/s | candle-transformers decode tokens/s | decode ours/candle-transformers | same greedy ids | pe-models = transformers' ids | candle-transformers = transformers' ids |");
    println!("|---|---|---:|---:|---:|---:|---:|---|---|---|");
    for m in measured {
        let rate = |v: Option<f64>| v.map_or("cannot run".into(), |v| format!("{v:.0}"));
        println!(
            "| {} | {} | {:.0} | {} | {:.0} | {} | {} | {} | {} | {} |",
            m.name,
            m.weights,
            m.prefill.0,
            rate(m.prefill.1),
            m.decode.0,
            rate(m.decode.1),
            m.ratio.map_or("-".into(), |r| format!("{r:.3}")),
            yes_no(m.same_ids),
            yes_no(Some(m.tf_ids.0)),
            yes_no(m.tf_ids.1),
        );
    }
    for m in measured {
        if let Some(e) = &m.ct_prefill_error {
            println!(
                "\ncandle-transformers cannot take {}'s prompt in one forward ({e}); its \
                 prefill above fed the prompt one token at a time.",
                m.name
            );
        }
    }
    println!(
        "\nThe last two columns compare the first {} greedy ids with the ones transformers \
         recorded for the fixture.",
        measured.iter().map(|m| m.tf_ids.2).min().unwrap_or(0)
    );
    println!(
        "\nThe ratio is the median of the rounds' ratios (each round runs both models back to \
         back), above 1 when pe-models is faster."
    );
}
