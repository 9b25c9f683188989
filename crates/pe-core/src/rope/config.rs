//! [`RopeConfig`]: one model's rotary embedding, with the words of HF `config.json`, read from
//! it directly.
//!
//! It reads the head dim (`head_dim`; DeepSeek's `qk_rope_head_dim`; Gemma 4's
//! `global_head_dim` for full-attention layers; or `hidden_size / num_attention_heads`, except
//! for Gemma 1-3, whose transformers default is 256),
//! `rope_theta`, `partial_rotary_factor`, `max_position_embeddings`, and the rope type with its
//! parameters from `rope_scaling` (keyed by `rope_type`, or the older `type`) or transformers 5's
//! `rope_parameters` (which may also carry `rope_theta`, `partial_rotary_factor` and the M-RoPE
//! fields), as transformers reads them; each rope type reads its own fields, with their
//! defaults and legacy spellings ([`RopeType`]). Vision-language configs are read from their
//! `text_config`. A field that is `null` is absent. A field of the wrong type, a missing one, a
//! value given in the rope dict and at the top level that disagrees, or an unknown `rope_type`
//! is an error naming the field ([`ConfigFields`]).
//!
//! [`RopeConfigs`] reads models with one rope per layer type (Gemma 3, Gemma 4).
//!
//! ```
//! use candle_pe_core::{RopeConfig, RopeType};
//!
//! let json = r#"{"hidden_size": 4096, "num_attention_heads": 32, "rope_theta": 500000.0,
//!   "max_position_embeddings": 131072,
//!   "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
//!                    "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}}"#;
//! let config = RopeConfig::from_hf_config(&serde_json::from_str(json)?)?;
//! assert_eq!((config.head_dim, config.rope_theta), (128, 500000.0));
//! assert_eq!(config.rope_type.name(), "llama3");
//!
//! let err = RopeConfig::from_hf_config(&serde_json::json!({"head_dim": -64})).unwrap_err();
//! assert!(err.to_string().contains("head_dim"), "{err}");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use super::types::RopeType;
use crate::{ConfigFields, Error, Result};

/// `rope_theta` when a config does not give one.
pub const DEFAULT_ROPE_THETA: f64 = 10_000.0;

/// One model's rotary embedding, in the words of HF `config.json`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RopeConfig {
    /// The width of each attention head.
    pub head_dim: usize,
    /// The base of the frequencies. Default 10000.
    pub rope_theta: f64,
    /// The fraction of each head that is rotated (phi, GPT-NeoX). Default 1.
    pub partial_rotary_factor: f64,
    /// The model's context length; some rope types read it (dynamic, yarn, longrope).
    pub max_position_embeddings: Option<usize>,
    /// The rope type and its parameters (written as transformers 5's `rope_parameters`).
    #[serde(rename = "rope_parameters")]
    pub rope_type: RopeType,
    /// M-RoPE (Qwen2-VL, Qwen2.5-VL, Qwen3-VL): how many frequency slots take their angle from
    /// the temporal, height and width position ids; `None` for 1-D rope.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mrope_section: Option<Vec<usize>>,
    /// Whether the M-RoPE sections interleave slot by slot (Qwen3-VL) instead of following each
    /// other (Qwen2-VL, Qwen2.5-VL).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub mrope_interleaved: bool,
}

impl RopeConfig {
    /// The default rope type for heads of `head_dim` with base `rope_theta`.
    pub fn new(head_dim: usize, rope_theta: f64) -> Self {
        Self {
            head_dim,
            rope_theta,
            partial_rotary_factor: 1.0,
            max_position_embeddings: None,
            rope_type: RopeType::Default,
            mrope_section: None,
            mrope_interleaved: false,
        }
    }

    /// The same config with another rope type.
    pub fn with_rope_type(mut self, rope_type: RopeType) -> Self {
        self.rope_type = rope_type;
        self
    }

    /// The width the tables cover, twice their column count: `head_dim * partial_rotary_factor`
    /// rounded down, or the width the rope type gives (the whole head for
    /// [`RopeType::Proportional`], whose unrotated pairs have frequency 0).
    pub fn rotary_dim(&self) -> usize {
        self.rope_type
            .formula()
            .rotary_dim(self.head_dim, self.partial_rotary_factor)
    }

    /// The config of a model with one rotary embedding for all its layers, from its HF
    /// `config.json` (see the module docs for the fields read). A config with one rope per
    /// layer type (Gemma 3, Gemma 4) is an error naming the field that says so: read it with
    /// [`RopeConfigs::from_hf_config`].
    pub fn from_hf_config(config: &Value) -> Result<Self> {
        let configs = RopeConfigs::from_hf_config(config)?;
        match configs.layers {
            Layers::Single(config) => Ok(config),
            Layers::PerType { field, configs } => Err(Error::Config {
                field,
                message: format!(
                    "the config sets one rope per layer type ({}): read it with \
                     RopeConfigs::from_hf_config, then for_layer_type or for_layer",
                    configs.keys().cloned().collect::<Vec<_>>().join(", ")
                ),
            }),
        }
    }
}

/// Reads a config with [`RopeConfig::from_hf_config`].
impl<'de> Deserialize<'de> for RopeConfig {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        RopeConfig::from_hf_config(&value).map_err(serde::de::Error::custom)
    }
}

/// Every rotary embedding of a model, per layer: one for all layers (most models), or one per
/// layer type (Gemma 3, Gemma 4: `full_attention`, `sliding_attention`), from its HF
/// `config.json`, in the transformers 5 form (`rope_parameters` keyed by layer type, with
/// `layer_types`) or the legacy Gemma 3 form (`rope_theta` for full layers,
/// `rope_local_base_freq` for sliding ones, `rope_scaling` for full layers only, and
/// `sliding_window_pattern` when `layer_types` is absent).
///
/// ```
/// use candle_pe_core::{RopeConfigs, RopeType};
///
/// let gemma3: serde_json::Value = serde_json::from_str(r#"{"head_dim": 256,
///   "num_hidden_layers": 12, "sliding_window_pattern": 6, "rope_theta": 1000000.0,
///   "rope_local_base_freq": 10000.0, "rope_scaling": {"rope_type": "linear", "factor": 8.0}}"#)?;
/// let configs = RopeConfigs::from_hf_config(&gemma3)?;
/// assert_eq!(configs.for_layer(5)?.rope_type.name(), "linear"); // full attention
/// assert_eq!(configs.for_layer(0)?.rope_theta, 10000.0); // sliding
/// assert!(configs.for_layer(12).is_err());
/// assert!(configs.for_layer_type("chunked_attention").is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct RopeConfigs {
    layers: Layers,
    layer_types: Option<Vec<String>>,
}

#[derive(Clone, Debug, PartialEq)]
enum Layers {
    Single(RopeConfig),
    /// `field`: the config field that makes the rope per layer type. A `None` config: a layer
    /// type without rope (NoPE).
    PerType {
        field: String,
        configs: BTreeMap<String, Option<RopeConfig>>,
    },
}

impl RopeConfigs {
    /// The rotary embeddings an HF `config.json` describes (also read from its `text_config`,
    /// as vision-language models nest it).
    pub fn from_hf_config(config: &Value) -> Result<Self> {
        let root = ConfigFields::new(config)?;
        let outer_model_type: Option<String> = root.get("model_type")?;
        if let Some(text) = root.object("text_config")? {
            let own = ["head_dim", "hidden_size", "rope_scaling", "rope_parameters"];
            if !own.iter().any(|k| root.has(k)) {
                return read_model(&text, outer_model_type.as_deref());
            }
        }
        read_model(&root, None)
    }

    /// One rope for every layer (read from another format, as `gguf.rs` does).
    pub(super) fn for_all_layers(config: RopeConfig, layer_types: Option<Vec<String>>) -> Self {
        Self {
            layers: Layers::Single(config),
            layer_types,
        }
    }

    /// One rope per layer type; `field` is what makes the rope per layer type (a key).
    pub(super) fn per_layer_type(
        field: String,
        configs: BTreeMap<String, RopeConfig>,
        layer_types: Option<Vec<String>>,
    ) -> Self {
        Self {
            layers: Layers::PerType {
                field,
                configs: configs.into_iter().map(|(k, c)| (k, Some(c))).collect(),
            },
            layer_types,
        }
    }

    /// Whether the layers have rope parameters per layer type.
    pub fn is_per_layer_type(&self) -> bool {
        matches!(self.layers, Layers::PerType { .. })
    }

    /// The config's `layer_types` (or the list its `sliding_window_pattern` implies), one per
    /// layer.
    pub fn layer_types(&self) -> Option<&[String]> {
        self.layer_types.as_deref()
    }

    /// The single config of a model whose layers all share one rope.
    pub fn single(&self) -> Option<&RopeConfig> {
        match &self.layers {
            Layers::Single(c) => Some(c),
            Layers::PerType { .. } => None,
        }
    }

    /// The rope of the layers of type `layer_type` (`full_attention`, `sliding_attention`).
    pub fn for_layer_type(&self, layer_type: &str) -> Result<&RopeConfig> {
        match &self.layers {
            Layers::Single(c) => match &self.layer_types {
                Some(types) if !types.iter().any(|t| t == layer_type) => Err(Error::Config {
                    field: "layer_types".into(),
                    message: format!("no layer has type {layer_type:?}"),
                }),
                _ => Ok(c),
            },
            Layers::PerType { field, configs } => match configs.get(layer_type) {
                Some(Some(c)) => Ok(c),
                Some(None) => Err(Error::Config {
                    field: format!("{field}.{layer_type}"),
                    message: format!("layers of type {layer_type:?} have no rotary embedding"),
                }),
                None => Err(Error::Config {
                    field: field.clone(),
                    message: format!(
                        "no rope parameters for layer type {layer_type:?}; the config has {}",
                        configs.keys().cloned().collect::<Vec<_>>().join(", ")
                    ),
                }),
            },
        }
    }

    /// The rope of layer `index` (counted from 0), by its type in `layer_types`.
    pub fn for_layer(&self, index: usize) -> Result<&RopeConfig> {
        match (&self.layer_types, &self.layers) {
            (Some(types), _) => match types.get(index) {
                Some(t) => self.for_layer_type(t),
                None => Err(Error::Config {
                    field: "layer_types".into(),
                    message: format!(
                        "layer {index} is past the last of the {} layers",
                        types.len()
                    ),
                }),
            },
            (None, Layers::Single(c)) => Ok(c),
            (None, Layers::PerType { .. }) => Err(Error::MissingParameter {
                name: "layer_types",
                needed_by: "picking a layer's rope by index (give layer_types, or \
                            num_hidden_layers with sliding_window_pattern)",
            }),
        }
    }
}

/// Whether the rope dict `params` holds one rope dict per layer type: some of its keys are
/// layer types or, without `layer_types`, all its values are dicts (or null, for NoPE).
fn is_nested(params: &ConfigFields, layer_types: Option<&[String]>) -> bool {
    match layer_types {
        Some(types) if params.keys().any(|k| types.iter().any(|t| t == k)) => true,
        _ => {
            params.keys().next().is_some()
                && params
                    .keys()
                    .all(|k| matches!(params.value(k), None | Some(Value::Object(_))))
        }
    }
}

/// The Gemma layer types for `layers` layers, every `pattern`-th one full attention (and the
/// last one for Gemma 4).
pub(super) fn pattern_layer_types(layers: usize, pattern: usize, last_full: bool) -> Vec<String> {
    (0..layers)
        .map(|i| {
            let full = (pattern > 0 && (i + 1) % pattern == 0) || (last_full && i + 1 == layers);
            if full {
                "full_attention"
            } else {
                "sliding_attention"
            }
            .to_string()
        })
        .collect()
}

/// Where a layer's `rope_theta` comes from when its rope dict does not give it: a top-level
/// field and its default.
#[derive(Clone, Copy)]
struct Theta {
    field: &'static str,
    default: f64,
}

impl Theta {
    /// `rope_theta`, default 10000.
    const ROPE_THETA: Theta = Theta {
        field: "rope_theta",
        default: DEFAULT_ROPE_THETA,
    };
    /// Gemma 3's full-attention layers: `rope_theta`, default 1e6.
    const GEMMA3_FULL: Theta = Theta {
        field: "rope_theta",
        default: 1e6,
    };
    /// Gemma 3's sliding layers: `rope_local_base_freq`, default 1e4.
    const GEMMA3_SLIDING: Theta = Theta {
        field: "rope_local_base_freq",
        default: 1e4,
    };
}

fn read_model(root: &ConfigFields, outer_model_type: Option<&str>) -> Result<RopeConfigs> {
    let model_type: Option<String> = root.get("model_type")?;
    let model_type = model_type.as_deref().or(outer_model_type).unwrap_or("");
    let is_gemma3 = model_type.starts_with("gemma3");
    let is_gemma4 = model_type.starts_with("gemma4");
    let mut layer_types: Option<Vec<String>> = root.get("layer_types")?;
    let implied_layer_types = |layer_types: &mut Option<Vec<String>>| -> Result<()> {
        if layer_types.is_none() {
            let pattern = root.get::<usize>("sliding_window_pattern")?.unwrap_or(6);
            if let Some(layers) = root.get::<usize>("num_hidden_layers")? {
                *layer_types = Some(pattern_layer_types(layers, pattern, is_gemma4));
            }
        }
        Ok(())
    };
    // Both are read, so that either one not being an object is an error.
    let params = match (
        root.object("rope_parameters")?,
        root.object("rope_scaling")?,
    ) {
        (Some(p), _) | (None, Some(p)) => Some(p),
        (None, None) => None,
    };
    if let Some(params) = params
        .as_ref()
        .filter(|p| is_nested(p, layer_types.as_deref()))
    {
        if is_gemma3 || is_gemma4 {
            implied_layer_types(&mut layer_types)?;
        }
        let mut configs = BTreeMap::new();
        for layer_type in params.keys() {
            let config = match params.object(layer_type)? {
                None => None,
                Some(dict) => Some(read_one(
                    root,
                    Some(&dict),
                    Some(layer_type),
                    model_type,
                    Theta::ROPE_THETA,
                )?),
            };
            configs.insert(layer_type.to_string(), config);
        }
        return Ok(RopeConfigs {
            layers: Layers::PerType {
                field: params.path().to_string(),
                configs,
            },
            layer_types,
        });
    }
    if is_gemma4 {
        return Err(root.invalid(
            "rope_parameters",
            "a Gemma 4 config needs rope_parameters keyed by layer type \
             (full_attention, sliding_attention); transformers' defaults are not assumed",
        ));
    }
    if is_gemma3 || root.has("rope_local_base_freq") {
        // Gemma 3's legacy form: rope_theta and rope_scaling for full-attention layers,
        // rope_local_base_freq for sliding ones.
        implied_layer_types(&mut layer_types)?;
        let full = read_one(
            root,
            params.as_ref(),
            Some("full_attention"),
            model_type,
            Theta::GEMMA3_FULL,
        )?;
        let sliding = read_one(
            root,
            None,
            Some("sliding_attention"),
            model_type,
            Theta::GEMMA3_SLIDING,
        )?;
        let configs = BTreeMap::from([
            ("full_attention".to_string(), Some(full)),
            ("sliding_attention".to_string(), Some(sliding)),
        ]);
        return Ok(RopeConfigs {
            layers: Layers::PerType {
                field: root.path_of("rope_local_base_freq"),
                configs,
            },
            layer_types,
        });
    }
    let config = read_one(root, params.as_ref(), None, model_type, Theta::ROPE_THETA)?;
    Ok(RopeConfigs {
        layers: Layers::Single(config),
        layer_types,
    })
}

/// The `model_type`s whose config class defaults `head_dim` to 256.
const GEMMA_HEAD_DIM_256: [&str; 4] = ["gemma", "gemma2", "gemma3", "gemma3_text"];

/// One rope: `root`'s head and context fields with the rope dict `dict`, `rope_theta` from
/// `theta` when the dict does not give it.
fn read_one(
    root: &ConfigFields,
    dict: Option<&ConfigFields>,
    layer_type: Option<&str>,
    model_type: &str,
    theta: Theta,
) -> Result<RopeConfig> {
    // transformers 5 moves rope_theta, partial_rotary_factor and the M-RoPE fields into
    // rope_parameters; a value at both levels must agree.
    let either = |name: &str, top_name: &str| -> Result<Option<f64>> {
        match dict {
            Some(dict) => dict.either(name, root, top_name),
            None => root.get(top_name),
        }
    };
    let global = match layer_type {
        Some("full_attention") => root.get::<usize>("global_head_dim")?,
        _ => None,
    };
    let head_dim = match (
        global,
        root.get::<usize>("qk_rope_head_dim")?,
        root.get::<usize>("head_dim")?,
    ) {
        (Some(d), _, _) | (None, Some(d), _) | (None, None, Some(d)) => d,
        // Gemma 1-3 never derive it from hidden_size: transformers' class default is 256 (the
        // published Gemma 3 config.json files leave it out).
        (None, None, None) if GEMMA_HEAD_DIM_256.contains(&model_type) => 256,
        (None, None, None) => {
            let hidden = root.get::<usize>("hidden_size")?;
            let heads = root.get::<usize>("num_attention_heads")?;
            match (hidden, heads) {
                (Some(hidden), Some(heads)) if heads > 0 => hidden / heads,
                _ => {
                    return Err(Error::MissingParameter {
                        name: "head_dim",
                        needed_by: "give head_dim (or qk_rope_head_dim, global_head_dim), or \
                                    hidden_size and num_attention_heads",
                    })
                }
            }
        }
    };
    let rope_type = match dict {
        Some(dict) => RopeType::from_dict(dict, root)?,
        None => RopeType::Default,
    };
    let (mrope_section, interleaved) = match dict {
        Some(dict) => (
            dict.either("mrope_section", root, "mrope_section")?,
            dict.either("mrope_interleaved", root, "mrope_interleaved")?,
        ),
        None => (root.get("mrope_section")?, root.get("mrope_interleaved")?),
    };
    // Qwen3-VL always interleaves (transformers never reads mrope_interleaved).
    let mrope_interleaved = interleaved.unwrap_or(false) || model_type.starts_with("qwen3_vl");
    Ok(RopeConfig {
        head_dim,
        rope_theta: either("rope_theta", theta.field)?.unwrap_or(theta.default),
        partial_rotary_factor: either("partial_rotary_factor", "partial_rotary_factor")?
            .unwrap_or(1.0),
        max_position_embeddings: root.get("max_position_embeddings")?,
        rope_type,
        mrope_section,
        mrope_interleaved,
    })
}
