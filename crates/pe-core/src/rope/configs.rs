//! [`RopeConfigs`]: every rotary embedding of a model, per layer: one rope for all layers (most
//! models), or one per layer type (Gemma 3, Gemma 4: `full_attention`, `sliding_attention`),
//! with the layers that have none (NoPE: Llama 4, SmolLM3) and their query scale.
//!
//! `candle-pe-formats` reads one from a `config.json` or a GGUF file; code builds one with the
//! constructors below, no file needed:
//!
//! ```
//! use candle_pe_core::{LinearScaling, RopeConfig, RopeConfigs, RopeType};
//!
//! // Gemma 3's layout: five sliding layers, then one full-attention layer, twice.
//! let full = RopeConfig::new(256, 1e6).with_rope_type(RopeType::Linear(LinearScaling {
//!     factor: 8.0,
//! }));
//! let sliding = RopeConfig::new(256, 1e4);
//! let layer_types: Vec<String> = (0..12)
//!     .map(|i| if i % 6 == 5 { "full_attention" } else { "sliding_attention" }.to_string())
//!     .collect();
//! let configs = RopeConfigs::per_layer_type([
//!     ("full_attention".to_string(), Some(full)),
//!     ("sliding_attention".to_string(), Some(sliding)),
//! ])?
//! .with_layer_types(layer_types);
//! assert_eq!(configs.num_layers(), Some(12));
//! assert_eq!(configs.for_layer(5)?.unwrap().rope_type.name(), "linear");
//! assert_eq!(configs.for_layer(0)?.unwrap().rope_theta, 1e4);
//! assert!(configs.for_layer(12).is_err());
//! assert!(configs.for_layer_type("chunked_attention").is_err());
//!
//! // SmolLM3's: one rope, every fourth layer without (NoPE).
//! let smollm3 = RopeConfigs::new(RopeConfig::new(128, 2e6))
//!     .with_nope_layers((0..8).map(|i| i % 4 == 3).collect());
//! assert!(smollm3.for_layer(2)?.is_some());
//! assert!(smollm3.for_layer(3)?.is_none());
//! assert!(smollm3.for_layer(8).is_err());
//! # Ok::<(), candle_pe_core::Error>(())
//! ```

use std::collections::BTreeMap;

use super::config::RopeConfig;
use super::query_scale::QueryScale;
use crate::{Error, Result};

/// The most layers a model's ropes are read for: `2^16` (llama.cpp loads at most 512). A reader
/// refuses a larger layer count before it makes the per-layer lists.
pub const MAX_LAYERS: usize = 1 << 16;

/// The field errors name for ropes given per layer type, unless a reader names its own
/// ([`RopeConfigs::with_field`]): transformers 5's dict of one rope per layer type.
const PER_TYPE_FIELD: &str = "rope_parameters";

/// Every rotary embedding of a model, per layer (see the module docs): built in code with
/// [`new`](Self::new) or [`per_layer_type`](Self::per_layer_type) and the `with_*` builders,
/// or read by `candle-pe-formats` (`FromHfConfig`, `FromGguf`). Each layer's rope is
/// [`for_layer`](Self::for_layer).
#[derive(Clone, Debug, PartialEq)]
pub struct RopeConfigs {
    layers: Layers,
    layer_types: Option<Vec<String>>,
    /// Per layer, whether it has no rotary embedding (NoPE); `None` when every layer has
    /// rotary.
    nope: Option<Vec<bool>>,
    /// The query scale of the NoPE layers (Llama 4's `attn_temperature_tuning`).
    nope_query_scale: Option<QueryScale>,
    /// The keys of the source that nothing read (a reader's report), as paths.
    unknown_keys: Vec<String>,
}

#[derive(Clone, Debug, PartialEq)]
enum Layers {
    Single(RopeConfig),
    /// `field`: the field that makes the rope per layer type, which errors name. A `None`
    /// config: a layer type without rope (NoPE).
    PerType {
        field: String,
        configs: BTreeMap<String, Option<RopeConfig>>,
    },
}

impl RopeConfigs {
    /// One rope for every layer. Give [`with_layer_types`](Self::with_layer_types) or
    /// [`with_nope_layers`](Self::with_nope_layers) for the layer count.
    pub fn new(config: RopeConfig) -> Self {
        Self {
            layers: Layers::Single(config),
            layer_types: None,
            nope: None,
            nope_query_scale: None,
            unknown_keys: Vec::new(),
        }
    }

    /// One rope per layer type (`None`: the layers of that type have no rotary embedding).
    /// At least one type must be given, and no type is named by an empty string. Give
    /// [`with_layer_types`](Self::with_layer_types) to pick a layer's rope by index.
    pub fn per_layer_type(
        configs: impl IntoIterator<Item = (String, Option<RopeConfig>)>,
    ) -> Result<Self> {
        let configs: BTreeMap<String, Option<RopeConfig>> = configs.into_iter().collect();
        let problem = if configs.is_empty() {
            Some("give the rope of at least one layer type")
        } else if configs.contains_key("") {
            Some("a layer type is named by an empty string")
        } else {
            None
        };
        if let Some(message) = problem {
            return Err(Error::Config {
                field: PER_TYPE_FIELD.into(),
                message: message.into(),
            });
        }
        Ok(Self {
            layers: Layers::PerType {
                field: PER_TYPE_FIELD.into(),
                configs,
            },
            layer_types: None,
            nope: None,
            nope_query_scale: None,
            unknown_keys: Vec::new(),
        })
    }

    /// The same ropes with each layer's type, one per layer (`full_attention`,
    /// `sliding_attention`); a layer whose type has no rope is an error when it is asked for
    /// ([`for_layer`](Self::for_layer) names it).
    pub fn with_layer_types(mut self, layer_types: Vec<String>) -> Self {
        self.layer_types = Some(layer_types);
        self
    }

    /// The same ropes with, per layer, whether it has no rotary embedding (NoPE); a layer past
    /// the list's end is an error when it is asked for.
    pub fn with_nope_layers(mut self, nope: Vec<bool>) -> Self {
        self.nope = Some(nope);
        self
    }

    /// The same ropes with a factor on the queries of the NoPE layers (Llama 4's
    /// `attn_temperature_tuning`, [`QueryScale::AttnTemperature`]), checked.
    pub fn with_nope_query_scale(mut self, scale: QueryScale) -> Result<Self> {
        scale.check()?;
        self.nope_query_scale = Some(scale);
        Ok(self)
    }

    /// The same ropes, errors about the ropes per layer type naming `field` (a reader names
    /// the config field or key they came from; default `rope_parameters`).
    pub fn with_field(mut self, field: impl Into<String>) -> Self {
        if let Layers::PerType { field: f, .. } = &mut self.layers {
            *f = field.into();
        }
        self
    }

    /// The same ropes with the keys of their source that nothing read
    /// ([`unknown_keys`](Self::unknown_keys)), as a reader reports them; kept sorted, once
    /// each.
    pub fn with_unknown_keys(mut self, mut keys: Vec<String>) -> Self {
        keys.sort();
        keys.dedup();
        self.unknown_keys = keys;
        self
    }

    /// The keys of the source the ropes were read from that nothing read, as paths from its
    /// root, sorted (`candle-pe-formats` lists the keys of a `config.json`'s rope dicts that
    /// neither the rope type nor the reader reads: a misspelt field,
    /// `rope_scaling.beta_fastt`). They are not errors: transformers warns about them and
    /// reads on. Empty for ropes built in code.
    pub fn unknown_keys(&self) -> &[String] {
        &self.unknown_keys
    }

    /// Per layer, whether it has no rotary embedding (NoPE), when the ropes say.
    pub fn nope_layers(&self) -> Option<&[bool]> {
        self.nope.as_deref()
    }

    /// The ropes per layer type (`None` for a NoPE type) and the field errors name for them;
    /// `None` for ropes that are one for every layer.
    pub fn per_type(&self) -> Option<(&str, &BTreeMap<String, Option<RopeConfig>>)> {
        match &self.layers {
            Layers::Single(_) => None,
            Layers::PerType { field, configs } => Some((field, configs)),
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

    /// The rope of the layers of type `layer_type` (`full_attention`, `sliding_attention`);
    /// `None` when that type has no rotary embedding (a NoPE layer type, given as `null`).
    /// A type all of whose layers are NoPE (Llama 4's `full_attention`) is `None` too.
    pub fn for_layer_type(&self, layer_type: &str) -> Result<Option<&RopeConfig>> {
        if let (Some(types), Some(nope)) = (&self.layer_types, &self.nope) {
            let mut of_type = types.iter().zip(nope).filter(|(t, _)| *t == layer_type);
            if of_type.clone().next().is_some() && of_type.all(|(_, &n)| n) {
                return Ok(None);
            }
        }
        match &self.layers {
            Layers::Single(c) => match &self.layer_types {
                Some(types) if !types.iter().any(|t| t == layer_type) => Err(Error::Config {
                    field: "layer_types".into(),
                    message: format!("no layer has type {layer_type:?}"),
                }),
                _ => Ok(Some(c)),
            },
            Layers::PerType { field, configs } => match configs.get(layer_type) {
                Some(c) => Ok(c.as_ref()),
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

    /// The number of layers, when the config says (`layer_types`, `no_rope_layers` or
    /// `num_hidden_layers`).
    pub fn num_layers(&self) -> Option<usize> {
        self.layer_types
            .as_ref()
            .map(Vec::len)
            .or(self.nope.as_ref().map(Vec::len))
    }

    /// The rope of layer `index` (counted from 0), by its type in `layer_types`; `None` for a
    /// layer without rotary embedding (NoPE: Llama 4's and SmolLM3's `no_rope_layers`, a NoPE
    /// layer type). The module docs build both kinds and ask.
    pub fn for_layer(&self, index: usize) -> Result<Option<&RopeConfig>> {
        if let Some(nope) = &self.nope {
            match nope.get(index) {
                Some(true) => return Ok(None),
                Some(false) => {}
                None => return Err(past_last("no_rope_layers", index, nope.len())),
            }
        }
        match (&self.layer_types, &self.layers) {
            (Some(types), _) => match types.get(index) {
                Some(t) => self.for_layer_type(t),
                None => Err(past_last("layer_types", index, types.len())),
            },
            (None, Layers::Single(c)) => Ok(Some(c)),
            (None, Layers::PerType { .. }) => Err(Error::MissingParameter {
                name: "layer_types",
                needed_by: "picking a layer's rope by index (give layer_types, or \
                            num_hidden_layers with sliding_window_pattern)",
            }),
        }
    }

    /// The factor on the queries of layer `index` at each position, if it has one: its rope's
    /// ([`RopeConfig::query_scale`], Ministral 3), or on a NoPE layer Llama 4's
    /// `attn_temperature_tuning` ([`QueryScale::AttnTemperature`]).
    pub fn query_scale(&self, index: usize) -> Result<Option<QueryScale>> {
        Ok(match self.for_layer(index)? {
            Some(c) => c.query_scale,
            None => self.nope_query_scale,
        })
    }
}

fn past_last(field: &str, index: usize, layers: usize) -> Error {
    Error::Config {
        field: field.into(),
        message: format!("layer {index} is past the last of the {layers} layers"),
    }
}
