//! [`UnrotatedKeys`]: a layer's keys before rotation, which a [`CachePolicy`](crate::CachePolicy)
//! rotates again when it moves them (`streaming.rs`); the attention records them as it
//! computes them.

use anyhow::Result;
use candle_core::Tensor;

use super::kv_buffer::KvBuffer;

/// A layer's keys before rotation, kept for a policy that moves keys: the cached ones, from
/// which a kept key is rotated again at its new position, and the last step's.
#[derive(Clone, Debug)]
pub(super) struct UnrotatedKeys {
    /// The cached keys before rotation, `(batch, kv_heads, len, head_dim)`.
    pub(super) keys: KvBuffer,
    /// The keys before rotation and the values of the last step's new tokens, as computed.
    pub(super) fresh: Option<(Tensor, Tensor)>,
}

impl Default for UnrotatedKeys {
    fn default() -> Self {
        Self {
            keys: KvBuffer::new(2),
            fresh: None,
        }
    }
}

impl UnrotatedKeys {
    /// Keeps a step's keys before rotation and its values.
    pub(super) fn record(&mut self, keys: &Tensor, values: &Tensor) -> Result<()> {
        self.fresh = Some((keys.clone(), values.clone()));
        self.keys.append(keys)
    }

    /// Forgets every key (a new sequence).
    pub(super) fn clear(&mut self) {
        self.keys.clear();
        self.fresh = None;
    }
}
