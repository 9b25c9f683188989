//! Video diffusion's 3-D rotary tables (Wan, HunyuanVideo, CogVideoX, LTX-Video, LTX-2) against
//! diffusers' own classes (fixtures written by `scripts/fixtures/video.py` with diffusers 0.42.1),
//! and against the exact values at ids up to 2^31 - 1 and at fractional coordinates.

use std::collections::HashMap;

use candle_core::{DType, Device, Tensor};
use candle_pe_core::{cogvideox_coordinates, video_patch_positions, AxesRope, Error};
use pe_testkit::{assert_axes_exact, axes_slots, tolerance, Big};

const U: f64 = 1.0 / (1u64 << 24) as f64;

fn fixture(name: &str) -> anyhow::Result<(serde_json::Value, HashMap<String, Tensor>)> {
    let dir = pe_testkit::fixture("video");
    let json = pe_testkit::read_json(dir.join(format!("{name}.json")));
    let tensors =
        candle_core::safetensors::load(dir.join(format!("{name}.safetensors")), &Device::Cpu)?;
    Ok((json, tensors))
}

fn values(t: &Tensor) -> anyhow::Result<Vec<f64>> {
    Ok(t.to_dtype(DType::F64)?.flatten_all()?.to_vec1::<f64>()?)
}

/// The angle of every cell of a `(n, half_dim)` table: `coordinate(row, axis) * w`, with
/// `slots[j] = Some((axis, w))` (`None` for a column that does not turn).
fn angles(coordinates: &[Vec<f64>], slots: &[Option<(usize, f64)>]) -> Vec<(f64, f64)> {
    coordinates
        .iter()
        .flat_map(|row| {
            slots.iter().map(move |slot| match slot {
                Some((a, w)) => (row[*a] * w, *w),
                None => (0.0, 0.0),
            })
        })
        .collect()
}

/// Asserts `|ours - theirs| <= bound(angle, w)` in every cell of cos and sin; returns the largest
/// difference and the largest fraction of its bound a cell uses.
fn assert_near(
    what: &str,
    ours: (&Tensor, &Tensor),
    theirs: (&Tensor, &Tensor),
    cells: &[(f64, f64)],
    bound: impl Fn(f64, f64) -> f64,
) -> anyhow::Result<(f64, f64)> {
    let (mut worst, mut used) = (0f64, 0f64);
    for (part, o, t) in [("cos", ours.0, theirs.0), ("sin", ours.1, theirs.1)] {
        assert_eq!(o.dims(), t.dims(), "{what} {part}");
        let (o, t) = (values(o)?, values(t)?);
        for (i, ((o, t), &(angle, w))) in o.iter().zip(&t).zip(cells).enumerate() {
            let (d, b) = ((o - t).abs(), bound(angle, w));
            assert!(
                d <= b,
                "{what} {part} cell {i}: ours {o} diffusers {t}, diff {d:e} over {b:e}"
            );
            worst = worst.max(d);
            used = used.max(d / b);
        }
    }
    println!("{what}: max |diff| {worst:e}, {:.3} of the bound", used);
    Ok((worst, used))
}

/// diffusers' `get_1d_rotary_pos_embed` in f32: the exponent `2k / d` rounded (moving the
/// frequency by up to `ln(theta) u` relatively), `pow` and the reciprocal (`u` each), the angle
/// (`u`), then f32 cos and sin (`2u`); ours are within `u` of the exact values.
fn f32_bound(theta: f64) -> impl Fn(f64, f64) -> f64 {
    move |angle: f64, _| angle.abs() * (theta.ln() + 4.0) * U + 3.0 * U
}

/// A table diffusers computes in f64 and rounds to f32, against ours in f64: half an f32 ulp,
/// plus torch's f64 cos and sin (a few f64 ulps).
fn f64_rounded_bound(_: f64, _: f64) -> f64 {
    U / 2.0 + 1e-15
}

/// Each column of [`AxesRope::new`]`(axes_dim, theta)`: its axis and frequency `theta^(-2k / d)`.
fn frequency_slots(axes_dim: &[usize], theta: f64) -> Vec<Option<(usize, f64)>> {
    axes_dim
        .iter()
        .enumerate()
        .flat_map(|(a, &d)| {
            (0..d / 2).map(move |k| Some((a, theta.powf(-2.0 * k as f64 / d as f64))))
        })
        .collect()
}

fn rows(t: &Tensor) -> anyhow::Result<Vec<Vec<f64>>> {
    Ok(t.to_dtype(DType::F64)?.to_vec2::<f64>()?)
}

/// Wan: the head split `d - 4 floor(d/6)`, `2 floor(d/6)`, `2 floor(d/6)` (128 -> 44, 42, 42;
/// 40 -> 16, 12, 12), tables diffusers computes in f64 and rounds to f32.
#[test]
fn wan() -> anyhow::Result<()> {
    let (json, t) = fixture("wan")?;
    for call in json["calls"].as_array().unwrap() {
        let name = call["name"].as_str().unwrap();
        let head_dim = call["module_init"]["attention_head_dim"].as_u64().unwrap() as usize;
        let rope = AxesRope::wan(head_dim)?;
        let axes: Vec<usize> = serde_json::from_value(call["axes_dim"].clone())?;
        assert_eq!(rope.axes_dim(), axes.as_slice());
        let ids = video_patch_positions(3, 4, 5, &Device::Cpu)?;
        let (cos, sin) = rope.at(&ids, DType::F64)?;
        let cells = angles(&rows(&ids)?, &frequency_slots(&axes, 10_000.0));
        let theirs = (&t[&format!("{name}.cos")], &t[&format!("{name}.sin")]);
        assert_near(
            &format!("wan {name}"),
            (&cos, &sin),
            theirs,
            &cells,
            f64_rounded_bound,
        )?;
    }
    Ok(())
}

/// HunyuanVideo: axes 16, 56, 56, theta 256, computed by diffusers in f32.
#[test]
fn hunyuan_video() -> anyhow::Result<()> {
    let (_, t) = fixture("hunyuan_video")?;
    let rope = AxesRope::hunyuan_video()?;
    let ids = video_patch_positions(3, 4, 5, &Device::Cpu)?;
    let (cos, sin) = rope.at(&ids, DType::F32)?;
    let cells = angles(&rows(&ids)?, &frequency_slots(&[16, 56, 56], 256.0));
    let theirs = (&t["main.cos"], &t["main.sin"]);
    assert_near(
        "hunyuan_video",
        (&cos, &sin),
        theirs,
        &cells,
        f32_bound(256.0),
    )?;
    Ok(())
}

/// CogVideoX: head_dim 64 (axes 16, 24, 24) at the crop rule's fractional coordinates (the
/// crops diffusers computed are in the fixture's JSON) and at the integer ids of the "slice"
/// grids of CogVideoX 1.5; diffusers computes in f32.
#[test]
fn cogvideox() -> anyhow::Result<()> {
    let (json, t) = fixture("cogvideox")?;
    let rope = AxesRope::cogvideox(64)?;
    let slots = frequency_slots(&[16, 24, 24], 10_000.0);
    for call in json["calls"].as_array().unwrap() {
        let name = call["name"].as_str().unwrap();
        let grid: Vec<usize> = serde_json::from_value(call["grid"].clone())?;
        let (f, h, w) = (grid[0], grid[1], grid[2]);
        let coordinates = if call["args"]["grid_type"] == "linspace" {
            let c = cogvideox_coordinates(f, h, w, 30, 45, &Device::Cpu)?;
            // The crop diffusers computed: first row and column at its top-left corner.
            let crops: Vec<Vec<f64>> =
                serde_json::from_value(call["args"]["crops_coords"].clone())?;
            let first = rows(&c)?[0].clone();
            assert_eq!(first, [0.0, crops[0][0], crops[0][1]], "{name}");
            let last = rows(&c)?[h * w - 1].clone();
            let end = |stop: f64, g: usize| stop * (g - 1) as f64 / g as f64;
            assert!((last[1] - end(crops[1][0], h)).abs() < 1e-12, "{name}");
            assert!((last[2] - end(crops[1][1], w)).abs() < 1e-12, "{name}");
            c
        } else {
            video_patch_positions(f, h, w, &Device::Cpu)?.to_dtype(DType::F64)?
        };
        let (cos, sin) = rope.at_coordinates(&coordinates, DType::F32)?;
        let cells = angles(&rows(&coordinates)?, &slots);
        let theirs = (&t[&format!("{name}.cos")], &t[&format!("{name}.sin")]);
        assert_near(
            &format!("cogvideox {name}"),
            (&cos, &sin),
            theirs,
            &cells,
            f32_bound(10_000.0),
        )?;
    }
    Ok(())
}

/// LTX's slots: the padding, then frequency `k` of axis `a` at column `axes * k + a`, with
/// `w_k = (pi / 2) theta^(k / (n - 1))`.
fn ltx_slots(dim: usize, axes: usize, theta: f64) -> Vec<Option<(usize, f64)>> {
    let n = dim / (2 * axes);
    let pad = dim / 2 - axes * n;
    let w = |k: usize| std::f64::consts::FRAC_PI_2 * theta.powf(k as f64 / (n - 1).max(1) as f64);
    std::iter::repeat_n(None, pad)
        .chain((0..n).flat_map(|k| (0..axes).map(move |a| Some((a, w(k))))))
        .collect()
}

/// diffusers' LTX tables in f32: the fraction's `2u - 1` rounded (`u` absolute, `|w| u` on the
/// angle), the frequency (the exponent `k / (n - 1)` rounded in f32 linspace: `ln(theta) u`
/// relatively; `pow` and the `pi / 2` factor: up to `3u`), the angle (`u`), then f32 cos and
/// sin (`2u`); ours are within `u` of the exact values.
fn ltx_bound(theta: f64) -> impl Fn(f64, f64) -> f64 {
    move |angle: f64, w: f64| angle.abs() * (theta.ln() + 5.0) * U + w.abs() * U + 3.0 * U
}

fn check_ltx(
    what: &str,
    rope: &AxesRope,
    coordinates: &Tensor,
    theirs: (&Tensor, &Tensor),
    dim: usize,
    axes: usize,
) -> anyhow::Result<(f64, f64)> {
    let (cos, sin) = rope.at_coordinates(coordinates, DType::F32)?;
    let centred: Vec<Vec<f64>> = rows(coordinates)?
        .into_iter()
        .map(|row| row.into_iter().map(|u| 2.0 * u - 1.0).collect())
        .collect();
    let cells = angles(&centred, &ltx_slots(dim, axes, 10_000.0));
    assert_near(what, (&cos, &sin), theirs, &cells, ltx_bound(10_000.0))
}

/// LTX-Video: dim 2048 (341 frequencies per axis, one padding column), at the fractions the
/// class computes with the pipeline's interpolation scale.
#[test]
fn ltx_video() -> anyhow::Result<()> {
    let (_, t) = fixture("ltx_video")?;
    let rope = AxesRope::ltx(2048, 3, 10_000.0)?;
    assert_eq!((rope.half_dim(), rope.padding()), (1024, 1));
    let theirs = (&t["main.cos"], &t["main.sin"]);
    check_ltx("ltx_video", &rope, &t["main.coordinates"], theirs, 2048, 3)?;
    Ok(())
}

/// LTX-2: video (dim 4096, 3 axes: 682 frequencies each, two padding columns) and audio (dim
/// 2048, one axis), with and without `rope_double_precision`, interleaved and split (the same
/// `(n, dim / 2)` table, which the split layout deals out to the heads).
#[test]
fn ltx2() -> anyhow::Result<()> {
    let (json, t) = fixture("ltx2")?;
    for call in json["calls"].as_array().unwrap() {
        let name = call["name"].as_str().unwrap();
        let dim = call["module_init"]["dim"].as_u64().unwrap() as usize;
        let axes = call["axes"].as_u64().unwrap() as usize;
        let rope = AxesRope::ltx(dim, axes, 10_000.0)?;
        let theirs = (&t[&format!("{name}.cos")], &t[&format!("{name}.sin")]);
        let coordinates = &t[&format!("{name}.coordinates")];
        check_ltx(
            &format!("ltx2 {name}"),
            &rope,
            coordinates,
            theirs,
            dim,
            axes,
        )?;
    }
    Ok(())
}

/// Every named constructor against the 256-bit oracle: the integer families at ids up to
/// 2^31 - 1 (negative too), in every dtype.
#[test]
fn named_constructors_are_exact_at_large_ids() -> anyhow::Result<()> {
    let top = (1i64 << 31) - 1;
    let ids = Tensor::new(
        &[
            [top, 0, 7],
            [123_456, top - 5, 1 << 30],
            [-top, 3, -(1 << 29)],
        ],
        &Device::Cpu,
    )?;
    for (name, rope, theta, axes_dim) in [
        ("wan 128", AxesRope::wan(128)?, 10_000.0, vec![44, 42, 42]),
        ("wan 40", AxesRope::wan(40)?, 10_000.0, vec![16, 12, 12]),
        (
            "hunyuan",
            AxesRope::hunyuan_video()?,
            256.0,
            vec![16, 56, 56],
        ),
        (
            "cogvideox",
            AxesRope::cogvideox(64)?,
            10_000.0,
            vec![16, 24, 24],
        ),
    ] {
        assert_eq!(rope.axes_dim(), axes_dim.as_slice(), "{name}");
        assert_axes_exact(&rope, &ids, theta, &axes_slots(&axes_dim))?;
    }
    Ok(())
}

/// LTX at fractional coordinates, far ones included, against the 256-bit oracle: the angle is
/// `(2u - 1) w` with `2u - 1` in f64 and `w = (pi / 2) theta^(k / (n - 1))` exact. The
/// coordinates keep every angle off the multiples of pi / 2 (but 0), where a value is an exact
/// zero and bf16's tolerance, relative, would ask for more than f64 gives.
#[test]
fn ltx_is_exact_at_fractional_coordinates() -> anyhow::Result<()> {
    let (dim, axes) = (64usize, 3usize);
    let rope = AxesRope::ltx(dim, axes, 10_000.0)?;
    let coordinates = Tensor::new(
        &[
            [0.3f64, 1.0 / 3.0, -0.7],
            [12_345.678, 0.0626, 0.5],
            [-33_554.432_1, 1e-9, 2.2501],
        ],
        &Device::Cpu,
    )?;
    let n = dim / (2 * axes);
    let pad = dim / 2 - axes * n;
    assert_eq!(rope.padding(), pad);
    let host = rows(&coordinates)?;
    let mut big = Big::new();
    let half_pi = Big::div(&big.pi(), &Big::num(2.0));
    for dtype in [DType::F64, DType::F32, DType::F16, DType::BF16] {
        let (cos, sin) = rope.at_coordinates(&coordinates, dtype)?;
        assert_eq!(cos.dims(), &[3, dim / 2]);
        let (cos, sin) = (values(&cos)?, values(&sin)?);
        for (r, row) in host.iter().enumerate() {
            let base = r * dim / 2;
            for i in base..base + pad {
                assert_eq!((cos[i], sin[i]), (1.0, 0.0), "padding");
            }
            for k in 0..n {
                let power = big.pow(&Big::num(10_000.0), &Big::ratio(k as f64, (n - 1) as f64));
                let w = Big::mul(&half_pi, &power);
                for (a, &u) in row.iter().enumerate() {
                    let (s, c) = big.sin_cos(2.0 * u - 1.0, &w);
                    let i = base + pad + axes * k + a;
                    assert!(
                        (cos[i] - c).abs() <= tolerance(dtype, c),
                        "{dtype:?} r{r} k{k} a{a}"
                    );
                    assert!(
                        (sin[i] - s).abs() <= tolerance(dtype, s),
                        "{dtype:?} r{r} k{k} a{a}"
                    );
                }
            }
        }
    }
    Ok(())
}

/// A coordinate with an integer value gives the integer id's bits; `-c` gives `c`'s cos and the
/// negated sin, bit for bit; batched coordinates give each batch's table.
#[test]
fn coordinates_agree_with_ids_and_signs() -> anyhow::Result<()> {
    let rope = AxesRope::hunyuan_video()?;
    let ids = Tensor::new(&[[0i64, 5, -9], [1 << 20, -3, 70_000]], &Device::Cpu)?;
    for dtype in [DType::F32, DType::BF16, DType::F64] {
        let (c1, s1) = rope.at(&ids, dtype)?;
        let (c2, s2) = rope.at_coordinates(&ids.to_dtype(DType::F64)?, dtype)?;
        assert_eq!(values(&c1)?, values(&c2)?);
        assert_eq!(values(&s1)?, values(&s2)?);
    }
    let c = Tensor::new(&[[0.25f64, 3.5, 100.125]], &Device::Cpu)?;
    let (pc, ps) = rope.at_coordinates(&c, DType::F32)?;
    let (nc, ns) = rope.at_coordinates(&c.neg()?, DType::F32)?;
    assert_eq!(values(&pc)?, values(&nc)?);
    assert_eq!(values(&ps)?, values(&ns.neg()?)?);
    let batch = Tensor::stack(&[&c, &c.affine(2.0, 1.0)?], 0)?;
    let (bc, _) = rope.at_coordinates(&batch, DType::F32)?;
    assert_eq!(bc.dims(), &[2, 1, 64]);
    assert_eq!(values(&bc.get(0)?)?, values(&pc)?);
    Ok(())
}

/// The grid is row-major: frame, then row, then column.
#[test]
fn video_patch_ids_are_row_major() -> anyhow::Result<()> {
    let ids = video_patch_positions(2, 3, 4, &Device::Cpu)?.to_vec2::<u32>()?;
    assert_eq!(ids.len(), 24);
    for (i, row) in ids.iter().enumerate() {
        assert_eq!(row, &[(i / 12) as u32, (i / 4 % 3) as u32, (i % 4) as u32]);
    }
    assert_eq!(
        video_patch_positions(0, 3, 4, &Device::Cpu)?.dims(),
        &[0, 3]
    );
    Ok(())
}

/// Bad input is an error naming it.
#[test]
fn bad_input_is_named() -> anyhow::Result<()> {
    let dev = Device::Cpu;
    let rope = AxesRope::wan(128)?;
    let nan = Tensor::new(&[[0f64, f64::NAN, 1.0]], &dev)?;
    match rope.at_coordinates(&nan, DType::F32) {
        Err(Error::CoordinateOutOfRange { index: 1, value }) => assert!(value.is_nan()),
        other => panic!("{other:?}"),
    }
    let far = Tensor::new(&[[0f64, 1.0, 2_147_483_648.0]], &dev)?;
    assert!(matches!(
        rope.at_coordinates(&far, DType::F32),
        Err(Error::CoordinateOutOfRange { index: 2, .. })
    ));
    let two = Tensor::new(&[[0f64, 1.0]], &dev)?;
    assert!(matches!(
        rope.at_coordinates(&two, DType::F32),
        Err(Error::ShapeMismatch {
            name: "coordinates",
            ..
        })
    ));
    for err in [
        AxesRope::wan(4).unwrap_err(),
        AxesRope::wan(65).unwrap_err(),
        AxesRope::cogvideox(24).unwrap_err(),
        AxesRope::ltx(4, 3, 1e4).unwrap_err(),
        AxesRope::ltx(4097, 3, 1e4).unwrap_err(),
    ] {
        assert!(matches!(err, Error::InvalidParameter { .. }), "{err}");
    }
    assert!(matches!(
        cogvideox_coordinates(1, 0, 4, 30, 45, &dev),
        Err(Error::InvalidParameter { name: "height", .. })
    ));
    let empty = Tensor::zeros((0, 3), DType::F64, &dev)?;
    let (cos, _) = AxesRope::ltx(64, 3, 1e4)?.at_coordinates(&empty, DType::F32)?;
    assert_eq!(cos.dims(), &[0, 32]);
    Ok(())
}
