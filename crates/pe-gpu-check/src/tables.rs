//! Every table family built on the target and held to the CPU's f64 tables, which the test
//! suite holds to the 256-bit oracle within 1e-9: sinusoidal presets (rows, ids, fractional
//! timesteps), rotary tables of every rope fixture (per layer type where a config has several),
//! M-RoPE, multi-axis rope, sin-cos grids and ALiBi, in f32, f16, bf16 and f64, at positions up
//! to 2^31 - 1. A table built from ids must equal, bit for bit, the rows of the same positions
//! built as a range (a value depends only on what it is, never on the request). The sinusoidal
//! and rotary tables the kernels build must also hold the CPU generator's bits in every dtype.

use anyhow::{Context, Result};
use candle_core::{DType, Device, Tensor};
use candle_pe_core::{
    patch_positions, video_patch_positions, Alibi, AxesRope, OddWidth, PeSpec, Preset, Rope,
    RopeConfig, SincosGrid, SincosGrid3d, SinusoidalEncoding,
};
use candle_pe_core::{At, RopeConfigs};
use serde_json::Value;

use crate::compare::{diff, host};
use crate::report::Report;
use crate::Target;
use candle_pe_formats::FromHfConfig;

pub const DTYPES: [DType; 4] = [DType::F32, DType::F16, DType::BF16, DType::F64];

/// The last 64 positions below 2^31, where the angles are largest.
pub const LAST: usize = (1 << 31) - 64;

const SECTION: &str = "tables";

pub fn run(target: &Target, report: &mut Report) -> Result<()> {
    sinusoidal(target, report)?;
    rotary(target, report)?;
    axes(target, report)?;
    report.attempt(SECTION, "grids", |r| grids(target, r));
    report.attempt(SECTION, "alibi", |r| alibi(target, r));
    Ok(())
}

/// The bound of one value of `dtype` against the exact `e`: the dtype's tolerance (1e-6 for
/// f32, 1e-9 for f64, one ulp for f16 and bf16), relative above 1 for f32 and f64 (scaled rope
/// tables reach 1.3), plus the 1e-9 of the CPU's f64 reference.
pub fn bound(dtype: DType, e: f64) -> f64 {
    let t = pe_testkit::tolerance(dtype, e);
    match dtype {
        DType::F32 | DType::F64 => t * e.abs().max(1.0) + 1e-9,
        _ => t + 1e-9,
    }
}

/// Checks `got` against `exact` elementwise within [`bound`]; records the element closest to
/// (or furthest over) its bound.
pub fn against_exact(
    report: &mut Report,
    section: &str,
    name: &str,
    got: &Tensor,
    exact: &Tensor,
) -> Result<()> {
    anyhow::ensure!(
        got.dims() == exact.dims(),
        "{name}: shape {:?}, the CPU's {:?}",
        got.dims(),
        exact.dims()
    );
    let dtype = got.dtype();
    let (g, e) = (host(got)?, host(exact)?);
    let mut worst = (0.0, bound(dtype, 0.0), 0.0); // (diff, bound, diff / bound)
    for (&g, &e) in g.iter().zip(&e) {
        let (d, b) = ((g - e).abs(), bound(dtype, e));
        let r = if d.is_nan() { f64::INFINITY } else { d / b };
        if r > worst.2 {
            worst = (d, b, r);
        }
    }
    report.check(
        section,
        &format!("{name} {dtype:?}"),
        if worst.2.is_infinite() {
            f64::NAN
        } else {
            worst.0
        },
        worst.1,
    );
    Ok(())
}

/// Records whether `a` and `b` hold the same bits (the largest difference if not, at least
/// the smallest positive f64 where only the bits differ, as -0 and 0).
pub fn same_bits(
    report: &mut Report,
    section: &str,
    name: &str,
    a: &Tensor,
    b: &Tensor,
) -> Result<()> {
    let d = diff(name, a, b)?;
    let shown = match (d.same_bits, d.max) {
        (true, _) => 0.0,
        (false, m) if m.is_nan() => f64::NAN,
        (false, m) => m.max(f64::MIN_POSITIVE),
    };
    report.check(section, name, shown, 0.0);
    Ok(())
}

/// Positions `first .. first + n` as an i64 ids tensor on `device`, in reverse order (a request
/// of another shape than the range).
fn reversed_ids(first: usize, n: usize, device: &Device) -> Result<Tensor> {
    let ids: Vec<i64> = (first..first + n).rev().map(|p| p as i64).collect();
    Ok(Tensor::from_vec(ids, n, device)?)
}

fn sinusoidal(target: &Target, report: &mut Report) -> Result<()> {
    let (rows, widths) = match target.full {
        true => (256, vec![64, 384, 1024, 1027]),
        false => (16, vec![64, 67]),
    };
    for preset in Preset::ALL {
        for &width in &widths {
            let name = format!("sinusoidal {} d{width}", preset.name());
            report.attempt(SECTION, &name.clone(), |r| {
                sinusoidal_case(target, r, &name, preset.spec(width), rows)
            });
        }
        let name = format!("sinusoidal {} timesteps", preset.name());
        report.attempt(SECTION, &name.clone(), |r| {
            timesteps(target, r, &name, preset.spec(320))
        });
    }
    report.attempt(SECTION, "sinusoidal custom", |r| custom(target, r));
    Ok(())
}

/// One preset at one width: rows near 0, 2^20 and 2^31 in every dtype; ids in another order
/// give the same bits as the range. An odd width the preset refuses is zero-padded.
fn sinusoidal_case(
    target: &Target,
    report: &mut Report,
    name: &str,
    spec: PeSpec,
    rows: usize,
) -> Result<()> {
    let dev = &target.device;
    let spec = match spec.width % 2 == 1 && spec.odd_width == OddWidth::Reject {
        true => spec.with_odd_width(OddWidth::ZeroPad),
        false => spec,
    };
    let exact = SinusoidalEncoding::new(spec)?;
    let ours = exact.clone().with_backend(target.backend);
    for first in [0, (1 << 20) - rows / 2, LAST.min((1 << 31) - rows)] {
        let reference = exact.range(first, rows, DType::F64, &Device::Cpu)?;
        for dtype in DTYPES {
            let name = format!("{name} @{first}");
            let got = ours.range(first, rows, dtype, dev)?;
            against_exact(report, SECTION, &name, &got, &reference)?;
            let cpu = exact.range(first, rows, dtype, &Device::Cpu)?;
            let bits = format!("{name} {dtype:?}: the CPU's bits");
            same_bits(report, SECTION, &bits, &got, &cpu)?;
            if dtype == DType::F32 {
                let at = ours.at(&reversed_ids(first, rows, dev)?, dtype)?;
                let at = at.flip_rows(rows)?;
                same_bits(
                    report,
                    SECTION,
                    &format!("{name}: at(ids) = range"),
                    &at,
                    &got,
                )?;
            }
        }
    }
    Ok(())
}

/// Fractional timesteps (diffusion), one value in f64 each.
fn timesteps(target: &Target, report: &mut Report, name: &str, spec: PeSpec) -> Result<()> {
    let steps: Vec<f32> = (0..64).map(|i| i as f32 * 15.625 + 0.37).collect();
    let reference = SinusoidalEncoding::new(spec)?
        .timesteps(&Tensor::new(steps.as_slice(), &Device::Cpu)?, DType::F64)?;
    let ours = SinusoidalEncoding::new(spec)?.with_backend(target.backend);
    let got = ours.timesteps(&Tensor::new(steps.as_slice(), &target.device)?, DType::F32)?;
    against_exact(report, SECTION, name, &got, &reference)
}

/// A custom base and angle scale at the last positions.
fn custom(target: &Target, report: &mut Report) -> Result<()> {
    let dev = &target.device;
    let spec = PeSpec::vaswani(512).with_base(500.0).with_angle_scale(0.25);
    let exact = SinusoidalEncoding::new(spec)?;
    let got = exact
        .clone()
        .with_backend(target.backend)
        .range(LAST, 64, DType::F32, dev)?;
    against_exact(
        report,
        SECTION,
        "sinusoidal base 500, angle scale 0.25",
        &got,
        &exact.range(LAST, 64, DType::F64, &Device::Cpu)?,
    )
}

/// The rope configs a fixture's HF config holds: one, or one per layer type.
pub fn fixture_ropes(config: &Value) -> Result<Vec<(String, RopeConfig)>> {
    let configs = RopeConfigs::from_hf_config(config)?;
    if let Some(single) = configs.single() {
        return Ok(vec![(String::new(), single.clone())]);
    }
    let mut types: Vec<String> = configs.layer_types().unwrap_or_default().to_vec();
    types.sort();
    types.dedup();
    let mut out = Vec::new();
    for t in types {
        if let Some(c) = configs.for_layer_type(&t)? {
            out.push((format!(" [{t}]"), c.clone()));
        }
    }
    Ok(out)
}

/// Every `rope/*.json` fixture's config: (name, HF config).
pub fn rope_fixtures() -> Result<Vec<(String, Value)>> {
    let dir = pe_testkit::fixture("rope");
    let mut names: Vec<_> = std::fs::read_dir(&dir)?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    names.sort();
    names
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path)?;
            let json: Value = serde_json::from_str(&text)?;
            let name = path.file_stem().unwrap().to_string_lossy().to_string();
            let config = json["config_input"].clone();
            Ok((name, config))
        })
        .collect::<Result<Vec<_>>>()
        .with_context(|| format!("reading the rope fixtures in {}", dir.display()))
}

fn rotary(target: &Target, report: &mut Report) -> Result<()> {
    let rows = if target.full { 128 } else { 16 };
    for (fixture, config) in rope_fixtures()? {
        let ropes = match fixture_ropes(&config) {
            Ok(ropes) => ropes,
            Err(e) => {
                report.attempt(SECTION, &format!("rope {fixture}"), |_| Err(e));
                continue;
            }
        };
        for (layer, config) in ropes {
            let name = format!("rope {fixture}{layer}");
            report.attempt(SECTION, &name.clone(), |r| {
                rotary_case(target, r, &name, config, rows)
            });
        }
    }
    Ok(())
}

/// One rope: rows at 0, 4,000 and the last positions in every dtype, M-RoPE where the config
/// has sections, and ids in another order giving the range's bits.
fn rotary_case(
    target: &Target,
    report: &mut Report,
    name: &str,
    config: RopeConfig,
    rows: usize,
) -> Result<()> {
    let dev = &target.device;
    let exact = Rope::new(config.clone())?;
    let ours = exact.clone().with_backend(target.backend);
    if config.mrope_section.is_some() {
        mrope(target, report, name, &exact, &ours)?;
    }
    // A rope's range asks for the frequencies of a sequence of `first + rows` positions,
    // at most 2^31 - 1.
    for first in [0, 4000, (1 << 31) - 1 - rows] {
        let (cos_e, sin_e) = exact.range(first, rows, DType::F64, &Device::Cpu)?;
        for dtype in DTYPES {
            let (cos, sin) = ours.range(first, rows, dtype, dev)?;
            let name = format!("{name} @{first}");
            against_exact(report, SECTION, &format!("{name} cos"), &cos, &cos_e)?;
            against_exact(report, SECTION, &format!("{name} sin"), &sin, &sin_e)?;
            let (cos_c, sin_c) = exact.range(first, rows, dtype, &Device::Cpu)?;
            let bits = format!("{name} {dtype:?}: the CPU's bits");
            same_bits(report, SECTION, &format!("{bits} (cos)"), &cos, &cos_c)?;
            same_bits(report, SECTION, &format!("{bits} (sin)"), &sin, &sin_c)?;
        }
        // The same positions as ids, in another order: the same bits. (Ids reaching
        // `first + rows` ask for the frequencies of the same sequence length.)
        let ids = reversed_ids(first, rows, dev)?;
        let (cos_at, _) = ours.at(&ids, DType::F32)?;
        let (cos, _) = ours.range(first, rows, DType::F32, dev)?;
        same_bits(
            report,
            SECTION,
            &format!("{name} @{first}: at(ids) = range"),
            &cos_at.flip_rows(rows)?,
            &cos,
        )?;
    }
    Ok(())
}

/// M-RoPE tables at (3, seq) ids: a video-like grid far out, and text ids (three equal rows),
/// which must give the 1-D tables' bits.
fn mrope(
    target: &Target,
    report: &mut Report,
    name: &str,
    exact: &Rope,
    ours: &Rope,
) -> Result<()> {
    let dev = &target.device;
    let n = 48usize;
    let base = 100_000i64;
    let rows: Vec<i64> = (0..3)
        .flat_map(|r| {
            (0..n as i64)
                .map(move |i| base + i / 16 * (r == 0) as i64 + (i % 16) * (r > 0) as i64 * (r + 1))
        })
        .collect();
    let ids_cpu = Tensor::from_vec(rows.clone(), (3, n), &Device::Cpu)?;
    let ids = Tensor::from_vec(rows, (3, n), dev)?;
    let (cos_e, sin_e) = exact.at(At::mrope(&ids_cpu), DType::F64)?;
    for dtype in DTYPES {
        let (cos, sin) = ours.at(At::mrope(&ids), dtype)?;
        against_exact(report, SECTION, &format!("{name} mrope cos"), &cos, &cos_e)?;
        against_exact(report, SECTION, &format!("{name} mrope sin"), &sin, &sin_e)?;
    }
    let text: Vec<i64> = (0..3)
        .flat_map(|_| (0..n as i64).map(|i| base + i))
        .collect();
    let (cos, _) = ours.at(At::mrope(&Tensor::from_vec(text, (3, n), dev)?), DType::F32)?;
    let (cos_1d, _) = ours.at(&Tensor::arange(base, base + n as i64, dev)?, DType::F32)?;
    same_bits(
        report,
        SECTION,
        &format!("{name} mrope text ids = 1-D"),
        &cos,
        &cos_1d,
    )
}

fn axes(target: &Target, report: &mut Report) -> Result<()> {
    let dev = &target.device;
    let (h, w) = if target.full { (64, 64) } else { (8, 8) };
    let cases: Vec<(&str, AxesRope, Tensor, Tensor)> = vec![
        (
            "flux (16, 56, 56)",
            AxesRope::new(&[16, 56, 56], 10_000.0)?,
            video_patch_positions(1, h, w, &Device::Cpu)?,
            video_patch_positions(1, h, w, dev)?,
        ),
        (
            "pixtral 2-D",
            AxesRope::split_spectrum(64, 2, 10_000.0)?,
            patch_positions(h, w, &Device::Cpu)?,
            patch_positions(h, w, dev)?,
        ),
        (
            "wan video",
            AxesRope::wan(128)?,
            video_patch_positions(4, h / 2, w / 2, &Device::Cpu)?,
            video_patch_positions(4, h / 2, w / 2, dev)?,
        ),
    ];
    for (name, rope, ids_cpu, ids) in cases {
        report.attempt(SECTION, &format!("axes {name}"), |r| {
            let (cos_e, sin_e) = rope.at(&ids_cpu, DType::F64)?;
            for dtype in DTYPES {
                let (cos, sin) = rope.at(&ids, dtype)?;
                against_exact(r, SECTION, &format!("axes {name} cos"), &cos, &cos_e)?;
                against_exact(r, SECTION, &format!("axes {name} sin"), &sin, &sin_e)?;
            }
            Ok(())
        });
    }
    // Far ids on every axis, signed (Qwen-Image centres them).
    let rope = AxesRope::new(&[16, 56, 56], 10_000.0)?;
    let far: Vec<i64> = (0..64i64)
        .flat_map(|i| [(1 << 31) - 1 - i, -((1 << 30) + i), i * 1000])
        .collect();
    let (cos_e, _) = rope.at(
        &Tensor::from_vec(far.clone(), (64, 3), &Device::Cpu)?,
        DType::F64,
    )?;
    let (cos, _) = rope.at(&Tensor::from_vec(far, (64, 3), dev)?, DType::F32)?;
    report.attempt(SECTION, "axes far ids", |r| {
        against_exact(
            r,
            SECTION,
            "axes flux far and negative ids cos",
            &cos,
            &cos_e,
        )
    });
    Ok(())
}

fn grids(target: &Target, report: &mut Report) -> Result<()> {
    let dev = &target.device;
    let side = if target.full { 64 } else { 8 };
    let grid = SincosGrid::new(1152)?
        .with_base_size(16.0)
        .with_extra_tokens(1);
    let exact = grid.table(side, side, DType::F64, &Device::Cpu)?;
    for dtype in DTYPES {
        let got = grid.table(side, side, dtype, dev)?;
        against_exact(report, SECTION, "sincos 2-D grid (PixArt)", &got, &exact)?;
    }
    let grid = SincosGrid3d::new(1920)?.with_spatial_interpolation_scale(1.875);
    let exact = grid.table(4, side / 2, side / 2, DType::F64, &Device::Cpu)?;
    for dtype in DTYPES {
        let got = grid.table(4, side / 2, side / 2, dtype, dev)?;
        against_exact(report, SECTION, "sincos 3-D grid (CogVideoX)", &got, &exact)?;
    }
    Ok(())
}

fn alibi(target: &Target, report: &mut Report) -> Result<()> {
    let dev = &target.device;
    let keys = if target.full { 8192 } else { 64 };
    for heads in [12, 16, 40] {
        let alibi = Alibi::new(heads)?;
        let exact = alibi.causal_bias(keys, DType::F64, &Device::Cpu)?;
        // ALiBi's values reach slope * keys, far above 1: f32 is held relative to them.
        for dtype in DTYPES {
            let got = alibi.causal_bias(keys, dtype, dev)?;
            against_exact(
                report,
                SECTION,
                &format!("alibi {heads} heads"),
                &got,
                &exact,
            )?;
        }
    }
    Ok(())
}

/// Rows in reverse order (the ids above were reversed).
trait FlipRows {
    fn flip_rows(&self, rows: usize) -> Result<Tensor>;
}

impl FlipRows for Tensor {
    fn flip_rows(&self, rows: usize) -> Result<Tensor> {
        let idx: Vec<u32> = (0..rows as u32).rev().collect();
        let idx = Tensor::from_vec(idx, rows, self.device())?;
        Ok(self.index_select(&idx, 0)?)
    }
}
