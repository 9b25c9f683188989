//! The rotary block against candle-nn's plain `rope_slow` / `rope_i_slow` with the same tables.

use candle_core::{DType, Device, Tensor, D};
use candle_nn::rotary_emb::{rope_i_slow, rope_slow};
use pe_core::rope::{Llama3, RopeType, Yarn};
use pe_core::{Backend, Rope, RopeConfig};
use pe_nn::RotaryEmbedding;

fn max_diff(a: &Tensor, b: &Tensor) -> anyhow::Result<f32> {
    let d = (a.to_dtype(DType::F32)? - b.to_dtype(DType::F32)?)?.abs()?;
    Ok(d.flatten_all()?.max(0)?.to_scalar::<f32>()?)
}

#[test]
fn apply_equals_rope_slow_with_the_same_tables() -> anyhow::Result<()> {
    let dev = Device::Cpu;
    let configs = [
        RopeConfig::new(64, 10_000.0),
        RopeConfig::new(128, 500_000.0).with_rope_type(RopeType::Llama3(Llama3 {
            factor: 8.0,
            low_freq_factor: 1.0,
            high_freq_factor: 4.0,
            original_max_position_embeddings: 8192,
        })),
        RopeConfig::new(64, 10_000.0).with_rope_type(RopeType::Yarn(Yarn::new(4.0, 4096))),
    ];
    for config in configs {
        for interleaved in [false, true] {
            for backend in [Backend::Cpu, Backend::Generic] {
                let rotary = RotaryEmbedding::new(config.clone())?
                    .interleaved(interleaved)
                    .with_backend(backend);
                let q = Tensor::randn(0f32, 1.0, (2, 4, 5, config.head_dim), &dev)?;
                let k = Tensor::randn(0f32, 1.0, (2, 2, 5, config.head_dim), &dev)?;
                let offset = 131_072;
                let (rq, rk) = rotary.apply(&q, &k, offset)?;
                let (cos, sin) = Rope::new(config.clone())?.tables(offset, 5, DType::F32, &dev)?;
                let slow = |x: &Tensor| {
                    if interleaved {
                        rope_i_slow(x, &cos, &sin)
                    } else {
                        rope_slow(x, &cos, &sin)
                    }
                };
                assert!(
                    max_diff(&rq, &slow(&q)?)? <= 1e-5,
                    "{config:?} interleaved={interleaved} q"
                );
                assert!(
                    max_diff(&rk, &slow(&k)?)? <= 1e-5,
                    "{config:?} interleaved={interleaved} k"
                );
            }
        }
    }
    Ok(())
}

#[test]
fn decoding_steps_equal_one_prefill() -> anyhow::Result<()> {
    let dev = Device::Cpu;
    let rotary = RotaryEmbedding::new(RopeConfig::new(32, 10_000.0))?;
    let q = Tensor::randn(0f32, 1.0, (1, 2, 6, 32), &dev)?;
    let (full, _) = rotary.apply(&q, &q, 100)?;
    for step in 0..6 {
        let one = q.narrow(2, step, 1)?;
        let (got, _) = rotary.apply(&one, &one, 100 + step)?;
        assert!(
            max_diff(&got, &full.narrow(2, step, 1)?)? <= 1e-6,
            "step {step}"
        );
    }
    // Explicit positions: per-sequence offsets of a left-padded batch.
    let q = Tensor::randn(0f32, 1.0, (2, 2, 3, 32), &dev)?;
    let positions = Tensor::new(&[[100u32, 101, 102], [7, 8, 9]], &dev)?;
    let (got, _) = rotary.apply_with_positions(&q, &q, &positions)?;
    let (first, _) = rotary.apply(&q.narrow(0, 0, 1)?, &q.narrow(0, 0, 1)?, 100)?;
    let (second, _) = rotary.apply(&q.narrow(0, 1, 1)?, &q.narrow(0, 1, 1)?, 7)?;
    // A table row depends only on its position: the same bits either way.
    let diff = max_diff(&got, &Tensor::cat(&[first, second], 0)?)?;
    assert_eq!(diff, 0.0);
    Ok(())
}

#[test]
fn partial_rotary_turns_only_the_first_features() -> anyhow::Result<()> {
    let dev = Device::Cpu;
    let mut config = RopeConfig::new(80, 10_000.0);
    config.partial_rotary_factor = 0.4; // phi-2: 32 of 80 features
    let rotary = RotaryEmbedding::new(config.clone())?;
    let q = Tensor::randn(0f32, 1.0, (1, 2, 4, 80), &dev)?;
    let (got, _) = rotary.apply(&q, &q, 9)?;
    let (cos, sin) = Rope::new(config)?.tables(9, 4, DType::F32, &dev)?;
    let turned = rope_slow(&q.narrow(D::Minus1, 0, 32)?.contiguous()?, &cos, &sin)?;
    assert!(max_diff(&got.narrow(D::Minus1, 0, 32)?, &turned)? <= 1e-5);
    assert_eq!(
        max_diff(
            &got.narrow(D::Minus1, 32, 48)?,
            &q.narrow(D::Minus1, 32, 48)?
        )?,
        0.0
    );
    Ok(())
}

#[test]
fn half_precision_and_errors() -> anyhow::Result<()> {
    let dev = Device::Cpu;
    let rotary = RotaryEmbedding::new(RopeConfig::new(16, 10_000.0))?;
    let q = Tensor::randn(0f32, 1.0, (1, 1, 2, 16), &dev)?.to_dtype(DType::BF16)?;
    let (got, _) = rotary.apply(&q, &q, 5)?;
    assert_eq!(got.dtype(), DType::BF16);
    let wrong = Tensor::zeros((1, 1, 2, 8), DType::F32, &dev)?;
    let err = rotary.apply(&wrong, &wrong, 0).unwrap_err().to_string();
    assert!(
        err.contains("(batch, heads, seq, 16)") && err.contains("[1, 1, 2, 8]"),
        "{err}"
    );
    let q = Tensor::zeros((1, 1, 2, 16), DType::F32, &dev)?;
    let k = Tensor::zeros((1, 1, 3, 16), DType::F32, &dev)?;
    assert!(rotary
        .apply(&q, &k, 0)
        .unwrap_err()
        .to_string()
        .contains("different sequence lengths"));
    let err = rotary.apply(&q, &q, (1 << 31) - 1).unwrap_err().to_string();
    assert!(err.contains("offset + len"), "{err}");
    Ok(())
}

#[test]
fn empty_and_far_requests() -> anyhow::Result<()> {
    let dev = Device::Cpu;
    let rotary = RotaryEmbedding::new(RopeConfig::new(16, 10_000.0))?;
    // An empty sequence, batch or head count comes back as it is (candle-nn's kernel panics).
    for shape in [(1, 2, 0, 16), (0, 2, 3, 16), (1, 0, 3, 16)] {
        let q = Tensor::zeros(shape, DType::F32, &dev)?;
        let (rq, rk) = rotary.apply(&q, &q, 7)?;
        assert_eq!((rq.dims(), rk.dims()), (q.dims(), q.dims()));
    }
    let q = Tensor::zeros((2, 1, 0, 16), DType::F32, &dev)?;
    let positions = Tensor::zeros((2, 0), DType::U32, &dev)?;
    assert_eq!(
        rotary.apply_with_positions(&q, &q, &positions)?.0.dims(),
        q.dims()
    );
    // Far past the cache's limit, the rows are generated: the same as the tables there.
    let q = Tensor::randn(0f32, 1.0, (1, 2, 3, 16), &dev)?;
    let far = 2_147_483_640;
    let (got, _) = rotary.apply(&q, &q, far)?;
    let (cos, sin) = rotary.rope().tables(far, 3, DType::F32, &dev)?;
    assert_eq!(max_diff(&got, &rope_slow(&q, &cos, &sin)?)?, 0.0);
    Ok(())
}
