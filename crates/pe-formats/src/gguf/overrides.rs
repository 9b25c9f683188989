//! A [`RopeOverride`] on a GGUF file, as llama.cpp applies its context parameters
//! (`llama-context.cpp`): each field replaces the key llama.cpp would read it from, and the file
//! is read again through the same reader, so every default and check is the reader's.
//!
//! Where llama.cpp's run time differs from a key of the file, so does this:
//! - the sliding-window layers keep the file's base and scaling (llama.cpp takes their
//!   `rope_freq_base_train_swa` and `rope_freq_scale_train_swa`, never the context's); an
//!   override that changes the scaling of a file whose sliding layers are scaled is refused,
//!   since llama.cpp would mix the file's factor with the override's YaRN parameters;
//! - `rope_scaling` takes none, linear and yarn: llama.cpp has no run-time dynamic NTK or llama3
//!   (its converter writes llama3's frequencies as the `rope_freqs` tensor);
//! - `yarn_attn_factor` is refused: under YaRN llama.cpp replaces it with the factor's own
//!   magnitude, so it changes nothing there;
//! - a factor without a type keeps the file's type, and a file without one is linear, as
//!   llama.cpp's default.

use std::io::{Read, Seek};

use candle_core::quantized::gguf_file::{Content, Value};
use candle_pe_core::{RopeConfigs, RopeType};

use super::rope::{read_overlaid, Overlay};
use crate::rope_override::{full_rope, refused};
use crate::{Error, FromGguf, GgufRope, Result, RopeOverride, RopeScaling};

/// Each field of an override: the key suffix llama.cpp's context parameter replaces, and the
/// value the field gives that key (floats as GGUF's f32, as llama.cpp's context holds them).
const KEYS: [(&str, &str, LaidValue); 7] = [
    ("rope_scaling", "rope.scaling.type", |o| {
        o.rope_scaling.map(|s| Value::String(s.name().into()))
    }),
    ("rope_scale", "rope.scaling.factor", |o| f32(o.rope_scale)),
    (
        "rope_freq_base",
        "rope.freq_base",
        |o| f32(o.rope_freq_base),
    ),
    (
        "yarn_orig_ctx",
        "rope.scaling.original_context_length",
        |o| {
            // Within 2^31 (`check_values`).
            o.yarn_orig_ctx.map(|n| Value::U32(n as u32))
        },
    ),
    ("yarn_ext_factor", "rope.scaling.yarn_ext_factor", |o| {
        f32(o.yarn_ext_factor)
    }),
    ("yarn_beta_fast", "rope.scaling.yarn_beta_fast", |o| {
        f32(o.yarn_beta_fast)
    }),
    ("yarn_beta_slow", "rope.scaling.yarn_beta_slow", |o| {
        f32(o.yarn_beta_slow)
    }),
];

/// The value an override field gives its key, if the field is given.
type LaidValue = fn(&RopeOverride) -> Option<Value>;

/// A float field as a GGUF f32 key.
fn f32(v: Option<f64>) -> Option<Value> {
    v.map(|v| Value::F32(v as f32))
}

impl RopeOverride {
    /// The ropes of the GGUF file `content` (its tensors read through `reader`) as llama.cpp
    /// runs it with these context parameters (see the module docs). An empty override reads
    /// the file as [`GgufRope::from_gguf`] does; a field llama.cpp gives no meaning to for the
    /// rope type in use is an error naming it. The sources of overridden values say
    /// `override <field> = <value>`.
    pub fn apply_to_gguf<R: Read + Seek>(
        &self,
        content: &Content,
        reader: &mut R,
    ) -> Result<GgufRope> {
        self.check_values()?;
        let plain = GgufRope::from_gguf(content, reader)?;
        if self.is_empty() {
            return Ok(plain);
        }
        self.check_for_llama_cpp(&plain)?;
        let overlay = self.overlay(&plain.architecture);
        let mut rope = read_overlaid(content, reader, &overlay).map_err(|e| self.blame(e))?;
        rope.configs = self.keep_sliding(&plain, rope.configs)?;
        for source in &mut rope.sources {
            if let Some((field, value)) = self.field_of_key(&plain.architecture, &source.source) {
                source.source = format!("override {field} = {value}");
            }
        }
        Ok(rope)
    }

    /// Refuses what llama.cpp has no run-time equivalent of, and fields the rope type in use
    /// (the override's, else the file's) gives no meaning to.
    fn check_for_llama_cpp(&self, plain: &GgufRope) -> Result<()> {
        if let Some(s @ (RopeScaling::Dynamic | RopeScaling::Llama3)) = self.rope_scaling {
            let message = format!(
                "{}: llama.cpp has no run-time {} scaling (a GGUF file's llama3 frequencies \
                 are its rope_freqs tensor); use none, linear or yarn",
                s.name(),
                s.name()
            );
            return Err(refused("rope_scaling", message));
        }
        if let Some(a) = self.yarn_attn_factor {
            let message = format!(
                "{a}: under YaRN llama.cpp replaces it with the factor's own magnitude \
                 (0.1 ln(factor) + 1), so it has no run-time meaning for a GGUF file"
            );
            return Err(refused("yarn_attn_factor", message));
        }
        let full = full_rope(&plain.configs);
        let kept = match full.map(|c| &c.rope_type) {
            None | Some(RopeType::Default) | Some(RopeType::Linear(_)) => RopeScaling::Linear,
            Some(RopeType::Yarn(_)) => RopeScaling::Yarn,
            Some(_) => RopeScaling::None,
        };
        let checkpoint = full.map_or("none", |c| c.rope_type.name());
        match self.rope_scaling {
            Some(s) => self.check_meaning(s, s.name(), false),
            None => self.check_meaning(kept, checkpoint, true),
        }
    }

    /// The keys the override replaces, by full key (`llama.rope.freq_base`).
    fn overlay(&self, arch: &str) -> Overlay {
        let key = |suffix: &str| format!("{arch}.{suffix}");
        let mut overlay: Overlay = KEYS
            .iter()
            .filter_map(|(_, suffix, value)| Some((key(suffix), Some(value(self)?))))
            .collect();
        if self.rope_scale.is_some() {
            // llama.cpp reads the legacy key only without rope.scaling.factor.
            overlay.insert(key("rope.scale_linear"), None);
        }
        overlay
    }

    /// The field (and its value) that replaced the key `key` of `arch`, if one did.
    fn field_of_key(&self, arch: &str, key: &str) -> Option<(&'static str, String)> {
        let (field, ..) = KEYS
            .iter()
            .find(|(_, suffix, _)| key == format!("{arch}.{suffix}"))?;
        self.given().into_iter().find(|(f, _)| f == field)
    }

    /// A reader's error about a key the override replaced, as the override field's.
    fn blame(&self, err: Error) -> Error {
        let key = match &err {
            Error::GgufKey { key, .. } | Error::GgufMissing { key, .. } => key.clone(),
            Error::GgufConflict { key, .. } => key.clone(),
            _ => return err,
        };
        let arch = key.split('.').next().unwrap_or_default();
        match self.field_of_key(arch, &key) {
            Some((field, _)) => refused(field, err.to_string()),
            None => err,
        }
    }

    /// The ropes with every layer type but the full layers' as the file has them: llama.cpp's
    /// sliding layers keep their trained base and scale. A scaled sliding rope is refused when
    /// the override changes the scaling.
    fn keep_sliding(&self, plain: &GgufRope, configs: RopeConfigs) -> Result<RopeConfigs> {
        let (Some((field, file)), Some((_, laid))) = (plain.configs.per_type(), configs.per_type())
        else {
            return Ok(configs);
        };
        let scales = self.given().iter().any(|(f, _)| *f != "rope_freq_base");
        let mut kept = laid.clone();
        for (layer_type, config) in file {
            if layer_type == "full_attention" {
                continue;
            }
            let scaled = config
                .as_ref()
                .is_some_and(|c| c.rope_type != RopeType::Default);
            if scales && scaled {
                let message = format!(
                    "the file's {layer_type} layers are scaled, and llama.cpp would mix their \
                     factor with the override's; overriding such a file's scaling is not supported"
                );
                return Err(refused("rope_scaling", message));
            }
            kept.insert(layer_type.clone(), config.clone());
        }
        let kept = RopeConfigs::per_layer_type(kept)?.with_field(field);
        Ok(match configs.layer_types() {
            Some(types) => kept.with_layer_types(types.to_vec()),
            None => kept,
        })
    }
}
