//! [`greedy`]: greedy decoding with a [`LlamaFamily`] and its KV cache, as transformers'
//! `generate(do_sample=False)` for one sequence: it stops after `max_new` tokens or at an
//! end-of-sequence id ([`eos_token_ids`](crate::eos_token_ids) reads a checkpoint's), and
//! times each phase.
//!
//! ```
//! use candle_core::{DType, Device};
//! use pe_models::{greedy, LlamaFamily};
//!
//! let dir = pe_testkit::fixture("models/llama31");
//! let mut model = LlamaFamily::from_dir(dir, DType::F32, &Device::Cpu)?;
//! // The prompt at positions 100..103, then four new tokens at 103, 104, ...
//! let out = greedy(&mut model, &[5, 6, 7], 100, 4, &[], |_| {})?;
//! assert_eq!(out.ids.len(), 4);
//!
//! // The same, stopping at the second id: it ends the output, as in transformers.
//! let eos = out.ids[1];
//! let stopped = greedy(&mut model, &[5, 6, 7], 100, 4, &[eos], |_| {})?;
//! assert!(stopped.ended_at_eos && stopped.ids.last() == Some(&eos));
//! println!("decode: {:.0} tokens/s", out.decode_tokens_per_second());
//! # Ok::<(), anyhow::Error>(())
//! ```

use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use candle_core::{DType, Device, IndexOp, Tensor};
use candle_pe_core::MAX_POSITION;

use crate::LlamaFamily;

/// The tokens [`greedy`] generated and how long each phase took.
#[derive(Clone, Debug, PartialEq)]
pub struct Generation {
    /// The new token ids, the prompt excluded; an end-of-sequence id that stopped the
    /// generation is the last.
    pub ids: Vec<u32>,
    /// Whether the generation ended at an end-of-sequence id (the last of `ids`).
    pub ended_at_eos: bool,
    /// The prompt's forward pass and the pick of the first new token.
    pub prefill: Duration,
    /// The cached one-token steps that picked the other new tokens.
    pub decode: Duration,
    /// Prompt tokens.
    pub prompt_len: usize,
}

impl Generation {
    /// Prompt tokens per second of the prefill (0 when it did not run: an empty prompt or
    /// `max_new == 0`).
    pub fn prefill_tokens_per_second(&self) -> f64 {
        rate(self.prompt_len, self.prefill)
    }

    /// Cached steps per second (each one feeds a token and picks the next); 0 when fewer than
    /// two tokens were generated.
    pub fn decode_tokens_per_second(&self) -> f64 {
        rate(self.ids.len().saturating_sub(1), self.decode)
    }
}

fn rate(tokens: usize, time: Duration) -> f64 {
    match tokens == 0 || time.is_zero() {
        true => 0.0,
        false => tokens as f64 / time.as_secs_f64(),
    }
}

/// Generates up to `max_new` tokens after `prompt`, each the argmax of the last logits, the
/// prompt at positions `first_position ..` and every new token at the next position (as
/// transformers' `position_ids`). It stops early after picking any id of `eos` (kept as the
/// last id); an empty `eos` never stops early. The model's KV cache is cleared first and holds
/// the sequence afterwards. `on_token` sees each new id as it is picked.
///
/// With a [`CachePolicy`](crate::CachePolicy) the cache chooses the positions
/// ([`LlamaFamily::forward_stream`]), `first_position` must be 0, and the generation may run
/// past the model's context.
///
/// An empty prompt or `max_new == 0` generates nothing (there are no logits to pick from).
/// Errors name the prompt id past the vocabulary, or the position past 2^31 - 1.
pub fn greedy(
    model: &mut LlamaFamily,
    prompt: &[u32],
    first_position: u32,
    max_new: usize,
    eos: &[u32],
    mut on_token: impl FnMut(u32),
) -> Result<Generation> {
    let generates = !prompt.is_empty() && max_new > 0;
    let stream = model.cache_policy().is_some();
    check_request(model, prompt, first_position, max_new)?;
    let mut out = Generation {
        ids: Vec::with_capacity(if generates { max_new } else { 0 }),
        ended_at_eos: false,
        prefill: Duration::ZERO,
        decode: Duration::ZERO,
        prompt_len: prompt.len(),
    };
    model.clear_cache();
    if !generates {
        return Ok(out);
    }
    let device = model.device().clone();
    let start = Instant::now();
    let ids = Tensor::new(prompt, &device)?.unsqueeze(0)?;
    let end = first_position + prompt.len() as u32;
    // Position ids stay on the host, whatever the model's device: checked there, and one run
    // from an offset, they cost a GPU no transfer and no read back.
    let positions = Tensor::arange(first_position, end, &Device::Cpu)?.unsqueeze(0)?;
    // Only the last position's logits: the next token's.
    let mut step = |ids: &Tensor, positions: &Tensor| match stream {
        true => model.forward_stream_last(ids),
        false => model.forward_last(ids, positions),
    };
    let mut next = pick(&step(&ids, &positions)?)?;
    out.prefill = start.elapsed();
    out.ids.push(next);
    on_token(next);
    let start = Instant::now();
    for i in 0..max_new - 1 {
        if eos.contains(&next) {
            break;
        }
        let ids = Tensor::new(&[[next]], &device)?;
        // Unused with a cache policy, whose positions may run past 2^31 - 1 tokens.
        let position = end.wrapping_add(i as u32);
        let positions = Tensor::new(&[[position]], &Device::Cpu)?;
        next = pick(&step(&ids, &positions)?)?;
        out.ids.push(next);
        on_token(next);
    }
    out.decode = start.elapsed();
    out.ended_at_eos = eos.contains(&next);
    Ok(out)
}

/// Fails on a [`greedy`] request the model cannot run: a prompt id past the vocabulary, a first
/// position other than 0 with a cache policy, or (without one) positions past the largest
/// supported; checked before anything is reserved for the new ids.
fn check_request(
    model: &LlamaFamily,
    prompt: &[u32],
    first_position: u32,
    max_new: usize,
) -> Result<()> {
    let vocab = model.config().vocab_size;
    if let Some((i, id)) = prompt
        .iter()
        .enumerate()
        .find(|(_, &id)| id as usize >= vocab)
    {
        bail!("prompt id {id} (index {i}) is not below the vocabulary size {vocab}")
    }
    let generates = !prompt.is_empty() && max_new > 0;
    let stream = model.cache_policy().is_some();
    if stream && first_position != 0 {
        bail!("first position {first_position}: with a cache policy the positions are the cache's, from 0")
    }
    // Positions fed: the prompt's and those of every new token but the last.
    let fed = prompt.len() as u128 + max_new as u128;
    let last = u128::from(first_position) + fed.saturating_sub(2);
    if generates && !stream && last >= u128::from(MAX_POSITION) {
        bail!(
            "first position {first_position} + {} prompt tokens + {max_new} new tokens reach position {last}, past the largest supported position {}",
            prompt.len(),
            MAX_POSITION - 1
        )
    }
    Ok(())
}

/// The argmax of the last position of `(1, seq, vocab)` logits.
fn pick(logits: &Tensor) -> Result<u32> {
    let seq = logits.dim(1)?;
    let last = logits.i((0, seq - 1))?.to_dtype(DType::F32)?;
    Ok(last.argmax(0)?.to_scalar::<u32>()?)
}
