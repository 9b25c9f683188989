//! The reference decoders on the target: the logits of a prompt on the target against the
//! CPU's (and against transformers' recorded ones) for the safetensors and GGUF fixtures, then
//! greedy decode tokens/s on a GGUF fixture against candle-transformers' `quantized_llama` on
//! the same device and file, in interleaved rounds.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use candle_core::quantized::gguf_file::Content;
use candle_core::{DType, Device, Tensor};
use candle_transformers::models::quantized_llama as qllama;
use pe_models::{greedy, LlamaFamily};
use pe_testkit::race::{Race, Sampled};

use crate::compare::diff;
use crate::report::{Report, Timing};
use crate::Target;

const SECTION: &str = "models";

/// Safetensors fixtures (`models/NAME`) and GGUF ones (`gguf/NAME.gguf`, with the reference
/// transformers recorded for them).
const DIRS: [&str; 4] = ["llama31", "qwen3", "gemma3", "phi3_longrope"];
const GGUFS: [(&str, &str); 4] = [
    ("llama31_f32", "llama31_f32"),
    ("llama31_q8_0", "llama31_q8_0_act"),
    ("qwen25_yarn_q8_0", "qwen25_yarn_q8_0_act"),
    ("phi3_longrope_q8_0", "phi3_longrope_q8_0_act"),
];

fn load(name: &str, device: &Device) -> Result<LlamaFamily> {
    match name.ends_with("_f32") || name.contains("q8_0") {
        true => LlamaFamily::from_gguf(
            pe_testkit::fixture(&format!("gguf/{name}.gguf")),
            DType::F32,
            device,
        ),
        false => LlamaFamily::from_dir(
            pe_testkit::fixture(&format!("models/{name}")),
            DType::F32,
            device,
        ),
    }
}

/// The prompt ids and transformers' prefill logits recorded in `outputs`.
fn recorded(outputs: &Path) -> Result<(Vec<u32>, Tensor)> {
    let rec = candle_core::safetensors::load(outputs, &Device::Cpu)
        .with_context(|| format!("{}", outputs.display()))?;
    let ids = rec
        .get("prefill.input_ids")
        .context("no prefill.input_ids")?;
    let ids: Vec<u32> = ids.to_dtype(DType::U32)?.flatten_all()?.to_vec1()?;
    let logits = rec
        .get("prefill.logits")
        .context("no prefill.logits")?
        .clone();
    Ok((ids, logits))
}

/// The largest difference of two sets of logits, compared as flat lists of values.
fn max_diff(a: &Tensor, b: &Tensor) -> Result<f64> {
    Ok(diff("logits", &a.flatten_all()?, &b.flatten_all()?)?.max)
}

/// The prefill logits `(1, seq, vocab)` of `ids` at positions `0..`.
fn prefill(model: &mut LlamaFamily, ids: &[u32]) -> Result<Tensor> {
    model.clear_cache();
    let dev = model.device().clone();
    let input = Tensor::new(ids, &dev)?.unsqueeze(0)?;
    let pos = Tensor::arange(0u32, ids.len() as u32, &dev)?.unsqueeze(0)?;
    model.forward(&input, &pos, None)
}

pub fn run(target: &Target, report: &mut Report) -> Result<()> {
    let cases: Vec<(String, std::path::PathBuf, bool)> = DIRS
        .iter()
        .map(|n| {
            (
                n.to_string(),
                pe_testkit::fixture(&format!("models/{n}/outputs.safetensors")),
                false,
            )
        })
        .chain(GGUFS.iter().map(|(n, r)| {
            (
                n.to_string(),
                pe_testkit::fixture(&format!("gguf/{r}.safetensors")),
                n.contains("q8_0"),
            )
        }))
        .collect();
    for (name, outputs, quantized) in cases {
        report.attempt(SECTION, &name.clone(), |r| {
            logits(target, r, &name, &outputs, quantized)
        });
    }
    for name in ["llama31_q8_0", "llama31_f32"] {
        report.attempt(SECTION, &format!("decode {name}"), |r| {
            decode_speed(target, r, name)
        });
    }
    Ok(())
}

/// A fixture's prefill logits on the target against the CPU's and transformers'.
fn logits(
    target: &Target,
    report: &mut Report,
    name: &str,
    outputs: &Path,
    quantized: bool,
) -> Result<()> {
    let dev = &target.device;
    {
        let (ids, tf) = recorded(outputs)?;
        let cpu = prefill(&mut load(name, &Device::Cpu)?, &ids)?;
        let ours = prefill(&mut load(name, dev)?, &ids)
            .with_context(|| format!("{name} on the target"))?;
        // f32 weights: the same sums in another order. Q8_0: the target's quantized matmul
        // may round its inputs otherwise than the CPU's Q8_0 blocks (0.14 to 0.28 on these
        // logits, measured on the CPU between rounded and unrounded inputs).
        let bound = if quantized { 0.3 } else { 1e-4 };
        report.check(
            SECTION,
            &format!("{name}: prefill logits, target vs CPU"),
            max_diff(&ours, &cpu)?,
            bound,
        );
        report.check(
            SECTION,
            &format!("{name}: prefill logits, target vs transformers"),
            max_diff(&ours, &tf)?,
            if quantized { 0.3 } else { 1e-4 },
        );
        let next = |t: &Tensor| -> Result<u32> {
            Ok(t.squeeze(0)?
                .get(ids.len() - 1)?
                .argmax(0)?
                .to_device(&Device::Cpu)?
                .to_scalar()?)
        };
        report.check(
            SECTION,
            &format!("{name}: first greedy id, target vs CPU"),
            (next(&ours)? != next(&cpu)?) as u8 as f64,
            if quantized { 1.0 } else { 0.0 },
        );
    }
    Ok(())
}

/// Greedy decode tokens/s of ours and candle-transformers' `quantized_llama` on one file,
/// interleaved rounds after a warm-up round; and whether their ids agree.
fn decode_speed(target: &Target, report: &mut Report, name: &str) -> Result<()> {
    let dev = &target.device;
    let path = pe_testkit::fixture(&format!("gguf/{name}.gguf"));
    let mut ours = LlamaFamily::from_gguf(&path, DType::F32, dev)?;
    let mut file = std::fs::File::open(&path)?;
    let content = Content::read(&mut file)?;
    let mut theirs = qllama::ModelWeights::from_gguf(content, &mut file, dev)?;
    let prompt: Vec<u32> = (0..12).map(|i| 5 + 7 * i).collect();
    let tokens = if target.full { 257 } else { 17 };
    let rounds = if target.full { 5 } else { 2 };
    // Ours on the CPU: where the target's greedy ids first leave them, if they do.
    let mut cpu_model = LlamaFamily::from_gguf(&path, DType::F32, &Device::Cpu)?;
    let on_cpu = greedy(&mut cpu_model, &prompt, 0, tokens, &[], |_| {})?.ids;
    // The ids of every run, the warm-up's included.
    let (mut ours_ids, mut theirs_ids) = (Vec::new(), Vec::new());
    let measured = Race::new(rounds).sample(vec![
        Sampled::new("pe-models", || {
            let g = greedy(&mut ours, &prompt, 0, tokens, &[], |_| {})?;
            ours_ids.push(g.ids.clone());
            Ok(g.decode_tokens_per_second())
        }),
        Sampled::new("candle-transformers", || {
            let (ids, decode) = their_greedy(&mut theirs, &prompt, tokens, dev)?;
            theirs_ids.push(ids);
            Ok((tokens - 1) as f64 / decode.as_secs_f64())
        }),
    ])?;
    let (o, t) = (
        measured.median("pe-models"),
        measured.median("candle-transformers"),
    );
    report.timing(Timing {
        case: format!("decode {name} (tiny fixture, {tokens} tokens): ms per token"),
        ours_ms: 1e3 / o,
        reference: "candle-transformers quantized_llama".into(),
        reference_ms: Some(1e3 / t),
        ratio: Some(1.0 / measured.ratio("pe-models", "candle-transformers")),
    });
    let agreement = Agreement::of(&ours_ids, &theirs_ids, &on_cpu);
    report.note(format!(
        "decode {name} on the target: ours {o:.0} tokens/s, candle-transformers' quantized_llama {t:.0} tokens/s; their greedy ids {} ours; ours on the target {} ours on the CPU",
        match agreement.theirs_leave {
            None if agreement.same_ids => "equal".to_string(),
            step => format!("leave at step {} of", step.unwrap_or(0)),
        },
        match agreement.vs_cpu {
            None => "equal".to_string(),
            Some(step) => format!("leave at step {step} of {tokens}"),
        },
    ));
    Ok(())
}

/// candle-transformers' greedy ids: the prompt in one forward, then one token a step; and
/// the time of the steps.
fn their_greedy(
    theirs: &mut qllama::ModelWeights,
    prompt: &[u32],
    tokens: usize,
    dev: &Device,
) -> Result<(Vec<u32>, Duration)> {
    theirs.clear_kv_cache();
    let input = Tensor::new(prompt, dev)?.unsqueeze(0)?;
    let pick =
        |logits: Tensor| -> Result<u32> { Ok(logits.flatten_all()?.argmax(0)?.to_scalar()?) };
    let mut next = pick(theirs.forward(&input, 0)?)?;
    let mut ids = vec![next];
    let start = Instant::now();
    for pos in prompt.len()..prompt.len() + tokens - 1 {
        next = pick(theirs.forward(&Tensor::new(&[next], dev)?.unsqueeze(0)?, pos)?)?;
        ids.push(next);
    }
    Ok((ids, start.elapsed()))
}

/// Whether the greedy ids of the runs agree: theirs with ours in every run (and where the
/// last run that differs leaves), and ours on the target with ours on the CPU (last run).
struct Agreement {
    same_ids: bool,
    theirs_leave: Option<usize>,
    vs_cpu: Option<usize>,
}

impl Agreement {
    fn of(ours: &[Vec<u32>], theirs: &[Vec<u32>], on_cpu: &[u32]) -> Self {
        let mut agreement = Agreement {
            same_ids: true,
            theirs_leave: None,
            vs_cpu: None,
        };
        for (ours, theirs) in ours.iter().zip(theirs) {
            if theirs != ours {
                agreement.same_ids = false;
                agreement.theirs_leave = first_difference(theirs, ours);
            }
            agreement.vs_cpu = first_difference(ours, on_cpu);
        }
        agreement
    }
}

/// The first index where `a` and `b` differ (or one ends), `None` if they are equal.
fn first_difference(a: &[u32], b: &[u32]) -> Option<usize> {
    match a.iter().zip(b).position(|(x, y)| x != y) {
        Some(i) => Some(i),
        None if a.len() == b.len() => None,
        None => Some(a.len().min(b.len())),
    }
}
