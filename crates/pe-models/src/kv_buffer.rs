//! [`KvBuffer`]: the keys or the values a KV cache holds, in a tensor with room to grow, so that
//! a decode step writes its new tokens in place instead of copying the whole cache.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use anyhow::{Context, Result};
use candle_core::Tensor;

/// The tokens a KV cache holds along `axis` of a larger tensor: its rows `start .. start + len`
/// along that axis; the rest is room. Appending writes after the tokens held; when the room runs
/// out they move to the front of a new tensor, twice as long when they need more, so that each
/// token is copied a bounded number of times on average. Dropping a range moves the shorter side
/// of it.
///
/// A clone shares the tensor until either of them writes: the writer copies it first.
#[derive(Debug)]
pub(crate) struct KvBuffer {
    buffer: Option<Tensor>,
    axis: usize,
    start: usize,
    len: usize,
    shared: AtomicBool,
}

impl Clone for KvBuffer {
    fn clone(&self) -> Self {
        self.shared.store(true, Relaxed);
        Self {
            buffer: self.buffer.clone(),
            axis: self.axis,
            start: self.start,
            len: self.len,
            shared: AtomicBool::new(true),
        }
    }
}

impl KvBuffer {
    /// An empty cache of tokens along `axis`.
    pub fn new(axis: usize) -> Self {
        Self {
            buffer: None,
            axis,
            start: 0,
            len: 0,
            shared: AtomicBool::new(false),
        }
    }

    /// How many tokens it holds.
    pub fn len(&self) -> usize {
        self.len
    }

    /// The tokens held (a view into the buffer, valid until the next write), `None` when empty.
    pub fn get(&self) -> Result<Option<Tensor>> {
        Ok(match &self.buffer {
            Some(buffer) if self.len > 0 => Some(buffer.narrow(self.axis, self.start, self.len)?),
            _ => None,
        })
    }

    /// Appends the tokens of `t` (contiguous; its other dimensions those of the tokens held).
    pub fn append(&mut self, t: &Tensor) -> Result<()> {
        let n = t.dim(self.axis)?;
        let buffer = self.reserve(n, t)?;
        buffer.slice_set(t, self.axis, self.start + self.len)?;
        self.len += n;
        Ok(())
    }

    /// Writes the tokens of `t` (contiguous) over those held from index `at`.
    pub fn write(&mut self, at: usize, t: &Tensor) -> Result<()> {
        let buffer = self.reserve(0, t)?;
        buffer.slice_set(t, self.axis, self.start + at)?;
        Ok(())
    }

    /// Keeps the last `n` tokens held at most.
    pub fn keep_last(&mut self, n: usize) {
        if self.len > n {
            self.start += self.len - n;
            self.len = n;
        }
    }

    /// Drops the tokens held at indices `range`.
    pub fn remove(&mut self, range: Range<usize>) -> Result<()> {
        let (axis, gone) = (self.axis, range.len());
        let Some(buffer) = self.buffer.clone() else {
            return Ok(());
        };
        let buffer = self.reserve(0, &buffer)?;
        let (head, tail) = (range.start, self.len - range.end);
        // A copy first: slice_set does not read the tensor it writes.
        if head <= tail {
            if head > 0 {
                let moved = buffer.narrow(axis, self.start, head)?.force_contiguous()?;
                buffer.slice_set(&moved, axis, self.start + gone)?;
            }
            self.start += gone;
        } else if tail > 0 {
            let moved = buffer
                .narrow(axis, self.start + range.end, tail)?
                .force_contiguous()?;
            buffer.slice_set(&moved, axis, self.start + range.start)?;
        }
        self.len -= gone;
        Ok(())
    }

    /// Drops every token.
    pub fn clear(&mut self) {
        *self = Self::new(self.axis);
    }

    /// The buffer, with room for `n` tokens after those held and written to by this cache only
    /// (the first, shaped like `like` but along the axis).
    fn reserve(&mut self, n: usize, like: &Tensor) -> Result<Tensor> {
        let capacity = match &self.buffer {
            Some(buffer) => buffer.dim(self.axis)?,
            None => 0,
        };
        let shared = self.shared.swap(false, Relaxed);
        if shared || self.start + self.len + n > capacity {
            let needed = self.len + n;
            let capacity = match needed > capacity {
                true => needed.max(2 * capacity),
                false => capacity,
            };
            let mut dims = like.dims().to_vec();
            dims[self.axis] = capacity;
            let fresh = Tensor::zeros(dims, like.dtype(), like.device())?;
            if let Some(held) = self.get()? {
                fresh.slice_set(&held.contiguous()?, self.axis, 0)?;
            }
            self.buffer = Some(fresh);
            self.start = 0;
        }
        self.buffer.clone().context("the KV cache holds no tokens")
    }
}
