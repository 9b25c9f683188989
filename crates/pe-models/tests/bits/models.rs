//! The reference models' logits (f32, CPU) on a fixed prompt, named with the machine's class
//! (candle's matmul kernels depend on the CPU's vector extensions): every `fixtures/models/<case>`
//! checkpoint (`LlamaFamily::from_dir`; the M2M100 encoder's last hidden state), and
//! `LlamaFamily::from_gguf` on every `fixtures/gguf/*_f32.gguf` and `*_q8_0.gguf`. Each decoder
//! runs a 12-token prefill, two cached decode steps, the prompt again at positions 20,000 ..
//! 20,011, a left-padded batch of two (the last logits), and for M-RoPE models a prompt with an
//! image's ids.

use anyhow::{Context, Result};
use candle_core::{DType, Device, Tensor};
use pe_models::{LlamaFamily, M2M100Encoder};
use serde_json::Value;

use crate::inputs::{ids, Cases};
use crate::tables::stem;

/// The prompt's token ids (every fixture's vocabulary has 128).
const PROMPT: [i64; 12] = [5, 42, 17, 99, 3, 64, 120, 8, 33, 77, 21, 90];

/// Every checkpoint of `fixtures/models`.
pub fn checkpoints(cases: &mut Cases) -> Result<()> {
    for dir in pe_testkit::fixture_entries("models") {
        let config = dir.join("config.json");
        if !config.is_file() {
            continue;
        }
        let name = stem(&dir)?;
        let json: Value = pe_testkit::read_json(&config);
        let prefix = format!("model@{}/{name}", pe_testkit::machine_class());
        if json["model_type"] == "m2m_100" {
            let encoder = M2M100Encoder::from_dir(&dir, DType::F32, &Device::Cpu)
                .with_context(|| prefix.clone())?;
            encoder_calls(cases, &prefix, &encoder)?;
        } else {
            let model = LlamaFamily::from_dir(&dir, DType::F32, &Device::Cpu)
                .with_context(|| prefix.clone())?;
            decoder_calls(cases, &prefix, model)?;
        }
    }
    Ok(())
}

/// Every `fixtures/gguf/*_f32.gguf` and `*_q8_0.gguf`, as the file lays it out.
pub fn ggufs(cases: &mut Cases) -> Result<()> {
    for path in pe_testkit::fixture_files("gguf", "gguf") {
        let name = stem(&path)?;
        if !(name.ends_with("_f32") || name.ends_with("_q8_0")) {
            continue;
        }
        let prefix = format!("gguf@{}/{name}", pe_testkit::machine_class());
        let model = LlamaFamily::from_gguf(&path, DType::F32, &Device::Cpu)
            .with_context(|| prefix.clone())?;
        decoder_calls(cases, &prefix, model)?;
    }
    Ok(())
}

/// A decoder's calls, each from an empty cache but the decode steps (after the prefill).
fn decoder_calls(cases: &mut Cases, prefix: &str, mut model: LlamaFamily) -> Result<()> {
    let n = PROMPT.len();
    let prompt = ids(&PROMPT, &[1, n])?;
    let at = |from: i64| ids(&(from..from + n as i64).collect::<Vec<_>>(), &[1, n]);
    cases.add(format!("{prefix}/prefill"), || {
        Ok(vec![model.forward(&prompt, &at(0)?, None)?])
    })?;
    cases.add(format!("{prefix}/decode"), || {
        let one = model.forward(&ids(&[9], &[1, 1])?, &ids(&[12], &[1, 1])?, None)?;
        let two = model.forward(&ids(&[77], &[1, 1])?, &ids(&[13], &[1, 1])?, None)?;
        Ok(vec![one, two])
    })?;
    model.clear_cache();
    cases.add(format!("{prefix}/far20000"), || {
        Ok(vec![model.forward(&prompt, &at(20_000)?, None)?])
    })?;
    model.clear_cache();
    cases.add(format!("{prefix}/batch"), || {
        // Row 1: 3 pads (id 0), then 5 tokens; positions cumsum(mask) - 1, pads at 0.
        let tokens = ids(
            &[5, 42, 17, 99, 3, 64, 120, 8, 0, 0, 0, 33, 77, 21, 90, 11],
            &[2, 8],
        )?;
        let mask = ids(&[1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 1, 1, 1, 1, 1], &[2, 8])?;
        let positions = ids(&[0, 1, 2, 3, 4, 5, 6, 7, 0, 0, 0, 0, 1, 2, 3, 4], &[2, 8])?;
        let logits = model.forward(&tokens, &positions, Some(&mask))?;
        Ok(vec![logits.narrow(1, 7, 1)?])
    })?;
    if model.is_mrope() {
        model.clear_cache();
        cases.add(format!("{prefix}/mrope"), || {
            // Text at 0 .. 3, a 1 x 2 x 3 image at (3, 3..5, 3..6), text from 6.
            let t = [0, 1, 2, 3, 3, 3, 3, 3, 3, 6, 7, 8];
            let h = [0, 1, 2, 3, 3, 3, 4, 4, 4, 6, 7, 8];
            let w = [0, 1, 2, 3, 4, 5, 3, 4, 5, 6, 7, 8];
            let positions = ids(&[t, h, w].concat(), &[3, 1, n])?;
            Ok(vec![model.forward(&prompt, &positions, None)?])
        })?;
    }
    Ok(())
}

/// The encoder's last hidden state, a plain batch and a left-padded one (pad id 1).
fn encoder_calls(cases: &mut Cases, prefix: &str, encoder: &M2M100Encoder) -> Result<()> {
    let prompt = ids(&PROMPT, &[1, PROMPT.len()])?;
    cases.add(format!("{prefix}/encode"), || {
        Ok(vec![encoder.forward(&prompt, None)?])
    })?;
    cases.add(format!("{prefix}/padded"), || {
        let tokens = ids(&[5, 42, 17, 99, 3, 1, 1, 33, 77, 21], &[2, 5])?;
        let mask = Tensor::new(&[[1i64, 1, 1, 1, 1], [0, 0, 1, 1, 1]], &Device::Cpu)?;
        Ok(vec![encoder.forward(&tokens, Some(&mask))?])
    })?;
    Ok(())
}
