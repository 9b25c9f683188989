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

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    /// The tokens `from .. from + n` along `axis` of a `(2, 3, 4)` tensor's shape, each value
    /// telling its token and its place apart.
    fn tokens(axis: usize, from: usize, n: usize) -> Result<Tensor> {
        let mut dims = vec![2, 3, 4];
        dims[axis] = n;
        let count: usize = dims.iter().product();
        let t = Tensor::arange(0u32, count as u32, &Device::Cpu)?
            .to_dtype(candle_core::DType::F32)?
            .reshape(dims)?;
        Ok((t + 1000.0 * from as f64)?)
    }

    /// `t` along `axis` without `range`, by `cat`.
    fn without(t: &Tensor, axis: usize, range: Range<usize>) -> Result<Tensor> {
        let len = t.dim(axis)?;
        let head = t.narrow(axis, 0, range.start)?;
        let tail = t.narrow(axis, range.end, len - range.end)?;
        Ok(Tensor::cat(&[head, tail], axis)?)
    }

    fn same(cache: &KvBuffer, reference: &Tensor) -> Result<()> {
        let held = cache.get()?.expect("tokens held");
        let (a, b) = (held.flatten_all()?, reference.flatten_all()?);
        assert_eq!(a.to_vec1::<f32>()?, b.to_vec1::<f32>()?);
        assert_eq!(cache.len(), reference.dim(cache.axis)?);
        Ok(())
    }

    /// Appends, drops (either side the shorter), writes, keeps the last tokens and clones: the
    /// tokens held are always those of the same steps done by `cat` and `narrow`.
    #[test]
    fn holds_what_cat_and_narrow_give() -> Result<()> {
        for axis in [1, 2] {
            let mut cache = KvBuffer::new(axis);
            let mut reference = tokens(axis, 0, 5)?;
            cache.append(&reference)?;
            let mut next = 1;
            for step in 0..12 {
                let n = 1 + step % 3;
                let t = tokens(axis, next, n)?;
                next += 1;
                cache.append(&t)?;
                reference = Tensor::cat(&[&reference, &t], axis)?;
                same(&cache, &reference)?;
                let len = cache.len();
                // A short head, then a short tail, dropped.
                let range = match step % 2 {
                    0 => 1..3,
                    _ => len - 3..len - 1,
                };
                cache.remove(range.clone())?;
                reference = without(&reference, axis, range)?;
                same(&cache, &reference)?;
                let t = tokens(axis, next, 2)?;
                next += 1;
                cache.write(1, &t)?;
                let len = reference.dim(axis)?;
                reference = Tensor::cat(
                    &[
                        &reference.narrow(axis, 0, 1)?,
                        &t,
                        &reference.narrow(axis, 3, len - 3)?,
                    ],
                    axis,
                )?;
                same(&cache, &reference)?;
                if step % 4 == 3 {
                    cache.keep_last(4);
                    reference = reference.narrow(axis, len - 4, 4)?;
                    same(&cache, &reference)?;
                }
            }
            // A clone and its original write over their shared tensor apart.
            let mut copy = cache.clone();
            let (a, b) = (tokens(axis, 100, 1)?, tokens(axis, 200, 1)?);
            cache.write(0, &b)?;
            copy.append(&a)?;
            let len = reference.dim(axis)?;
            let rest = reference.narrow(axis, 1, len - 1)?;
            same(&copy, &Tensor::cat(&[&reference, &a], axis)?)?;
            same(&cache, &Tensor::cat(&[&b, &rest], axis)?)?;
        }
        Ok(())
    }
}
