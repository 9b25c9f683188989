//! Multi-axis rotary tables, sin-cos grids and ALiBi against the real code (fixtures written by
//! `scripts/fixtures/grids.py` with diffusers 0.42.1 and transformers 5.24.0), and against the
//! exact values.

use std::collections::HashMap;

use candle_core::{DType, Device, Tensor};
use candle_pe_core::{patch_positions, AxesRope};
use candle_pe_core::{Alibi, SincosGrid, SincosGrid3d};
use pe_testkit::{assert_axes_exact, axes_slots};

fn fixture(name: &str) -> anyhow::Result<(serde_json::Value, HashMap<String, Tensor>)> {
    let dir = pe_testkit::fixture("grids");
    let json = pe_testkit::read_json(dir.join(format!("{name}.json")));
    let tensors =
        candle_core::safetensors::load(dir.join(format!("{name}.safetensors")), &Device::Cpu)?;
    Ok((json, tensors))
}

fn values(t: &Tensor) -> anyhow::Result<Vec<f64>> {
    Ok(t.to_dtype(DType::F64)?.flatten_all()?.to_vec1::<f64>()?)
}

/// FLUX.1 and FLUX.2: diffusers' tables hold each of our values twice (columns 2k, 2k + 1),
/// computed in f64 from the ids and rounded to f32, so they agree within f32's rounding.
#[test]
fn flux_pos_embed() -> anyhow::Result<()> {
    for name in ["flux", "flux2"] {
        let (json, t) = fixture(name)?;
        let init = &json["calls"][0]["module_init"];
        let axes: Vec<usize> = serde_json::from_value(init["axes_dim"].clone())?;
        let theta = init["theta"].as_f64().unwrap();
        let rope = AxesRope::new(&axes, theta)?;
        let ids = &t["main.ids"];
        for dtype in [DType::F32, DType::F64] {
            let (cos, sin) = rope.at(ids, dtype)?;
            assert_eq!(cos.dims(), &[ids.dim(0)?, rope.half_dim()]);
            for (what, ours, theirs) in [
                ("cos", values(&cos)?, values(&t["main.freqs_cos"])?),
                ("sin", values(&sin)?, values(&t["main.freqs_sin"])?),
            ] {
                let h = rope.half_dim();
                for (i, &o) in ours.iter().enumerate() {
                    let (r, k) = (i / h, i % h);
                    for col in [2 * k, 2 * k + 1] {
                        let d = theirs[r * 2 * h + col];
                        assert!(
                            (o - d).abs() <= 1.2e-7,
                            "{name} {what} {dtype:?} row {r} slot {k}: {o} vs diffusers {d}"
                        );
                    }
                }
            }
        }
    }
    Ok(())
}

/// Every slot of every axis against the exact values, at ids up to 2^31 - 1.
#[test]
fn axes_rope_is_exact_at_large_ids() -> anyhow::Result<()> {
    let axes = [16usize, 56, 56];
    let rope = AxesRope::new(&axes, 10_000.0)?;
    let top = (1u32 << 31) - 1;
    let ids = Tensor::new(&[[top, 0, 7], [123_456, top - 5, 1 << 30]], &Device::Cpu)?;
    assert_axes_exact(&rope, &ids, 10_000.0, &axes_slots(&axes))
}

/// Negative ids (Qwen-Image centres its height and width ids) against the exact values, down to
/// -(2^31 - 1), in every dtype; `-p` gives `p`'s cos and the negated sin, bit for bit.
#[test]
fn axes_rope_is_exact_at_negative_ids() -> anyhow::Result<()> {
    let axes = [16usize, 56, 56];
    let rope = AxesRope::new(&axes, 10_000.0)?;
    let top = (1i64 << 31) - 1;
    let rows = [[0i64, -1, -3], [-top, top, -123_456], [7, -(1 << 30), 5]];
    let ids = Tensor::new(&rows, &Device::Cpu)?;
    assert_axes_exact(&rope, &ids, 10_000.0, &axes_slots(&axes))?;
    let small = [[3i32, -5, 0], [-1_000_000, 9, 2]];
    let ids = Tensor::new(&small, &Device::Cpu)?;
    let (cos, sin) = rope.at(&ids, DType::F32)?;
    let (pcos, psin) = rope.at(&ids.abs()?, DType::F32)?;
    let signs = Tensor::new(&[[1f32, -1., 1.], [-1., 1., 1.]], &Device::Cpu)?;
    let columns: Vec<u32> = axes
        .iter()
        .enumerate()
        .flat_map(|(a, &d)| std::iter::repeat_n(a as u32, d / 2))
        .collect();
    let signs = signs.index_select(&Tensor::new(columns.as_slice(), &Device::Cpu)?, 1)?;
    assert_eq!(values(&cos)?, values(&pcos)?);
    assert_eq!(values(&sin)?, values(&(psin * signs)?)?);
    Ok(())
}

/// Qwen-Image (diffusers' `QwenEmbedRope`): centred video ids (`scale_rope`, negative height
/// and width ids) and plain ones, and the text rows, whose three ids are one position. diffusers
/// computes in f32, so the tables agree within [`f32_reference_bound`].
#[test]
fn qwen_image_rope_with_centred_ids() -> anyhow::Result<()> {
    let (json, t) = fixture("qwen_image")?;
    for call in json["calls"].as_array().unwrap() {
        let name = call["name"].as_str().unwrap();
        let init = &call["module_init"];
        let axes: Vec<usize> = serde_json::from_value(init["axes_dim"].clone())?;
        let theta = init["theta"].as_f64().unwrap();
        let rope = AxesRope::new(&axes, theta)?;
        let video = t[&format!("{name}.video_positions")].clone();
        let text = t[&format!("{name}.text_positions")].unsqueeze(1)?;
        let text = Tensor::cat(&[&text, &text, &text], 1)?;
        let negative = video.flatten_all()?.min(0)?.to_scalar::<i64>()? < 0;
        assert_eq!(
            negative,
            name == "scaled",
            "{name}: centred ids are negative"
        );
        let mut largest: f64 = 0.0;
        for (rows, ids) in [("vid", video), ("txt", text)] {
            let (cos, sin) = rope.at(&ids, DType::F32)?;
            for (what, ours) in [("cos", cos), ("sin", sin)] {
                let theirs = &t[&format!("{name}.{rows}_{what}")];
                let context = format!("{name} {rows} {what}");
                let slots = axes_slots(&axes);
                let (l, _) =
                    assert_near_f32_reference(&ours, theirs, &ids, theta, &slots, &context)?;
                largest = largest.max(l);
            }
        }
        println!("qwen_image {name}: largest difference {largest:.2e}");
    }
    Ok(())
}

#[test]
fn axes_rope_refuses_bad_axes_and_ids() -> anyhow::Result<()> {
    for axes in [&[16usize, 7][..], &[0, 8], &[]] {
        let err = AxesRope::new(axes, 10_000.0).unwrap_err().to_string();
        assert!(err.contains("axes_dim"), "{axes:?}: {err}");
    }
    let rope = AxesRope::new(&[4, 4], 10_000.0)?;
    let ids = Tensor::zeros((5, 3), DType::U32, &Device::Cpu)?;
    let err = rope.at(&ids, DType::F32).unwrap_err().to_string();
    assert!(err.contains("positions") && err.contains("[5, 3]"), "{err}");
    for (bad, value) in [(-(1i64 << 31), "-2147483648"), (1 << 31, "2147483648")] {
        let ids = Tensor::new(&[[0i64, 1], [bad, 2]], &Device::Cpu)?;
        let err = rope.at(&ids, DType::F32).unwrap_err().to_string();
        assert!(
            err.contains("axis position") && err.contains(value),
            "{err}"
        );
    }
    let err = rope
        .at(
            &Tensor::zeros((1, 2), DType::F32, &Device::Cpu)?,
            DType::F32,
        )
        .unwrap_err()
        .to_string();
    assert!(err.contains("integer"), "{err}");
    let (cos, _) = rope.at(
        &Tensor::zeros((2, 0, 2), DType::U32, &Device::Cpu)?,
        DType::F32,
    )?;
    assert_eq!(cos.dims(), &[2, 0, 4]);
    Ok(())
}

/// How far a value transformers computes in f32 may be from ours, at an exact angle `angle` with
/// base `theta`. transformers computes `inv_freq` in f32 (the exponent `2i / d` rounded, which
/// moves the frequency by up to `ln(theta) u` relatively, then `pow` and the reciprocal, about
/// `u` each, with `u = 2^-24`), the angle `id * inv_freq` (`u` more), then f32 cos and sin
/// (within an f32 ulp, `2u`). So its value is off by up to `|angle| (ln(theta) + 4) u + 2u`;
/// ours are within half an f32 ulp (`u`) of the exact values.
fn f32_reference_bound(angle: f64, theta: f64) -> f64 {
    let u = 2f64.powi(-24);
    angle.abs() * (theta.ln() + 4.0) * u + 3.0 * u
}

/// Asserts that our table `ours` (`(n, slots.len())`, at ids `(n, axes)`) is within
/// [`f32_reference_bound`] of the reference's `theirs`, `slots` as in [`assert_axes_exact`]. Returns
/// the largest difference and the largest fraction of its bound a value uses.
fn assert_near_f32_reference(
    ours: &Tensor,
    theirs: &Tensor,
    ids: &Tensor,
    theta: f64,
    slots: &[(usize, f64, f64)],
    context: &str,
) -> anyhow::Result<(f64, f64)> {
    assert_eq!(ours.dims(), theirs.dims(), "{context}");
    let host = ids.to_dtype(DType::I64)?.to_vec2::<i64>()?;
    let (mut largest, mut worst): (f64, f64) = (0.0, 0.0);
    for (i, (o, d)) in values(ours)?.iter().zip(values(theirs)?).enumerate() {
        let (r, j) = (i / slots.len(), i % slots.len());
        let (a, num, den) = slots[j];
        let bound = f32_reference_bound(host[r][a] as f64 * theta.powf(-num / den), theta);
        let id = host[r][a];
        assert!(
            (o - d).abs() <= bound,
            "{context}: row {r} slot {j} (id {id}): {o} vs {d}"
        );
        largest = largest.max((o - d).abs());
        worst = worst.max((o - d).abs() / bound);
    }
    Ok((largest, worst))
}

/// The slots of [`AxesRope::split_spectrum`]`(head_dim, axes, ..)`: axis `a` takes frequencies
/// `theta^(-2i / head_dim)` with `i = a, a + axes, ..`.
fn split_slots(head_dim: usize, axes: usize) -> Vec<(usize, f64, f64)> {
    let per_axis = head_dim / 2 / axes;
    (0..head_dim / 2)
        .map(|slot| {
            let (a, j) = (slot / per_axis, slot % per_axis);
            (a, 2.0 * (a + axes * j) as f64, head_dim as f64)
        })
        .collect()
}

/// Pixtral's vision tower: transformers' `PixtralVisionRotaryEmbedding` returns `[t, t]`, each
/// `t` our table, within [`f32_reference_bound`]; the test prints how much of it the worst
/// value uses.
#[test]
fn pixtral_vision_rope() -> anyhow::Result<()> {
    let (json, t) = fixture("pixtral")?;
    let ids = &t["ids"];
    for call in json["calls"].as_array().unwrap() {
        let name = call["name"].as_str().unwrap();
        let config = &call["config"];
        let head_dim = config["head_dim"].as_u64().unwrap() as usize;
        let theta = config["rope_parameters"]["rope_theta"].as_f64().unwrap();
        let rope = AxesRope::split_spectrum(head_dim, 2, theta)?;
        let h = head_dim / 2;
        let slots = split_slots(head_dim, 2);
        let grid_rows = json["rows"]["grid_rows"][1].as_u64().unwrap() as usize;
        let (mut largest, mut worst, mut in_grid): (f64, f64, f64) = (0.0, 0.0, 0.0);
        for dtype in [DType::F32, DType::F64] {
            let (cos, sin) = rope.at(ids, dtype)?;
            for (what, ours) in [("cos", cos), ("sin", sin)] {
                let theirs = &t[&format!("{name}.{what}")];
                for half in [0, h] {
                    let theirs = theirs.narrow(1, half, h)?;
                    let context = format!("{name} {what} {dtype:?} columns {half}..");
                    let (l, w) =
                        assert_near_f32_reference(&ours, &theirs, ids, theta, &slots, &context)?;
                    (largest, worst) = (largest.max(l), worst.max(w));
                    let (l, _) = assert_near_f32_reference(
                        &ours.narrow(0, 0, grid_rows)?,
                        &theirs.narrow(0, 0, grid_rows)?,
                        &ids.narrow(0, 0, grid_rows)?,
                        theta,
                        &slots,
                        &context,
                    )?;
                    in_grid = in_grid.max(l);
                }
            }
        }
        println!(
            "{name}: largest difference {largest:.2e} ({in_grid:.2e} in the small grid), the worst \
             value uses {worst:.3} of its bound"
        );
    }
    Ok(())
}

/// Llama 4's vision encoder needs no rope of its own: transformers' `Llama4VisionRotaryEmbedding`
/// is two FLUX-style axes of `head_dim / 2` features at ids `(column + 1, row + 1)`, the class
/// token at `(0, 0)`, within [`f32_reference_bound`].
#[test]
fn llama4_vision_rope_is_two_axes() -> anyhow::Result<()> {
    let (json, t) = fixture("llama4_vision")?;
    let config = &json["calls"][0]["config"];
    let head_dim = (config["hidden_size"].as_u64().unwrap()
        / config["num_attention_heads"].as_u64().unwrap()) as usize;
    let theta = config["rope_parameters"]["rope_theta"].as_f64().unwrap();
    let axes = [head_dim / 2, head_dim / 2];
    let rope = AxesRope::new(&axes, theta)?;
    let ids = &t["ids"];
    let (cos, sin) = rope.at(ids, DType::F32)?;
    let mut largest: f64 = 0.0;
    for (what, ours) in [("cos", cos), ("sin", sin)] {
        let slots = axes_slots(&axes);
        let (l, _) = assert_near_f32_reference(&ours, &t[what], ids, theta, &slots, what)?;
        largest = largest.max(l);
    }
    println!("llama4_vision: largest difference {largest:.2e}");
    Ok(())
}

/// The split spectrum against the exact values at ids up to 2^31 - 1, in every dtype; with one
/// axis it is the plain 1-D table, bit for bit.
#[test]
fn split_spectrum_is_exact_at_large_ids() -> anyhow::Result<()> {
    let (head_dim, axes, theta) = (48usize, 3usize, 10_000.0);
    let rope = AxesRope::split_spectrum(head_dim, axes, theta)?;
    assert_eq!(rope.axes_dim(), &[16, 16, 16]);
    let top = (1u32 << 31) - 1;
    let ids = Tensor::new(&[[top, 0, 7], [123_456, top - 5, 1 << 30]], &Device::Cpu)?;
    assert_axes_exact(&rope, &ids, theta, &split_slots(head_dim, axes))?;
    let column = ids.narrow(1, 0, 1)?;
    let one = AxesRope::split_spectrum(64, 1, theta)?.at(&column, DType::F32)?;
    let plain = AxesRope::new(&[64], theta)?.at(&column, DType::F32)?;
    assert_eq!(values(&one.0)?, values(&plain.0)?);
    assert_eq!(values(&one.1)?, values(&plain.1)?);
    Ok(())
}

#[test]
fn patch_ids_are_row_major_and_split_spectrum_checks_its_width() -> anyhow::Result<()> {
    let ids = patch_positions(2, 3, &Device::Cpu)?;
    assert_eq!(
        ids.to_vec2::<u32>()?,
        [[0, 0], [0, 1], [0, 2], [1, 0], [1, 1], [1, 2]]
    );
    assert_eq!(patch_positions(0, 3, &Device::Cpu)?.dims(), &[0, 2]);
    let err = patch_positions(1 << 32, 1, &Device::Cpu)
        .unwrap_err()
        .to_string();
    assert!(err.contains("grid height 4294967296"), "{err}");
    let err = patch_positions(1 << 30, 1 << 30, &Device::Cpu)
        .unwrap_err()
        .to_string();
    assert!(err.contains("bytes"), "{err}");
    for (head_dim, axes, name) in [(30, 2, "head_dim"), (0, 2, "head_dim"), (64, 0, "axes")] {
        let err = AxesRope::split_spectrum(head_dim, axes, 10_000.0)
            .unwrap_err()
            .to_string();
        assert!(err.contains(name), "{head_dim} {axes}: {err}");
    }
    let rope = AxesRope::split_spectrum(16, 2, 10_000.0)?;
    let (cos, _) = rope.at(&patch_positions(0, 0, &Device::Cpu)?, DType::F32)?;
    assert_eq!(cos.dims(), &[0, 8]);
    Ok(())
}

/// diffusers' `get_2d_sincos_pos_embed`, every case. It rounds the positions to f32 before its
/// f64 arithmetic; where that rounding is inexact (`rect_interp`) the tables differ by it.
#[test]
fn sincos_grids_match_diffusers() -> anyhow::Result<()> {
    let (json, t) = fixture("sincos_2d")?;
    for call in json["calls"].as_array().unwrap() {
        let name = call["name"].as_str().unwrap();
        let args = &call["args"];
        let embed_dim = args["embed_dim"].as_u64().unwrap() as usize;
        let (h, w) = match &args["grid_size"] {
            serde_json::Value::Array(hw) => (hw[0].as_u64().unwrap(), hw[1].as_u64().unwrap()),
            n => (n.as_u64().unwrap(), n.as_u64().unwrap()),
        };
        let mut grid = SincosGrid::new(embed_dim)?
            .with_base_size(args["base_size"].as_f64().unwrap_or(16.0))
            .with_interpolation_scale(args["interpolation_scale"].as_f64().unwrap_or(1.0));
        if args["cls_token"].as_bool() == Some(true) {
            grid = grid.with_extra_tokens(args["extra_tokens"].as_u64().unwrap_or(0) as usize);
        }
        let ours = grid.table(h as usize, w as usize, DType::F64, &Device::Cpu)?;
        let theirs = &t[call["tensors"]["pos_embed"].as_str().unwrap()];
        assert_eq!(ours.dims(), theirs.dims(), "{name}");
        // diffusers' positions are f32: off by up to half an f32 ulp of the largest (and the
        // frequencies are at most 1), nothing where the scale is a power of two.
        let largest = (h.max(w) - 1) as f64 * 16f64.max(args["base_size"].as_f64().unwrap_or(16.0));
        let tol = largest * f32::EPSILON as f64 / 2.0 + 1e-12;
        let diff = (ours - theirs.to_dtype(DType::F64)?)?
            .abs()?
            .max_all()?
            .to_scalar::<f64>()?;
        assert!(diff <= tol, "{name}: differs from diffusers by {diff:e}");
    }
    for (bad, needle) in [(6usize, "width"), (0, "width")] {
        assert!(SincosGrid::new(bad)
            .unwrap_err()
            .to_string()
            .contains(needle));
    }
    let grid = SincosGrid::new(8)?;
    // An empty grid is valid: no patch rows (the extra rows stay).
    for (h, w) in [(0, 4), (4, 0), (0, 0)] {
        let table = grid.table(h, w, DType::F32, &Device::Cpu)?;
        assert_eq!(table.dims(), &[0, 8]);
        let table = grid
            .clone()
            .with_extra_tokens(1)
            .table(h, w, DType::F32, &Device::Cpu)?;
        assert_eq!(table.dims(), &[1, 8]);
    }
    let err = grid
        .table(1 << 21, 1, DType::F32, &Device::Cpu)
        .unwrap_err()
        .to_string();
    assert!(err.contains("grid height"), "{err}");
    // A scale that carries positions past 2^31 is named, its value readable.
    let err = grid
        .clone()
        .with_interpolation_scale(1e-300)
        .table(4, 5, DType::F32, &Device::Cpu)
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("interpolation_scale must be") && err.ends_with("got 1e-300"),
        "{err}"
    );
    let err = grid
        .clone()
        .with_base_size(1e300)
        .table(4, 5, DType::F32, &Device::Cpu)
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("base_size must be"), "{err}");
    let tall = SincosGrid3d::new(16)?.with_temporal_interpolation_scale(1e-12);
    let err = tall.table(3, 1, 1, DType::F32, &Device::Cpu).unwrap_err();
    assert!(err.to_string().starts_with("temporal_interpolation_scale"));
    assert_eq!(
        tall.table(0, 1, 1, DType::F32, &Device::Cpu)?.dims(),
        &[0, 1, 16]
    );
    let err = grid
        .with_interpolation_scale(0.0)
        .table(2, 2, DType::F32, &Device::Cpu)
        .unwrap_err()
        .to_string();
    assert!(err.contains("interpolation_scale"), "{err}");
    Ok(())
}

/// diffusers' `get_3d_sincos_pos_embed` (CogVideoX): `spatial_size` is (width, height) there.
/// Its f32 positions are exact in these cases but CogVideoX's (1 / 1.875 is not dyadic).
#[test]
fn sincos_3d_grids_match_diffusers() -> anyhow::Result<()> {
    let (json, t) = fixture("sincos_3d")?;
    for call in json["calls"].as_array().unwrap() {
        let name = call["name"].as_str().unwrap();
        let args = &call["args"];
        let (w, h) = match &args["spatial_size"] {
            serde_json::Value::Array(wh) => (wh[0].as_u64().unwrap(), wh[1].as_u64().unwrap()),
            n => (n.as_u64().unwrap(), n.as_u64().unwrap()),
        };
        let frames = args["temporal_size"].as_u64().unwrap() as usize;
        let spatial = args["spatial_interpolation_scale"].as_f64().unwrap_or(1.0);
        let temporal = args["temporal_interpolation_scale"].as_f64().unwrap_or(1.0);
        let grid = SincosGrid3d::new(args["embed_dim"].as_u64().unwrap() as usize)?
            .with_spatial_interpolation_scale(spatial)
            .with_temporal_interpolation_scale(temporal);
        let ours = grid.table(frames, h as usize, w as usize, DType::F64, &Device::Cpu)?;
        let theirs = &t[call["tensors"]["pos_embed"].as_str().unwrap()];
        assert_eq!(ours.dims(), theirs.dims(), "{name}");
        let largest = (frames.max(h.max(w) as usize) as f64) / spatial.min(temporal);
        let tol = largest * f32::EPSILON as f64 + 1e-12;
        let diff = (ours - theirs.to_dtype(DType::F64)?)?
            .abs()?
            .max_all()?
            .to_scalar::<f64>()?;
        assert!(diff <= tol, "{name}: differs from diffusers by {diff:e}");
    }
    let err = SincosGrid3d::new(24).unwrap_err().to_string();
    assert!(err.contains("width"), "{err}");
    // No frames: an empty table, as any empty grid; too many are named.
    let grid = SincosGrid3d::new(32)?;
    let empty = grid.table(0, 2, 2, DType::F32, &Device::Cpu)?;
    assert_eq!(empty.dims(), &[0, 4, 32]);
    let err = grid
        .table(1 << 21, 1, 1, DType::F32, &Device::Cpu)
        .unwrap_err()
        .to_string();
    assert!(err.contains("frames"), "{err}");
    Ok(())
}

/// ALiBi slopes: MPT's are the exact powers of two rounded to f32, and so are ours; BLOOM's
/// f32 `pow` is one f32 step off for some heads. Biases: MPT's causal form exactly, BLOOM's
/// padding-aware form within BLOOM's slope rounding.
#[test]
fn alibi_matches_mpt_and_bloom() -> anyhow::Result<()> {
    let dev = Device::Cpu;
    let (mpt, t) = fixture("alibi_mpt")?;
    for call in mpt["calls"].as_array().unwrap() {
        let heads = call["num_heads"].as_u64().unwrap() as usize;
        let alibi = Alibi::new(heads)?;
        let name = call["name"].as_str().unwrap();
        let slopes = &t[&format!("{name}.slopes")];
        assert_eq!(
            alibi.slopes_tensor(DType::F32, &dev)?.to_vec1::<f32>()?,
            slopes
                .to_dtype(DType::F32)?
                .flatten_all()?
                .to_vec1::<f32>()?,
            "{heads} heads"
        );
        let bias = &t[&format!("{name}.bias")];
        let keys = bias.dim(2)?;
        let ours = values(&alibi.causal_bias(keys, DType::F32, &dev)?)?;
        for (o, m) in ours.iter().zip(values(bias)?) {
            assert!(
                (o - m).abs() <= m.abs() * f32::EPSILON as f64,
                "{heads}: {o} vs {m}"
            );
        }
    }
    let (bloom, t) = fixture("alibi_bloom")?;
    let mask: Vec<Vec<f64>> = serde_json::from_value(bloom["attention_mask"].clone())?;
    for call in bloom["calls"].as_array().unwrap() {
        let heads = call["num_heads"].as_u64().unwrap() as usize;
        let name = call["name"].as_str().unwrap();
        let alibi = Alibi::new(heads)?;
        let theirs = values(&t[&format!("{name}.slopes")])?;
        for (h, (&o, b)) in alibi.slopes().iter().zip(&theirs).enumerate() {
            // BLOOM raises an f32-rounded base to the power k: up to k f32 steps off.
            let k = (h + 1) as f64;
            assert!(
                (o - b).abs() <= o * k * f32::EPSILON as f64,
                "{heads} heads, head {h}: {o} vs BLOOM's {b}"
            );
        }
        // BLOOM: (batch * heads, 1, L) = slope * (cumsum(mask) - 1) * mask.
        let bias = values(&t[&format!("{name}.alibi_f32")])?;
        let len = mask[0].len();
        for (b, row) in mask.iter().enumerate() {
            let mut seen = 0.0;
            for (j, &m) in row.iter().enumerate() {
                seen += m;
                for (h, &slope) in alibi.slopes().iter().enumerate() {
                    let want = slope * (seen - 1.0) * m;
                    let got = bias[(b * heads + h) * len + j];
                    let k = (h + 2) as f64;
                    assert!((got - want).abs() <= want.abs() * k * f32::EPSILON as f64);
                }
            }
        }
    }
    // The symmetric encoder form, and the errors.
    let (slopes, distance) = Alibi::new(2)?.symmetric_factors(3, 1, 4, DType::F32, &dev)?;
    let bias = slopes.broadcast_mul(&distance)?;
    assert_eq!(bias.dims(), &[2, 3, 4]);
    assert_eq!(
        bias.get(0)?.get(0)?.to_vec1::<f32>()?,
        [-0.0625, 0.0, -0.0625, -0.125]
    );
    assert!(Alibi::new(0).unwrap_err().to_string().contains("heads"));
    assert!(Alibi::new(8)?
        .with_max_bias(f64::NAN)
        .unwrap_err()
        .to_string()
        .contains("alibi_bias_max"));
    Ok(())
}
