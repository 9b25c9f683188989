//! [`RopeConfig`]: one model's rotary embedding, with the words of HF `config.json`, read from
//! it directly.
//!
//! It reads the head dim (`head_dim`; DeepSeek's `qk_rope_head_dim`; Gemma 4's
//! `global_head_dim` for full-attention layers; or `hidden_size / num_attention_heads`, except
//! for Gemma 1-3, whose transformers default is 256),
//! `rope_theta`, `partial_rotary_factor`, `max_position_embeddings`, and the rope type with its
//! parameters from `rope_scaling` (keyed by `rope_type`, or the older `type`) or transformers 5's
//! `rope_parameters` (which may also carry `rope_theta` and `partial_rotary_factor`), as
//! transformers reads them: legacy `mrope` is `default` with `mrope_section`, Phi-3's `su` and
//! `yarn` with factor lists are `longrope`, a top-level `original_max_position_embeddings`
//! (Phi-3) counts, yarn's missing `factor` is `max_position_embeddings /
//! original_max_position_embeddings`. Vision-language configs are read from their
//! `text_config`. A field of the wrong type, a missing one, a contradictory one, or an unknown
//! `rope_type` is an error naming the field.
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
//! let config: RopeConfig = serde_json::from_str(json).unwrap();
//! assert_eq!((config.head_dim, config.rope_theta), (128, 500000.0));
//! assert_eq!(config.rope_type.name(), "llama3");
//!
//! let err = serde_json::from_str::<RopeConfig>(r#"{"head_dim": -64}"#).unwrap_err();
//! assert!(err.to_string().contains("head_dim"), "{err}");
//! ```

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

use super::types::RopeType;
use crate::{Error, Result};

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
    /// rounded down, or the whole head for [`RopeType::Proportional`] (whose unrotated pairs
    /// have frequency 0).
    pub fn rotary_dim(&self) -> usize {
        match self.rope_type {
            RopeType::Proportional(_) => self.head_dim,
            _ => (self.head_dim as f64 * self.partial_rotary_factor) as usize,
        }
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
        let root = object(config, "(root)")?;
        let outer_model_type: Option<String> = field(root, "", "model_type")?;
        if let Some(Value::Object(text)) = root.get("text_config") {
            let own = ["head_dim", "hidden_size", "rope_scaling", "rope_parameters"];
            if !own.iter().any(|k| root.contains_key(*k)) {
                return read_model(text, outer_model_type.as_deref()).map_err(|e| match e {
                    Error::Config { field, message } => Error::Config {
                        field: path("text_config", &field),
                        message,
                    },
                    e => e,
                });
            }
        }
        read_model(root, None)
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
                    field: path(field, layer_type),
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

/// `value` as a JSON object, or an error naming the field `name`.
fn object<'a>(value: &'a Value, name: &str) -> Result<&'a Map<String, Value>> {
    value.as_object().ok_or_else(|| Error::Config {
        field: name.into(),
        message: format!("a config must be a JSON object, got {value}"),
    })
}

/// Whether the rope dict `params` holds one rope dict per layer type: some of its keys are
/// layer types or, without `layer_types`, all its values are dicts (or null, for NoPE).
fn is_nested(params: &Map<String, Value>, layer_types: Option<&[String]>) -> bool {
    match layer_types {
        Some(types) if params.keys().any(|k| types.contains(k)) => true,
        _ => {
            !params.is_empty()
                && params
                    .values()
                    .all(|v| matches!(v, Value::Object(_) | Value::Null))
        }
    }
}

/// The Gemma layer types for `layers` layers, every `pattern`-th one full attention (and the
/// last one for Gemma 4).
fn pattern_layer_types(layers: usize, pattern: usize, last_full: bool) -> Vec<String> {
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

fn read_model(root: &Map<String, Value>, outer_model_type: Option<&str>) -> Result<RopeConfigs> {
    let model_type: Option<String> = field(root, "", "model_type")?;
    let model_type = model_type.as_deref().or(outer_model_type).unwrap_or("");
    let is_gemma3 = model_type.starts_with("gemma3");
    let is_gemma4 = model_type.starts_with("gemma4");
    let mut layer_types: Option<Vec<String>> = field(root, "", "layer_types")?;
    let implied_layer_types = |layer_types: &mut Option<Vec<String>>| -> Result<()> {
        if layer_types.is_none() {
            let pattern = field::<usize>(root, "", "sliding_window_pattern")?;
            let layers = field::<usize>(root, "", "num_hidden_layers")?;
            if let (Some(pattern), Some(layers)) = (pattern.or(Some(6)), layers) {
                *layer_types = Some(pattern_layer_types(layers, pattern, is_gemma4));
            }
        }
        Ok(())
    };
    let (params_name, params) = match (root.get("rope_parameters"), root.get("rope_scaling")) {
        (Some(Value::Object(p)), _) => ("rope_parameters", Some(p)),
        (_, Some(Value::Object(p))) => ("rope_scaling", Some(p)),
        (Some(v @ (Value::Bool(_) | Value::Number(_) | Value::String(_) | Value::Array(_))), _) => {
            return Err(Error::Config {
                field: "rope_parameters".into(),
                message: format!("must be an object, got {v}"),
            })
        }
        _ => ("rope_scaling", None),
    };
    if let Some(params) = params.filter(|p| is_nested(p, layer_types.as_deref())) {
        if is_gemma3 || is_gemma4 {
            implied_layer_types(&mut layer_types)?;
        }
        let mut configs = BTreeMap::new();
        for (layer_type, p) in params {
            let name = path(params_name, layer_type);
            let config = match p {
                Value::Null => None,
                p => Some(read_one(
                    root,
                    Some((&name, object(p, &name)?)),
                    Some(layer_type),
                    model_type,
                )?),
            };
            configs.insert(layer_type.clone(), config);
        }
        return Ok(RopeConfigs {
            layers: Layers::PerType {
                field: params_name.into(),
                configs,
            },
            layer_types,
        });
    }
    if is_gemma4 {
        return Err(Error::Config {
            field: "rope_parameters".into(),
            message: "a Gemma 4 config needs rope_parameters keyed by layer type \
                      (full_attention, sliding_attention); transformers' defaults are not assumed"
                .into(),
        });
    }
    if is_gemma3 || root.contains_key("rope_local_base_freq") {
        // Gemma 3's legacy form: rope_theta (default 1e6) and rope_scaling for full-attention
        // layers, rope_local_base_freq (default 1e4) for sliding ones.
        implied_layer_types(&mut layer_types)?;
        let mut full = params.cloned().unwrap_or_default();
        let theta = root.get("rope_theta").cloned().unwrap_or(Value::from(1e6));
        full.entry("rope_theta").or_insert(theta);
        let local = root
            .get("rope_local_base_freq")
            .cloned()
            .unwrap_or(Value::from(1e4));
        let sliding = Map::from_iter([
            ("rope_type".to_string(), Value::from("default")),
            ("rope_theta".to_string(), local),
        ]);
        let full_name = params_name.to_string();
        let mut configs = BTreeMap::new();
        configs.insert(
            "full_attention".to_string(),
            Some(read_one(
                root,
                Some((&full_name, &full)),
                Some("full_attention"),
                model_type,
            )?),
        );
        configs.insert(
            "sliding_attention".to_string(),
            Some(read_one(
                root,
                Some(("rope_local_base_freq", &sliding)),
                Some("sliding_attention"),
                model_type,
            )?),
        );
        return Ok(RopeConfigs {
            layers: Layers::PerType {
                field: "rope_local_base_freq".into(),
                configs,
            },
            layer_types,
        });
    }
    let config = read_one(root, params.map(|p| (params_name, p)), None, model_type)?;
    Ok(RopeConfigs {
        layers: Layers::Single(config),
        layer_types,
    })
}

/// The `model_type`s whose config class defaults `head_dim` to 256.
const GEMMA_HEAD_DIM_256: [&str; 4] = ["gemma", "gemma2", "gemma3", "gemma3_text"];

/// One rope: `root`'s head and context fields with the rope dict `params` (named by its path).
fn read_one(
    root: &Map<String, Value>,
    params: Option<(&str, &Map<String, Value>)>,
    layer_type: Option<&str>,
    model_type: &str,
) -> Result<RopeConfig> {
    let (params_name, params) = match params {
        Some((name, p)) => (name, Some(p)),
        None => ("rope_scaling", None),
    };
    // transformers 5 moves rope_theta and partial_rotary_factor into rope_parameters.
    let either = |name: &'static str| match params.filter(|p| p.contains_key(name)) {
        Some(p) => field::<f64>(p, params_name, name),
        None => field::<f64>(root, "", name),
    };
    let global = match layer_type {
        Some("full_attention") => field::<usize>(root, "", "global_head_dim")?,
        _ => None,
    };
    let head_dim = match (
        global,
        field::<usize>(root, "", "qk_rope_head_dim")?,
        field::<usize>(root, "", "head_dim")?,
    ) {
        (Some(d), _, _) | (None, Some(d), _) | (None, None, Some(d)) => d,
        // Gemma 1-3 never derive it from hidden_size: transformers' class default is 256 (the
        // published Gemma 3 config.json files leave it out).
        (None, None, None) if GEMMA_HEAD_DIM_256.contains(&model_type) => 256,
        (None, None, None) => {
            let hidden = field::<usize>(root, "", "hidden_size")?;
            let heads = field::<usize>(root, "", "num_attention_heads")?;
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
    let max_position_embeddings: Option<usize> = field(root, "", "max_position_embeddings")?;
    let (rope_type, mrope_section, interleaved) = match params {
        Some(p) => rope_type(p, params_name, root, max_position_embeddings)?,
        None => (RopeType::Default, None, None),
    };
    let mrope_section = match mrope_section {
        Some(s) => Some(s),
        None => field(root, "", "mrope_section")?,
    };
    let interleaved = match interleaved {
        Some(i) => Some(i),
        None => field(root, "", "mrope_interleaved")?,
    };
    // Qwen3-VL always interleaves (transformers never reads mrope_interleaved).
    let mrope_interleaved = interleaved.unwrap_or(false) || model_type.starts_with("qwen3_vl");
    Ok(RopeConfig {
        head_dim,
        rope_theta: either("rope_theta")?.unwrap_or(DEFAULT_ROPE_THETA),
        partial_rotary_factor: either("partial_rotary_factor")?.unwrap_or(1.0),
        max_position_embeddings,
        rope_type,
        mrope_section,
        mrope_interleaved,
    })
}

/// `parent.name` for messages; `name` alone at the root.
fn path(parent: &str, name: &str) -> String {
    if parent.is_empty() {
        name.to_string()
    } else {
        format!("{parent}.{name}")
    }
}

/// The field `name` of `object` (`None` when absent or null), or an error naming it.
fn field<T: DeserializeOwned>(
    object: &Map<String, Value>,
    parent: &str,
    name: &str,
) -> Result<Option<T>> {
    match object.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => T::deserialize(value).map(Some).map_err(|e| Error::Config {
            field: path(parent, name),
            message: format!("{e}, got {value}"),
        }),
    }
}

/// The rope type of a `rope_scaling` / `rope_parameters` object named `parent`, with the
/// M-RoPE fields it carries (`mrope_section`, `mrope_interleaved`). Legacy names are read as
/// transformers reads them: `mrope` is `default` (with `mrope_section`), Phi-3's `su`, and
/// `yarn` with factor lists, are `longrope`.
#[allow(clippy::type_complexity)]
fn rope_type(
    params: &Map<String, Value>,
    parent: &str,
    root: &Map<String, Value>,
    max_position_embeddings: Option<usize>,
) -> Result<(RopeType, Option<Vec<usize>>, Option<bool>)> {
    let key = if params.contains_key("rope_type") {
        "rope_type"
    } else {
        "type"
    };
    let mut name: String = field(params, parent, key)?.unwrap_or_else(|| "default".into());
    let mrope_section: Option<Vec<usize>> = field(params, parent, "mrope_section")?;
    let interleaved: Option<bool> = field(params, parent, "mrope_interleaved")?;
    let has_lists = params.contains_key("short_factor") || params.contains_key("long_factor");
    match name.as_str() {
        "mrope" => {
            if mrope_section.is_none() {
                return Err(Error::Config {
                    field: path(parent, "mrope_section"),
                    message: format!("{key} \"mrope\" needs mrope_section"),
                });
            }
            name = "default".into();
        }
        "su" => name = "longrope".into(),
        "yarn" if has_lists => name = "longrope".into(),
        _ => {}
    }
    let mut tagged = params.clone();
    for k in ["type", "mrope_section", "mrope_interleaved"] {
        tagged.remove(k);
    }
    tagged.insert("rope_type".into(), Value::String(name.clone()));
    if matches!(name.as_str(), "llama3" | "yarn" | "longrope") {
        // Phi-3 gives original_max_position_embeddings at the top level.
        let l0 = "original_max_position_embeddings";
        match (tagged.get(l0), root.get(l0)) {
            (None | Some(Value::Null), Some(top)) if !top.is_null() => {
                tagged.insert(l0.into(), top.clone());
            }
            (Some(inner), Some(top)) if !inner.is_null() && !top.is_null() && inner != top => {
                return Err(Error::Config {
                    field: path(parent, l0),
                    message: format!(
                        "{inner} contradicts the top-level original_max_position_embeddings {top}"
                    ),
                });
            }
            _ => {}
        }
    }
    if name == "yarn" && matches!(tagged.get("factor"), None | Some(Value::Null)) {
        // transformers: factor = max_position_embeddings / original_max_position_embeddings.
        let original = field::<usize>(&tagged, parent, "original_max_position_embeddings")?;
        if let (Some(max), Some(original)) = (max_position_embeddings, original) {
            if original > 0 {
                tagged.insert("factor".into(), Value::from(max as f64 / original as f64));
            }
        }
    }
    let value = Value::Object(tagged.clone());
    let rope_type = serde_path_to_error::deserialize(&value).map_err(|e| {
        let inner = e.inner().to_string();
        if inner.starts_with("unknown variant") {
            return Error::Config {
                field: path(parent, key),
                message: format!("rope type {name:?} is not supported ({inner})"),
            };
        }
        let at = match e.path().to_string().as_str() {
            "." | "" => culprit(&tagged, &inner),
            at => Some(at.to_string()),
        };
        Error::Config {
            field: at.map_or(parent.to_string(), |at| path(parent, &at)),
            message: inner,
        }
    })?;
    Ok((rope_type, mrope_section, interleaved))
}

/// The field of `params` behind an error that carries no path (serde reads a tagged enum
/// through a buffer): the one whose removal fixes the error, or turns it into its own absence.
fn culprit(params: &Map<String, Value>, message: &str) -> Option<String> {
    if message.starts_with("missing field") {
        return None; // the message names the field
    }
    params.keys().filter(|k| *k != "rope_type").find_map(|key| {
        let mut without = params.clone();
        without.remove(key);
        let fixed = match serde_json::from_value::<RopeType>(Value::Object(without)) {
            Ok(_) => true,
            Err(e) => e.to_string() == format!("missing field `{key}`"),
        };
        fixed.then(|| key.clone())
    })
}
