//! Rope without tables (`Rope::rotate_without_tables`, the rope kernel of pe-core's
//! `src/cuda/rope.cu`), built for the host: the same bits as the rotation by the CPU's tables,
//! for random configs of every rope type the oracle knows, every dtype, both pair layouts, both
//! input layouts, at per-token positions up to 2^31 - 1, at offsets and at M-RoPE positions, q
//! and k alone and in one launch. On a GPU the same code runs as the kernel; here
//! `TableBackend::Kernel` runs its host build.

use candle_core::{DType, Device, Tensor};
use candle_pe_formats::FromHfConfig;
use candle_pe_nn::{At, PairLayout, Positions, Rope, RotaryEmbedding, TableBackend};
use pe_testkit::{random_mrope_config, random_offset, random_rope_config};
use pe_testkit::{same_bits as same, seeded_rng};
use rand::Rng;

const DTYPES: [DType; 4] = [DType::F32, DType::F16, DType::BF16, DType::F64];

/// A random position per token: the edges of an anchor span, the top of the range, anywhere.
fn positions(rng: &mut impl Rng, n: usize) -> Vec<i64> {
    (0..n)
        .map(|_| match rng.random_range(0..5) {
            0 => rng.random_range(0..200),
            1 => 64 * rng.random_range(0..1_000_000) + [0, 63][rng.random_range(0..2)],
            2 => (1i64 << 31) - 1 - rng.random_range(0..100),
            _ => rng.random_range(0..(1i64 << 31)),
        })
        .collect()
}

#[test]
fn rope_without_tables_has_the_bits_of_the_tables() -> anyhow::Result<()> {
    let mut rng = seeded_rng("rope_without_tables_has_the_bits_of_the_tables");
    let dev = Device::Cpu;
    for case in 0..40 {
        let config = random_rope_config(&mut rng);
        let d = config.head_dim;
        let pairs = [PairLayout::Halves, PairLayout::Interleaved][case % 2];
        let tables = RotaryEmbedding::new(config.clone())?.with_pair_layout(pairs);
        let kernel = tables.clone().with_backend(TableBackend::Kernel);
        let rope = Rope::new(config.clone())?.with_backend(TableBackend::Kernel);
        let seq = [1, 4][rng.random_range(0..2)];
        let ids = Tensor::from_vec(positions(&mut rng, 2 * seq), (2, seq), &dev)?;
        let ids = Positions::new(&ids)?;
        let tokens = Tensor::from_vec(positions(&mut rng, 5), 5, &dev)?;
        let tokens = Positions::new(&tokens)?;
        let offset = random_offset(&mut rng, 5);
        for dtype in DTYPES {
            let what = format!("case {case}: {config:?} {pairs:?} {dtype:?}");
            let q = Tensor::randn(0f32, 1.0, (2, 3, seq, d), &dev)?.to_dtype(dtype)?;
            let k = Tensor::randn(0f32, 1.0, (2, 1, seq, d), &dev)?.to_dtype(dtype)?;
            let t = Tensor::randn(0f32, 1.0, (5, 2, d), &dev)?.to_dtype(dtype)?;
            // Each side with the frequencies of the sequence its largest position reaches.
            let at_ids = At::positions(&ids).with_tracked_len(ids.end());
            let at_tokens = At::positions(&tokens).with_tracked_len(tokens.end());
            let at_offset = At::offset(offset).with_tracked_len(offset + seq);
            let at_offset_t = At::offset(offset).with_tracked_len(offset + 5);
            for (x, at, kind) in [
                (&q, at_ids, "q at (batch, seq) positions"),
                (&k, at_ids, "k at (batch, seq) positions"),
                (&t, at_tokens, "(tokens, heads, d) at positions"),
                (&q, at_offset, "q at an offset"),
                (&t, at_offset_t, "(tokens, heads, d) at an offset"),
            ] {
                let want = tables.apply_k(x, at)?;
                let got = rope.rotate_without_tables(&[x], at, pairs)?;
                let got = got.expect("the kernels' host build runs on the CPU");
                same(&got[0], &want, &format!("{what}: {kind}"))?;
            }
            // q and k in one launch (one cos and sin for both); k in another dtype alone.
            let t1 = Tensor::randn(0f32, 1.0, (5, 3, d), &dev)?.to_dtype(dtype)?;
            let other = [DType::F32, DType::BF16][usize::from(dtype == DType::F32)];
            let k_other = k.to_dtype(other)?;
            for (x, y, at, kind) in [
                (&q, &k, at_ids, "q and k at (batch, seq) positions"),
                (&q, &k, at_offset, "q and k at an offset"),
                (&t1, &t, at_tokens, "(tokens, heads, d) pair at positions"),
                (&q, &k_other, at_offset, "q and k in another dtype"),
            ] {
                let got = rope.rotate_without_tables(&[x, y], at, pairs)?;
                let got = got.expect("the kernels' host build runs on the CPU");
                let want = [tables.apply_k(x, at)?, tables.apply_k(y, at)?];
                same(&got[0], &want[0], &format!("{what}: {kind}, q"))?;
                same(&got[1], &want[1], &format!("{what}: {kind}, k"))?;
            }
            // The block routes offsets and per-token positions through the kernel where it
            // runs: q and k in one launch, k alone in another.
            for (at, kind) in [(at_ids, "positions"), (At::offset(offset), "an offset")] {
                let (kq, kk) = kernel.apply(&q, &k, at)?;
                let (tq, tk) = tables.apply(&q, &k, at)?;
                same(&kq, &tq, &format!("{what}: apply at {kind}, q"))?;
                same(&kk, &tk, &format!("{what}: apply at {kind}, k"))?;
                let kk = kernel.apply_k(&k, at)?;
                same(&kk, &tk, &format!("{what}: apply_k at {kind}"))?;
            }
        }
    }
    Ok(())
}

/// M-RoPE: each pair at the position of its row (temporal, height, width), both slot layouts,
/// positions up to 2^31 - 1: the bits of the rotation by the M-RoPE tables.
#[test]
fn mrope_without_tables_has_the_bits_of_the_tables() -> anyhow::Result<()> {
    let mut rng = seeded_rng("mrope_without_tables_has_the_bits_of_the_tables");
    let dev = Device::Cpu;
    for case in 0..24 {
        let config = random_mrope_config(&mut rng);
        let pairs = [PairLayout::Halves, PairLayout::Interleaved][case / 2 % 2];
        let tables = RotaryEmbedding::new(config.clone())?.with_pair_layout(pairs);
        let kernel = tables.clone().with_backend(TableBackend::Kernel);
        let rope = Rope::new(config.clone())?.with_backend(TableBackend::Kernel);
        let (batch, seq) = (rng.random_range(1..=2), rng.random_range(1..=6));
        let ids = positions(&mut rng, 3 * batch * seq);
        let ids = Positions::new(&Tensor::from_vec(ids, (3, batch, seq), &dev)?)?;
        let at = At::mrope(&ids).with_tracked_len(ids.end());
        for dtype in DTYPES {
            let what = format!("case {case}: {config:?} {pairs:?} {dtype:?}");
            let d = config.head_dim;
            let q = Tensor::randn(0f32, 1.0, (batch, 3, seq, d), &dev)?.to_dtype(dtype)?;
            let k = Tensor::randn(0f32, 1.0, (batch, 1, seq, d), &dev)?.to_dtype(dtype)?;
            let (tq, tk) = tables.apply(&q, &k, at)?;
            let (kq, kk) = kernel.apply(&q, &k, at)?;
            same(&kq, &tq, &format!("{what}: q"))?;
            same(&kk, &tk, &format!("{what}: k"))?;
            let direct = rope
                .rotate_without_tables(&[&q, &k], at, pairs)?
                .expect("runs");
            same(&direct[0], &tq, &format!("{what}: direct q"))?;
            same(&direct[1], &tk, &format!("{what}: direct k"))?;
            same(&kernel.apply_k(&k, at)?, &tk, &format!("{what}: apply_k"))?;
        }
    }
    Ok(())
}

/// The rope kernel splits the heads of a launch among more threads the fewer tokens it turns
/// (one thread per head at a decode step, one for all heads at a long prefill; pe-core's
/// `rope_groups`), and turns a thread's heads four at a time, then the rest: q of 9 heads and k
/// of 5, with token counts that give 14, 4, 3, 2 and 1 threads per (token, slot), whole and
/// partial rotary, both pair layouts, every dtype, have the bits of the tables' rotation.
#[test]
fn rope_without_tables_has_the_same_bits_in_any_head_groups() -> anyhow::Result<()> {
    let mut rng = seeded_rng("rope_without_tables_has_the_same_bits_in_any_head_groups");
    let dev = Device::Cpu;
    // Slots per token: 4 (d 8, whole), 6 (d 8, rotary 4); 2^18 threads a launch.
    let whole = candle_pe_nn::RopeConfig::new(8, 10_000.0);
    let partial = candle_pe_nn::RopeConfig::new(8, 500_000.0).with_rotary_dim(4);
    for (config, tokens) in [
        (&whole, [1, 16_384, 30_000, 40_000, 70_000]),
        (&partial, [1, 11_000, 20_000, 30_000, 50_000]),
    ] {
        let tables = RotaryEmbedding::new(config.clone())?;
        let rope = Rope::new(config.clone())?.with_backend(TableBackend::Kernel);
        for (case, tokens) in tokens.into_iter().enumerate() {
            let pairs = [PairLayout::Halves, PairLayout::Interleaved][case % 2];
            let tables = tables.clone().with_pair_layout(pairs);
            let ids = Tensor::from_vec(positions(&mut rng, tokens), tokens, &dev)?;
            let ids = Positions::new(&ids)?;
            let at = At::positions(&ids).with_tracked_len(ids.end());
            let rotary = config.rotary_dim();
            for dtype in DTYPES {
                let what = format!("{tokens} tokens, rotary {rotary}, {pairs:?} {dtype:?}");
                let q = Tensor::randn(0f32, 1.0, (tokens, 9, 8), &dev)?.to_dtype(dtype)?;
                let k = Tensor::randn(0f32, 1.0, (tokens, 5, 8), &dev)?.to_dtype(dtype)?;
                let got = rope.rotate_without_tables(&[&q, &k], at, pairs)?;
                let got = got.expect("the kernels' host build runs on the CPU");
                same(&got[0], &tables.apply_k(&q, at)?, &format!("{what}: q"))?;
                same(&got[1], &tables.apply_k(&k, at)?, &format!("{what}: k"))?;
            }
        }
    }
    Ok(())
}

/// Where the kernels do not run (the CPU generator's backend) the answer is `None`, for the
/// tables' path; empty inputs stay empty; q and k must share their tokens.
#[test]
fn rope_without_tables_declines_and_keeps_empty_inputs() -> anyhow::Result<()> {
    let dev = Device::Cpu;
    let rope = Rope::new(candle_pe_nn::RopeConfig::new(8, 10_000.0))?;
    let halves = PairLayout::Halves;
    let x = Tensor::zeros((1, 2, 3, 8), DType::F32, &dev)?;
    assert!(rope.rotate_without_tables(&[&x], 5, halves)?.is_none());
    let kernel = rope.with_backend(TableBackend::Kernel);
    let empty = Tensor::zeros((0, 2, 8), DType::BF16, &dev)?;
    let none = Tensor::zeros(0, DType::U32, &dev)?;
    let got = kernel.rotate_without_tables(&[&empty], &none, halves)?;
    assert_eq!(got.expect("runs")[0].dims(), &[0, 2, 8]);
    let wrong = Tensor::zeros((1, 2, 3, 6), DType::F32, &dev)?;
    let err = kernel
        .rotate_without_tables(&[&wrong], 0, halves)
        .unwrap_err();
    assert!(err.to_string().contains("(batch, heads, seq, 8)"), "{err}");
    let k = Tensor::zeros((1, 1, 4, 8), DType::F32, &dev)?;
    let err = kernel
        .rotate_without_tables(&[&x, &k], 0, halves)
        .unwrap_err();
    assert!(
        err.to_string().contains("the tokens of [1, 2, 3, 8]"),
        "{err}"
    );
    Ok(())
}

/// A shift without tables (`Rope::shift_without_tables`, the rope kernel turning each token by
/// its distance): the bits of the plain twin's rotation by the shift tables, for random configs
/// of every rope type, every dtype, both pair layouts, both input layouts, between offsets
/// (either way, up to 2^31 - 1 apart), per-token positions and M-RoPE positions.
#[test]
fn shift_without_tables_has_the_bits_of_the_tables() -> anyhow::Result<()> {
    let mut rng = seeded_rng("shift_without_tables_has_the_bits_of_the_tables");
    let dev = Device::Cpu;
    for case in 0..40 {
        let mrope = case % 4 == 3;
        let config = match mrope {
            true => random_mrope_config(&mut rng),
            false => random_rope_config(&mut rng),
        };
        let d = config.head_dim;
        let pairs = [PairLayout::Halves, PairLayout::Interleaved][case / 2 % 2];
        let tables = RotaryEmbedding::new(config.clone())?.with_pair_layout(pairs);
        let kernel = tables.clone().with_backend(TableBackend::Kernel);
        let rope = Rope::new(config.clone())?.with_backend(TableBackend::Kernel);
        let (batch, seq) = (rng.random_range(1..=2), rng.random_range(1..=4));
        let mut draw = |shape: &[usize]| -> anyhow::Result<Positions> {
            let n = shape.iter().product();
            Ok(Positions::new(&Tensor::from_vec(
                positions(&mut rng, n),
                shape,
                &dev,
            )?)?)
        };
        let lead: &[usize] = if mrope {
            &[3, batch, seq]
        } else {
            &[batch, seq]
        };
        let (from, to) = (draw(lead)?, draw(lead)?);
        let tokens = batch * seq;
        let (from_t, to_t) = (draw(&[tokens])?, draw(&[tokens])?);
        let offsets = [random_offset(&mut rng, seq), random_offset(&mut rng, seq)];
        for dtype in DTYPES {
            let what = format!("case {case}: {config:?} {pairs:?} {dtype:?}");
            let k = Tensor::randn(0f32, 1.0, (batch, 2, seq, d), &dev)?.to_dtype(dtype)?;
            let flat = Tensor::randn(0f32, 1.0, (tokens, 2, d), &dev)?.to_dtype(dtype)?;
            let side = |p| match mrope {
                true => At::mrope(p),
                false => At::positions(p),
            };
            let mut moves = vec![(&k, side(&from), side(&to), "(batch, seq) positions")];
            if !mrope {
                let [a, b] = offsets;
                moves.extend([
                    (&k, At::offset(a), At::offset(b), "offsets"),
                    (&k, At::offset(b), At::offset(a), "offsets back"),
                    (&flat, side(&from_t), side(&to_t), "(tokens,) positions"),
                ]);
            }
            for (x, f, t, kind) in moves {
                let what = format!("{what}: {kind}");
                let want = tables.shift_slow(x, f, t)?;
                same(&kernel.shift(x, f, t)?, &want, &what)?;
                // Both sides in the spectrum of one length: the kernel takes every shift.
                let len = (1usize << 31) - 1;
                let (f, t) = (f.with_tracked_len(len), t.with_tracked_len(len));
                let got = rope.shift_without_tables(x, f, t, pairs)?;
                let got = got.expect("one spectrum: the kernels' host build runs on the CPU");
                same(
                    &got,
                    &tables.shift_slow(x, f, t)?,
                    &format!("{what}, one length"),
                )?;
            }
        }
    }
    Ok(())
}

/// A shift between two spectra (dynamic NTK grown from one length to another) is left to the
/// tables (`None`); on the CPU generator's backend every shift is; an empty k stays empty.
#[test]
fn shift_without_tables_declines_two_spectra() -> anyhow::Result<()> {
    let dev = Device::Cpu;
    let json = r#"{"hidden_size": 64, "num_attention_heads": 2, "rope_theta": 10000.0,
        "max_position_embeddings": 64, "rope_scaling": {"type": "dynamic", "factor": 2.0}}"#;
    let config = candle_pe_nn::RopeConfig::from_hf_config(&serde_json::from_str(json)?)?;
    let kernel = Rope::new(config.clone())?.with_backend(TableBackend::Kernel);
    let halves = PairLayout::Halves;
    let k = Tensor::randn(0f32, 1.0, (1, 2, 3, 32), &dev)?;
    let runs = |from: At, to: At| -> anyhow::Result<bool> {
        Ok(kernel.shift_without_tables(&k, from, to, halves)?.is_some())
    };
    // Grown from 64 positions to 500: two spectra. Both within the original 64: one.
    let (at_0, at_5) = (At::offset(0), At::offset(5));
    assert!(!runs(
        at_0.with_tracked_len(64),
        at_5.with_tracked_len(500)
    )?);
    assert!(runs(at_0.with_tracked_len(10), at_5.with_tracked_len(64))?);
    let cpu = Rope::new(config)?;
    assert!(cpu.shift_without_tables(&k, 0, 5, halves)?.is_none());
    let empty = Tensor::zeros((0, 2, 32), DType::BF16, &dev)?;
    let none = Tensor::zeros(0, DType::U32, &dev)?;
    let got = kernel.shift_without_tables(&empty, &none, &none, halves)?;
    assert_eq!(got.expect("runs").dims(), &[0, 2, 32]);
    Ok(())
}
