//! `pe inspect`'s longer-context parts: the override's flags in the report, and `--context N`,
//! what the checkpoint does at N positions: whether N is past the trained context, the
//! override that stretches it there (YaRN and linear, factor N / trained context, rounded up
//! to hundredths) as the exact flags to pass, and the angle errors of f32- and bf16-built
//! tables at N with and without it.
//!
//! ```text
//! pe inspect gemma-3-270m-q4_k_m.gguf --context 60000
//! pe inspect smollm2.gguf --rope-scaling yarn --rope-scale 4 --yarn-orig-ctx 8192
//! ```

use std::fmt::Write as _;

use anyhow::Result;
use candle_pe_cli::override_flag;
use candle_pe_core::{LinearScaling, Rope, RopeConfig, RopeConfigs, RopeType, Yarn};
use candle_pe_formats::{RopeOverride, ValueSource};

use crate::inspect::angle_errors;

/// The override as the flags that give it.
pub fn flags(laid: &RopeOverride) -> String {
    let given = laid.given();
    let flags: Vec<String> = given
        .iter()
        .map(|(field, value)| format!("{} {value}", override_flag(field)))
        .collect();
    flags.join(" ")
}

/// A GGUF reader's sources with the override's flags: `override rope_scale = 4` (how
/// pe-formats marks a key the override replaced) is `--rope-scale 4 (rope override)`.
pub fn name_gguf_flags(sources: &mut [ValueSource]) {
    for s in sources.iter_mut() {
        let marked = s.source.strip_prefix("override ");
        if let Some((field, value)) = marked.and_then(|rest| rest.split_once(" = ")) {
            s.source = format!("{} {value} (rope override)", override_flag(field));
        }
    }
}

/// A config.json's sources with the override's flags: the rope type and base of the layers
/// the override writes into (every layer, or the full-attention ones), in place of the field
/// it wrote them to.
pub fn name_config_flags(sources: &mut [ValueSource], laid: &RopeOverride) {
    let given = laid.given();
    for s in sources.iter_mut() {
        let full = matches!(s.layer_type.as_deref(), None | Some("full_attention"));
        let field = match s.value {
            "rope_theta" => "rope_freq_base",
            "rope_type" => "rope_scaling",
            _ => continue,
        };
        if let (true, Some((field, value))) = (full, given.iter().find(|(f, _)| *f == field)) {
            let flag = override_flag(field);
            s.source = format!("{flag} {value} (rope override, in place of {})", s.source);
        }
    }
}

/// The `--context n` section: the full layers' rope (or the one rope) at `n` positions.
pub fn advice(out: &mut String, configs: &RopeConfigs, n: usize) -> Result<()> {
    let full = match configs.single() {
        Some(c) => Some(c),
        None => configs.for_layer_type("full_attention")?,
    };
    writeln!(out, "\ncontext {n}")?;
    let Some(config) = full else {
        writeln!(
            out,
            "  the full layers have no rotary embedding: nothing to stretch"
        )?;
        return Ok(());
    };
    let Some((trained, reach)) = reach(config) else {
        writeln!(
            out,
            "  the checkpoint gives no trained context (max_position_embeddings, context_length)"
        )?;
        return errors(out, &[("as is", config.clone())], n);
    };
    if n <= reach {
        let scaled = match reach > trained {
            true => format!(", which the rope's own scaling stretches to {reach}"),
            false => String::new(),
        };
        writeln!(
            out,
            "  within the trained context, {trained}{scaled}: no override is needed"
        )?;
        return errors(out, &[("as is", config.clone())], n);
    }
    suggest(out, config, (trained, reach), n)
}

/// Past the rope's reach: the YaRN and linear overrides that stretch `config` (trained on
/// `trained` positions, reaching `reach`) to `n`, as flags, and the angle errors with each.
fn suggest(
    out: &mut String,
    config: &RopeConfig,
    (trained, reach): (usize, usize),
    n: usize,
) -> Result<()> {
    let factor = (n as f64 / trained as f64 * 100.0).ceil() / 100.0;
    writeln!(
        out,
        "  past the rope's reach, {reach} (trained context {trained}, {:.2}x); to stretch the \
         rope there (factor {n} / {trained}, rounded up):",
        n as f64 / trained as f64
    )?;
    let mut rows = vec![("as is", config.clone())];
    if !matches!(
        config.rope_type,
        RopeType::Default | RopeType::Linear(_) | RopeType::Yarn(_)
    ) {
        writeln!(
            out,
            "    none suggested: the override flags would replace the checkpoint's own {} scaling",
            config.rope_type.name()
        )?;
        return errors(out, &rows, n);
    }
    writeln!(
        out,
        "    YaRN:   --rope-scaling yarn --rope-scale {factor} --yarn-orig-ctx {trained}"
    )?;
    writeln!(
        out,
        "    linear: --rope-scaling linear --rope-scale {factor}"
    )?;
    let yarn = Yarn::new(factor, trained);
    let linear = LinearScaling { factor };
    rows.push(("yarn", config.clone().with_rope_type(RopeType::Yarn(yarn))));
    let linear = config.clone().with_rope_type(RopeType::Linear(linear));
    rows.push(("linear", linear));
    errors(out, &rows, n)
}

/// The trained context of `config`'s rope, and how far its own scaling reaches: the context
/// for an unscaled rope, the factor times it for linear and YaRN (YaRN from its original
/// context); `None` when the checkpoint gives no context.
fn reach(config: &RopeConfig) -> Option<(usize, usize)> {
    let context = config.max_position_embeddings.filter(|&t| t > 0);
    let (trained, factor) = match &config.rope_type {
        RopeType::Linear(l) => (context?, l.factor),
        RopeType::Yarn(y) => (y.original_max_position_embeddings.or(context)?, y.factor),
        _ => (context?, 1.0),
    };
    let reach = (trained as f64 * factor.max(1.0)).floor() as usize;
    Some((trained, reach))
}

/// The largest angle errors at `n` of each rope of `rows`.
fn errors(out: &mut String, rows: &[(&str, RopeConfig)], n: usize) -> Result<()> {
    writeln!(
        out,
        "  largest angle error at {n} (radians, the 64 positions up to it):"
    )?;
    writeln!(
        out,
        "    {:<8}  {:>12}  {:>12}",
        "rope", "f32-built", "bf16-built"
    )?;
    for (name, config) in rows {
        let (e32, e16) = angle_errors(&Rope::new(config.clone())?, n);
        writeln!(out, "    {name:<8}  {e32:>12.3e}  {e16:>12.3e}")?;
    }
    Ok(())
}
