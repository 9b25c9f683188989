//! [`KvBuffer`]: the keys or the values a KV cache holds, in a tensor with room to grow, so that
//! a decode step writes its new tokens in place instead of copying the whole cache; and
//! [`Keys`], the keys laid out as the device's matmul reads them in place.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use anyhow::{Context, Result};
use candle_core::{Device, Tensor};

/// Tokens of room a buffer gets beyond what it must hold when it grows: a prompt's prefill
/// leaves room for the decode steps after it, which then write in place (without it the first
/// step copies every layer's cache into a buffer twice as long).
const ROOM: usize = 256;

/// The tokens a KV cache holds along `axis` of a larger tensor: its rows `start .. start + len`
/// along that axis; the rest is room. Appending writes after the tokens held; when the room runs
/// out they move to the front of a new tensor, twice as long (and at least [`ROOM`] longer than
/// they need), so that each token is copied a bounded number of times on average. Dropping a
/// range moves the shorter side of it.
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
                true => (needed + ROOM).max(2 * capacity),
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

/// The rotated keys a layer holds, laid out so that the scores' matmul reads them in place,
/// without copying the cache at every step:
/// - on the CPU, transposed, `(batch, kv_heads, head_dim, len)`: gemm reads any strides, and
///   this layout keeps the bits the fixtures were checked with and is the faster one at short
///   lengths (a decode step's scores over 512 keys of 128 took 1.4x as long through a
///   transposed view; 0.81x to 0.96x at 4,096 keys, 0.67x at 16,384);
/// - elsewhere as computed, `(batch, kv_heads, len, head_dim)`, read through a transposed view:
///   cuBLAS takes a matrix whose rows are packed (transposed or not) and whose batches lie at
///   one stride, which a view of a longer buffer along `len` is, and a view of a transposed
///   buffer is not (its rows are a buffer's length apart): that layout cost a copy of every
///   layer's keys at every step.
#[derive(Clone, Debug)]
pub(crate) struct Keys {
    held: KvBuffer,
    transposed: bool,
}

impl Keys {
    /// No keys, in the layout of `device`.
    pub fn new(device: &Device) -> Self {
        Self::laid_out(device.is_cpu())
    }

    /// No keys, held transposed or as computed.
    pub(super) fn laid_out(transposed: bool) -> Self {
        Self {
            held: KvBuffer::new(if transposed { 3 } else { 2 }),
            transposed,
        }
    }

    /// Appends keys `(batch, kv_heads, seq, head_dim)`.
    pub fn append(&mut self, k: &Tensor) -> Result<()> {
        let k = self.laid(k)?;
        self.held.append(&k)
    }

    /// Writes keys `(batch, kv_heads, n, head_dim)` over those held from index `at`.
    pub fn write(&mut self, at: usize, k: &Tensor) -> Result<()> {
        let k = self.laid(k)?;
        self.held.write(at, &k)
    }

    /// The keys held, transposed, `(batch, kv_heads, head_dim, len)`: a view valid until the
    /// next write, as the scores' matmul reads it; `None` when empty.
    pub fn transposed(&self) -> Result<Option<Tensor>> {
        Ok(match self.held.get()? {
            Some(k) if !self.transposed => Some(k.t()?),
            held => held,
        })
    }

    /// Keeps the last `n` keys at most.
    pub fn keep_last(&mut self, n: usize) {
        self.held.keep_last(n)
    }

    /// Drops the keys at indices `range`.
    pub fn remove(&mut self, range: Range<usize>) -> Result<()> {
        self.held.remove(range)
    }

    /// Drops every key.
    pub fn clear(&mut self) {
        self.held.clear()
    }

    /// Keys `(batch, kv_heads, n, head_dim)` in this cache's layout, contiguous.
    fn laid(&self, k: &Tensor) -> Result<Tensor> {
        Ok(match self.transposed {
            true => k.t()?.contiguous()?,
            false => k.contiguous()?,
        })
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

    /// A prompt's prefill leaves room for the decode steps after it: the next 256 single tokens
    /// ([`ROOM`]) are written into the same tensor, and only the one after them moves the cache.
    #[test]
    fn a_prompt_leaves_room_for_the_steps_after_it() -> Result<()> {
        let mut cache = KvBuffer::new(1);
        let mut reference = tokens(1, 0, 300)?;
        cache.append(&reference)?;
        let capacity = |c: &KvBuffer| c.buffer.as_ref().map(|b| b.dim(1)).transpose();
        let first = capacity(&cache)?;
        for step in 1..=257 {
            let t = tokens(1, step, 1)?;
            cache.append(&t)?;
            reference = Tensor::cat(&[&reference, &t], 1)?;
            let moved = capacity(&cache)? != first;
            assert_eq!(moved, step > 256, "step {step}");
        }
        same(&cache, &reference)
    }

    /// Whether cuBLAS's strided batched gemm reads `rhs` `(.., k, n)` as a matmul's right-hand
    /// side in place, by the rule of candle 0.11's CUDA matmul (`gemm_config`): its rows packed,
    /// transposed or not, and its batches at one stride.
    fn cublas_reads(rhs: &Tensor) -> bool {
        let (dims, strides) = (rhs.dims(), rhs.stride());
        let r = dims.len();
        let (k, n, m2, m1) = (dims[r - 2], dims[r - 1], strides[r - 2], strides[r - 1]);
        let rows = (m1 == 1 || n == 1) && (m2 == n || k == 1);
        let columns = (m1 == k || n == 1) && (m2 == 1 || k == 1);
        let batches = match strides[..r - 2] {
            [s1, s] => s1 == s * dims[1] || dims[0] == 1 || dims[1] == 1,
            _ => true,
        };
        (rows || columns) && batches
    }

    /// Keys appended, written over, dropped and kept last hold what `cat` and `narrow` give in
    /// either layout, seen transposed; held as computed (a GPU's layout), the view is one that
    /// cuBLAS reads in place, where a transposed buffer with room is not.
    #[test]
    fn keys_in_either_layout_hold_the_same() -> Result<()> {
        // Keys (batch 2, kv heads 2, len, head_dim 4), each value telling its token apart.
        let keys = |from: usize, n: usize| -> Result<Tensor> {
            Ok(tokens(1, from, n)?.unsqueeze(0)?.repeat((2, 1, 1, 1))?)
        };
        let mut transposed_fails = false;
        for transposed in [true, false] {
            let mut held = Keys::laid_out(transposed);
            let mut reference = keys(0, 3)?;
            held.append(&reference)?;
            for step in 1..10 {
                let k = keys(step, 1 + step % 2)?;
                held.append(&k)?;
                reference = Tensor::cat(&[&reference, &k], 2)?;
                if step % 3 == 0 {
                    held.remove(1..2)?;
                    reference = without(&reference, 2, 1..2)?;
                    let k = keys(100 + step, 1)?;
                    held.write(0, &k)?;
                    let len = reference.dim(2)?;
                    reference = Tensor::cat(&[&k, &reference.narrow(2, 1, len - 1)?], 2)?;
                }
                if step == 7 {
                    held.keep_last(4);
                    let len = reference.dim(2)?;
                    reference = reference.narrow(2, len - 4, 4)?;
                }
                let view = held.transposed()?.expect("keys held");
                let want = reference.t()?;
                assert_eq!(
                    view.dims(),
                    want.dims(),
                    "transposed {transposed} step {step}"
                );
                let (a, b) = (view.flatten_all()?, want.flatten_all()?);
                assert_eq!(a.to_vec1::<f32>()?, b.to_vec1::<f32>()?);
                match transposed {
                    true => transposed_fails |= !cublas_reads(&view),
                    false => assert!(cublas_reads(&view), "step {step}: {:?}", view.stride()),
                }
            }
            held.clear();
            assert!(held.transposed()?.is_none());
        }
        assert!(transposed_fails);
        Ok(())
    }
}
