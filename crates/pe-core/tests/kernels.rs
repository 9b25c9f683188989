//! The CUDA kernels' arithmetic, held to the CPU generator bit for bit without a GPU: the host
//! build of `src/cuda/tables.cu` (the `host-kernels` feature, which pe-testkit turns on) runs
//! through `TableBackend::Kernel` on the CPU, and every table it makes must have the CPU
//! generator's bits. Every preset at widths odd and even, the four dtypes, ranges up to
//! 2^31 - 1, ids, fractional timesteps, padding rows, angles past 2^32 (the wide reduction),
//! the rotary tables of every rope type the oracle knows, M-RoPE, and random specs.

use candle_core::{DType, Device, Tensor};
use candle_pe_core::MAX_POSITION;
use candle_pe_core::{At, PeCache, PeSpec, Positions, Preset, Rope};
use candle_pe_core::{SinusoidalEncoding, TableBackend, TokenPositions};
use pe_testkit::{random_encoding, random_mrope_config, random_offset, random_rope_config};
use pe_testkit::{same_bits as same, seeded_rng};
use rand::Rng;

const DTYPES: [DType; 4] = [DType::F32, DType::F16, DType::BF16, DType::F64];

/// Every request shape of a sinusoidal encoding, on both generators.
fn every_request(spec: PeSpec, what: &str) -> anyhow::Result<()> {
    let dev = Device::Cpu;
    let cpu = SinusoidalEncoding::new(spec)?.with_backend(TableBackend::Cpu);
    let kernel = SinusoidalEncoding::new(spec)?.with_backend(TableBackend::Kernel);
    let top = MAX_POSITION as usize - 1;
    let ids = Tensor::new(&[[5u32, 900, 64, 63], [0, 4096, top as u32, 5]], &dev)?;
    let timesteps = Tensor::new(&[0.0f64, 0.5, 999.25, -3.0, 1e9 + 0.125], &dev)?;
    let tokens = Tensor::new(&[[5i64, 6, 1, 1], [1, 9, 10, 11]], &dev)?;
    for dtype in DTYPES {
        let case = |name: &str| format!("{what} {dtype:?} {name}");
        for (offset, len) in [(0, 130), (1_000_003, 70), (top - 64, 65)] {
            let (k, c) = (
                kernel.range(offset, len, dtype, &dev)?,
                cpu.range(offset, len, dtype, &dev)?,
            );
            same(&k, &c, &case(&format!("range {offset}+{len}")))?;
        }
        same(
            &kernel.at(&ids, dtype)?,
            &cpu.at(&ids, dtype)?,
            &case("ids"),
        )?;
        let (k, c) = (
            kernel.timesteps(&timesteps, dtype)?,
            cpu.timesteps(&timesteps, dtype)?,
        );
        same(&k, &c, &case("timesteps"))?;
        let (k, c) = (
            kernel.padding_aware(&tokens, 1, 0, dtype)?,
            cpu.padding_aware(&tokens, 1, 0, dtype)?,
        );
        same(&k, &c, &case("padding-aware"))?;
    }
    Ok(())
}

#[test]
fn every_preset_and_width_has_the_cpu_bits() -> anyhow::Result<()> {
    for preset in Preset::ALL {
        for width in [1, 2, 7, 8, 63, 64, 130, 1032] {
            let Ok(spec) = SinusoidalEncoding::new(preset.spec(width)).map(|pe| *pe.spec()) else {
                continue; // presets that reject a width
            };
            every_request(spec, &format!("{preset} width {width}"))?;
        }
    }
    Ok(())
}

/// Angles past 2^32 take the wide reduction on both sides: an angle scale of 300 reaches
/// 6.4e11 radians at 2^31 - 1.
#[test]
fn angles_past_two_to_the_32_have_the_cpu_bits() -> anyhow::Result<()> {
    let mut spec = Preset::Vaswani.spec(16);
    spec.angle_scale = 300.0;
    every_request(spec, "angle scale 300")
}

#[test]
fn random_specs_have_the_cpu_bits() -> anyhow::Result<()> {
    let mut rng = seeded_rng("random_specs_have_the_cpu_bits");
    for case in 0..40 {
        let spec = *random_encoding(&mut rng, 700, TableBackend::Cpu).spec();
        let len = rng.random_range(1..200);
        let offset = random_offset(&mut rng, len);
        let cpu = SinusoidalEncoding::new(spec)?.with_backend(TableBackend::Cpu);
        let kernel = SinusoidalEncoding::new(spec)?.with_backend(TableBackend::Kernel);
        for dtype in DTYPES {
            let (k, c) = (
                kernel.range(offset, len, dtype, &Device::Cpu)?,
                cpu.range(offset, len, dtype, &Device::Cpu)?,
            );
            same(
                &k,
                &c,
                &format!("case {case}: {spec:?} offset {offset} {dtype:?}"),
            )?;
        }
    }
    Ok(())
}

/// The rotary tables (both halves written by one launch) of every rope type the oracle knows,
/// with partial rotary and YaRN's attention factor, for ranges and ids.
#[test]
fn rotary_tables_have_the_cpu_bits() -> anyhow::Result<()> {
    let mut rng = seeded_rng("rotary_tables_have_the_cpu_bits");
    let dev = Device::Cpu;
    for case in 0..60 {
        let config = random_rope_config(&mut rng);
        let cpu = Rope::new(config.clone())?.with_backend(TableBackend::Cpu);
        let kernel = Rope::new(config.clone())?.with_backend(TableBackend::Kernel);
        let len = rng.random_range(1..300);
        let offset = rng.random_range(0..(MAX_POSITION as usize - len));
        let ids = Tensor::new(&[[3u32, 70_000, 5], [offset as u32, 0, 2]], &dev)?;
        for dtype in DTYPES {
            let what = format!("case {case}: {config:?} {dtype:?}");
            let ((kc, ks), (cc, cs)) = (
                kernel.range(offset, len, dtype, &dev)?,
                cpu.range(offset, len, dtype, &dev)?,
            );
            same(&kc, &cc, &format!("{what} cos at {offset}"))?;
            same(&ks, &cs, &format!("{what} sin at {offset}"))?;
            let ((kc, ks), (cc, cs)) = (kernel.at(&ids, dtype)?, cpu.at(&ids, dtype)?);
            same(&kc, &cc, &format!("{what} cos of ids"))?;
            same(&ks, &cs, &format!("{what} sin of ids"))?;
        }
    }
    Ok(())
}

/// M-RoPE tables (three position axes, both slot layouts) at random positions up to 2^31 - 1.
#[test]
fn mrope_tables_have_the_cpu_bits() -> anyhow::Result<()> {
    let mut rng = seeded_rng("mrope_tables_have_the_cpu_bits");
    let dev = Device::Cpu;
    for case in 0..24 {
        let config = random_mrope_config(&mut rng);
        let (batch, seq) = (rng.random_range(1..=2), rng.random_range(1..=40));
        let ids: Vec<u32> = (0..3 * batch * seq)
            .map(|_| rng.random_range(0..MAX_POSITION as u32))
            .collect();
        let positions = Tensor::from_vec(ids, (3, batch, seq), &dev)?;
        let cpu = Rope::new(config.clone())?.with_backend(TableBackend::Cpu);
        let kernel = Rope::new(config.clone())?.with_backend(TableBackend::Kernel);
        for dtype in DTYPES {
            let what = format!("case {case}: {config:?} {dtype:?}");
            let ((kc, ks), (cc, cs)) = (
                kernel.at(At::mrope(&positions), dtype)?,
                cpu.at(At::mrope(&positions), dtype)?,
            );
            same(&kc, &cc, &format!("{what} cos"))?;
            same(&ks, &cs, &format!("{what} sin"))?;
        }
    }
    Ok(())
}

/// The embedding block, `scale * weights[tokens] + PE`, by one kernel launch: every dtype of
/// weights, a batch at an offset (rows repeating per sequence), explicit positions up to
/// 2^31 - 1, fairseq's padding rows, odd zero-padded widths, and an empty batch.
#[test]
fn the_embedding_block_has_the_cpu_bits() -> anyhow::Result<()> {
    let dev = Device::Cpu;
    let mut rng = seeded_rng("the_embedding_block_has_the_cpu_bits");
    for spec in [
        PeSpec::vaswani(63),
        PeSpec::fairseq(96),
        Preset::Tensor2tensor.spec(9),
    ] {
        let cpu = PeCache::new(SinusoidalEncoding::new(spec)?.with_backend(TableBackend::Cpu));
        let kernel =
            PeCache::new(SinusoidalEncoding::new(spec)?.with_backend(TableBackend::Kernel));
        for dtype in DTYPES {
            let weights = Tensor::randn(0f32, 1.0, (50, spec.width), &dev)?.to_dtype(dtype)?;
            let what = |case: &str| format!("{spec:?} {dtype:?} {case}");
            for (offset, seq) in [
                (0, 130),
                (37, 200),
                (MAX_POSITION as usize - 70, 70),
                (5, 0),
            ] {
                let tokens: Vec<u32> = (0..3 * seq).map(|_| rng.random_range(0..50)).collect();
                let tokens = Tensor::from_vec(tokens, (3, seq), &dev)?;
                let at = TokenPositions::Offset(offset);
                let (k, c) = (
                    kernel.embed(&weights, &tokens, at, 2.5)?,
                    cpu.embed(&weights, &tokens, at, 2.5)?,
                );
                same(&k, &c, &what(&format!("offset {offset}, seq {seq}")))?;
            }
            let tokens = Tensor::new(&[[5u32, 6, 1, 1], [1, 9, 10, 11]], &dev)?;
            let ids = Tensor::new(&[[2i64, 3, 1, 1], [1, 2, 2_000_000_000, 7]], &dev)?;
            let ids = Positions::new(&ids)?;
            for at in [
                TokenPositions::Ids(&ids),
                TokenPositions::PaddedIds {
                    positions: &ids,
                    padding_idx: 1,
                },
            ] {
                let (k, c) = (
                    kernel.embed(&weights, &tokens, at, 0.75)?,
                    cpu.embed(&weights, &tokens, at, 0.75)?,
                );
                same(&k, &c, &what("ids"))?;
            }
        }
    }
    Ok(())
}

/// A shift's turn tables (`Rope::at_shift`) by `pe_turns`: one spectrum (a delta per token,
/// repeated deltas computed once), two spectra (dynamic NTK's lengths, longrope past its
/// original context), M-RoPE's three axes, every dtype.
#[test]
fn shift_tables_have_the_cpu_bits() -> anyhow::Result<()> {
    let mut rng = seeded_rng("shift_tables_have_the_cpu_bits");
    let dev = Device::Cpu;
    for case in 0..40 {
        let mut config = random_rope_config(&mut rng);
        let mrope = rng.random_bool(0.3);
        if mrope {
            let h = config.rotary_dim() / 2;
            config.mrope_section = Some(vec![h - h / 3 - h / 4, h / 3, h / 4]);
        }
        let cpu = Rope::new(config.clone())?.with_backend(TableBackend::Cpu);
        let kernel = Rope::new(config.clone())?.with_backend(TableBackend::Kernel);
        let tokens = rng.random_range(1..20);
        let axes = if mrope { 3 } else { 1 };
        let mut draw =
            |n: usize| -> Vec<i64> { (0..n).map(|_| rng.random_range(0..200_000i64)).collect() };
        let (from, to) = (draw(axes * tokens), draw(axes * tokens));
        let shape: &[usize] = if mrope { &[3, 1, tokens] } else { &[1, tokens] };
        let from = Tensor::from_vec(from, shape, &dev)?;
        let mut to = Tensor::from_vec(to, shape, &dev)?;
        if rng.random_bool(0.3) {
            to = (&from + 7.0)?; // one delta for every token: one row, broadcast
        }
        for dtype in DTYPES {
            let what = format!("case {case}: {config:?} {dtype:?}");
            let ((kc, ks), (cc, cs)) = if mrope {
                (
                    kernel.at_shift(At::mrope(&from), At::mrope(&to), dtype)?,
                    cpu.at_shift(At::mrope(&from), At::mrope(&to), dtype)?,
                )
            } else {
                (
                    kernel.at_shift(&from, &to, dtype)?,
                    cpu.at_shift(&from, &to, dtype)?,
                )
            };
            same(&kc, &cc, &format!("{what} cos"))?;
            same(&ks, &cs, &format!("{what} sin"))?;
        }
    }
    Ok(())
}

/// An empty request launches nothing and is empty, in every dtype.
#[test]
fn empty_requests_are_empty() -> anyhow::Result<()> {
    let pe = SinusoidalEncoding::new(Preset::Fairseq.spec(8))?.with_backend(TableBackend::Kernel);
    for dtype in DTYPES {
        assert_eq!(pe.range(77, 0, dtype, &Device::Cpu)?.dims(), &[0, 8]);
    }
    Ok(())
}
