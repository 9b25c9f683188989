//! [`RopeConfig`]: one model's rotary embedding, with the words of HF `config.json`, read from
//! it directly.
//!
//! It reads `head_dim` (or `hidden_size / num_attention_heads`), `rope_theta`,
//! `partial_rotary_factor`, `max_position_embeddings`, and the rope type with its parameters
//! from `rope_scaling` (keyed by `rope_type`, or the older `type`) or transformers 5's
//! `rope_parameters` (which may also carry `rope_theta` and `partial_rotary_factor`). A field of
//! the wrong type, a missing one, or an unknown `rope_type` is an error naming the field.
//!
//! ```
//! use pe_core::rope::{RopeConfig, RopeType};
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
    /// The model's context length; some rope types read it (dynamic, yarn).
    pub max_position_embeddings: Option<usize>,
    /// The rope type and its parameters (written as transformers 5's `rope_parameters`).
    #[serde(rename = "rope_parameters")]
    pub rope_type: RopeType,
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
        }
    }

    /// The same config with another rope type.
    pub fn with_rope_type(mut self, rope_type: RopeType) -> Self {
        self.rope_type = rope_type;
        self
    }

    /// The rotated width of each head: `head_dim * partial_rotary_factor`, rounded down.
    pub fn rotary_dim(&self) -> usize {
        (self.head_dim as f64 * self.partial_rotary_factor) as usize
    }

    /// The config an HF `config.json` describes (see the module docs for the fields read).
    pub fn from_hf_config(config: &Value) -> Result<Self> {
        let root = config.as_object().ok_or_else(|| Error::Config {
            field: "(root)".into(),
            message: "a config must be a JSON object".into(),
        })?;
        let (params_name, params) = match (root.get("rope_parameters"), root.get("rope_scaling")) {
            (Some(p @ Value::Object(_)), _) => ("rope_parameters", Some(p)),
            (_, Some(p @ Value::Object(_))) => ("rope_scaling", Some(p)),
            _ => ("rope_scaling", None),
        };
        let params = params.and_then(Value::as_object);
        // transformers 5 moves rope_theta and partial_rotary_factor into rope_parameters.
        let either = |name: &'static str| match params.filter(|p| p.contains_key(name)) {
            Some(p) => field::<f64>(p, params_name, name),
            None => field::<f64>(root, "", name),
        };
        let head_dim = match field::<usize>(root, "", "head_dim")? {
            Some(d) => d,
            None => {
                let hidden = field::<usize>(root, "", "hidden_size")?;
                let heads = field::<usize>(root, "", "num_attention_heads")?;
                match (hidden, heads) {
                    (Some(hidden), Some(heads)) if heads > 0 => hidden / heads,
                    _ => {
                        return Err(Error::MissingParameter {
                            name: "head_dim",
                            needed_by: "give head_dim, or hidden_size and num_attention_heads",
                        })
                    }
                }
            }
        };
        let rope_type = match params {
            Some(p) => rope_type(p, params_name)?,
            None => RopeType::Default,
        };
        Ok(Self {
            head_dim,
            rope_theta: either("rope_theta")?.unwrap_or(DEFAULT_ROPE_THETA),
            partial_rotary_factor: either("partial_rotary_factor")?.unwrap_or(1.0),
            max_position_embeddings: field(root, "", "max_position_embeddings")?,
            rope_type,
        })
    }
}

/// Reads a config with [`RopeConfig::from_hf_config`].
impl<'de> Deserialize<'de> for RopeConfig {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        RopeConfig::from_hf_config(&value).map_err(serde::de::Error::custom)
    }
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

/// The rope type of a `rope_scaling` / `rope_parameters` object named `parent`.
fn rope_type(params: &Map<String, Value>, parent: &str) -> Result<RopeType> {
    let key = if params.contains_key("rope_type") {
        "rope_type"
    } else {
        "type"
    };
    let name: String = field(params, parent, key)?.unwrap_or_else(|| "default".into());
    let mut tagged = params.clone();
    tagged.remove("type");
    tagged.insert("rope_type".into(), Value::String(name.clone()));
    let value = Value::Object(tagged.clone());
    serde_path_to_error::deserialize(&value).map_err(|e| {
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
    })
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
