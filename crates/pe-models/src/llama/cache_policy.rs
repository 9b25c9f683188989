//! [`CachePolicy`]: bounded KV caches for endless generation with [`LlamaFamily`](crate::LlamaFamily),
//! and the bookkeeping of where each cached token sits.
//!
//! - [`CachePolicy::Sink`] keeps the first `sink` tokens (the attention sinks) and the last
//!   `window` ones. With [`SinkPositions::Contiguous`] (StreamingLLM) a token's position is its
//!   index in the cache: an eviction moves every later key back, and the new token follows the
//!   last one kept. With [`SinkPositions::Transformers`] the positions are those of transformers
//!   4.52.4's `SinkCache` driven by `model(ids, past_key_values=cache)`: a new token sits at the
//!   cache's length before it, and each step that reaches `sink + window` moves the tokens it
//!   keeps back by the number of new tokens, whatever their positions were (so positions repeat
//!   and leave gaps; users of that class reproduce its outputs with it).
//! - [`CachePolicy::Keep`] is llama.cpp's context shift: with `size` tokens held, a step that
//!   does not fit keeps the first `keep`, drops half of the rest and moves the remainder back.
//!   With M-RoPE (Qwen2-VL), each token holds three ids (temporal, height, width) and the
//!   remainder moves back on all three by the positions the dropped tokens spanned (their count
//!   for text; an image run spans fewer positions than it has tokens), so it follows the kept
//!   tokens as it followed the dropped ones.
//!
//! Kept keys are rotated again from the keys before rotation, at their new positions, so a key
//! is always one rounding from its exact rotation, after any number of evictions.
//!
//! ```
//! use candle_core::{DType, Device, Tensor};
//! use pe_models::{CachePolicy, LlamaFamily, SinkPositions};
//!
//! let dir = pe_testkit::fixture("models/llama31");
//! let policy = CachePolicy::Sink { sink: 4, window: 12, positions: SinkPositions::Contiguous };
//! let mut model = LlamaFamily::from_dir(dir, DType::F32, &Device::Cpu)?.with_cache_policy(policy)?;
//! let mut next = 5u32;
//! for _ in 0..40 {
//!     let logits = model.forward_stream(&Tensor::new(&[[next]], &Device::Cpu)?)?;
//!     next = logits.squeeze(0)?.squeeze(0)?.argmax(0)?.to_scalar::<u32>()?;
//! }
//! assert_eq!(model.kv_len(), 16); // bounded
//! assert_eq!(model.cache_positions(), (0..16).collect::<Vec<i64>>());
//! # Ok::<(), anyhow::Error>(())
//! ```

use std::ops::Range;

use anyhow::{bail, Result};

/// How [`LlamaFamily::forward_stream`](crate::LlamaFamily::forward_stream) bounds the KV cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CachePolicy {
    /// Keep the first `sink` tokens and the last `window` ones.
    Sink {
        /// Tokens kept from the start.
        sink: usize,
        /// Most recent tokens kept.
        window: usize,
        /// Where the kept tokens sit.
        positions: SinkPositions,
    },
    /// llama.cpp's context shift: hold at most `size` tokens; when a step does not fit, keep the
    /// first `keep`, drop half of the others (the oldest) and move the rest back.
    Keep {
        /// Tokens kept from the start.
        keep: usize,
        /// Tokens held at most (llama.cpp's context size).
        size: usize,
    },
}

/// The positions of a [`CachePolicy::Sink`] cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum SinkPositions {
    /// StreamingLLM: each token at its index in the cache.
    #[default]
    Contiguous,
    /// transformers 4.52.4's `SinkCache` bookkeeping (`window_length = sink + window`).
    Transformers,
}

impl CachePolicy {
    /// Checks the sizes.
    pub fn check(&self) -> Result<()> {
        match *self {
            CachePolicy::Sink { window: 0, .. } => bail!("--window must be at least 1, got 0"),
            CachePolicy::Sink {
                sink,
                window,
                positions: SinkPositions::Transformers,
            } if window < 2 => bail!(
                "--window must be at least 2 with --sink-positions transformers (SinkCache keeps window_length - sink - 1 tokens besides the sinks), got --sink {sink} --window {window}"
            ),
            CachePolicy::Keep { keep, size } if keep + 2 > size => bail!(
                "--keep {keep} leaves nothing to shift in a context of {size} tokens: it must be at most {} (the context size - 2)",
                size.saturating_sub(2)
            ),
            _ => Ok(()),
        }
    }
}

/// What a step does to the cache before the new tokens join it: drop the tokens at `drop`, then
/// the tokens at `moved` (indices after the drop) take new positions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Surgery {
    pub drop: Range<usize>,
    pub moved: Range<usize>,
}

/// The positions of the tokens a [`CachePolicy`] cache holds.
#[derive(Clone, Debug)]
pub(crate) struct Stream {
    pub policy: CachePolicy,
    /// The position of every token held, in cache order (the same for every row of a batch).
    pub positions: Vec<i64>,
    /// With M-RoPE, the ids (temporal, height, width) of every token held, in cache order.
    pub mrope: Vec<[i64; 3]>,
}

impl Stream {
    pub fn new(policy: CachePolicy) -> Self {
        Self {
            policy,
            positions: Vec::new(),
            mrope: Vec::new(),
        }
    }

    /// Forgets every token held.
    pub fn clear(&mut self) {
        self.positions.clear();
        self.mrope.clear();
    }

    /// [`before`](Self::before) a step of M-RoPE ids `chunk`, given from 0 at the step's start
    /// (as `get_rope_index` gives a prompt's): the surgery and the new tokens' ids, `chunk` moved
    /// past the largest id held. The ids held are updated as `positions` are: after a
    /// [`CachePolicy::Keep`] shift, the tokens moved back by the positions between the kept
    /// ones' largest id and their own smallest (the dropped tokens' span).
    pub fn before_mrope(&mut self, chunk: &[[i64; 3]]) -> Result<(Option<Surgery>, Vec<[i64; 3]>)> {
        let (surgery, _) = self.before(chunk.len())?;
        let ids = &mut self.mrope;
        if let Some(s) = &surgery {
            ids.drain(s.drop.clone());
            // The kept tokens end before `next`; the moved ones start at `first`.
            let next = ids[..s.moved.start]
                .iter()
                .flatten()
                .max()
                .map_or(0, |m| m + 1);
            if let Some(&first) = ids[s.moved.clone()].iter().flatten().min() {
                let delta = (first - next).max(0);
                for id in &mut ids[s.moved.clone()] {
                    *id = id.map(|v| v - delta);
                }
            }
        }
        let next = ids.iter().flatten().max().map_or(0, |m| m + 1);
        let new: Vec<[i64; 3]> = chunk.iter().map(|id| id.map(|v| v + next)).collect();
        ids.extend(&new);
        Ok((surgery, new))
    }

    /// Before a step of `n` tokens: the surgery (if any) and the new tokens' positions. The
    /// positions held are updated to those after the surgery, the new tokens' included.
    pub fn before(&mut self, n: usize) -> Result<(Option<Surgery>, Vec<i64>)> {
        let len = self.positions.len();
        let surgery = match self.policy {
            CachePolicy::Sink {
                sink,
                window,
                positions: SinkPositions::Contiguous,
            } => contiguous_sink(sink, window, len, n),
            CachePolicy::Sink {
                sink,
                window,
                positions: SinkPositions::Transformers,
            } => transformers_sink(sink, window, len, n)?,
            CachePolicy::Keep { keep, size } => context_shift(keep, size, len, n)?,
        };
        let transformers = matches!(
            self.policy,
            CachePolicy::Sink {
                positions: SinkPositions::Transformers,
                ..
            }
        );
        if let Some(s) = &surgery {
            // transformers' SinkCache moves the kept tokens back by the new tokens' count.
            let delta = match transformers {
                true => n as i64,
                false => s.drop.len() as i64,
            };
            self.positions.drain(s.drop.clone());
            for p in &mut self.positions[s.moved.clone()] {
                *p -= delta;
            }
        }
        let first = match transformers {
            true => len as i64,
            // The index after the last token held.
            false => self.positions.len() as i64,
        };
        let new: Vec<i64> = (first..first + n as i64).collect();
        self.positions.extend(&new);
        Ok((surgery, new))
    }

    /// After a step: the surgery that brings a prompt longer than a contiguous sink cache back
    /// to `sink + window` tokens (transformers' SinkCache holds it all until the next step).
    pub fn after(&mut self) -> Option<Surgery> {
        let len = self.positions.len();
        let CachePolicy::Sink {
            sink,
            window,
            positions: SinkPositions::Contiguous,
        } = self.policy
        else {
            return None;
        };
        let evict = len.checked_sub(sink + window).filter(|&e| e > 0)?;
        self.positions.drain(sink..sink + evict);
        for p in &mut self.positions[sink..] {
            *p -= evict as i64;
        }
        Some(Surgery {
            drop: sink..sink + evict,
            moved: sink..len - evict,
        })
    }
}

/// The surgery of a StreamingLLM sink cache before `n` new tokens join `len` held: the oldest
/// tokens after the `sink` first ones leave so that at most `sink + window` remain, the rest
/// move back.
fn contiguous_sink(sink: usize, window: usize, len: usize, n: usize) -> Option<Surgery> {
    let capacity = sink + window;
    let evict = (len + n)
        .saturating_sub(capacity)
        .min(len.saturating_sub(sink));
    (len > 0 && evict > 0).then(|| Surgery {
        drop: sink..sink + evict,
        moved: sink..len - evict,
    })
}

/// The surgery of transformers' `SinkCache(window_length = sink + window)`: it grows while
/// `n + len < window_length`, and otherwise keeps `cache[-window_length + sink + n:]` besides
/// the sinks (rotated back by `n` positions, [`Stream::before`]).
fn transformers_sink(sink: usize, window: usize, len: usize, n: usize) -> Result<Option<Surgery>> {
    let total = sink + window;
    if len == 0 || n + len < total {
        return Ok(None);
    }
    let from = len as i64 - (total - sink - n) as i64;
    if (total as i64) < (sink + n) as i64 || from < sink as i64 {
        bail!(
            "a step of {n} tokens on {len} cached ones would make transformers' SinkCache (window_length {total}, {sink} sink tokens) repeat its sink tokens; feed fewer tokens at once"
        )
    }
    Ok(Some(Surgery {
        drop: sink..from as usize,
        moved: sink..sink + (len - from as usize),
    }))
}

/// The surgery of llama.cpp's context shift before `n` new tokens join `len` held in a context
/// of `size`: when they do not fit, keep the first `keep`, drop half of the others, move the
/// rest back.
fn context_shift(keep: usize, size: usize, len: usize, n: usize) -> Result<Option<Surgery>> {
    if n > size {
        bail!("a step of {n} tokens does not fit a context of {size} tokens")
    }
    if len + n <= size {
        return Ok(None);
    }
    let discard = (len - keep.min(len)) / 2;
    if len - discard + n > size {
        bail!(
            "a step of {n} tokens does not fit a context of {size} tokens after a context shift (keep {keep}, {len} held)"
        )
    }
    Ok(Some(Surgery {
        drop: keep..keep + discard,
        moved: keep..len - discard,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(policy: CachePolicy, steps: &[usize]) -> Vec<Vec<i64>> {
        let mut stream = Stream::new(policy);
        steps
            .iter()
            .map(|&n| {
                stream.before(n).unwrap();
                stream.after();
                stream.positions.clone()
            })
            .collect()
    }

    #[test]
    fn contiguous_positions_are_cache_indices() {
        let policy = CachePolicy::Sink {
            sink: 2,
            window: 3,
            positions: SinkPositions::Contiguous,
        };
        let seen = run(policy, &[3, 1, 1, 1, 1]);
        assert_eq!(seen[0], [0, 1, 2]);
        assert_eq!(seen[2], [0, 1, 2, 3, 4]);
        assert_eq!(seen[4], [0, 1, 2, 3, 4]);
        // A prompt longer than the cache is cut back after its forward.
        assert_eq!(run(policy, &[9])[0], [0, 1, 2, 3, 4]);
    }

    /// SinkCache(window_length = 8, num_sink_tokens = 2), a prompt of 5 then one token a step:
    /// the step that reaches 8 moves the 5 non-sink tokens back by one although none was
    /// dropped, so position 1 repeats.
    #[test]
    fn transformers_positions_follow_sink_cache() {
        let policy = CachePolicy::Sink {
            sink: 2,
            window: 6,
            positions: SinkPositions::Transformers,
        };
        let seen = run(policy, &[5, 1, 1, 1, 1]);
        assert_eq!(seen[1], [0, 1, 2, 3, 4, 5]);
        assert_eq!(seen[2], [0, 1, 2, 3, 4, 5, 6]);
        assert_eq!(seen[3], [0, 1, 1, 2, 3, 4, 5, 7]);
        assert_eq!(seen[4], [0, 1, 1, 2, 3, 4, 6, 8]);
        // A prompt longer than the window is held whole until the next step.
        let seen = run(policy, &[10, 1]);
        assert_eq!(seen[0], (0..10).collect::<Vec<_>>());
        assert_eq!(seen[1], [0, 1, 4, 5, 6, 7, 8, 10]);
    }

    #[test]
    fn keep_drops_half_of_the_rest() {
        let policy = CachePolicy::Keep { keep: 2, size: 8 };
        let seen = run(policy, &[8, 1]);
        // 6 after the kept 2: 3 dropped, 3 moved back, the new token after them.
        assert_eq!(seen[1], [0, 1, 2, 3, 4, 5]);
        let mut stream = Stream::new(policy);
        assert!(stream.before(9).is_err());
    }

    /// M-RoPE: the rest moves back by the span of the dropped ids, not their count; a run cut
    /// by the drop keeps its ids when it already follows the kept ones.
    #[test]
    fn keep_moves_mrope_ids_by_the_span_dropped() {
        let image = [[0, 0, 0], [0, 0, 1], [0, 1, 0], [0, 1, 1]];
        let text = |n: i64| (0..n).map(|p| [p; 3]).collect::<Vec<_>>();
        let mut stream = Stream::new(CachePolicy::Keep { keep: 0, size: 8 });
        stream.before_mrope(&image).unwrap();
        stream.before_mrope(&text(4)).unwrap();
        assert_eq!(stream.mrope[4..], [[2; 3], [3; 3], [4; 3], [5; 3]]);
        // The image's 4 tokens spanned 2 positions.
        let (_, new) = stream.before_mrope(&text(1)).unwrap();
        assert_eq!(stream.mrope, [[0; 3], [1; 3], [2; 3], [3; 3], [4; 3]]);
        assert_eq!(new, [[4; 3]]);

        let mut stream = Stream::new(CachePolicy::Keep { keep: 1, size: 6 });
        stream.before_mrope(&text(1)).unwrap();
        stream.before_mrope(&image).unwrap();
        stream.before_mrope(&text(1)).unwrap();
        stream.before_mrope(&text(1)).unwrap();
        assert_eq!(stream.mrope, [[0; 3], [1, 2, 1], [1, 2, 2], [3; 3], [4; 3]]);
    }
}
