//! The [`LlamaFamily`] decoder with a KV cache bounded by a [`CachePolicy`]: the policy chooses
//! the new tokens' positions, drops the tokens it evicts and rotates the keys it moves again at
//! their new positions, in every layer's cache, before the layers run as they always do.
//! (`llama.rs` is the decoder; this is what a policy adds around it.)

use anyhow::{bail, Context, Result};
use candle_core::{DType, Device, Tensor};
use candle_pe_nn::At;
use candle_pe_nn::Positions;

use super::cache_policy::{CachePolicy, Stream, Surgery};
use super::unrotated::UnrotatedKeys;
use super::{Attention, LlamaFamily, Logits};
use crate::layers::Mask;

impl LlamaFamily {
    /// The same model bounding its KV cache by `policy` (see [`CachePolicy`]): generation then
    /// goes through [`forward_stream`](Self::forward_stream), which chooses the positions, and
    /// can go on past the model's context. The policy replaces the config's sliding window.
    /// The cache is cleared.
    pub fn with_cache_policy(mut self, policy: CachePolicy) -> Result<Self> {
        policy.check()?;
        if self.is_mrope() && !matches!(policy, CachePolicy::Keep { .. }) {
            bail!(
                "an M-RoPE model bounds its cache by a context shift (--keep) only, got {policy:?}"
            )
        }
        if let Some(c) = self.config.attention_chunk_size {
            bail!(
                "a cache policy is not supported with chunked attention (attention_chunk_size {c})"
            )
        }
        self.stream = Some(Stream::new(policy));
        for layer in &mut self.layers {
            // The policy chooses what the cache drops: no window trims it.
            layer.attn.window = None;
            layer.attn.unrotated = Some(UnrotatedKeys::default());
        }
        self.clear_cache();
        Ok(self)
    }

    /// The cache policy, if the cache is bounded by one.
    pub fn cache_policy(&self) -> Option<CachePolicy> {
        self.stream.as_ref().map(|s| s.policy)
    }

    /// With a cache policy and M-RoPE, the ids (temporal, height, width) of each token held, in
    /// cache order (the keys held are rotated at them); empty otherwise.
    pub fn cache_mrope_positions(&self) -> Vec<[i64; 3]> {
        self.stream
            .as_ref()
            .map_or_else(Vec::new, |s| s.mrope.clone())
    }

    /// With a cache policy, the position of each token held, in cache order (the keys held are
    /// rotated at them; with M-RoPE, its index in the cache); empty otherwise.
    pub fn cache_positions(&self) -> Vec<i64> {
        self.stream
            .as_ref()
            .map_or_else(Vec::new, |s| s.positions.clone())
    }

    /// With a cache policy, layer `layer`'s keys before rotation and values of the tokens of the
    /// last [`forward_stream`](Self::forward_stream), as they were computed, `(batch, kv_heads,
    /// seq, head_dim)` each.
    pub fn fresh_kv(&self, layer: usize) -> Option<(Tensor, Tensor)> {
        self.layers
            .get(layer)?
            .attn
            .unrotated
            .as_ref()?
            .fresh
            .clone()
    }

    /// The logits `(batch, seq, vocab)` of `input_ids` `(batch, seq)` appended to a cache bounded
    /// by the [`CachePolicy`] (every row at the same positions, no padding): the policy
    /// chooses the new tokens' positions, drops the tokens it evicts and rotates the keys it
    /// moves again at their new positions, in every layer, before the new tokens attend to the
    /// cache (all of it, and the new tokens causally). On an error the cache should be
    /// cleared. With M-RoPE the tokens are text, after the largest id held.
    pub fn forward_stream(&mut self, input_ids: &Tensor) -> Result<Tensor> {
        self.stream_step(input_ids, None, Logits::Every)
    }

    /// [`Self::forward_stream`] with the logits of the last position alone, `(batch, 1,
    /// vocab)` ([`Self::forward_last`]'s twin).
    pub(crate) fn forward_stream_last(&mut self, input_ids: &Tensor) -> Result<Tensor> {
        self.stream_step(input_ids, None, Logits::Last)
    }

    /// [`forward_stream`](Self::forward_stream) for an M-RoPE model, with the tokens' ids
    /// `position_ids` `(3, batch, seq)` counted from 0 at the first of them (as
    /// [`candle_pe_formats::QwenVlConfig::positions`] gives a prompt's, image runs included; every
    /// row of the batch the same): they are moved past the largest id held.
    pub fn forward_stream_mrope(
        &mut self,
        input_ids: &Tensor,
        position_ids: &Tensor,
    ) -> Result<Tensor> {
        let (b, s) = input_ids
            .dims2()
            .context("input_ids must be (batch, seq)")?;
        if !self.is_mrope() {
            bail!("forward_stream_mrope needs an M-RoPE model (a rope with mrope_section)")
        }
        if position_ids.dims() != [3, b, s] {
            bail!(
                "position_ids must be (3, batch, seq) = [3, {b}, {s}], got {:?}",
                position_ids.dims()
            )
        }
        Positions::new(position_ids)?;
        let values = position_ids
            .to_dtype(DType::I64)?
            .flatten_all()?
            .to_vec1::<i64>()?;
        let at = |axis: usize, row: usize, t: usize| values[(axis * b + row) * s + t];
        if (0..b).any(|row| (0..3).any(|a| (0..s).any(|t| at(a, row, t) != at(a, 0, t)))) {
            bail!("position_ids must be the same for every row of the batch (a bounded cache holds one stream)")
        }
        let chunk: Vec<[i64; 3]> = (0..s)
            .map(|t| [at(0, 0, t), at(1, 0, t), at(2, 0, t)])
            .collect();
        self.stream_step(input_ids, Some(chunk), Logits::Every)
    }

    /// A step of a bounded cache: `chunk` the new tokens' M-RoPE ids from 0 (text when `None`),
    /// with the logits `keep` asks for.
    fn stream_step(
        &mut self,
        input_ids: &Tensor,
        chunk: Option<Vec<[i64; 3]>>,
        keep: Logits,
    ) -> Result<Tensor> {
        let (b, s) = input_ids
            .dims2()
            .context("input_ids must be (batch, seq)")?;
        if self.stream.is_none() {
            bail!("forward_stream needs a cache policy (with_cache_policy)")
        }
        if b == 0 || s == 0 {
            return self.no_logits(b, s, input_ids.device());
        }
        candle_pe_core::check_tokens(input_ids, self.config.vocab_size)?;
        let device = input_ids.device().clone();
        let (surgery, moved, positions) = self.step_positions(b, s, chunk, &device)?;
        let held = self.cached_positions() - s;
        let mask = causal_mask(b, s, held, &device)?;
        let mut x = self.embed_tokens(input_ids)?;
        // Each layer's cache moves before its layer reads it.
        if let (Some(surgery), Some(moved)) = (&surgery, &moved) {
            for layer in &mut self.layers {
                layer.attn.operate(surgery, moved)?;
            }
        }
        for layer in &mut self.layers {
            x = layer.forward(&x, &positions, mask.as_ref())?;
        }
        self.cached += s;
        self.after_step(b, &device)?;
        self.logits(&x, keep)
    }

    /// The tokens the policy holds, the step's new ones included.
    fn cached_positions(&self) -> usize {
        self.stream.as_ref().map_or(0, |s| s.positions.len())
    }

    /// The policy's move before a step of `s` tokens (`chunk`: their M-RoPE ids from 0; text
    /// when `None`): the surgery, the positions the moved tokens go to, and the new tokens'
    /// positions, each for the `b` rows.
    fn step_positions(
        &mut self,
        b: usize,
        s: usize,
        chunk: Option<Vec<[i64; 3]>>,
        device: &Device,
    ) -> Result<(Option<Surgery>, Option<Positions>, Positions)> {
        let mrope = self.is_mrope();
        let Some(stream) = self.stream.as_mut() else {
            bail!("forward_stream needs a cache policy (with_cache_policy)")
        };
        if mrope {
            let chunk = chunk.unwrap_or_else(|| (0..s as i64).map(|p| [p; 3]).collect());
            let (surgery, new) = stream.before_mrope(&chunk)?;
            let moved = match &surgery {
                Some(sg) => Some(mrope_rows(&stream.mrope[sg.moved.clone()], b, device)?),
                None => None,
            };
            return Ok((surgery, moved, mrope_rows(&new, b, device)?));
        }
        let (surgery, new) = stream.before(s)?;
        let moved = match &surgery {
            Some(sg) => Some(text_rows(&stream.positions[sg.moved.clone()], b, device)?),
            None => None,
        };
        Ok((surgery, moved, text_rows(&new, b, device)?))
    }

    /// The policy's move after a step (a prompt longer than a sink cache cut back to it), in
    /// every layer.
    fn after_step(&mut self, b: usize, device: &Device) -> Result<()> {
        let Some(stream) = self.stream.as_mut() else {
            return Ok(());
        };
        if let Some(sg) = stream.after() {
            let moved = text_rows(&stream.positions[sg.moved.clone()], b, device)?;
            for layer in &mut self.layers {
                layer.attn.operate(&sg, &moved)?;
            }
        }
        Ok(())
    }
}

/// Text positions `values`, the same on each of the `b` rows: `(b, n)`.
fn text_rows(values: &[i64], b: usize, device: &Device) -> Result<Positions> {
    let n = values.len();
    let t = Tensor::from_slice(values, (1, n), device)?.repeat((b, 1))?;
    Ok(Positions::new(&t)?)
}

/// M-RoPE ids `values`, each token's three on its rows, the same for each of the `b` rows:
/// `(3, b, n)`.
fn mrope_rows(values: &[[i64; 3]], b: usize, device: &Device) -> Result<Positions> {
    let n = values.len();
    let data: Vec<i64> = (0..3)
        .flat_map(|a| values.iter().map(move |id| id[a]))
        .collect();
    let t = Tensor::from_vec(data, (3, 1, n), device)?.repeat((1, b, 1))?;
    Ok(Positions::new(&t)?)
}

/// The mask of `s` new tokens after `held` cached ones, each seeing every cached token and the
/// new ones up to itself: `(b, 1, s, held + s)`; `None` for a single token, which sees all.
fn causal_mask(b: usize, s: usize, held: usize, device: &Device) -> Result<Option<Mask>> {
    if s == 1 {
        return Ok(None);
    }
    let data: Vec<u8> = (0..s)
        .flat_map(|t| (0..held + s).map(move |j| u8::from(j <= held + t)))
        .collect();
    let one = Tensor::from_vec(data, (1, 1, s, held + s), device)?;
    Ok(Some(Mask::new(one.repeat((b, 1, 1, 1))?)?))
}

impl Attention {
    /// Drops the tokens `surgery.drop` from the cache and rotates the keys of `surgery.moved`
    /// again, from their keys before rotation, at `moved` `(batch, moved)` (M-RoPE: `(3, batch,
    /// moved)`), as the new keys are rotated: one rounding from the exact rotation at the new
    /// position, however often a token moves.
    fn operate(&mut self, surgery: &Surgery, moved: &Positions) -> Result<()> {
        let Some(unrotated) = &mut self.unrotated else {
            return Ok(());
        };
        let len = unrotated.keys.len();
        if len == 0 {
            return Ok(());
        }
        let drop = &surgery.drop;
        if !drop.is_empty() && drop.end <= len {
            self.keys.remove(drop.clone())?;
            self.values.remove(drop.clone())?;
            unrotated.keys.remove(drop.clone())?;
        }
        let m = surgery.moved.len();
        if let (true, Some(unrotated)) = (m > 0, unrotated.keys.get()?) {
            let keys = unrotated.narrow(2, surgery.moved.start, m)?.contiguous()?;
            let turned = match (self.rotary.rotary(), moved.dims().len()) {
                (Some(rotary), 3) => rotary.apply_k(&keys, At::mrope(moved))?,
                (Some(rotary), _) => rotary.apply_k(&keys, moved)?,
                // A NoPE layer's keys stay as they are wherever they move.
                (None, _) => keys,
            };
            self.keys.write(surgery.moved.start, &turned)?;
        }
        Ok(())
    }
}
