//! M-RoPE with a query scale: `apply_mrope` multiplies q by the rope's query scale at the
//! temporal row, after the rotation and before the one rounding. The CPU's one pass and candle-nn's
//! kernels (`TableBackend::Generic`) agree bit for bit with the plain twin, in every dtype, with
//! contiguous and interleaved sections, both pairings and partial rotary; keys are not scaled;
//! text-only ids give `apply_at`'s bits; `apply_k_mrope` turns keys alone as `apply_mrope` turns
//! them.

use candle_core::{DType, Device, Tensor};
use candle_pe_core::{MropeSlots, PairLayout, QueryScale, RopeConfig, TableBackend};
use candle_pe_nn::At;
use candle_pe_nn::RotaryEmbedding;

/// The pair layout a test's `interleaved` flag names.
fn layout(interleaved: bool) -> PairLayout {
    match interleaved {
        true => PairLayout::Interleaved,
        false => PairLayout::Halves,
    }
}

const DTYPES: [DType; 4] = [DType::F32, DType::BF16, DType::F16, DType::F64];

fn bits(t: &Tensor) -> anyhow::Result<Vec<u64>> {
    let v = t.to_dtype(DType::F64)?.flatten_all()?.to_vec1::<f64>()?;
    Ok(v.into_iter().map(f64::to_bits).collect())
}

/// A step of the scale every 16 positions.
const SCALE: QueryScale = QueryScale::Llama4Scaling {
    beta: 0.1,
    original_max_position_embeddings: 16,
};

/// (config, pair interleaving): contiguous sections, Qwen3-VL's interleaved sections, adjacent
/// pairs, partial rotary.
fn cases() -> Vec<(RopeConfig, bool)> {
    let mrope = |head_dim, section: [usize; 3], interleaved: bool, partial| RopeConfig {
        mrope_section: Some(section.to_vec()),
        mrope_slots: match interleaved {
            true => MropeSlots::Alternating,
            false => MropeSlots::Sections,
        },
        partial_rotary_factor: partial,
        query_scale: Some(SCALE),
        ..RopeConfig::new(head_dim, 1e6)
    };
    vec![
        (mrope(32, [4, 6, 6], false, 1.0), false),
        (mrope(32, [6, 5, 5], true, 1.0), false),
        (mrope(32, [4, 6, 6], false, 1.0), true),
        (mrope(64, [4, 6, 6], false, 0.5), false),
    ]
}

/// `(3, batch, seq)` ids whose temporal row and spatial rows fall on different sides of the
/// scale's steps (image patches at 15 .. 17 and past 100,000), so that a scale read from another
/// row shows.
fn ids(batch: usize, seq: usize) -> anyhow::Result<Tensor> {
    let mut rows: [Vec<i64>; 3] = Default::default();
    for b in 0..batch {
        for s in 0..seq {
            let start = [15i64, 100_003][b % 2] + (s / 4) as i64 * 3;
            rows[0].push(start);
            rows[1].push(start + (s % 4 / 2) as i64);
            rows[2].push(start + (s % 2) as i64 + 1);
        }
    }
    Ok(Tensor::from_vec(
        rows.concat(),
        (3, batch, seq),
        &Device::Cpu,
    )?)
}

#[test]
fn one_pass_kernels_and_plain_twin_agree_bit_for_bit() -> anyhow::Result<()> {
    let dev = Device::Cpu;
    for (config, interleaved) in cases() {
        let d = config.head_dim;
        let rotary = RotaryEmbedding::new(config.clone())?.with_pair_layout(layout(interleaved));
        let generic = rotary.clone().with_backend(TableBackend::Generic);
        let plain = RotaryEmbedding::new(RopeConfig {
            query_scale: None,
            ..config.clone()
        })?
        .with_pair_layout(layout(interleaved));
        for dtype in DTYPES {
            // A decode step of two sequences, and a prefill long enough to be split across threads.
            for (batch, seq) in [(2, 1), (2, 8), (2, 300)] {
                let what = format!("{config:?} pairs {interleaved} {dtype:?} {batch}x{seq}");
                let q = Tensor::randn(0f32, 1.0, (batch, 4, seq, d), &dev)?.to_dtype(dtype)?;
                let k = Tensor::randn(0f32, 1.0, (batch, 2, seq, d), &dev)?.to_dtype(dtype)?;
                let ids = ids(batch, seq)?;
                let (q1, k1) = rotary.apply(&q, &k, At::mrope(&ids))?;
                let (q2, k2) = rotary.apply_slow(&q, &k, At::mrope(&ids))?;
                assert_eq!(bits(&q1)?, bits(&q2)?, "{what}: one pass vs plain twin");
                assert_eq!(bits(&k1)?, bits(&k2)?, "{what}");
                // candle-nn's kernels on the generic generator's tables, against the plain twin
                // on the same tables (and against the one pass where the two generators give the
                // same f32 tables; their f64 tables may differ in the last bit).
                let (q3, k3) = generic.apply(&q, &k, At::mrope(&ids))?;
                let (q4, k4) = generic.apply_slow(&q, &k, At::mrope(&ids))?;
                assert_eq!(bits(&q3)?, bits(&q4)?, "{what}: kernels vs plain twin");
                assert_eq!(bits(&k3)?, bits(&k4)?, "{what}");
                if dtype != DType::F64 {
                    assert_eq!(bits(&q1)?, bits(&q3)?, "{what}: one pass vs kernels");
                    assert_eq!(bits(&k1)?, bits(&k3)?, "{what}");
                }
                // Keys are not scaled.
                let (_, k5) = plain.apply(&q, &k, At::mrope(&ids))?;
                assert_eq!(bits(&k1)?, bits(&k5)?, "{what}: keys");
                // Keys alone (a cache kept before rotation) turn as they do beside q.
                assert_eq!(
                    bits(&rotary.apply_k(&k, At::mrope(&ids))?)?,
                    bits(&k1)?,
                    "{what}: k alone"
                );
                assert_eq!(
                    bits(&generic.apply_k(&k, At::mrope(&ids))?)?,
                    bits(&k3)?,
                    "{what}"
                );
                // The rotation, then the factor at the temporal row, in f32 (f64), rounded once.
                let math = if dtype == DType::F64 {
                    DType::F64
                } else {
                    DType::F32
                };
                let (turned, _) =
                    plain.apply(&q.to_dtype(math)?, &k.to_dtype(math)?, At::mrope(&ids))?;
                let s = SCALE.at(&ids.get(0)?, math)?.reshape((batch, 1, seq, 1))?;
                let expected = turned.broadcast_mul(&s)?.to_dtype(dtype)?;
                assert_eq!(
                    bits(&q1)?,
                    bits(&expected)?,
                    "{what}: scaled at the temporal row"
                );
            }
        }
    }
    Ok(())
}

/// Three equal rows are text: `apply_mrope` gives `apply_at`'s bits, scale included.
#[test]
fn text_ids_scale_as_apply_at() -> anyhow::Result<()> {
    let dev = Device::Cpu;
    for (config, interleaved) in cases() {
        let rotary = RotaryEmbedding::new(config.clone())?.with_pair_layout(layout(interleaved));
        let d = config.head_dim;
        for dtype in DTYPES {
            let q = Tensor::randn(0f32, 1.0, (2, 4, 3, d), &dev)?.to_dtype(dtype)?;
            let k = Tensor::randn(0f32, 1.0, (2, 2, 3, d), &dev)?.to_dtype(dtype)?;
            let text = Tensor::new(&[[14i64, 15, 16], [40_000, 40_001, 2_000_000]], &dev)?;
            let ids = Tensor::stack(&[&text, &text, &text], 0)?;
            let (a, b) = rotary.apply(&q, &k, At::mrope(&ids))?;
            let (c, e) = rotary.apply(&q, &k, &text)?;
            assert_eq!(bits(&a)?, bits(&c)?, "{config:?} {dtype:?}");
            assert_eq!(bits(&b)?, bits(&e)?, "{config:?} {dtype:?}");
        }
    }
    Ok(())
}
