//! Re-rotation of cached keys (`shift`, `shift_at`, `shift_at_with_len`, `shift_mrope`) against
//! pe-testkit's 256-bit oracle: a key rotated at `p` and shifted to `q` is the exact turn of the
//! stored key by `q w' - p w` to within one rounding of its dtype (plus the f32 arithmetic's
//! few 2^-24), at random `p`, `q` up to 2^31 - 1, in bf16, f16, f32 and f64, both layouts, both
//! pairings, partial rotary, and where the spectrum changes (dynamic NTK, longrope). The CPU's
//! one pass, candle-nn's kernels (`TableBackend::Generic`) and the plain twin agree bit for bit.

use candle_core::{DType, Device, Tensor};
use candle_pe_core::{Dynamic, Longrope, PairLayout, RopeConfig, RopeType, TableBackend};
use candle_pe_formats::FromHfConfig;
use candle_pe_nn::At;
use candle_pe_nn::RotaryEmbedding;
use pe_testkit::{seeded_rng, Big, BigFloat};
use rand::Rng;

/// The pair layout a test's `interleaved` flag names.
fn layout(interleaved: bool) -> PairLayout {
    match interleaved {
        true => PairLayout::Interleaved,
        false => PairLayout::Halves,
    }
}

const DTYPES: [DType; 4] = [DType::BF16, DType::F16, DType::F32, DType::F64];

/// Half an ulp of `y` in `dtype` (the error of one rounding to nearest).
fn half_ulp(dtype: DType, y: f64) -> f64 {
    let (bits, min_exp) = match dtype {
        DType::BF16 => (7, -126),
        DType::F16 => (10, -14),
        DType::F32 => (23, -126),
        _ => (52, -1022),
    };
    let e = if y == 0.0 {
        min_exp
    } else {
        (y.abs().log2().floor() as i32).max(min_exp)
    };
    2f64.powi(e - bits - 1)
}

/// What the arithmetic before the one rounding may add, per unit of `|x1| + |x2|`: the f32
/// tables and products (f64 for f64 keys), and the oracle's own f64 rotation.
fn slack(dtype: DType) -> f64 {
    match dtype {
        DType::F64 => 8.0 * 2f64.powi(-53),
        _ => 4.0 * 2f64.powi(-24),
    }
}

/// The exact frequencies `rope_theta^(-2i/d) / ext_i` of a default rope with divisors `ext`.
fn frequencies(big: &mut Big, theta: &BigFloat, d: usize, ext: &[f64]) -> Vec<BigFloat> {
    (0..d / 2)
        .map(|i| {
            let w = big.pow(theta, &Big::ratio(2.0 * i as f64, d as f64).neg());
            Big::div(&w, &Big::num(ext[i]))
        })
        .collect()
}

/// Everything one check needs: the rotary, the old and new exact frequencies.
struct Case {
    rotary: RotaryEmbedding,
    old: Vec<BigFloat>,
    new: Vec<BigFloat>,
}

fn default_case(head_dim: usize, partial: f64, interleaved: bool) -> Case {
    let mut config = RopeConfig::new(head_dim, 10_000.0);
    config.partial_rotary_factor = partial;
    let d = config.rotary_dim();
    let rotary = RotaryEmbedding::new(config)
        .unwrap()
        .with_pair_layout(layout(interleaved));
    let mut big = Big::new();
    let w = frequencies(&mut big, &Big::num(10_000.0), d, &vec![1.0; d / 2]);
    Case {
        rotary,
        old: w.clone(),
        new: w,
    }
}

/// `(y1, y2)` exact: the turn of `(x1, x2)` by `q w_new - p w_old`, per slot.
fn exact_turns(big: &mut Big, case: &Case, from: &[i64], to: &[i64]) -> Vec<Vec<(f64, f64)>> {
    from.iter()
        .zip(to)
        .map(|(&p, &q)| {
            case.old
                .iter()
                .zip(&case.new)
                .map(|(wo, wn)| {
                    let angle = Big::sub(
                        &Big::mul(&Big::num(q as f64), wn),
                        &Big::mul(&Big::num(p as f64), wo),
                    );
                    big.sin_cos(1.0, &angle)
                })
                .collect()
        })
        .collect()
}

/// Checks `got` (tokens, heads, d) against the exact turn of `stored` (same shape) by `turns`:
/// every rotated element within one rounding (plus slack), every passed one unchanged.
fn check_turn(
    case: &Case,
    stored: &Tensor,
    got: &Tensor,
    turns: &[Vec<(f64, f64)>],
    what: &str,
) -> anyhow::Result<f64> {
    let dtype = got.dtype();
    let (t, h, d) = got.dims3()?;
    let half = case.rotary.rope().half_dim();
    let x = stored
        .to_dtype(DType::F64)?
        .flatten_all()?
        .to_vec1::<f64>()?;
    let y = got.to_dtype(DType::F64)?.flatten_all()?.to_vec1::<f64>()?;
    let mut worst = 0f64;
    assert_eq!(turns.len(), t);
    for (ti, token) in turns.iter().enumerate() {
        for hi in 0..h {
            let base = (ti * h + hi) * d;
            for (i, &(s, c)) in token.iter().enumerate() {
                let (a, b) = if case.rotary.pair_layout().is_interleaved() {
                    (base + 2 * i, base + 2 * i + 1)
                } else {
                    (base + i, base + i + half)
                };
                let want = [x[a] * c - x[b] * s, x[a] * s + x[b] * c];
                for (j, w) in [(a, want[0]), (b, want[1])] {
                    let bound = half_ulp(dtype, w) + slack(dtype) * (x[a].abs() + x[b].abs());
                    let err = (y[j] - w).abs();
                    assert!(
                        err <= bound,
                        "{what} {dtype:?}: token {ti} head {hi} slot {i}: got {}, exact {w}, error {err:e} > {bound:e}",
                        y[j]
                    );
                    worst = worst.max(err / (2.0 * half_ulp(dtype, w)));
                }
            }
            for j in base + 2 * half..base + d {
                assert_eq!(y[j].to_bits(), x[j].to_bits(), "{what}: passed feature {j}");
            }
        }
    }
    Ok(worst)
}

/// `(tokens, heads, d)` as `(1, heads, tokens, d)`.
fn to_bhsd(x: &Tensor) -> anyhow::Result<Tensor> {
    Ok(x.transpose(0, 1)?.unsqueeze(0)?.contiguous()?)
}

fn from_bhsd(x: &Tensor) -> anyhow::Result<Tensor> {
    Ok(x.squeeze(0)?.transpose(0, 1)?.contiguous()?)
}

#[test]
fn shift_at_is_one_rounding_from_the_exact_turn() -> anyhow::Result<()> {
    let mut rng = seeded_rng("shift_at_is_one_rounding_from_the_exact_turn");
    let dev = Device::Cpu;
    let mut big = Big::new();
    for (partial, interleaved) in [(1.0, false), (1.0, true), (0.5, false), (0.5, true)] {
        let case = default_case(64, partial, interleaved);
        let tokens = 6;
        let mut from: Vec<i64> = (0..tokens)
            .map(|_| rng.random_range(0..(1i64 << 31)))
            .collect();
        let mut to: Vec<i64> = (0..tokens)
            .map(|_| rng.random_range(0..(1i64 << 31)))
            .collect();
        // The ends of the range, and no move at all.
        (from[0], to[0]) = (0, (1 << 31) - 1);
        (from[1], to[1]) = ((1 << 31) - 1, 0);
        (from[2], to[2]) = (77, 77);
        let turns = exact_turns(&mut big, &case, &from, &to);
        let direct = exact_turns(&mut big, &case, &vec![0; tokens], &to);
        let (from_t, to_t) = (
            Tensor::new(from.as_slice(), &dev)?,
            Tensor::new(to.as_slice(), &dev)?,
        );
        let k0 = Tensor::randn(0f64, 1.0, (tokens, 3, 64), &dev)?;
        for dtype in DTYPES {
            let k0 = k0.to_dtype(dtype)?;
            let (_, stored) = case.rotary.apply(&k0, &k0, &from_t)?;
            let what = format!("partial {partial} interleaved {interleaved}");
            let got = case.rotary.shift(&stored, &from_t, &to_t)?;
            check_turn(&case, &stored, &got, &turns, &what)?;
            // The same in (batch, heads, seq, head_dim).
            let got4 = case.rotary.shift(
                &to_bhsd(&stored)?,
                &from_t.unsqueeze(0)?,
                &to_t.unsqueeze(0)?,
            )?;
            check_turn(&case, &stored, &from_bhsd(&got4)?, &turns, &what)?;
            // Against the key rotated at q directly: the stored key's rounding plus the shift's.
            let x0 = k0.to_dtype(DType::F64)?.flatten_all()?.to_vec1::<f64>()?;
            let xs = stored
                .to_dtype(DType::F64)?
                .flatten_all()?
                .to_vec1::<f64>()?;
            let y = got.to_dtype(DType::F64)?.flatten_all()?.to_vec1::<f64>()?;
            let half = case.rotary.rope().half_dim();
            for (ti, token) in direct.iter().enumerate() {
                for hi in 0..3 {
                    let base = (ti * 3 + hi) * 64;
                    for (i, &(s, c)) in token.iter().enumerate() {
                        let (a, b) = if interleaved {
                            (base + 2 * i, base + 2 * i + 1)
                        } else {
                            (base + i, base + i + half)
                        };
                        let stored_err = half_ulp(dtype, xs[a].abs().max(xs[b].abs()));
                        for (j, w) in [(a, x0[a] * c - x0[b] * s), (b, x0[a] * s + x0[b] * c)] {
                            let bound = 2f64.sqrt() * stored_err
                                + half_ulp(dtype, w)
                                + slack(dtype) * 2.0 * (x0[a].abs() + x0[b].abs());
                            assert!(
                                (y[j] - w).abs() <= bound,
                                "{what} {dtype:?}: shifted {} vs rotated at {} directly {w}",
                                y[j],
                                to[ti]
                            );
                        }
                    }
                }
            }
        }
    }
    Ok(())
}

#[test]
fn shift_by_delta_is_shift_at_of_that_difference() -> anyhow::Result<()> {
    let dev = Device::Cpu;
    let mut big = Big::new();
    let case = default_case(64, 1.0, false);
    let k = Tensor::randn(0f32, 1.0, (2, 2, 5, 64), &dev)?.to_dtype(DType::BF16)?;
    for delta in [0i64, 1, -1, 996, -996, (1 << 31) - 11, -((1 << 31) - 11)] {
        let from: Vec<i64> = (0..10)
            .map(|t| if delta < 0 { -delta + t } else { t })
            .collect();
        let to: Vec<i64> = from.iter().map(|f| f + delta).collect();
        let ft = Tensor::from_vec(from.clone(), (2, 5), &dev)?;
        let tt = Tensor::from_vec(to.clone(), (2, 5), &dev)?;
        let a = case
            .rotary
            .shift(&k, (-delta).max(0) as usize, delta.max(0) as usize)?;
        let b = case.rotary.shift(&k, &ft, &tt)?;
        let same = a.to_dtype(DType::F32)?.eq(&b.to_dtype(DType::F32)?)?;
        assert_eq!(same.min_all()?.to_scalar::<u8>()?, 1, "delta {delta}");
        // And one rounding from the exact turn.
        let turns = exact_turns(&mut big, &case, &from, &to);
        let thd = |x: &Tensor| -> anyhow::Result<Tensor> {
            Ok(x.transpose(1, 2)?.contiguous()?.reshape((10, 2, 64))?)
        };
        check_turn(&case, &thd(&k)?, &thd(&a)?, &turns, "shift")?;
    }
    Ok(())
}

/// Where the frequencies differ between the two sides, the turn is `q w_new - p w_old`.
#[test]
fn spectrum_changes_turn_by_new_angle_less_old_angle() -> anyhow::Result<()> {
    let mut rng = seeded_rng("spectrum_changes_turn_by_new_angle_less_old_angle");
    let dev = Device::Cpu;
    let mut big = Big::new();
    let theta = Big::num(10_000.0);
    let d = 64;
    // Dynamic NTK, grown from its 4096 positions to 100_000.
    let dynamic = RopeConfig {
        max_position_embeddings: Some(4096),
        ..RopeConfig::new(d, 10_000.0).with_rope_type(RopeType::Dynamic(Dynamic { factor: 2.0 }))
    };
    let grown = {
        // base' = theta * (factor L / max - (factor - 1))^(d / (d - 2))
        let growth = Big::sub(&Big::ratio(2.0 * 100_000.0, 4096.0), &Big::num(1.0));
        let base = Big::mul(
            &theta,
            &big.pow(&growth, &Big::ratio(d as f64, d as f64 - 2.0)),
        );
        frequencies(&mut big, &base, d, &vec![1.0; d / 2])
    };
    let plain = frequencies(&mut big, &theta, d, &vec![1.0; d / 2]);
    // Longrope, from its short factors (within 4096) to its long ones.
    let short: Vec<f64> = (0..d / 2).map(|i| 1.0 + i as f64 * 0.01).collect();
    let long: Vec<f64> = (0..d / 2).map(|i| 1.0 + i as f64 * 0.7).collect();
    let longrope = RopeConfig {
        max_position_embeddings: Some(131_072),
        ..RopeConfig::new(d, 10_000.0).with_rope_type(RopeType::Longrope(Longrope {
            short_factor: short.clone(),
            long_factor: long.clone(),
            factor: None,
            original_max_position_embeddings: Some(4096),
            attention_factor: None,
            short_mscale: None,
            long_mscale: None,
        }))
    };
    let cases = [
        ("dynamic", dynamic, plain.clone(), grown, (4096, 100_000)),
        (
            "longrope",
            longrope,
            frequencies(&mut big, &theta, d, &short),
            frequencies(&mut big, &theta, d, &long),
            (4096, 100_000),
        ),
    ];
    for (name, config, old, new, (from_len, to_len)) in cases {
        let rotary = RotaryEmbedding::new(config)?;
        let case = Case { rotary, old, new };
        let from: Vec<i64> = (0..5).map(|_| rng.random_range(0..4096)).collect();
        let to: Vec<i64> = (0..5).map(|_| rng.random_range(0..100_000)).collect();
        let turns = exact_turns(&mut big, &case, &from, &to);
        let (ft, tt) = (
            Tensor::new(from.as_slice(), &dev)?,
            Tensor::new(to.as_slice(), &dev)?,
        );
        for dtype in DTYPES {
            let k = Tensor::randn(0f64, 1.0, (5, 2, d), &dev)?.to_dtype(dtype)?;
            let got = case.rotary.shift(
                &k,
                At::positions(&ft).with_tracked_len(from_len),
                At::positions(&tt).with_tracked_len(to_len),
            )?;
            check_turn(&case, &k, &got, &turns, name)?;
            let generic = case
                .rotary
                .clone()
                .with_backend(TableBackend::Generic)
                .shift(
                    &k,
                    At::positions(&ft).with_tracked_len(from_len),
                    At::positions(&tt).with_tracked_len(to_len),
                )?;
            assert_bits(&got, &generic, name)?;
        }
    }
    // Longrope without lengths takes each side's from its largest position, as apply_at does.
    let case_rotary = RotaryEmbedding::new(RopeConfig {
        max_position_embeddings: Some(131_072),
        ..RopeConfig::new(d, 10_000.0).with_rope_type(RopeType::Longrope(Longrope {
            short_factor: short,
            long_factor: long,
            factor: None,
            original_max_position_embeddings: Some(4096),
            attention_factor: None,
            short_mscale: None,
            long_mscale: None,
        }))
    })?;
    let k = Tensor::randn(0f32, 1.0, (2, 2, d), &dev)?;
    let (ft, tt) = (
        Tensor::new(&[5u32, 4000], &dev)?,
        Tensor::new(&[9000u32, 99_999], &dev)?,
    );
    let a = case_rotary.shift(&k, &ft, &tt)?;
    let b = case_rotary.shift(
        &k,
        At::positions(&ft).with_tracked_len(4001),
        At::positions(&tt).with_tracked_len(100_000),
    )?;
    assert_bits(&a, &b, "longrope lengths")?;
    Ok(())
}

fn assert_bits(a: &Tensor, b: &Tensor, what: &str) -> anyhow::Result<()> {
    assert_eq!(a.dims(), b.dims(), "{what}");
    let a = a.to_dtype(DType::F64)?.flatten_all()?.to_vec1::<f64>()?;
    let b = b.to_dtype(DType::F64)?.flatten_all()?.to_vec1::<f64>()?;
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        assert_eq!(x.to_bits(), y.to_bits(), "{what}: element {i}: {x} vs {y}");
    }
    Ok(())
}

/// The CPU's one pass, candle-nn's kernels (what other devices run) and the plain twin give the
/// same bits, in both layouts, both pairings, partial rotary, every dtype, strided keys too.
#[test]
fn one_pass_kernels_and_plain_twin_agree_bit_for_bit() -> anyhow::Result<()> {
    let dev = Device::Cpu;
    let mut rng = seeded_rng("one_pass_kernels_and_plain_twin_agree_bit_for_bit");
    for (partial, interleaved) in [(1.0, false), (1.0, true), (0.25, false), (0.5, true)] {
        let case = default_case(32, partial, interleaved);
        let generic = case.rotary.clone().with_backend(TableBackend::Generic);
        let from: Vec<i64> = (0..12).map(|_| rng.random_range(0..(1i64 << 31))).collect();
        let to: Vec<i64> = (0..12).map(|_| rng.random_range(0..(1i64 << 31))).collect();
        for dtype in DTYPES {
            let k4 = Tensor::randn(0f64, 1.0, (3, 2, 4, 32), &dev)?.to_dtype(dtype)?;
            let k3 = Tensor::randn(0f64, 1.0, (12, 2, 32), &dev)?.to_dtype(dtype)?;
            let f4 = Tensor::from_vec(from.clone(), (3, 4), &dev)?;
            let t4 = Tensor::from_vec(to.clone(), (3, 4), &dev)?;
            let f3 = Tensor::from_vec(from.clone(), 12, &dev)?;
            let t3 = Tensor::from_vec(to.clone(), 12, &dev)?;
            for (k, f, t) in [(&k4, &f4, &t4), (&k3, &f3, &t3)] {
                let what = format!(
                    "{dtype:?} {:?} partial {partial} interleaved {interleaved}",
                    k.dims()
                );
                let one_pass = case.rotary.shift(k, f, t)?;
                assert_bits(&one_pass, &generic.shift(k, f, t)?, &what)?;
                assert_bits(&one_pass, &case.rotary.shift_slow(k, f, t)?, &what)?;
                // A strided view of the same keys.
                let wide = Tensor::cat(&[k, k], 1)?;
                let view = wide.narrow(1, 0, 2)?;
                assert_bits(&one_pass, &case.rotary.shift(&view, f, t)?, &what)?;
                for delta in [-5i64, 1 << 20] {
                    let (from, to) = ((-delta).max(0) as usize, delta.max(0) as usize);
                    let a = case.rotary.shift(k, from, to)?;
                    assert_bits(&a, &generic.shift(k, from, to)?, &what)?;
                }
            }
        }
    }
    Ok(())
}

fn mrope() -> anyhow::Result<RotaryEmbedding> {
    let json = r#"{"hidden_size": 256, "num_attention_heads": 2, "rope_theta": 1000000.0,
        "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]}}"#;
    let config = RopeConfig::from_hf_config(&serde_json::from_str(json)?)?;
    Ok(RotaryEmbedding::new(config)?)
}

#[test]
fn shift_mrope_moves_each_section_by_its_row() -> anyhow::Result<()> {
    let dev = Device::Cpu;
    let rotary = mrope()?;
    let k = Tensor::randn(0f32, 1.0, (2, 2, 3, 128), &dev)?;
    // Text: three equal rows shift as shift_at does.
    let text_from = Tensor::new(&[[5u32, 6, 7], [100, 101, 102]], &dev)?;
    let text_to = Tensor::new(&[[1u32, 2, 3], [4, 5, 6]], &dev)?;
    let three = |t: &Tensor| Tensor::stack(&[t, t, t], 0);
    let a = rotary.shift(
        &k,
        At::mrope(&three(&text_from)?),
        At::mrope(&three(&text_to)?),
    )?;
    let b = rotary.shift(&k, &text_from, &text_to)?;
    assert_bits(&a, &b, "mrope text")?;
    // Image patches moved back by 1000 along time only: shifting keys rotated at `from` gives
    // the keys rotated at `to` within a few f32 roundings.
    let from = Tensor::new(
        &[
            [[1005u32, 1005, 1005], [1000, 1000, 1000]],
            [[5, 6, 6], [0, 0, 1]],
            [[5, 5, 6], [0, 1, 1]],
        ],
        &dev,
    )?;
    let to = Tensor::new(
        &[
            [[5u32, 5, 5], [0, 0, 0]],
            [[5, 6, 6], [0, 0, 1]],
            [[5, 5, 6], [0, 1, 1]],
        ],
        &dev,
    )?;
    let (_, at_from) = rotary.apply(&k, &k, At::mrope(&from))?;
    let (_, at_to) = rotary.apply(&k, &k, At::mrope(&to))?;
    let moved = rotary.shift(&at_from, At::mrope(&from), At::mrope(&to))?;
    let err = (moved - &at_to)?.abs()?.max_all()?.to_scalar::<f32>()?;
    assert!(err <= 4e-6, "mrope shift error {err}");
    let generic = rotary.clone().with_backend(TableBackend::Generic);
    assert_bits(
        &rotary.shift(&at_from, At::mrope(&from), At::mrope(&to))?,
        &generic.shift(&at_from, At::mrope(&from), At::mrope(&to))?,
        "mrope generic",
    )?;
    Ok(())
}

#[test]
fn errors_name_the_argument() -> anyhow::Result<()> {
    let dev = Device::Cpu;
    let case = default_case(64, 1.0, false);
    let k = Tensor::zeros((2, 1, 3, 64), DType::F32, &dev)?;
    let ok = Tensor::new(&[[0u32, 1, 2], [3, 4, 5]], &dev)?;
    let cases: Vec<(candle_core::Result<Tensor>, &str)> = vec![
        (
            case.rotary.shift(&k, 0, 1 << 31),
            "offset + len 2147483651 is outside",
        ),
        (
            case.rotary.shift(&k, 1 << 31, 0),
            "offset + len 2147483651 is outside",
        ),
        (
            case.rotary
                .shift(&k, &Tensor::new(&[0u32, 1, 2], &dev)?, &ok),
            "from must have shape (batch, seq) = [2, 3]",
        ),
        (
            case.rotary.shift(&k, &ok, &ok.t()?),
            "to must have shape (batch, seq) = [2, 3]",
        ),
        (
            case.rotary
                .shift(&k, &ok, &Tensor::new(&[[0i64, 1, -2], [3, 4, 5]], &dev)?),
            "position -2",
        ),
        (
            case.rotary.shift(&k, &ok, &ok.to_dtype(DType::F32)?),
            "integer tensor",
        ),
        (
            case.rotary
                .shift(&Tensor::zeros((2, 1, 3, 32), DType::F32, &dev)?, 0, 1),
            "k must have shape",
        ),
        (
            case.rotary
                .shift(&Tensor::zeros((2, 1, 3, 64), DType::U32, &dev)?, 0, 1),
            "k must be f16, bf16, f32 or f64",
        ),
        (
            case.rotary.shift(
                &k,
                At::mrope(&Tensor::stack(&[&ok, &ok, &ok], 0)?),
                At::mrope(&Tensor::stack(&[&ok, &ok, &ok], 0)?),
            ),
            "mrope_section",
        ),
        (
            mrope()?.shift(
                &Tensor::zeros((2, 1, 3, 128), DType::F32, &dev)?,
                At::mrope(&ok),
                At::mrope(&ok),
            ),
            "from must have shape (3, batch, seq)",
        ),
    ];
    for (i, (result, needle)) in cases.into_iter().enumerate() {
        let err = result.expect_err(needle).to_string();
        assert!(err.contains(needle), "case {i}: {err:?} lacks {needle:?}");
    }
    Ok(())
}

/// `apply_k_at` rotates keys alone with the bits `apply_at` gives them, in both layouts, on the
/// one-pass path and the kernels', with either generator's tables.
#[test]
fn apply_k_at_is_the_k_of_apply_at() -> anyhow::Result<()> {
    let dev = Device::Cpu;
    for interleaved in [false, true] {
        let case = default_case(32, 0.5, interleaved);
        let generic = case.rotary.clone().with_backend(TableBackend::Generic);
        for dtype in DTYPES {
            let k4 = Tensor::randn(0f64, 1.0, (2, 3, 5, 32), &dev)?.to_dtype(dtype)?;
            let p4 = Tensor::new(&[[0u32, 9, 4, 100_000, 7], [3, 3, 3, 1 << 30, 2]], &dev)?;
            let k3 = Tensor::randn(0f64, 1.0, (4, 3, 32), &dev)?.to_dtype(dtype)?;
            let p3 = Tensor::new(&[5u32, 0, 70_000, 12], &dev)?;
            for (k, p) in [(&k4, &p4), (&k3, &p3)] {
                // (p4 reaches past the cache's limit: the gathered tables and the kernels.)
                let (_, want) = case.rotary.apply(k, k, p)?;
                assert_bits(&case.rotary.apply_k(k, p)?, &want, "apply_k_at")?;
                let (_, want) = generic.apply(k, k, p)?;
                assert_bits(&generic.apply_k(k, p)?, &want, "apply_k_at generic")?;
            }
        }
    }
    let err = default_case(32, 1.0, false)
        .rotary
        .apply_k(
            &Tensor::zeros((2, 1, 3, 32), DType::F32, &dev)?,
            &Tensor::new(&[1u32, 2], &dev)?,
        )
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("positions must have shape (batch, seq) = [2, 3]"),
        "{err}"
    );
    Ok(())
}
