//! `pe inspect`: a rope doctor for an HF `config.json` or a GGUF file. For each layer type it
//! prints the resolved rope (type, theta, rotary width, pair layout, attention factor, the
//! factors in short), where each value came from (a key or field, or a default), and the
//! largest angle error of tables built the usual ways, against this crate's, near positions
//! 4,096, 32,768, 131,072 and the model's context:
//!
//! - **f32-built**: the frequencies rounded to f32 and the angle `position * frequency` computed
//!   in f32 (candle's models, transformers' default), the best case of f32 (a frequency computed
//!   with f32 `powf` adds its own rounding);
//! - **bf16-built**: the position, the frequency and their product rounded to bf16 (tables built
//!   in the model's bf16 dtype).
//!
//! The error is the angle's distance to the exact one, in radians (wrapped to `0 ..= pi`), the
//! largest over the 64 positions ending at the one shown and over every pair.
//!
//! ```text
//! pe inspect Meta-Llama-3.1-8B-Instruct/config.json
//! pe inspect qwen2.5-7b-instruct-q8_0.gguf
//! ```

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use candle_pe_core::MAX_POSITION;
use candle_pe_core::{PairLayout, RopeConfigs};
use candle_pe_core::{Rope, RopeConfig, RopeType};
use candle_pe_formats::{
    FromHfConfig, HfRope, HfTextConfig, RopeOverride, ValueSource, VisionLayout, VisionRopeConfig,
};
use clap::Args;
use serde_json::Value;

/// Arguments of `pe inspect`.
#[derive(Debug, Args)]
pub struct InspectArgs {
    /// An HF config.json, or a GGUF file (told apart by the file's first bytes).
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// What the checkpoint does at N positions: whether N is past its trained context, the
    /// override that stretches it there (as flags), and the angle errors at N with and without
    /// it.
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub context: Option<usize>,
    /// llama.cpp's rope override flags, laid over the file's rope.
    #[command(flatten)]
    pub laid: candle_pe_cli::RopeOverrideArgs,
}

/// The positions the angle errors are shown at, besides the model's context.
const POSITIONS: [usize; 3] = [4_096, 32_768, 131_072];

/// How many positions, ending at each shown one, the largest error is taken over.
const WINDOW: usize = 64;

/// What a file says about its ropes.
struct Resolved {
    kind: String,
    configs: RopeConfigs,
    layout: PairLayout,
    layout_source: String,
    sources: Vec<ValueSource>,
    /// A config.json's vision tower, as a section of the report (`None`: no tower).
    vision: Option<String>,
}

/// What `pe inspect` found in a file.
enum Found {
    /// Its text ropes (and a config.json's vision tower).
    Ropes(Box<Resolved>),
    /// No text rope, but a vision tower's or a video tracker's memory attention's: the report.
    VisionOnly(String),
}

/// Prints the rope doctor's report on `args.file` to stdout.
pub fn run(args: &InspectArgs) -> Result<()> {
    if let Some(n) = args.context.filter(|&n| n == 0 || n as u64 >= MAX_POSITION) {
        anyhow::bail!("--context {n}: give a context from 1 to 2147483647 positions");
    }
    let laid = args.laid.rope_override()?;
    let resolved = match resolve(&args.file, &laid)? {
        Found::Ropes(resolved) => resolved,
        Found::VisionOnly(report) => {
            if let Some(n) = args.context {
                anyhow::bail!("--context {n}: {} has no text rope", args.file.display());
            }
            print!("{report}");
            return Ok(());
        }
    };
    let mut out = report(&args.file, &resolved)?;
    if !laid.is_empty() {
        let flags = crate::context::flags(&laid);
        out = out.replacen('\n', &format!("\nrope override: {flags}\n"), 1);
    }
    if let Some(n) = args.context {
        crate::context::advice(&mut out, &resolved.configs, n)?;
    }
    print!("{out}");
    Ok(())
}

fn resolve(path: &Path, laid: &RopeOverride) -> Result<Found> {
    if crate::gguf::is_gguf(path) {
        let mut rope = crate::gguf::read(path, "pe inspect", laid)?;
        crate::context::name_gguf_flags(&mut rope.sources);
        return Ok(Found::Ropes(Box::new(Resolved {
            kind: format!("GGUF, architecture {}", rope.architecture),
            configs: rope.configs,
            layout: rope.layout,
            layout_source: "llama.cpp's rope type of the architecture (general.architecture)"
                .into(),
            sources: rope.sources,
            vision: None,
        })));
    }
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("pe inspect {}: cannot read it", path.display()))?;
    let json: Value = serde_json::from_str(&text).with_context(|| {
        format!(
            "pe inspect {}: neither a GGUF file nor JSON",
            path.display()
        )
    })?;
    let json = laid
        .apply_to_config(&json)
        .map_err(|e| candle_pe_cli::Flags::default().name(e))?;
    let HfRope {
        configs,
        mut sources,
    } = match HfRope::from_hf_config(&json) {
        Ok(rope) => rope,
        Err(e) => match vision_only_report(path, &json, &e.to_string())? {
            // No text rope, but a vision tower's or a memory attention's.
            Some(report) if laid.is_empty() => return Ok(Found::VisionOnly(report)),
            _ => anyhow::bail!("pe inspect {}: {e}", path.display()),
        },
    };
    let model_type = json
        .get("model_type")
        .and_then(Value::as_str)
        .unwrap_or("unknown");
    // The rope is read from the text config pe-formats finds (text_config, when the top level
    // has none of its own fields).
    let text = HfTextConfig::from_hf_config(&json)?;
    crate::context::name_config_flags(&mut sources, laid);
    let (layout, layout_source) = config_layout(&text, &configs);
    Ok(Found::Ropes(Box::new(Resolved {
        kind: format!("config.json, model_type {model_type}"),
        configs,
        layout,
        layout_source,
        sources,
        vision: vision_section(&json)?,
    })))
}

/// The report's section on a config.json's vision tower: its 2-D rope as `VisionRopeConfig`
/// reads it, or why it could not be read where the file has a `vision_config`; `None` for a
/// model without a tower.
fn vision_section(json: &Value) -> Result<Option<String>> {
    match VisionRopeConfig::from_hf_config(json) {
        Ok(vision) => Ok(Some(describe_vision("vision tower", &vision)?)),
        Err(e) if json.get("vision_config").is_some() => {
            Ok(Some(format!("\nvision tower: not read: {e}\n")))
        }
        Err(_) => Ok(None),
    }
}

/// The report on a config.json that has no text rope (`text_error` says why) but a vision
/// tower's rope or a video tracker's memory attention's (SAM 2's config, a tower's own): its
/// header and those sections; `None` where it has neither.
fn vision_only_report(path: &Path, json: &Value, text_error: &str) -> Result<Option<String>> {
    let mut sections = String::new();
    if let Ok(vision) = VisionRopeConfig::from_hf_config(json) {
        sections += &describe_vision("vision tower", &vision)?;
    }
    if let Ok(memory) = VisionRopeConfig::memory_attention_from_hf_config(json) {
        sections += &describe_vision("memory attention", &memory)?;
    }
    if sections.is_empty() {
        return Ok(None);
    }
    let model_type = json.get("model_type").and_then(Value::as_str);
    let mut out = String::new();
    writeln!(
        out,
        "{} (config.json, model_type {})",
        path.display(),
        model_type.unwrap_or("unknown")
    )?;
    writeln!(out, "no text rope: {text_error}")?;
    out.push_str(&sections);
    Ok(Some(out))
}

/// The report's section on the 2-D (or 3-D) rope `vision` of a `module` (a vision tower, or a
/// video tracker's memory attention).
fn describe_vision(module: &str, vision: &VisionRopeConfig) -> Result<String> {
    let layout = match vision.layout {
        VisionLayout::RowsFirst => "each axis head_dim/4 frequencies, the row's columns first",
        VisionLayout::ColumnsFirst => "each axis head_dim/4 frequencies, the column's first",
        VisionLayout::AlternatingRowsFirst => {
            "each axis head_dim/4 frequencies, alternating, the row's first"
        }
        VisionLayout::AlternatingColumnsFirst => {
            "each axis head_dim/4 frequencies, alternating, the column's first"
        }
        VisionLayout::SplitSpectrum => {
            "one spectrum of head_dim/2 frequencies, even ones the row's, odd the column's"
        }
        VisionLayout::FramesRowsColumns => {
            "three axes (frame, row, column), each 2*floor(head_dim/6) features, the frame's columns first; the rest of the head passes through"
        }
        VisionLayout::HalvesPerAxis => {
            "each axis head_dim/4 frequencies, the column turning the head's first half, the row its second"
        }
    };
    let pairs = match vision.layout {
        VisionLayout::HalvesPerAxis => {
            describe_pairs(vision.pair_layout, "half") + ", within each axis's half of head_dim"
        }
        _ => describe_pairs(vision.pair_layout, "head_dim"),
    };
    let mut out = String::new();
    writeln!(
        out,
        "\n{module} {} ({}-D rope at patch positions {})",
        vision.model_type,
        vision.layout.axes(),
        vision.layout.positions()
    )?;
    writeln!(out, "  layout: {:?}: {layout}", vision.layout)?;
    writeln!(out, "  pair layout: {pairs}")?;
    let whole = if vision.whole_width {
        " (the whole width, turned before the heads split it)"
    } else {
        ""
    };
    writeln!(out, "  head_dim: {}{whole}", vision.head_dim)?;
    writeln!(out, "  rope_theta: {}", vision.rope_theta)?;
    if vision.patch_origin > 0 {
        writeln!(
            out,
            "  patch origin: {0}: patch (r, c) at (r + {0}, c + {0})",
            vision.patch_origin
        )?;
    }
    if !vision.unknown_keys.is_empty() {
        writeln!(
            out,
            "  unknown keys, not read: {}",
            vision.unknown_keys.join(", ")
        )?;
    }
    Ok(out)
}

/// How the report names `layout`, the pairs of a rotation `width` features wide.
fn describe_pairs(layout: PairLayout, width: &str) -> String {
    if layout.is_interleaved() {
        "interleaved: adjacent pairs (2i, 2i+1), candle's rope_i".into()
    } else {
        format!("halves: pairs (i, i + {width}/2), rotate_half, candle's rope")
    }
}

/// The pair layout of a config.json's ropes (one for all its layers), and where it comes from:
/// its `rope_interleave`, else its model type's row (the models whose code turns adjacent pairs:
/// Cohere, GLM-4, DeepSeek-V3, Llama 4, ...), else transformers' `rotate_half`.
fn config_layout(text: &HfTextConfig, configs: &RopeConfigs) -> (PairLayout, String) {
    let layout = match configs.per_type() {
        None => configs.single().map(|c| c.pair_layout),
        Some((_, ropes)) => ropes.values().flatten().next().map(|c| c.pair_layout),
    }
    .unwrap_or(PairLayout::Halves);
    let source = if text.fields().has("rope_interleave") {
        text.fields().path_of("rope_interleave")
    } else if layout.is_interleaved() {
        "the model type: its transformers code turns adjacent pairs".into()
    } else {
        "transformers' rotate_half (safetensors checkpoints)".into()
    };
    (layout, source)
}

/// The report: one section per layer type.
fn report(path: &Path, r: &Resolved) -> Result<String> {
    let mut out = String::new();
    writeln!(out, "{} ({})", path.display(), r.kind)?;
    let layout = describe_pairs(r.layout, "rotary_dim");
    writeln!(out, "pair layout: {layout}  <- {}", r.layout_source)?;
    let unknown = r.configs.unknown_keys();
    if !unknown.is_empty() {
        writeln!(
            out,
            "unknown keys, not read (transformers warns and ignores them too): {}",
            unknown.join(", ")
        )?;
    }
    let nope = r.configs.nope_layers().unwrap_or_default();
    let unrotated: Vec<String> = (0..nope.len())
        .filter(|&i| nope[i])
        .map(|i| i.to_string())
        .collect();
    if !unrotated.is_empty() {
        writeln!(
            out,
            "no rotary embedding (NoPE) on layers {} ({} of {} layers)",
            unrotated.join(", "),
            unrotated.len(),
            nope.len()
        )?;
    }
    let every = match (unrotated.is_empty(), unrotated.len() == nope.len()) {
        (true, _) => "every layer",
        // Granite 4.0-H: the rope switch is off.
        (false, true) => "no layer: the rope its keys give, which no layer uses",
        (false, false) => "every other layer",
    };
    let types: Vec<Option<String>> = if r.configs.is_per_layer_type() {
        let mut types: Vec<String> = match r.configs.layer_types() {
            Some(t) => t.to_vec(),
            None => vec!["full_attention".into(), "sliding_attention".into()],
        };
        types.sort();
        types.dedup();
        types.into_iter().map(Some).collect()
    } else {
        vec![None]
    };
    for layer_type in types {
        let config = match &layer_type {
            Some(t) => match r.configs.for_layer_type(t)? {
                Some(config) => config,
                None => {
                    writeln!(out, "\n{t}: no rotary embedding (NoPE)")?;
                    continue;
                }
            },
            None => r
                .configs
                .single()
                .context("a single rope for every layer")?,
        };
        let layers = match (&layer_type, r.configs.layer_types()) {
            (Some(t), Some(all)) => {
                let n = all.iter().filter(|x| *x == t).count();
                format!(" ({n} of {} layers)", all.len())
            }
            _ => String::new(),
        };
        writeln!(out, "\n{}{layers}", layer_type.as_deref().unwrap_or(every))?;
        section(&mut out, config, layer_type.as_deref(), &r.sources)?;
    }
    if let Some(vision) = &r.vision {
        out.push_str(vision);
    }
    Ok(out)
}

fn section(
    out: &mut String,
    config: &RopeConfig,
    layer_type: Option<&str>,
    sources: &[ValueSource],
) -> Result<()> {
    let rope = Rope::new(config.clone())?;
    writeln!(out, "  rope_type: {}", describe_type(&config.rope_type))?;
    writeln!(out, "  rope_theta: {}", config.rope_theta)?;
    writeln!(
        out,
        "  rotary_dim: {} of head_dim {}",
        config.rotary_dim(),
        config.head_dim
    )?;
    if let Some(s) = &config.mrope_section {
        let how = if config.mrope_slots.is_alternating() {
            "interleaved"
        } else {
            "in sections"
        };
        writeln!(out, "  mrope_section: {s:?} ({how})")?;
    }
    writeln!(
        out,
        "  attention factor: {}",
        attention_factor(config, &rope)
    )?;
    let context = config.max_position_embeddings;
    match context {
        Some(c) => writeln!(out, "  context (max_position_embeddings): {c}")?,
        None => writeln!(out, "  context (max_position_embeddings): not given")?,
    }
    writeln!(out, "  where each value came from:")?;
    for s in sources
        .iter()
        .filter(|s| s.layer_type.is_none() || s.layer_type.as_deref() == layer_type)
    {
        writeln!(out, "    {:<32} <- {}", s.value, s.source)?;
    }
    angle_errors_table(out, &rope, context)
}

/// The factor on cos and sin; Phi-3.5-MoE's changes with the factors in use.
fn attention_factor(config: &RopeConfig, rope: &Rope) -> String {
    match &config.rope_type {
        RopeType::Longrope(l) if l.short_mscale.is_some() || l.long_mscale.is_some() => {
            let context = config.max_position_embeddings;
            let original = l.original_max_position_embeddings.or(context).unwrap_or(0);
            let (short, short_from) = l.mscale_for(false, context);
            let (long, long_from) = l.mscale_for(true, context);
            format!(
                "{short} ({short_from}, with short_factor, sequences up to \
                 {original} positions); {long} ({long_from}, with long_factor, longer ones)"
            )
        }
        _ => rope.attention_scaling().to_string(),
    }
}

/// The largest angle errors of f32- and bf16-built tables up to each of [`POSITIONS`] and
/// the context.
fn angle_errors_table(out: &mut String, rope: &Rope, context: Option<usize>) -> Result<()> {
    writeln!(
        out,
        "  largest angle error vs these tables (radians, {WINDOW} positions up to each):"
    )?;
    writeln!(
        out,
        "    {:>10}  {:>12}  {:>12}",
        "position", "f32-built", "bf16-built"
    )?;
    let mut positions: Vec<usize> = POSITIONS.to_vec();
    // A context past the positions a table holds (a file's max_position_embeddings may be
    // anything) has no row to show.
    let shown = |c: &usize| !POSITIONS.contains(c) && *c > 0 && (*c as u64) < MAX_POSITION;
    if let Some(c) = context.filter(shown) {
        positions.push(c);
    }
    positions.sort_unstable();
    for p in positions {
        let (e32, e16) = angle_errors(rope, p);
        let note = if Some(p) == context {
            "  (context)"
        } else {
            ""
        };
        writeln!(out, "    {p:>10}  {e32:>12.3e}  {e16:>12.3e}{note}")?;
    }
    Ok(())
}

/// The rope type and its parameters in one line, factor lists in short.
fn describe_type(t: &RopeType) -> String {
    let Ok(Value::Object(fields)) = serde_json::to_value(t) else {
        return t.name().to_string();
    };
    let mut parts = Vec::new();
    for (k, v) in fields {
        if k == "rope_type" {
            continue;
        }
        let v = match v {
            Value::Array(items) if items.len() > 4 => {
                let show = |x: &Value| {
                    x.as_f64()
                        .map_or_else(|| x.to_string(), |f| format!("{f:.4}"))
                };
                format!(
                    "[{}, {}, ..., {}] ({} numbers)",
                    show(&items[0]),
                    show(&items[1]),
                    show(&items[items.len() - 1]),
                    items.len()
                )
            }
            v => v.to_string(),
        };
        parts.push(format!("{k} {v}"));
    }
    if parts.is_empty() {
        t.name().to_string()
    } else {
        format!("{} ({})", t.name(), parts.join(", "))
    }
}

/// bf16 rounding (to nearest, ties to even) of an f32.
fn bf16(x: f32) -> f32 {
    let bits = x.to_bits();
    let rounded = bits.wrapping_add(0x7FFF + ((bits >> 16) & 1)) & 0xFFFF_0000;
    f32::from_bits(rounded)
}

/// The distance of two angles on the circle.
fn circle_distance(a: f64, b: f64) -> f64 {
    let two_pi = 2.0 * std::f64::consts::PI;
    let d = (a - b).rem_euclid(two_pi);
    d.min(two_pi - d)
}

/// The largest angle errors of f32-built and bf16-built tables over the positions
/// `p - WINDOW + 1 ..= p`, with the frequencies of a sequence reaching `p`.
pub(crate) fn angle_errors(rope: &Rope, p: usize) -> (f64, f64) {
    let w = rope.inv_freq(p + 1);
    let (mut e32, mut e16) = (0.0f64, 0.0f64);
    for pos in p.saturating_sub(WINDOW - 1)..=p {
        for &wi in &w {
            let exact = pos as f64 * wi;
            let a32 = (pos as f32) * (wi as f32);
            let a16 = bf16(bf16(pos as f32) * bf16(wi as f32));
            e32 = e32.max(circle_distance(a32 as f64, exact));
            e16 = e16.max(circle_distance(a16 as f64, exact));
        }
    }
    (e32, e16)
}
