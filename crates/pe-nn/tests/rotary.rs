//! The rotary block against its plain twin (`apply_at_slow`), candle-nn's `rope_slow` /
//! `rope_i_slow`, and an f64 rotation written here from pe-core's exact f64 tables: both
//! layouts, per-token positions, ragged batches, both pairings, partial rotary, f16/bf16
//! rounding, errors, empties and far positions.

use candle_core::{DType, Device, Tensor, D};
use candle_nn::rotary_emb::{rope, rope_i, rope_i_slow, rope_slow};
use candle_pe_core::{Llama3, RopeType, Yarn};
use candle_pe_core::{PairLayout, Rope, RopeConfig, TableBackend};
use candle_pe_formats::FromHfConfig;
use candle_pe_nn::At;
use candle_pe_nn::RotaryEmbedding;

/// The pair layout a test's `interleaved` flag names.
fn layout(interleaved: bool) -> PairLayout {
    match interleaved {
        true => PairLayout::Interleaved,
        false => PairLayout::Halves,
    }
}

fn max_diff(a: &Tensor, b: &Tensor) -> anyhow::Result<f64> {
    let d = (a.to_dtype(DType::F64)? - b.to_dtype(DType::F64)?)?.abs()?;
    if d.elem_count() == 0 {
        return Ok(0.0);
    }
    Ok(d.flatten_all()?.max(0)?.to_scalar::<f64>()?)
}

fn llama31() -> RopeConfig {
    RopeConfig::new(128, 500_000.0).with_rope_type(RopeType::Llama3(Llama3 {
        factor: 8.0,
        low_freq_factor: 1.0,
        high_freq_factor: 4.0,
        original_max_position_embeddings: 8192,
    }))
}

fn partial(head_dim: usize, factor: f64) -> RopeConfig {
    let mut config = RopeConfig::new(head_dim, 10_000.0);
    config.partial_rotary_factor = factor;
    config
}

/// `(batch, heads, seq, d)` as `(batch * seq, heads, d)`, contiguous.
fn to_thd(x: &Tensor) -> anyhow::Result<Tensor> {
    let (b, h, s, d) = x.dims4()?;
    Ok(x.transpose(1, 2)?.contiguous()?.reshape((b * s, h, d))?)
}

/// The f64 rotation of `x` `(tokens, heads, head_dim)` at `positions`, from the exact f64
/// tables, written out pair by pair.
fn reference(rotary: &RotaryEmbedding, x: &Tensor, positions: &[u32]) -> anyhow::Result<Tensor> {
    let (t, h, d) = x.dims3()?;
    let ids = Tensor::new(positions, &Device::Cpu)?;
    let (cos, sin) = rotary.rope().at(&ids, DType::F64)?;
    let half = rotary.rope().half_dim();
    let (cos, sin) = (
        cos.flatten_all()?.to_vec1::<f64>()?,
        sin.flatten_all()?.to_vec1::<f64>()?,
    );
    let xs = x.to_dtype(DType::F64)?.flatten_all()?.to_vec1::<f64>()?;
    let mut out = xs.clone();
    for ti in 0..t {
        for hi in 0..h {
            let base = (ti * h + hi) * d;
            for i in 0..half {
                let (a, b) = if rotary.pair_layout().is_interleaved() {
                    (base + 2 * i, base + 2 * i + 1)
                } else {
                    (base + i, base + i + half)
                };
                let (c, s) = (cos[ti * half + i], sin[ti * half + i]);
                out[a] = xs[a] * c - xs[b] * s;
                out[b] = xs[a] * s + xs[b] * c;
            }
        }
    }
    Ok(Tensor::from_vec(out, (t, h, d), &Device::Cpu)?)
}

#[test]
fn apply_equals_rope_slow_with_the_same_tables() -> anyhow::Result<()> {
    let dev = Device::Cpu;
    let configs = [
        RopeConfig::new(64, 10_000.0),
        llama31(),
        RopeConfig::new(64, 10_000.0).with_rope_type(RopeType::Yarn(Yarn::new(4.0, 4096))),
    ];
    for config in configs {
        for interleaved in [false, true] {
            for backend in [TableBackend::Cpu, TableBackend::Generic] {
                let rotary = RotaryEmbedding::new(config.clone())?
                    .with_pair_layout(layout(interleaved))
                    .with_backend(backend);
                let q = Tensor::randn(0f32, 1.0, (2, 4, 5, config.head_dim), &dev)?;
                let k = Tensor::randn(0f32, 1.0, (2, 2, 5, config.head_dim), &dev)?;
                let offset = 131_072;
                let (rq, rk) = rotary.apply(&q, &k, offset)?;
                let (cos, sin) = Rope::new(config.clone())?.range(offset, 5, DType::F32, &dev)?;
                let slow = |x: &Tensor| {
                    if interleaved {
                        rope_i_slow(x, &cos, &sin)
                    } else {
                        rope_slow(x, &cos, &sin)
                    }
                };
                let what = format!("{config:?} interleaved={interleaved}");
                // The same f32 tables and the same formula (x1 cos - x2 sin, x1 sin + x2 cos, each
                // product and sum rounded): the same bits.
                assert_eq!(max_diff(&rq, &slow(&q)?)?, 0.0, "{what} q");
                assert_eq!(max_diff(&rk, &slow(&k)?)?, 0.0, "{what} k");
            }
        }
    }
    Ok(())
}

#[test]
fn fused_equals_the_slow_twin_bit_for_bit() -> anyhow::Result<()> {
    let dev = Device::Cpu;
    for config in [llama31(), partial(80, 0.4)] {
        for interleaved in [false, true] {
            let rotary =
                RotaryEmbedding::new(config.clone())?.with_pair_layout(layout(interleaved));
            let d = config.head_dim;
            for dtype in [DType::F32, DType::BF16, DType::F16, DType::F64] {
                let what = format!("d={d} interleaved={interleaved} {dtype:?}");
                // (batch, heads, seq, d) at (batch, seq) positions, seq 1 and 3.
                for seq in [1, 3] {
                    let q = Tensor::randn(0f32, 1.0, (2, 4, seq, d), &dev)?.to_dtype(dtype)?;
                    let k = Tensor::randn(0f32, 1.0, (2, 2, seq, d), &dev)?.to_dtype(dtype)?;
                    let ids: Vec<u32> = (0..2 * seq as u32).map(|i| 977 * i + 3).collect();
                    let positions = Tensor::from_vec(ids, (2, seq), &dev)?;
                    let (fq, fk) = rotary.apply(&q, &k, &positions)?;
                    let (sq, sk) = rotary.apply_slow(&q, &k, &positions)?;
                    assert_eq!(fq.dtype(), dtype, "{what}");
                    assert_eq!(max_diff(&fq, &sq)?, 0.0, "{what} seq={seq} q");
                    assert_eq!(max_diff(&fk, &sk)?, 0.0, "{what} seq={seq} k");
                    // At an offset: tables of the sequence's rows, shared by the batch.
                    let (fq, fk) = rotary.apply(&q, &k, 4093)?;
                    let (sq, sk) = rotary.apply_slow(&q, &k, 4093)?;
                    assert_eq!(max_diff(&fq, &sq)?, 0.0, "{what} seq={seq} offset q");
                    assert_eq!(max_diff(&fk, &sk)?, 0.0, "{what} seq={seq} offset k");
                }
                // (tokens, heads, d) at (tokens,) positions.
                let q = Tensor::randn(0f32, 1.0, (6, 4, d), &dev)?.to_dtype(dtype)?;
                let k = Tensor::randn(0f32, 1.0, (6, 2, d), &dev)?.to_dtype(dtype)?;
                let positions = Tensor::new(&[0i64, 1, 2, 16_384, 131_071, 7], &dev)?;
                let (fq, fk) = rotary.apply(&q, &k, &positions)?;
                let (sq, sk) = rotary.apply_slow(&q, &k, &positions)?;
                assert_eq!(max_diff(&fq, &sq)?, 0.0, "{what} thd q");
                assert_eq!(max_diff(&fk, &sk)?, 0.0, "{what} thd k");
                // Past the cache's limit the rows are gathered: a table row per token.
                let far = Tensor::new(&[0i64, 1 << 30, 2, 7, 5_000_000, 3], &dev)?;
                let (fq, fk) = rotary.apply(&q, &k, &far)?;
                let (sq, sk) = rotary.apply_slow(&q, &k, &far)?;
                assert_eq!(max_diff(&fq, &sq)?, 0.0, "{what} thd far q");
                assert_eq!(max_diff(&fk, &sk)?, 0.0, "{what} thd far k");
                let (fq, fk) = rotary.apply(&q, &k, 999)?;
                let (sq, sk) = rotary.apply_slow(&q, &k, 999)?;
                assert_eq!(max_diff(&fq, &sq)?, 0.0, "{what} thd offset q");
                assert_eq!(max_diff(&fk, &sk)?, 0.0, "{what} thd offset k");
            }
        }
    }
    Ok(())
}

#[test]
fn thd_equals_bhsd() -> anyhow::Result<()> {
    let dev = Device::Cpu;
    for interleaved in [false, true] {
        let rotary = RotaryEmbedding::new(llama31())?.with_pair_layout(layout(interleaved));
        let q = Tensor::randn(0f32, 1.0, (2, 4, 5, 128), &dev)?;
        let k = Tensor::randn(0f32, 1.0, (2, 2, 5, 128), &dev)?;
        // Consecutive positions from an offset.
        let (bq, bk) = rotary.apply(&q, &k, 40_000)?;
        for b in 0..2 {
            let one = |x: &Tensor| -> anyhow::Result<Tensor> { to_thd(&x.narrow(0, b, 1)?) };
            let (tq, tk) = rotary.apply(&one(&q)?, &one(&k)?, 40_000)?;
            assert_eq!(max_diff(&tq, &one(&bq)?)?, 0.0, "offset q {b}");
            assert_eq!(max_diff(&tk, &one(&bk)?)?, 0.0, "offset k {b}");
        }
        // Explicit ragged positions: (batch, seq) for bhsd, flattened for thd.
        let ids = [[3u32, 4, 5, 6, 7], [90_000, 90_001, 90_002, 90_003, 90_004]];
        let positions = Tensor::new(&ids, &dev)?;
        let (bq, bk) = rotary.apply(&q, &k, &positions)?;
        let (tq, tk) = rotary.apply(&to_thd(&q)?, &to_thd(&k)?, &positions.flatten_all()?)?;
        assert_eq!(
            max_diff(&tq, &to_thd(&bq)?)?,
            0.0,
            "interleaved={interleaved} q"
        );
        assert_eq!(
            max_diff(&tk, &to_thd(&bk)?)?,
            0.0,
            "interleaved={interleaved} k"
        );
        // And both equal the f64 rotation to f32 precision.
        let flat: Vec<u32> = ids.concat();
        let exact = reference(&rotary, &to_thd(&q)?, &flat)?;
        assert!(max_diff(&tq, &exact)? <= 2e-6, "interleaved={interleaved}");
    }
    Ok(())
}

#[test]
fn per_token_positions_equal_slices_of_a_prefill() -> anyhow::Result<()> {
    let dev = Device::Cpu;
    let rotary = RotaryEmbedding::new(RopeConfig::new(32, 10_000.0))?;
    let q = Tensor::randn(0f32, 1.0, (1, 2, 6, 32), &dev)?;
    let k = Tensor::randn(0f32, 1.0, (1, 1, 6, 32), &dev)?;
    let (full_q, full_k) = rotary.apply(&q, &k, 100)?;
    for step in 0..6 {
        // Decoding steps at an offset.
        let one = |x: &Tensor| x.narrow(2, step, 1);
        let (got, _) = rotary.apply(&one(&q)?, &one(&k)?, 100 + step)?;
        assert_eq!(max_diff(&got, &one(&full_q)?)?, 0.0, "step {step}");
        // The same token at an explicit (batch, seq) position.
        let at = Tensor::new(&[[100 + step as u32]], &dev)?;
        let (got_q, got_k) = rotary.apply(&one(&q)?, &one(&k)?, &at)?;
        assert_eq!(max_diff(&got_q, &one(&full_q)?)?, 0.0, "step {step} q");
        assert_eq!(max_diff(&got_k, &one(&full_k)?)?, 0.0, "step {step} k");
    }
    // A continuous batch mixing the prefill's tokens in any order.
    let order = [4usize, 0, 5, 2];
    let pick = |x: &Tensor| -> anyhow::Result<Tensor> {
        let idx = Tensor::new(&order.map(|i| i as u32), &dev)?;
        Ok(to_thd(x)?.index_select(&idx, 0)?)
    };
    let positions = Tensor::new(&order.map(|i| 100 + i as u32), &dev)?;
    let (got_q, got_k) = rotary.apply(&pick(&q)?, &pick(&k)?, &positions)?;
    assert_eq!(max_diff(&got_q, &pick(&full_q)?)?, 0.0);
    assert_eq!(max_diff(&got_k, &pick(&full_k)?)?, 0.0);
    Ok(())
}

#[test]
fn ragged_left_padded_batch() -> anyhow::Result<()> {
    let dev = Device::Cpu;
    let rotary = RotaryEmbedding::new(llama31())?;
    // Sequence 0 has 3 tokens after 2 pads, sequence 1 has 5; HF gives pads position 1.
    let q = Tensor::randn(0f32, 1.0, (2, 4, 5, 128), &dev)?;
    let k = Tensor::randn(0f32, 1.0, (2, 2, 5, 128), &dev)?;
    let positions = Tensor::new(&[[1i64, 1, 0, 1, 2], [0, 1, 2, 3, 4]], &dev)?;
    let (got_q, got_k) = rotary.apply(&q, &k, &positions)?;
    let (alone_q, alone_k) = rotary.apply(&q.narrow(2, 2, 3)?, &k.narrow(2, 2, 3)?, 0)?;
    let first = |x: &Tensor, from, len| x.narrow(0, 0, 1)?.narrow(2, from, len);
    assert_eq!(
        max_diff(&first(&got_q, 2, 3)?, &first(&alone_q, 0, 3)?)?,
        0.0
    );
    assert_eq!(
        max_diff(&first(&got_k, 2, 3)?, &first(&alone_k, 0, 3)?)?,
        0.0
    );
    let (full_q, _) = rotary.apply(&q, &k, 0)?;
    let second = |x: &Tensor| x.narrow(0, 1, 1);
    assert_eq!(max_diff(&second(&got_q)?, &second(&full_q)?)?, 0.0);
    Ok(())
}

#[test]
fn interleaved_and_partial_match_the_f64_rotation() -> anyhow::Result<()> {
    let dev = Device::Cpu;
    for config in [
        RopeConfig::new(64, 10_000.0),
        partial(80, 0.4),
        partial(128, 0.75),
    ] {
        for interleaved in [false, true] {
            let rotary =
                RotaryEmbedding::new(config.clone())?.with_pair_layout(layout(interleaved));
            let d = config.head_dim;
            let r = config.rotary_dim();
            let q = Tensor::randn(0f32, 1.0, (5, 3, d), &dev)?;
            let ids = [0u32, 1, 9, 4096, 100_000];
            let (got, _) = rotary.apply(&q, &q, &Tensor::new(&ids, &dev)?)?;
            assert!(got.is_contiguous(), "a plain tensor for matmul");
            let exact = reference(&rotary, &q, &ids)?;
            let what = format!("d={d} r={r} interleaved={interleaved}");
            assert!(max_diff(&got, &exact)? <= 2e-6, "{what}");
            // The features past rotary_dim pass with the same bits.
            if r < d {
                let tail = |x: &Tensor| x.narrow(D::Minus1, r, d - r);
                assert_eq!(max_diff(&tail(&got)?, &tail(&q)?)?, 0.0, "{what}");
            }
        }
    }
    // Interleaved pairs (2i, 2i + 1) are the half-split pairs (i, i + d/2) after a permutation.
    let rotary = RotaryEmbedding::new(RopeConfig::new(8, 10_000.0))?;
    let q = Tensor::randn(0f32, 1.0, (1, 1, 2, 8), &dev)?;
    let perm = Tensor::new(&[0u32, 4, 1, 5, 2, 6, 3, 7], &dev)?;
    let (split, _) = rotary.apply(&q, &q, 3)?;
    let (paired, _) = rotary
        .clone()
        .with_pair_layout(PairLayout::Interleaved)
        .apply(&q.index_select(&perm, 3)?, &q, 3)?;
    assert_eq!(max_diff(&paired, &split.index_select(&perm, 3)?)?, 0.0);
    Ok(())
}

#[test]
fn half_precision_is_the_f32_rotation_rounded_once() -> anyhow::Result<()> {
    let dev = Device::Cpu;
    for interleaved in [false, true] {
        let rotary = RotaryEmbedding::new(llama31())?.with_pair_layout(layout(interleaved));
        let ids = [16_380u32, 16_384, 16_390, 131_060, 131_071, 131_072];
        let positions = Tensor::new(&ids, &dev)?;
        let bits_of = |dtype: DType| match dtype {
            DType::BF16 => 8,
            _ => 11,
        };
        for dtype in [DType::BF16, DType::F16] {
            let x = Tensor::randn(0f32, 1.0, (6, 8, 128), &dev)?.to_dtype(dtype)?;
            let (got, _) = rotary.apply(&x, &x, &positions)?;
            let x32 = x.to_dtype(DType::F32)?;
            let (f32_rot, _) = rotary.apply(&x32, &x32, &positions)?;
            // One rounding: the f32 rotation of the same inputs, rounded to the dtype.
            assert_eq!(max_diff(&got, &f32_rot.to_dtype(dtype)?)?, 0.0, "{dtype:?}");
            // Within half an ulp of the f64 rotation (plus the f32 rotation's own error).
            let exact = reference(&rotary, &x, &ids)?;
            let bound = (exact.abs()? * 0.5f64.powi(bits_of(dtype)))?.affine(1.0, 1e-6)?;
            let err = (got.to_dtype(DType::F64)? - &exact)?.abs()?;
            let over = err.gt(&bound)?.to_dtype(DType::U32)?.sum_all()?;
            assert_eq!(
                over.to_scalar::<u32>()?,
                0,
                "{dtype:?} interleaved={interleaved}"
            );
        }
    }
    Ok(())
}

#[test]
fn errors_name_the_argument() -> anyhow::Result<()> {
    let dev = Device::Cpu;
    let rotary = RotaryEmbedding::new(RopeConfig::new(16, 10_000.0))?;
    let z = |shape: &[usize], dtype| Tensor::zeros(shape, dtype, &dev);
    let f = DType::F32;
    let expect = |result: candle_core::Result<(Tensor, Tensor)>, parts: &[&str]| {
        let err = result.unwrap_err().to_string();
        for part in parts {
            assert!(err.contains(part), "{err:?} should contain {part:?}");
        }
    };
    let q = z(&[1, 1, 2, 16], f)?;
    let wrong = z(&[1, 1, 2, 8], f)?;
    expect(
        rotary.apply(&wrong, &q, 0),
        &[
            "q must have shape (batch, heads, seq, 16) or (tokens, heads, 16)",
            "[1, 1, 2, 8]",
        ],
    );
    expect(
        rotary.apply(&q, &z(&[2, 16], f)?, 0),
        &["k must have shape", "[2, 16]"],
    );
    expect(
        rotary.apply(&z(&[1, 1, 1, 2, 16], f)?, &q, 0),
        &["q must", "[1, 1, 1, 2, 16]"],
    );
    expect(
        rotary.apply(&q, &z(&[1, 1, 3, 16], f)?, 0),
        &[
            "different sequence lengths",
            "[1, 1, 2, 16]",
            "[1, 1, 3, 16]",
        ],
    );
    expect(
        rotary.apply(&q, &z(&[2, 1, 2, 16], f)?, 0),
        &["different batch sizes"],
    );
    expect(
        rotary.apply(&z(&[3, 2, 16], f)?, &z(&[4, 2, 16], f)?, 0),
        &["different token counts"],
    );
    expect(
        rotary.apply(&q, &z(&[2, 1, 16], f)?, 0),
        &["same layout", "[2, 1, 16]"],
    );
    expect(
        rotary.apply(&q, &z(&[1, 1, 2, 16], DType::BF16)?, 0),
        &["same dtype", "BF16"],
    );
    expect(
        rotary.apply(&z(&[1, 1, 2, 16], DType::U32)?, &q, 0),
        &["q must be f16, bf16, f32 or f64", "U32"],
    );
    expect(
        rotary.apply(&q, &q, (1 << 31) - 1),
        &["offset + len 2147483649 is outside the supported positions"],
    );
    // Positions: shape, dtype, range.
    let thd = z(&[3, 2, 16], f)?;
    expect(
        rotary.apply(&q, &q, &Tensor::new(&[0u32, 1], &dev)?),
        &["positions must have shape (batch, seq) = [1, 2]", "got [2]"],
    );
    expect(
        rotary.apply(&thd, &thd, &Tensor::new(&[[0u32, 1, 2]], &dev)?),
        &["positions must have shape (tokens,) = [3]", "got [1, 3]"],
    );
    expect(
        rotary.apply(&thd, &thd, &Tensor::new(&[0f32, 1., 2.], &dev)?),
        &["positions must be an integer tensor", "F32"],
    );
    expect(
        rotary.apply(&thd, &thd, &Tensor::new(&[0i64, -1, 2], &dev)?),
        &["position -1 is outside", "2147483647"],
    );
    expect(
        rotary.apply(&thd, &thd, &Tensor::new(&[0i64, 1 << 31, 2], &dev)?),
        &["position 2147483648 is outside"],
    );
    // pe-core's errors reach the caller as data, not as text.
    let err = rotary
        .apply(&thd, &thd, &Tensor::new(&[0i64, 1 << 31, 2], &dev)?)
        .unwrap_err();
    assert!(
        matches!(
            candle_pe_core::Error::from_candle(&err),
            Some(candle_pe_core::Error::PositionOutOfRange {
                name: "position",
                value: 2147483648
            })
        ),
        "{err:?}"
    );
    let err = rotary
        .apply(&thd, &thd, &Tensor::new(&[0f32, 1., 2.], &dev)?)
        .unwrap_err()
        .context("layer 0");
    assert!(
        matches!(
            candle_pe_core::Error::from_candle(&err),
            Some(candle_pe_core::Error::NotInteger {
                dtype: DType::F32,
                ..
            })
        ),
        "{err:?}"
    );
    Ok(())
}

/// `apply_at` the way it was before the per-token CPU rotation (and still is elsewhere): the
/// cached rows gathered into tables of their own, the rotated features in the tables' dtype
/// through candle-nn's kernels, rounded once, the rest passed unchanged.
fn gather_then_kernel(
    rotary: &RotaryEmbedding,
    x: &Tensor,
    positions: &Tensor,
) -> anyhow::Result<Tensor> {
    let dtype = if x.dtype() == DType::F64 {
        DType::F64
    } else {
        DType::F32
    };
    let (cos, sin) = rotary.cache().at(positions, dtype)?;
    let (d, r) = (x.dim(D::Minus1)?, rotary.rope().config().rotary_dim());
    let turned = x.narrow(D::Minus1, 0, r)?.to_dtype(dtype)?.contiguous()?;
    let kernel = if rotary.pair_layout().is_interleaved() {
        rope_i
    } else {
        rope
    };
    let turned = if x.rank() == 4 {
        kernel(&turned, &cos, &sin)?
    } else {
        let (t, h, _) = x.dims3()?;
        let (cos, sin) = (cos.reshape((t, 1, r / 2))?, sin.reshape((t, 1, r / 2))?);
        kernel(&turned.reshape((t, h, 1, r))?, &cos, &sin)?.reshape((t, h, r))?
    };
    let turned = turned.to_dtype(x.dtype())?;
    Ok(Tensor::cat(
        &[&turned, &x.narrow(D::Minus1, r, d - r)?],
        D::Minus1,
    )?)
}

/// Bit-for-bit equality (as f64, which every input dtype widens to exactly).
fn assert_same(got: &Tensor, want: &Tensor, what: &str) -> anyhow::Result<()> {
    assert_eq!(
        (got.dims(), got.dtype()),
        (want.dims(), want.dtype()),
        "{what}"
    );
    let (got, want) = (
        got.to_dtype(DType::F64)?.flatten_all()?.to_vec1::<f64>()?,
        want.to_dtype(DType::F64)?.flatten_all()?.to_vec1::<f64>()?,
    );
    let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert!(bits(&got) == bits(&want), "{what}");
    Ok(())
}

/// The per-token CPU rotation (read from the cached rows in one pass) against the gathered
/// tables + candle-nn kernels and against the plain twin: every dtype, both layouts, both
/// pairings, whole and partial rotary, decode and prefill sizes (one thread and many),
/// distinct positions in every sequence and token so that a wrong row shows.
#[test]
fn per_token_rows_equal_gather_then_kernel_bit_for_bit() -> anyhow::Result<()> {
    let dev = Device::Cpu;
    for config in [llama31(), partial(80, 0.4), partial(64, 0.5)] {
        let d = config.head_dim;
        for interleaved in [false, true] {
            let rotary =
                RotaryEmbedding::new(config.clone())?.with_pair_layout(layout(interleaved));
            for dtype in [DType::F32, DType::BF16, DType::F16, DType::F64] {
                // (batch, heads, seq, d) at (batch, seq) positions: a ragged decode step and a
                // prefill long enough to be split across threads.
                for (batch, seq) in [(3, 1), (2, 5), (2, 300)] {
                    let q = Tensor::randn(0f32, 1.0, (batch, 4, seq, d), &dev)?.to_dtype(dtype)?;
                    let k = Tensor::randn(0f32, 1.0, (batch, 2, seq, d), &dev)?.to_dtype(dtype)?;
                    let ids: Vec<i64> = (0..(batch * seq) as i64)
                        .map(|i| (7919 * i + 100) % 9000)
                        .collect();
                    let positions = Tensor::from_vec(ids, (batch, seq), &dev)?;
                    let what = format!("d={d} interleaved={interleaved} {dtype:?} {batch}x{seq}");
                    let (fq, fk) = rotary.apply(&q, &k, &positions)?;
                    let (sq, sk) = rotary.apply_slow(&q, &k, &positions)?;
                    assert_same(&fq, &gather_then_kernel(&rotary, &q, &positions)?, &what)?;
                    assert_same(&fk, &gather_then_kernel(&rotary, &k, &positions)?, &what)?;
                    assert_same(&fq, &sq, &what)?;
                    assert_same(&fk, &sk, &what)?;
                    // The same tokens as (tokens, heads, d) at (tokens,) positions.
                    let (tq, tk, tp) = (to_thd(&q)?, to_thd(&k)?, positions.flatten_all()?);
                    let (fq, fk) = rotary.apply(&tq, &tk, &tp)?;
                    let (sq, sk) = rotary.apply_slow(&tq, &tk, &tp)?;
                    assert_same(&fq, &gather_then_kernel(&rotary, &tq, &tp)?, &what)?;
                    assert_same(&fk, &gather_then_kernel(&rotary, &tk, &tp)?, &what)?;
                    assert_same(&fq, &sq, &what)?;
                    assert_same(&fk, &sk, &what)?;
                }
            }
        }
    }
    Ok(())
}

/// The last cached row is read in place, the first row past the cache's limit is generated:
/// both give the gathered + kernel bits, in one call that mixes them too.
#[test]
fn positions_at_the_cache_limit() -> anyhow::Result<()> {
    let dev = Device::Cpu;
    for interleaved in [false, true] {
        // A small head keeps the 2^20 cached rows small.
        let rotary = RotaryEmbedding::new(partial(8, 0.5))?.with_pair_layout(layout(interleaved));
        let limit = rotary.cache().limit() as i64;
        for ids in [
            vec![limit - 1, limit - 2, 0],
            vec![limit, limit - 1, 3],
            vec![limit + 1, limit, limit - 1],
        ] {
            let positions = Tensor::new(ids.as_slice(), &dev)?;
            for dtype in [DType::F32, DType::BF16, DType::F64] {
                let q = Tensor::randn(0f32, 1.0, (3, 2, 8), &dev)?.to_dtype(dtype)?;
                let what = format!("interleaved={interleaved} {ids:?} {dtype:?}");
                let (got, _) = rotary.apply(&q, &q, &positions)?;
                assert_same(&got, &gather_then_kernel(&rotary, &q, &positions)?, &what)?;
                assert_same(&got, &rotary.apply_slow(&q, &q, &positions)?.0, &what)?;
            }
        }
    }
    Ok(())
}

#[test]
fn empty_inputs_come_back_as_they_are() -> anyhow::Result<()> {
    let dev = Device::Cpu;
    let rotary = RotaryEmbedding::new(RopeConfig::new(16, 10_000.0))?;
    // An empty sequence, batch or head count (candle-nn's kernels panic on an empty sequence).
    for shape in [(1, 2, 0, 16), (0, 2, 3, 16), (1, 0, 3, 16)] {
        let q = Tensor::zeros(shape, DType::BF16, &dev)?;
        let (rq, rk) = rotary.apply(&q, &q, 7)?;
        assert_eq!((rq.dims(), rk.dims()), (q.dims(), q.dims()));
        let positions = Tensor::zeros((shape.0, shape.2), DType::U32, &dev)?;
        let (rq, _) = rotary.apply(&q, &q, &positions)?;
        assert_eq!(rq.dims(), q.dims());
    }
    for shape in [(0, 2, 16), (3, 0, 16)] {
        let q = Tensor::zeros(shape, DType::F32, &dev)?;
        let positions = Tensor::zeros(shape.0, DType::I64, &dev)?;
        assert_eq!(rotary.apply(&q, &q, &positions)?.0.dims(), q.dims());
        assert_eq!(rotary.apply(&q, &q, 5)?.0.dims(), q.dims());
    }
    // q without heads, k with some: k still turns.
    let q = Tensor::zeros((3, 0, 16), DType::F32, &dev)?;
    let k = Tensor::randn(0f32, 1.0, (3, 2, 16), &dev)?;
    let positions = Tensor::new(&[4u32, 5, 6], &dev)?;
    let (_, rk) = rotary.apply(&q, &k, &positions)?;
    assert_eq!(max_diff(&rk, &rotary.apply(&k, &k, &positions)?.0)?, 0.0);
    Ok(())
}

#[test]
fn far_positions() -> anyhow::Result<()> {
    let dev = Device::Cpu;
    for interleaved in [false, true] {
        let rotary = RotaryEmbedding::new(RopeConfig::new(16, 10_000.0))?
            .with_pair_layout(layout(interleaved));
        let far = (1u32 << 31) - 8;
        let ids: Vec<u32> = (far..far + 8).collect();
        // Past the cache's limit the rows are generated: the f64 rotation to f32 precision.
        let q = Tensor::randn(0f32, 1.0, (8, 2, 16), &dev)?;
        let (got, _) = rotary.apply(&q, &q, &Tensor::new(ids.as_slice(), &dev)?)?;
        let exact = reference(&rotary, &q, &ids)?;
        assert!(max_diff(&got, &exact)? <= 2e-6, "interleaved={interleaved}");
        let (by_offset, _) = rotary.apply(&q, &q, far as usize)?;
        assert_eq!(max_diff(&by_offset, &got)?, 0.0);
        // The same in (batch, heads, seq, d), against candle-nn's plain rope.
        let q = Tensor::randn(0f32, 1.0, (1, 2, 8, 16), &dev)?;
        let (got, _) = rotary.apply(&q, &q, far as usize)?;
        let (cos, sin) = rotary.rope().range(far as usize, 8, DType::F32, &dev)?;
        let slow = if interleaved {
            rope_i_slow(&q, &cos, &sin)?
        } else {
            rope_slow(&q, &cos, &sin)?
        };
        assert_eq!(max_diff(&got, &slow)?, 0.0);
    }
    Ok(())
}

#[test]
fn f32_tables_serve_every_input_dtype() -> anyhow::Result<()> {
    let dev = Device::Cpu;
    let rotary = RotaryEmbedding::new(RopeConfig::new(16, 10_000.0))?;
    for dtype in [DType::BF16, DType::F16, DType::F32] {
        let q = Tensor::zeros((1, 1, 4, 16), dtype, &dev)?;
        rotary.apply(&q, &q, 0)?;
    }
    assert!(rotary.cache().cached_rows(DType::F32, &dev) >= 4);
    assert_eq!(rotary.cache().cached_rows(DType::BF16, &dev), 0);
    // f64 inputs turn in f64, with f64 tables.
    let q = Tensor::randn(0f64, 1.0, (3, 2, 16), &dev)?;
    let ids = [5u32, 70_000, 1 << 30];
    let (got, _) = rotary.apply(&q, &q, &Tensor::new(&ids, &dev)?)?;
    assert_eq!(got.dtype(), DType::F64);
    // The same products and sums in the same order, in f64: the same bits.
    assert_eq!(max_diff(&got, &reference(&rotary, &q, &ids)?)?, 0.0);
    Ok(())
}

#[test]
fn strided_inputs_equal_contiguous_ones() -> anyhow::Result<()> {
    let dev = Device::Cpu;
    for interleaved in [false, true] {
        let rotary = RotaryEmbedding::new(partial(64, 0.5))?.with_pair_layout(layout(interleaved));
        // As attention makes them: (batch, seq, heads, d) projected, then transposed.
        let q = Tensor::randn(0f32, 1.0, (2, 5, 4, 64), &dev)?.transpose(1, 2)?;
        assert!(!q.is_contiguous());
        let (got, _) = rotary.apply(&q, &q, 300)?;
        let (want, _) = rotary.apply(&q.contiguous()?, &q.contiguous()?, 300)?;
        assert_eq!(max_diff(&got, &want)?, 0.0);
        // (tokens, heads, d) narrowed out of a fused qkv projection.
        let qkv = Tensor::randn(0f32, 1.0, (6, 12, 64), &dev)?.to_dtype(DType::BF16)?;
        let (q, k) = (qkv.narrow(1, 0, 8)?, qkv.narrow(1, 8, 2)?);
        let positions = Tensor::new(&[9u32, 10, 11, 0, 1, 2], &dev)?;
        let (got_q, got_k) = rotary.apply(&q, &k, &positions)?;
        let (want_q, want_k) = rotary.apply(&q.contiguous()?, &k.contiguous()?, &positions)?;
        assert_eq!(max_diff(&got_q, &want_q)?, 0.0);
        assert_eq!(max_diff(&got_k, &want_k)?, 0.0);
    }
    Ok(())
}

/// Dynamic NTK keeps transformers' state: the frequencies of the longest sequence seen, reset
/// by a sequence shorter than max_position_embeddings (the calls of the llama_dynamic fixture).
#[test]
fn dynamic_ntk_grows_and_resets_like_transformers() -> anyhow::Result<()> {
    use candle_pe_core::Dynamic;
    let dev = Device::Cpu;
    let config = RopeConfig {
        max_position_embeddings: Some(4096),
        ..RopeConfig::new(64, 10_000.0).with_rope_type(RopeType::Dynamic(Dynamic { factor: 2.0 }))
    };
    let rotary = RotaryEmbedding::new(config)?;
    let layer = rotary.clone(); // layers share the state
    assert_eq!(rotary.tracked_len(), Some(4096));
    let q = Tensor::randn(0f32, 1.0, (2, 2, 64), &dev)?;
    for (reach, expected) in [
        (100, 4096),
        (6000, 6000),
        (9000, 9000),
        (5000, 9000),
        (100, 4096),
    ] {
        let positions = Tensor::new(&[0u32, reach - 1], &dev)?;
        let (got, _) = layer.apply(&q, &q, &positions)?;
        assert_eq!(
            rotary.tracked_len(),
            Some(expected as usize),
            "after {reach}"
        );
        let (cos, sin) = rotary.rope().at(
            At::positions(&positions).with_tracked_len(expected as usize),
            DType::F32,
        )?;
        // Token t (heads, d) turned by row t: as (1, heads, 1, d) with a one-row table.
        let want = (0..2)
            .map(|t| {
                let x = q.get(t)?.unsqueeze(0)?.unsqueeze(2)?.contiguous()?;
                let (c, s) = (cos.narrow(0, t, 1)?, sin.narrow(0, t, 1)?);
                rope_slow(&x, &c, &s)?.squeeze(2)?.squeeze(0)
            })
            .collect::<candle_core::Result<Vec<_>>>()?;
        let want = Tensor::stack(&want, 0)?;
        assert_eq!(max_diff(&got, &want)?, 0.0, "reach {reach}");
    }
    // apply (consecutive positions) follows the same rule.
    let q = Tensor::randn(0f32, 1.0, (1, 2, 3, 64), &dev)?;
    rotary.apply(&q, &q, 7000)?;
    assert_eq!(rotary.tracked_len(), Some(7003));
    rotary.apply(&q, &q, 0)?;
    assert_eq!(rotary.tracked_len(), Some(4096));
    Ok(())
}

/// M-RoPE: text-only ids rotate as apply_at does, and 3-D ids as the M-RoPE tables say.
#[test]
fn mrope_rotates_by_section() -> anyhow::Result<()> {
    let dev = Device::Cpu;
    let json = r#"{"hidden_size": 256, "num_attention_heads": 2, "rope_theta": 1000000.0,
        "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]}}"#;
    let config = RopeConfig::from_hf_config(&serde_json::from_str(json)?)?;
    let rotary = RotaryEmbedding::new(config)?;
    let q = Tensor::randn(0f32, 1.0, (2, 2, 3, 128), &dev)?;
    let k = Tensor::randn(0f32, 1.0, (2, 1, 3, 128), &dev)?;
    let text = Tensor::new(&[[5u32, 6, 7], [0, 1, 2]], &dev)?;
    let ids = Tensor::stack(&[&text, &text, &text], 0)?;
    let (a, b) = rotary.apply(&q, &k, At::mrope(&ids))?;
    let (c, d) = rotary.apply(&q, &k, &text)?;
    assert_eq!((max_diff(&a, &c)?, max_diff(&b, &d)?), (0.0, 0.0));
    // Image patches: the height and width rows differ.
    let hw = Tensor::new(
        &[
            [[5u32, 5, 5], [0, 0, 0]],
            [[5, 6, 6], [0, 0, 1]],
            [[5, 5, 6], [0, 1, 1]],
        ],
        &dev,
    )?;
    let (got, _) = rotary.apply(&q, &k, At::mrope(&hw))?;
    let (cos, sin) = rotary.rope().at(At::mrope(&hw), DType::F32)?;
    let want = (0..2)
        .map(|b| rope_slow(&q.narrow(0, b, 1)?, &cos.get(b)?, &sin.get(b)?))
        .collect::<candle_core::Result<Vec<_>>>()?;
    assert_eq!(max_diff(&got, &Tensor::cat(&want, 0)?)?, 0.0);
    let err = rotary
        .apply(&q, &k, At::mrope(&text))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("positions must have shape") && err.contains("[3, 2, 3]"),
        "{err}"
    );
    Ok(())
}

/// Positions on the host that are one run from an offset in every sequence rotate as that
/// offset does (`Positions::as_offset`), with the bits of the plain twin at the same positions
/// (gathered tables): random configs of every rope type, every dtype, both pairings, both
/// layouts, both backends, offsets up to 2^31 - 1, q and k together and k alone.
#[test]
fn positions_in_one_run_rotate_as_their_offset() -> anyhow::Result<()> {
    use candle_pe_core::Positions;
    use pe_testkit::{random_offset, random_rope_config, same_bits, seeded_rng};
    use rand::Rng;

    let mut rng = seeded_rng("positions_in_one_run_rotate_as_their_offset");
    let dev = Device::Cpu;
    for case in 0..40 {
        let config = random_rope_config(&mut rng);
        let d = config.head_dim;
        let backend = [TableBackend::default(), TableBackend::Kernel][case % 2];
        let rotary = RotaryEmbedding::new(config.clone())?
            .with_pair_layout(layout(case % 4 < 2))
            .with_backend(backend);
        let seq = [1, 5][rng.random_range(0..2)];
        let offset = random_offset(&mut rng, seq);
        let run: Vec<i64> = (0..seq as i64).map(|i| offset as i64 + i).collect();
        let ids = Tensor::from_vec([run.clone(), run.clone()].concat(), (2, seq), &dev)?;
        let tokens = Tensor::from_vec(run, seq, &dev)?;
        assert_eq!(Positions::new(&ids)?.as_offset(), Some(offset));
        for dtype in [DType::F32, DType::F16, DType::BF16, DType::F64] {
            let what = format!("case {case}: {config:?} {backend:?} {dtype:?} at {offset}");
            let x = |dims: &[usize]| Tensor::randn(0f32, 1.0, dims, &dev)?.to_dtype(dtype);
            let (q, k) = (x(&[2, 3, seq, d])?, x(&[2, 1, seq, d])?);
            let (tq, tk) = (x(&[seq, 3, d])?, x(&[seq, 1, d])?);
            for (q, k, ids, kind) in [
                (&q, &k, &ids, "(batch, seq)"),
                (&tq, &tk, &tokens, "(tokens,)"),
            ] {
                let (got_q, got_k) = rotary.apply(q, k, ids)?;
                let (want_q, want_k) = rotary.apply_slow(q, k, ids)?;
                same_bits(&got_q, &want_q, &format!("{what}: q at {kind} positions"))?;
                same_bits(&got_k, &want_k, &format!("{what}: k at {kind} positions"))?;
                let got_k = rotary.apply_k(k, ids)?;
                same_bits(
                    &got_k,
                    &want_k,
                    &format!("{what}: k alone at {kind} positions"),
                )?;
            }
        }
    }
    // Runs from different offsets, or not runs, are not an offset.
    for ids in [[[3i64, 4], [4, 5]], [[3, 5], [3, 5]], [[1, 0], [1, 0]]] {
        let ids = Tensor::new(&ids, &dev)?;
        assert_eq!(Positions::new(&ids)?.as_offset(), None, "{ids}");
    }
    Ok(())
}

/// Per-token positions of a longrope past its original context read the long factors' cached
/// rows in one pass on the CPU, with the bits of the plain twin (generated, gathered tables);
/// within the original context, the short factors' rows.
#[test]
fn longrope_per_token_rows_come_from_the_long_cache() -> anyhow::Result<()> {
    use candle_pe_core::Longrope;
    let dev = Device::Cpu;
    let factors = |step: f64| (0..8).map(|i| 1.0 + step * i as f64).collect();
    let config = RopeConfig {
        max_position_embeddings: Some(256),
        ..RopeConfig::new(16, 10_000.0).with_rope_type(RopeType::Longrope(Longrope {
            short_factor: factors(0.5),
            long_factor: factors(4.0),
            factor: None,
            original_max_position_embeddings: Some(64),
            attention_factor: None,
            short_mscale: None,
            long_mscale: None,
        }))
    };
    for interleaved in [false, true] {
        let rotary = RotaryEmbedding::new(config.clone())?.with_pair_layout(layout(interleaved));
        // Within the original context first: the long cache stays empty until a call past it.
        for (ids, long) in [
            ([[7i64, 3, 10], [5, 63, 0]], false),
            ([[70, 3, 100], [5, 65, 0]], true),
        ] {
            let positions = Tensor::new(&ids, &dev)?;
            for dtype in [DType::F32, DType::BF16, DType::F16, DType::F64] {
                let q = Tensor::randn(0f32, 1.0, (2, 4, 3, 16), &dev)?.to_dtype(dtype)?;
                let k = Tensor::randn(0f32, 1.0, (2, 2, 3, 16), &dev)?.to_dtype(dtype)?;
                let what = format!("{ids:?} interleaved={interleaved} {dtype:?}");
                let (fq, fk) = rotary.apply(&q, &k, &positions)?;
                let (sq, sk) = rotary.apply_slow(&q, &k, &positions)?;
                assert_same(&fq, &sq, &what)?;
                assert_same(&fk, &sk, &what)?;
            }
            let held = rotary.cache().cached_long_rows(DType::F32, &dev);
            assert_eq!(held >= 101, long, "{ids:?}: {held} long rows");
        }
    }
    Ok(())
}
