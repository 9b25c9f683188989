//! The tables pe-core builds: sinusoidal encodings (every preset, an even and an odd width,
//! ranges near 0, 2^20 and 2^31 - 64, integer positions, fractional timesteps, padding-aware
//! rows, the cache), rotary tables of every rope fixture and every rope-only GGUF (each layer
//! type; ranges, positions, shifts, M-RoPE, query scales, dynamic lengths), the multi-axis
//! ropes, the sin-cos grids and ALiBi; on both generators where a type takes a backend, in every
//! float dtype.

use std::path::Path;

use anyhow::{bail, Context, Result};
use candle_core::quantized::gguf_file::Content;
use candle_core::{DType, Device, Tensor};
use candle_pe_core::RopeConfigs;
use candle_pe_core::{
    cogvideox_coordinates, patch_positions, video_patch_positions, Alibi, AxesRope, OddWidth,
    PeCache, Preset, Rope, RopeConfig, SincosGrid, SincosGrid3d, SinusoidalEncoding,
};
use candle_pe_formats::GgufRope;
use candle_pe_nn::At;

use crate::inputs::{dt, ids, Cases, BACKENDS, DTYPES};
use candle_pe_formats::{FromGguf, FromHfConfig};

/// The rows asked of every range.
const ROWS: usize = 16;

/// Offsets near 0, 2^20 and the last rows below 2^31.
const OFFSETS: [usize; 3] = [0, (1 << 20) - 8, (1 << 31) - 64];

/// Scattered positions, anchors and their neighbours, the largest one.
const POSITIONS: [i64; 8] = [0, 1, 63, 64, 65, 4_097, 1 << 20, (1 << 31) - 1];

/// Every sinusoidal preset at widths 64 and 33 (where the preset takes an odd width).
pub fn sinusoidal(cases: &mut Cases) -> Result<()> {
    let positions = ids(&POSITIONS, &[2, 4])?;
    let timesteps = Tensor::new(&[0.0f64, 0.5, 1.25, 999.75, -3.5, 1e6 + 0.1], &Device::Cpu)?;
    // Two sequences, the second left-padded with pad id 1.
    let tokens = Tensor::new(&[[5u32, 9, 12, 7, 3], [1, 1, 4, 8, 2]], &Device::Cpu)?;
    for preset in Preset::ALL {
        for width in [64, 33] {
            let spec = preset.spec(width);
            if width % 2 == 1 && spec.odd_width == OddWidth::Reject {
                continue;
            }
            for (backend, b) in BACKENDS {
                let pe = SinusoidalEncoding::new(spec)?.with_backend(backend);
                for dtype in DTYPES {
                    let at = |what: &str| {
                        format!("sin/{}/w{width}/{what}/{}/{b}", preset.name(), dt(dtype))
                    };
                    for offset in OFFSETS {
                        cases.add(at(&format!("range{offset}")), || {
                            Ok(vec![pe.range(offset, ROWS, dtype, &Device::Cpu)?])
                        })?;
                    }
                    cases.add(at("at"), || Ok(vec![pe.at(&positions, dtype)?]))?;
                    cases.add(at("timesteps"), || {
                        Ok(vec![pe.timesteps(&timesteps, dtype)?])
                    })?;
                    cases.add(at("padding_aware"), || {
                        Ok(vec![pe.padding_aware(&tokens, 1, 3, dtype)?])
                    })?;
                }
            }
        }
    }
    // The cache serves views of the same rows, grown across calls.
    let cache = PeCache::new(SinusoidalEncoding::new(Preset::Vaswani.spec(64))?);
    cases.add("pecache/vaswani/w64/range8/f32".into(), || {
        Ok(vec![cache.range(8, ROWS, DType::F32, &Device::Cpu)?])
    })?;
    cases.add("pecache/vaswani/w64/at/f32".into(), || {
        Ok(vec![cache.at(&positions, DType::F32)?])
    })?;
    Ok(())
}

/// Every `fixtures/rope/*.json` config (`config_input`), each layer type.
pub fn rope_fixtures(cases: &mut Cases) -> Result<()> {
    for path in pe_testkit::fixture_files("rope", "json") {
        let name = stem(&path)?;
        let json = pe_testkit::read_json(&path);
        let configs = RopeConfigs::from_hf_config(&json["config_input"])
            .with_context(|| format!("rope fixture {name}"))?;
        rope_configs(cases, &format!("rope/{name}"), &configs)?;
    }
    Ok(())
}

/// Every rope-only GGUF of `fixtures/gguf` (`*_rope.gguf`), each layer type.
pub fn rope_ggufs(cases: &mut Cases) -> Result<()> {
    for path in pe_testkit::fixture_files("gguf", "gguf") {
        let name = stem(&path)?;
        if !name.ends_with("_rope") {
            continue;
        }
        let mut file = std::fs::File::open(&path)?;
        let content = Content::read(&mut file).with_context(|| format!("{}", path.display()))?;
        let rope = GgufRope::from_gguf(&content, &mut file)
            .with_context(|| format!("{}", path.display()))?;
        rope_configs(cases, &format!("gguf_rope/{name}"), &rope.configs)?;
    }
    Ok(())
}

/// The tables of each layer type of `configs` (a NoPE type has none; its query scale is hashed
/// when it has one).
fn rope_configs(cases: &mut Cases, prefix: &str, configs: &RopeConfigs) -> Result<()> {
    let mut types: Vec<&str> = vec![];
    for t in configs.layer_types().unwrap_or_default() {
        if !types.contains(&t.as_str()) {
            types.push(t);
        }
    }
    if types.is_empty() {
        let Some(config) = configs.single() else {
            bail!("{prefix}: per-type ropes without layer_types")
        };
        rope_tables(cases, &format!("{prefix}/all"), config)?;
    }
    for t in types {
        if let Some(config) = configs.for_layer_type(t)? {
            rope_tables(cases, &format!("{prefix}/{t}"), config)?;
        }
    }
    // The query scale of NoPE layers (Llama 4's attention temperature).
    let layers = configs.num_layers().unwrap_or(0);
    if let Some(layer) = (0..layers).find(|&i| matches!(configs.for_layer(i), Ok(None))) {
        if let Some(scale) = configs.query_scale(layer)? {
            for dtype in [DType::F32, DType::F64] {
                cases.add(format!("{prefix}/nope_query_scale/{}", dt(dtype)), || {
                    let p = ids(&POSITIONS, &[8])?;
                    Ok(vec![
                        scale.range(0, ROWS, dtype, &Device::Cpu)?,
                        scale.at(&p, dtype)?,
                    ])
                })?;
            }
        }
    }
    Ok(())
}

/// One rope's tables on both backends in every dtype.
fn rope_tables(cases: &mut Cases, prefix: &str, config: &RopeConfig) -> Result<()> {
    let positions = ids(&POSITIONS, &[2, 4])?;
    let from = ids(&[5, 70, 1000, 4_090, 9], &[5])?;
    let to = ids(&[4, 900, 1 << 20, 4_100, (1 << 31) - 2], &[5])?;
    // (3, batch 1, 6): three text tokens, then a 1 x 3 strip of patches.
    let mrope = ids(
        &[0, 1, 2, 3, 3, 3, 0, 1, 2, 3, 3, 3, 0, 1, 2, 3, 4, 5],
        &[3, 1, 6],
    )?;
    for (backend, b) in BACKENDS {
        let rope = Rope::new(config.clone())
            .with_context(|| format!("{prefix}: Rope::new"))?
            .with_backend(backend);
        for dtype in DTYPES {
            let at = |what: &str| format!("{prefix}/{what}/{}/{b}", dt(dtype));
            for offset in [OFFSETS[0], OFFSETS[2]] {
                cases.add(at(&format!("range{offset}")), || {
                    let (cos, sin) = rope.range(offset, ROWS, dtype, &Device::Cpu)?;
                    Ok(vec![cos, sin])
                })?;
            }
            cases.add(at("at"), || {
                let (cos, sin) = rope.at(&positions, dtype)?;
                Ok(vec![cos, sin])
            })?;
            cases.add(at("at_shift"), || {
                let (cos, sin) = rope.at_shift(
                    At::positions(&from).with_tracked_len(0),
                    At::positions(&to).with_tracked_len(0),
                    dtype,
                )?;
                Ok(vec![cos, sin])
            })?;
            if rope.tracked_len().is_some() {
                cases.add(at("at_with_len"), || {
                    let (cos, sin) =
                        rope.at(At::positions(&positions).with_tracked_len(100_000), dtype)?;
                    Ok(vec![cos, sin])
                })?;
            }
            if config.mrope_section.is_some() {
                cases.add(at("at_mrope"), || {
                    let (cos, sin) = rope.at(At::mrope(&mrope), dtype)?;
                    Ok(vec![cos, sin])
                })?;
            }
            if let Some(scale) = rope.query_scale() {
                cases.add(at("query_scale"), || {
                    Ok(vec![scale.range(
                        (1 << 20) - 8,
                        ROWS,
                        dtype,
                        &Device::Cpu,
                    )?])
                })?;
            }
        }
    }
    Ok(())
}

/// The multi-axis ropes: FLUX (negative ids too, as Qwen-Image centres them), Pixtral's split
/// spectrum, Llama 4's vision axes, Wan, HunyuanVideo, CogVideoX at ids and at its cropped
/// coordinates, LTX at fractional coordinates.
pub fn axes(cases: &mut Cases) -> Result<()> {
    let dev = &Device::Cpu;
    let flux_ids = Tensor::new(
        &[
            [0i64, 0, 0],
            [0, 0, 1],
            [0, 1, 0],
            [0, -3, 2],
            [0, 5, -7],
            [3, 2, 1],
        ],
        dev,
    )?;
    let video = video_patch_positions(2, 2, 3, dev)?;
    let ltx_coordinates = Tensor::new(
        &[
            [0.0f64, 0.0078125, 0.0234375],
            [0.02, 0.0078125, 0.0390625],
            [1.0, 0.5, 0.25],
        ],
        dev,
    )?;
    let by_ids: [(&str, AxesRope, Tensor); 6] = [
        ("flux", AxesRope::new(&[16, 56, 56], 10_000.0)?, flux_ids),
        (
            "pixtral",
            AxesRope::split_spectrum(64, 2, 10_000.0)?,
            patch_positions(3, 4, dev)?,
        ),
        (
            "llama4_vision",
            AxesRope::new(&[16, 16], 10_000.0)?,
            patch_positions(3, 4, dev)?,
        ),
        ("wan", AxesRope::wan(128)?, video.clone()),
        ("hunyuan_video", AxesRope::hunyuan_video()?, video.clone()),
        ("cogvideox", AxesRope::cogvideox(64)?, video),
    ];
    let by_coordinates: [(&str, AxesRope, Tensor); 2] = [
        (
            "cogvideox",
            AxesRope::cogvideox(64)?,
            cogvideox_coordinates(2, 3, 5, 4, 6, dev)?,
        ),
        ("ltx", AxesRope::ltx(256, 3, 10_000.0)?, ltx_coordinates),
    ];
    for dtype in DTYPES {
        for (name, rope, ids) in &by_ids {
            cases.add(format!("axes/{name}/at/{}", dt(dtype)), || {
                let (cos, sin) = rope.at(ids, dtype)?;
                Ok(vec![cos, sin])
            })?;
        }
        for (name, rope, coordinates) in &by_coordinates {
            cases.add(format!("axes/{name}/at_coordinates/{}", dt(dtype)), || {
                let (cos, sin) = rope.at_coordinates(coordinates, dtype)?;
                Ok(vec![cos, sin])
            })?;
        }
    }
    Ok(())
}

/// The 2-D and 3-D sin-cos grids (DiT / PixArt / MAE, CogVideoX).
pub fn grids(cases: &mut Cases) -> Result<()> {
    let dev = &Device::Cpu;
    let plain = SincosGrid::new(64)?;
    let pixart = SincosGrid::new(64)?
        .with_base_size(32.0)
        .with_interpolation_scale(2.0)
        .with_extra_tokens(1);
    let video = SincosGrid3d::new(64)?.with_spatial_interpolation_scale(1.875);
    for dtype in DTYPES {
        let d = dt(dtype);
        cases.add(format!("grid/plain/3x4/{d}"), || {
            Ok(vec![plain.table(3, 4, dtype, dev)?])
        })?;
        cases.add(format!("grid/pixart/4x4/{d}"), || {
            Ok(vec![pixart.table(4, 4, dtype, dev)?])
        })?;
        cases.add(format!("grid3d/cogvideox/2x3x4/{d}"), || {
            Ok(vec![video.table(2, 3, 4, dtype, dev)?])
        })?;
    }
    Ok(())
}

/// ALiBi slopes, causal biases and symmetric factors, 8 heads and 12 (not a power of two).
pub fn alibi(cases: &mut Cases) -> Result<()> {
    let dev = &Device::Cpu;
    let heads = [
        ("h8", Alibi::new(8)?),
        ("h12_bias16", Alibi::new(12)?.with_max_bias(16.0)?),
    ];
    for dtype in DTYPES {
        for (name, alibi) in &heads {
            let at = |what: &str| format!("alibi/{name}/{what}/{}", dt(dtype));
            cases.add(at("slopes"), || Ok(vec![alibi.slopes_tensor(dtype, dev)?]))?;
            cases.add(at("causal_bias"), || {
                Ok(vec![alibi.causal_bias(10, dtype, dev)?])
            })?;
            cases.add(at("symmetric_factors"), || {
                let (slopes, distance) = alibi.symmetric_factors(4, 3, 7, dtype, dev)?;
                Ok(vec![slopes, distance])
            })?;
        }
    }
    Ok(())
}

/// A file's name without its extension.
pub fn stem(path: &Path) -> Result<String> {
    path.file_stem()
        .and_then(|s| s.to_str())
        .map(str::to_string)
        .with_context(|| format!("no UTF-8 file name in {}", path.display()))
}
