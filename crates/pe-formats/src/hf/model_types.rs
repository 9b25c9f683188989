//! [`HfModelType`]: what a Hugging Face `model_type` changes in how its `config.json` is read,
//! one row of data per model type; and [`HfTextConfig`], the object of a `config.json` that
//! holds the text decoder's fields (the root, or the `text_config` a vision-language model
//! nests them in) with the row of its model type.
//!
//! The readers of `config.json` (the rope reader [`RopeConfigs`](crate::RopeConfigs), the
//! Qwen-VL position ids' [`QwenVlConfig`](crate::QwenVlConfig), pe-models' decoder config and
//! `pe inspect`) look a model type up here and read the fields of its row; none of them names
//! a model type. A model type without a row reads as most models do (every field off).
//!
//! A new model type whose transformers config class or model code changes how its
//! `config.json` reads is one row in `MODEL_TYPES` (and a fixture written by transformers). A
//! row gives:
//! - `names`: the `model_type` strings it covers, the text config's own (`gemma3_text`) as well
//!   as the outer one (`gemma3`); with `prefix`, also every model type that starts with one of
//!   them and that no row names (`gemma3` covers `gemma3n`);
//! - `head_dim`: the config class's `head_dim` default, when it is not `hidden_size /
//!   num_attention_heads` (Gemma 1 to 3: 256);
//! - `pair_layout`: the default of `rope_interleave`, [`PairLayout::Interleaved`] where the
//!   config class defaults it to true or the model always turns adjacent pairs (DeepSeek-V3,
//!   Llama 4);
//! - `nope_interval`: without `no_rope_layers`, every `no_rope_layer_interval`-th layer (this
//!   default) has no rotary (SmolLM3, Llama 4);
//! - `attn_temperature`: the NoPE layers' query temperature, `attn_temperature_tuning`
//!   (Llama 4);
//! - `sliding`: layers of two types whose types follow from `sliding_window_pattern`, and the
//!   rope forms read (Gemma 3, Gemma 4);
//! - `mrope_slots`: [`MropeSlots::Alternating`] where the M-RoPE slots always alternate,
//!   whatever `mrope_interleaved` says (Qwen3-VL);
//! - `yarn_is_longrope`: a `yarn` rope dict reads as LongRoPE (Phi-3, Phi-4-multimodal);
//! - `mscales`: LongRoPE's `short_mscale` and `long_mscale` are read, and required
//!   (Phi-3.5-MoE);
//! - `qwen_vl`: the Qwen-VL generation whose rules build the model's position ids.
//!
//! ```
//! use candle_pe_formats::{HfModelType, HfTextConfig};
//!
//! assert_eq!(HfModelType::of("gemma3_text").head_dim_default(), Some(256));
//! assert_eq!(HfModelType::of("llama").head_dim_default(), None);
//!
//! let gemma3 = serde_json::json!({"model_type": "gemma3", "text_config": {
//!     "model_type": "gemma3_text", "hidden_size": 2560, "num_attention_heads": 8}});
//! let text = HfTextConfig::from_hf_config(&gemma3)?;
//! assert_eq!(text.fields().path(), "text_config");
//! assert_eq!(text.head_dim()?, 256); // not 2560 / 8
//! # Ok::<(), candle_pe_formats::Error>(())
//! ```

use serde_json::Value;

use candle_pe_core::Error as CoreError;
use candle_pe_core::{MropeSlots, PairLayout};

use crate::{ConfigFields, Error, Result};

/// What a `model_type` changes in how its `config.json` is read: one row of `MODEL_TYPES` (the
/// module docs say what each field means).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HfModelType {
    pub(crate) names: &'static [&'static str],
    pub(crate) prefix: bool,
    pub(crate) head_dim: Option<usize>,
    pub(crate) pair_layout: PairLayout,
    pub(crate) nope_interval: Option<usize>,
    pub(crate) attn_temperature: bool,
    pub(crate) sliding: Option<Sliding>,
    pub(crate) mrope_slots: MropeSlots,
    pub(crate) yarn_is_longrope: bool,
    pub(crate) mscales: bool,
    pub(crate) qwen_vl: Option<QwenVlVersion>,
}

/// Layers of two types, sliding and full attention (Gemma 3 and 4).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Sliding {
    /// `sliding_window_pattern` makes every pattern-th layer full attention, and the last one
    /// too (Gemma 4).
    pub last_full: bool,
    /// Only transformers 5's `rope_parameters` keyed by layer type is read (Gemma 4); otherwise
    /// the legacy form is read too (Gemma 3: `rope_theta` and `rope_scaling` for full layers,
    /// `rope_local_base_freq` for sliding ones).
    pub keyed_only: bool,
}

/// Which Qwen-VL generation's rules build the ids.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QwenVlVersion {
    /// Qwen2-VL (`model_type` `qwen2_vl`).
    Qwen2Vl,
    /// Qwen2.5-VL (`qwen2_5_vl`): video time from `tokens_per_second * second_per_grid_ts`.
    Qwen25Vl,
    /// Qwen3-VL and Qwen3.5 (`qwen3_vl`, `qwen3_vl_moe`, `qwen3_5`, `qwen3_5_moe`): each video
    /// frame its own run.
    Qwen3Vl,
}

/// The row of a model type that has none: every field off.
const DEFAULT: HfModelType = HfModelType {
    names: &[],
    prefix: false,
    head_dim: None,
    pair_layout: PairLayout::Halves,
    nope_interval: None,
    attn_temperature: false,
    sliding: None,
    mrope_slots: MropeSlots::Sections,
    yarn_is_longrope: false,
    mscales: false,
    qwen_vl: None,
};

/// Gemma 3's layers: every `sliding_window_pattern`-th one full attention, the legacy rope
/// form read too.
const GEMMA3_SLIDING: Option<Sliding> = Some(Sliding {
    last_full: false,
    keyed_only: false,
});

/// Every model type whose `config.json` reads differently from the default. A name is in at
/// most one row without `prefix`; a prefix row covers the names that no row holds.
const MODEL_TYPES: &[HfModelType] = &[
    HfModelType {
        names: &["gemma", "gemma2"],
        head_dim: Some(256),
        ..DEFAULT
    },
    HfModelType {
        names: &["gemma3", "gemma3_text"],
        head_dim: Some(256),
        sliding: GEMMA3_SLIDING,
        ..DEFAULT
    },
    HfModelType {
        names: &["gemma3"],
        prefix: true,
        sliding: GEMMA3_SLIDING,
        ..DEFAULT
    },
    HfModelType {
        names: &["gemma4"],
        prefix: true,
        sliding: Some(Sliding {
            last_full: true,
            keyed_only: true,
        }),
        ..DEFAULT
    },
    // Llama 4's attention turns adjacent pairs (as complex numbers); its config has no
    // rope_interleave.
    HfModelType {
        names: &["llama4", "llama4_text"],
        pair_layout: PairLayout::Interleaved,
        nope_interval: Some(4),
        attn_temperature: true,
        ..DEFAULT
    },
    HfModelType {
        names: &["llama4"],
        prefix: true,
        attn_temperature: true,
        ..DEFAULT
    },
    HfModelType {
        names: &["smollm3"],
        nope_interval: Some(4),
        ..DEFAULT
    },
    // The config classes that default rope_interleave to true.
    HfModelType {
        names: &["deepseek_v3", "glm4_moe_lite", "mistral4", "youtu", "axk1"],
        pair_layout: PairLayout::Interleaved,
        ..DEFAULT
    },
    // transformers' Phi3Config and Phi4MultimodalConfig (convert_rope_params_to_dict: older
    // Phi-3 checkpoints wrote `yarn` with factor lists).
    HfModelType {
        names: &["phi3", "phi4_multimodal"],
        yarn_is_longrope: true,
        ..DEFAULT
    },
    // transformers' PhimoeRotaryEmbedding (PhimoeConfig.validate_rope requires both).
    HfModelType {
        names: &["phimoe"],
        mscales: true,
        ..DEFAULT
    },
    HfModelType {
        names: &["qwen2_vl"],
        qwen_vl: Some(QwenVlVersion::Qwen2Vl),
        ..DEFAULT
    },
    HfModelType {
        names: &["qwen2_5_vl"],
        qwen_vl: Some(QwenVlVersion::Qwen25Vl),
        ..DEFAULT
    },
    // transformers' Qwen3-VL never reads mrope_interleaved.
    HfModelType {
        names: &["qwen3_vl", "qwen3_vl_moe"],
        mrope_slots: MropeSlots::Alternating,
        qwen_vl: Some(QwenVlVersion::Qwen3Vl),
        ..DEFAULT
    },
    HfModelType {
        names: &["qwen3_vl"],
        prefix: true,
        mrope_slots: MropeSlots::Alternating,
        ..DEFAULT
    },
    HfModelType {
        names: &["qwen3_5", "qwen3_5_moe"],
        qwen_vl: Some(QwenVlVersion::Qwen3Vl),
        ..DEFAULT
    },
];

/// The fields whose presence at a config's root means the root holds the text decoder's fields
/// (and its `text_config`, if any, is not read).
const OWN_FIELDS: [&str; 4] = ["head_dim", "hidden_size", "rope_scaling", "rope_parameters"];

impl HfModelType {
    /// The row of `model_type`: the row naming it, else the first prefix row it starts with,
    /// else the default one (every field off).
    pub fn of(model_type: &str) -> &'static HfModelType {
        let prefixed = || {
            MODEL_TYPES
                .iter()
                .find(|r| r.prefix && r.names.iter().any(|n| model_type.starts_with(n)))
        };
        MODEL_TYPES
            .iter()
            .find(|r| !r.prefix && r.names.contains(&model_type))
            .or_else(prefixed)
            .unwrap_or(&DEFAULT)
    }

    /// The `head_dim` the config class gives when a config leaves it out (Gemma 1 to 3: 256);
    /// `None` when it is `hidden_size / num_attention_heads`.
    pub fn head_dim_default(&self) -> Option<usize> {
        self.head_dim
    }

    /// The width of each attention head of the config's object `root`: its `head_dim`, else
    /// this model type's default, else `hidden_size / num_attention_heads`.
    pub(crate) fn head_dim(&self, root: &ConfigFields) -> Result<usize> {
        if let Some(d) = root.get::<usize>("head_dim")?.or(self.head_dim) {
            return Ok(d);
        }
        let hidden = root.get::<usize>("hidden_size")?;
        let heads = root.get::<usize>("num_attention_heads")?;
        match (hidden, heads) {
            (Some(hidden), Some(heads)) if heads > 0 => Ok(hidden / heads),
            _ => Err(Error::Core(CoreError::MissingParameter {
                name: "head_dim",
                needed_by: "give head_dim (or qk_rope_head_dim, global_head_dim), or \
                            hidden_size and num_attention_heads",
            })),
        }
    }

    /// The model types whose position ids a Qwen-VL generation builds, for errors.
    pub(crate) fn qwen_vl_names() -> Vec<&'static str> {
        MODEL_TYPES
            .iter()
            .filter(|r| !r.prefix && r.qwen_vl.is_some())
            .flat_map(|r| r.names.iter().copied())
            .collect()
    }
}

/// The object of an HF `config.json` that holds the text decoder's fields, and the row of its
/// model type: the root, or its `text_config` when the root has none of the decoder's own
/// fields (`head_dim`, `hidden_size`, `rope_scaling`, `rope_parameters`), as vision-language
/// models nest them; the model type is the text config's own `model_type`, else the root's.
#[derive(Clone, Debug)]
pub struct HfTextConfig<'a> {
    fields: ConfigFields<'a>,
    model_type: &'static HfModelType,
}

impl<'a> HfTextConfig<'a> {
    /// Finds the text decoder's fields of a parsed `config.json`.
    pub fn from_hf_config(config: &'a Value) -> Result<Self> {
        let root = ConfigFields::new(config)?;
        let outer: Option<String> = root.get("model_type")?;
        let fields = match root.object("text_config")? {
            Some(text) if !OWN_FIELDS.iter().any(|k| root.has(k)) => text,
            _ => root,
        };
        let model_type: Option<String> = match fields.path() {
            "" => outer,
            _ => fields.get::<String>("model_type")?.or(outer),
        };
        Ok(Self {
            fields,
            model_type: HfModelType::of(model_type.as_deref().unwrap_or("")),
        })
    }

    /// The object holding the decoder's fields (its [`path`](ConfigFields::path) is
    /// `text_config` when nested).
    pub fn fields(&self) -> &ConfigFields<'a> {
        &self.fields
    }

    /// The row of the model type.
    pub fn model_type(&self) -> &'static HfModelType {
        self.model_type
    }

    /// The width of each attention head: `head_dim`, else the model type's default, else
    /// `hidden_size / num_attention_heads`; an error naming `head_dim` when none is given.
    pub fn head_dim(&self) -> Result<usize> {
        self.model_type.head_dim(&self.fields)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_has_one_exact_row_which_keeps_what_its_prefix_row_gives() {
        let mut seen = std::collections::HashSet::new();
        for row in MODEL_TYPES.iter().filter(|r| !r.prefix) {
            for &name in row.names {
                assert!(seen.insert(name), "{name} in two rows");
                assert_eq!(HfModelType::of(name), row);
                let prefix_row = MODEL_TYPES
                    .iter()
                    .find(|r| r.prefix && r.names.iter().any(|n| name.starts_with(n)));
                if let Some(p) = prefix_row {
                    // Every field the prefix row sets, the exact row sets the same way.
                    let keep = |f: fn(&HfModelType) -> bool| !f(p) || f(row);
                    assert!(keep(|r| r.sliding.is_some()), "{name}: sliding");
                    assert_eq!(row.sliding.or(p.sliding), row.sliding, "{name}");
                    assert!(
                        keep(|r| r.pair_layout.is_interleaved()),
                        "{name}: pair_layout"
                    );
                    assert!(keep(|r| r.attn_temperature), "{name}: attn_temperature");
                    assert!(
                        keep(|r| r.mrope_slots.is_alternating()),
                        "{name}: mrope_slots"
                    );
                }
            }
        }
    }

    #[test]
    fn lookup_by_name_then_prefix() {
        assert_eq!(HfModelType::of("gemma3n").head_dim, None);
        assert_eq!(HfModelType::of("gemma3n").sliding, GEMMA3_SLIDING);
        assert_eq!(HfModelType::of("gemma3_text").head_dim, Some(256));
        assert!(HfModelType::of("qwen3_vl_text")
            .mrope_slots
            .is_alternating());
        assert_eq!(HfModelType::of("qwen3_vl_text").qwen_vl, None);
        assert_eq!(HfModelType::of(""), &DEFAULT);
        assert_eq!(HfModelType::of("llama"), &DEFAULT);
    }
}
