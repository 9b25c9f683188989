//! [`SideBySide`]: linear projections that read the same input (q, k and v; gate and up), run
//! as one matmul where that keeps every output's bits.

use anyhow::{bail, Result};
use candle_core::{Tensor, D};
use candle_nn::Linear;

use super::proj::{fused, stacked, Proj};

/// Linear layers reading the same input, side by side (q, k and v; gate and up): for a single
/// row of input one matmul with their weights stacked, otherwise each layer's own matmul. The
/// outputs have the same bits either way: for one row, gemm computes each output as the dot
/// product of its own weight row with the input, whatever rows sit beside it; for more rows
/// its blocking depends on the width, so the layers keep their own matmuls there. A decode step
/// makes one matmul where it made two or three. Quantized layers of one type and no bias are
/// stacked as their blocks (one quantization of the input, one matmul, each output the bits of
/// its own layer's, for every input); others share one quantization of the input and one
/// parallel region where candle has a fused kernel, and keep their own matmuls otherwise.
#[derive(Clone, Debug)]
pub(crate) struct SideBySide<const N: usize> {
    /// The layers' weights stacked; `None` when some are quantized.
    stacked: Option<Proj>,
    /// The layers (dense ones as views of `stacked`'s rows); `None` when the checkpoint stores
    /// them stacked (Phi-3), whose one matmul then serves every input.
    parts: Option<[Proj; N]>,
    /// The output width of each layer.
    widths: [usize; N],
}

impl<const N: usize> SideBySide<N> {
    /// `parts`, each with a bias or none with one.
    pub fn new(parts: [Proj; N]) -> Result<Self> {
        let mut widths = [0; N];
        for (width, part) in widths.iter_mut().zip(&parts) {
            *width = part.out_dim()?;
        }
        let dense: Vec<&Linear> = parts
            .iter()
            .filter_map(|p| match p {
                Proj::Dense(l) => Some(l),
                Proj::Quantized { .. } => None,
            })
            .collect();
        if dense.len() != N {
            // Same-typed quantized layers: their blocks stacked, one matmul for every input.
            if let Some(stacked) = stacked(&parts)? {
                return Ok(Self::stacked(stacked, widths));
            }
            return Ok(Self {
                stacked: None,
                parts: Some(parts),
                widths,
            });
        }
        let weights: Vec<&Tensor> = dense.iter().map(|l| l.weight()).collect();
        let biases: Vec<&Tensor> = dense.iter().filter_map(|l| l.bias()).collect();
        let bias = match biases.len() {
            0 => None,
            n if n == N => Some(Tensor::cat(&biases, 0)?),
            _ => bail!("linear layers side by side: some have a bias and some do not"),
        };
        let stacked = Linear::new(Tensor::cat(&weights, 0)?, bias);
        // The layers again, as views of the stacked rows (the weights are held once).
        let mut at = 0;
        let mut views = Vec::with_capacity(N);
        for width in widths {
            let rows = |t: &Tensor| t.narrow(0, at, width);
            let bias = stacked.bias().map(rows).transpose()?;
            views.push(Proj::Dense(Linear::new(rows(stacked.weight())?, bias)));
            at += width;
        }
        Ok(Self {
            stacked: Some(Proj::Dense(stacked)),
            parts: Some(array(views)?),
            widths,
        })
    }

    /// A checkpoint's stacked layer, of outputs `widths` in order, used for every input.
    pub fn stacked(stacked: Proj, widths: [usize; N]) -> Self {
        Self {
            stacked: Some(stacked),
            parts: None,
            widths,
        }
    }

    /// The output of each layer, in order.
    pub fn forward(&self, x: &Tensor) -> Result<[Tensor; N]> {
        let rows = x.elem_count() / x.dim(D::Minus1)?.max(1);
        let out = match (&self.stacked, &self.parts) {
            (Some(stacked), None) => self.split(&stacked.forward(x)?)?,
            (Some(stacked), Some(_)) if rows == 1 => self.split(&stacked.forward(x)?)?,
            (None, Some(parts)) => match fused(parts, x)? {
                Some(out) => out,
                None => Self::each(parts, x)?,
            },
            (Some(_), Some(parts)) => Self::each(parts, x)?,
            (None, None) => bail!("linear layers side by side: no layers"),
        };
        array(out)
    }

    /// Each layer's own output.
    fn each(parts: &[Proj; N], x: &Tensor) -> Result<Vec<Tensor>> {
        parts.iter().map(|part| part.forward(x)).collect()
    }

    /// The outputs of the layers, side by side along the last dimension of `y`.
    fn split(&self, y: &Tensor) -> Result<Vec<Tensor>> {
        let mut at = 0;
        let mut out = Vec::with_capacity(N);
        for width in self.widths {
            out.push(y.narrow(D::Minus1, at, width)?);
            at += width;
        }
        Ok(out)
    }
}

/// The `N` items of `items`.
fn array<T, const N: usize>(items: Vec<T>) -> Result<[T; N]> {
    let len = items.len();
    items
        .try_into()
        .map_err(|_| anyhow::anyhow!("expected {N} items, got {len}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{DType, Device, Module};

    fn bits(t: &Tensor) -> Result<Vec<u32>> {
        let values = t.flatten_all()?.to_vec1::<f32>()?;
        Ok(values.into_iter().map(f32::to_bits).collect())
    }

    /// Every output of [`SideBySide`] has the bits of its layer's own matmul: the stacked one
    /// for a single row, the layers' for more (where a stacked matmul of this width rounds
    /// some outputs differently: the llama31 fixture's batch of two 4-token prompts does).
    #[test]
    fn side_by_side_keeps_the_bits_of_each_layer() -> Result<()> {
        let dev = Device::Cpu;
        let layer = |out: usize| -> Result<Linear> {
            let weight = Tensor::randn(0f32, 1.0, (out, 64), &dev)?;
            Ok(Linear::new(
                weight,
                Some(Tensor::randn(0f32, 1.0, out, &dev)?),
            ))
        };
        let parts = [layer(64)?, layer(32)?, layer(32)?];
        let both = SideBySide::new(parts.clone().map(Proj::Dense))?;
        for shape in [(1, 1, 64), (1, 12, 64), (2, 4, 64), (3, 1, 64)] {
            let x = Tensor::randn(0f32, 1.0, shape, &dev)?;
            for (i, (got, part)) in both.forward(&x)?.iter().zip(&parts).enumerate() {
                let want = part.forward(&x)?;
                assert_eq!(bits(got)?, bits(&want)?, "layer {i}, input {shape:?}");
            }
        }
        Ok(())
    }

    /// Quantized layers side by side have the bits of each layer's own `QMatMul`, with
    /// candle's fused kernel (where the CPU has one) or without.
    #[test]
    fn quantized_side_by_side_keeps_the_bits_of_each_layer() -> Result<()> {
        use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
        let dev = Device::Cpu;
        let layer = |out: usize, width: usize, bias: bool, dtype: GgmlDType| -> Result<Proj> {
            let weight = Tensor::randn(0f32, 1.0, (out, width), &dev)?;
            let q = QTensor::quantize(&weight, dtype)?;
            Ok(Proj::Quantized {
                weight: QMatMul::from_qtensor(q)?,
                bias: bias
                    .then(|| Tensor::randn(0f32, 1.0, out, &dev))
                    .transpose()?,
                out_dim: out,
            })
        };
        // Inputs of 64 take each layer's matmul; of 256, candle's fused kernel on x86 CPUs
        // with AVX-512 VNNI (its repacked Q8_0 tiles want rows of 256). Layers of one type are
        // stacked; of two types, each keeps its own matmul.
        let (q8, q4) = (GgmlDType::Q8_0, GgmlDType::Q4_0);
        for types in [[q8, q8, q8], [q4, q4, q8], [q8, q4, q4], [q8, q4, q8]] {
            for (width, bias) in [(64, false), (64, true), (256, false), (256, true)] {
                let parts = [
                    layer(64, width, bias, types[0])?,
                    layer(32, width, bias, types[1])?,
                    layer(32, width, bias, types[2])?,
                ];
                let both = SideBySide::new(parts.clone())?;
                for shape in [(1, 1, width), (1, 12, width), (2, 4, width)] {
                    let x = Tensor::randn(0f32, 1.0, shape, &dev)?;
                    let ran_fused = fused(&parts, &x)?.is_some();
                    for (i, (got, part)) in both.forward(&x)?.iter().zip(&parts).enumerate() {
                        let want = part.forward(&x)?;
                        assert_eq!(
                            bits(got)?,
                            bits(&want)?,
                            "types {types:?}, layer {i}, input {shape:?}, bias {bias}, fused \
                             kernel {ran_fused}"
                        );
                    }
                }
            }
        }
        Ok(())
    }

    #[test]
    fn side_by_side_refuses_a_bias_on_some_layers_only() -> Result<()> {
        let dev = Device::Cpu;
        let weight = Tensor::zeros((4, 8), DType::F32, &dev)?;
        let with = Linear::new(weight.clone(), Some(Tensor::zeros(4, DType::F32, &dev)?));
        let err = SideBySide::new([with, Linear::new(weight, None)].map(Proj::Dense)).unwrap_err();
        assert!(err.to_string().contains("some have a bias"), "{err}");
        Ok(())
    }
}
