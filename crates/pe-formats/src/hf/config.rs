//! [`RopeConfig`]s read from HF `config.json` ([`FromHfConfig`]), as transformers reads them.
//!
//! It reads the head dim (`head_dim`; DeepSeek's `qk_rope_head_dim`; Gemma 4's
//! `global_head_dim` for full-attention layers; or the model type's default, Gemma 1-3's 256,
//! or `hidden_size / num_attention_heads`),
//! `rope_theta`, `partial_rotary_factor`, `max_position_embeddings`, and the rope type with its
//! parameters from `rope_scaling` (keyed by `rope_type`, or the older `type`) or transformers 5's
//! `rope_parameters` (which may also carry `rope_theta`, `partial_rotary_factor` and the M-RoPE
//! fields), as transformers reads them; each rope type reads its own fields, with their
//! defaults and legacy spellings (`rope_dicts.rs`). Vision-language configs are read from their
//! `text_config` ([`HfTextConfig`]). What a `model_type` changes (defaults, layer types, which
//! rope type a dict reads as) is its row of [`HfModelType`]; this reader names no model type.
//! A field that is `null` is absent. A field of the wrong type, a missing one, a value given in
//! the rope dict and at the top level that disagrees, or an unknown `rope_type` is an error
//! naming the field ([`ConfigFields`]). A key of a rope dict that nothing reads is
//! not an error, as in transformers: [`RopeConfigs::unknown_keys`] lists it.
//!
//! [`RopeConfigs`] reads models with one rope per layer type (Gemma 3, Gemma 4); [`HfRope`]
//! gives the same with where each value came from, recorded as it was read.
//!
//! ```
//! use candle_pe_core::{RopeConfig, RopeType};
//! use candle_pe_formats::FromHfConfig;
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

use std::collections::{BTreeMap, BTreeSet};

use candle_pe_core::Error as CoreError;
use candle_pe_core::{
    MropeSlots, PairLayout, QueryScale, RopeConfig, RopeConfigs, RopeType, MAX_LAYERS,
};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

use super::model_types::{
    HfModelType, HfTextConfig, LegacyUses, RopeSwitch, Sliding, SlidingOnly, Windowless,
};
use super::rope_dicts::{field_names, read_rope_dict};
use crate::{ConfigFields, Error, Result, ValueSource};

/// A value read from an HF `config.json` (parsed with `serde_json`), as transformers reads it.
/// Import it to call `from_hf_config` on [`RopeConfig`], [`RopeConfigs`] and
/// [`QwenVlConfig`](crate::QwenVlConfig). ([`HfTextConfig::from_hf_config`], a view into the
/// config, borrows it and is its own.)
pub trait FromHfConfig: Sized {
    /// The value `config` describes; a field of the wrong type, a missing one, or one whose
    /// value cannot be honoured is an error naming the field.
    fn from_hf_config(config: &Value) -> Result<Self>;
}

/// A value serde reads through [`FromHfConfig`]: the same reader, the same errors, for code that
/// deserializes a config inside a larger document.
///
/// ```
/// use candle_pe_core::RopeConfig;
/// use candle_pe_formats::HfConfig;
///
/// let text = r#"{"head_dim": 64, "rope_theta": 1e6}"#;
/// let HfConfig(config) = serde_json::from_str::<HfConfig<RopeConfig>>(text)?;
/// assert_eq!(config, RopeConfig::new(64, 1e6));
/// let err = serde_json::from_str::<HfConfig<RopeConfig>>(r#"{"head_dim": -64}"#).unwrap_err();
/// assert!(err.to_string().contains("config field head_dim"), "{err}");
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct HfConfig<T>(pub T);

impl<'de, T: FromHfConfig> Deserialize<'de> for HfConfig<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        T::from_hf_config(&value)
            .map(HfConfig)
            .map_err(serde::de::Error::custom)
    }
}

impl FromHfConfig for RopeConfig {
    /// The config of a model with one rotary embedding for all its layers, from its HF
    /// `config.json` (see the module docs for the fields read). A config with one rope per
    /// layer type (Gemma 3, Gemma 4) is an error naming the field that says so: read it with
    /// [`RopeConfigs::from_hf_config`].
    fn from_hf_config(config: &Value) -> Result<Self> {
        let configs = RopeConfigs::from_hf_config(config)?;
        let nope = configs.nope_layers().unwrap_or_default();
        if let Some(layer) = nope.iter().position(|&n| n) {
            return Err(Error::Core(CoreError::Config {
                field: "no_rope_layers".into(),
                message: format!(
                    "layer {layer} has no rotary embedding (NoPE): read the config with \
                     RopeConfigs::from_hf_config, then for_layer"
                ),
            }));
        }
        match configs.per_type() {
            None => Ok(configs.single().expect("one rope").clone()),
            Some((field, configs)) => Err(Error::Core(CoreError::Config {
                field: field.to_string(),
                message: format!(
                    "the config sets one rope per layer type ({}): read it with \
                     RopeConfigs::from_hf_config, then for_layer_type or for_layer",
                    configs.keys().cloned().collect::<Vec<_>>().join(", ")
                ),
            })),
        }
    }
}

/// Every rotary embedding of a model, per layer ([`RopeConfigs`]), from its HF `config.json`:
/// one for all layers (most models), or one per layer type (Gemma 3, Gemma 4:
/// `full_attention`, `sliding_attention`), in the transformers 5 form (`rope_parameters` keyed by
/// layer type, with `layer_types`) or the legacy Gemma 3 form (`rope_theta` for full layers,
/// `rope_local_base_freq` for sliding ones, `rope_scaling` for full layers only, and
/// `sliding_window_pattern` when `layer_types` is absent); NoPE layers from `no_rope_layers`
/// or the model type's default (SmolLM3: every 4th layer). The keys of the rope dicts that
/// nothing reads are [`RopeConfigs::unknown_keys`].
///
/// ```
/// use candle_pe_core::RopeConfigs;
/// use candle_pe_formats::FromHfConfig;
///
/// let gemma3: serde_json::Value = serde_json::from_str(r#"{"head_dim": 256,
///   "num_hidden_layers": 12, "sliding_window_pattern": 6, "rope_theta": 1000000.0,
///   "rope_local_base_freq": 10000.0, "rope_scaling": {"rope_type": "linear", "factor": 8.0}}"#)?;
/// let configs = RopeConfigs::from_hf_config(&gemma3)?;
/// assert_eq!(configs.for_layer(5)?.unwrap().rope_type.name(), "linear"); // full attention
/// assert_eq!(configs.for_layer(0)?.unwrap().rope_theta, 10000.0); // sliding
///
/// let smollm3 = serde_json::json!({"model_type": "smollm3", "head_dim": 128,
///     "num_hidden_layers": 8, "rope_theta": 2e6});
/// let configs = RopeConfigs::from_hf_config(&smollm3)?;
/// assert!(configs.for_layer(3)?.is_none()); // every 4th layer is NoPE by default
///
/// let json = serde_json::json!({"head_dim": 64, "max_position_embeddings": 32768,
///     "rope_scaling": {"rope_type": "yarn", "factor": 8.0, "beta_fastt": 64,
///         "original_max_position_embeddings": 4096}});
/// let configs = RopeConfigs::from_hf_config(&json)?;
/// assert_eq!(configs.unknown_keys(), ["rope_scaling.beta_fastt"]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
impl FromHfConfig for RopeConfigs {
    /// The rotary embeddings an HF `config.json` describes (also read from its `text_config`,
    /// as vision-language models nest it).
    fn from_hf_config(config: &Value) -> Result<Self> {
        HfRope::from_hf_config(config).map(|rope| rope.configs)
    }
}

/// A model's rotary embeddings read from its HF `config.json`, with where each value came
/// from: the field (`rope_parameters.full_attention.rope_theta`,
/// `per_layer_config.5.head_dim`), or `default (...)` where none gave it. The reader records
/// each source as it reads the value, so that `pe inspect` names what was read.
///
/// ```
/// use candle_pe_formats::{FromHfConfig, HfRope};
///
/// let json = serde_json::json!({"model_type": "qwen3", "hidden_size": 2048,
///     "num_attention_heads": 16, "rope_scaling": {"rope_type": "linear", "factor": 2.0}});
/// let rope = HfRope::from_hf_config(&json)?;
/// let source = |value: &str| {
///     rope.sources.iter().find(|s| s.value == value).map(|s| s.source.as_str())
/// };
/// assert_eq!(source("rope_type"), Some("rope_scaling.rope_type"));
/// assert_eq!(source("head_dim"), Some("default (the model type's: 128)"));
/// assert_eq!(source("rope_theta"), Some("default (the model type's: 10000)"));
/// # Ok::<(), candle_pe_formats::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct HfRope {
    /// The ropes per layer, as [`RopeConfigs::from_hf_config`] gives them.
    pub configs: RopeConfigs,
    /// Where each value came from: per layer type (`None`: every layer) its `rope_theta`,
    /// `head_dim`, `partial_rotary_factor`, `max_position_embeddings` and `rope_type`.
    pub sources: Vec<ValueSource>,
}

impl FromHfConfig for HfRope {
    fn from_hf_config(config: &Value) -> Result<Self> {
        let text = HfTextConfig::from_hf_config(config)?;
        read_model(text.fields(), text.model_type())
    }
}

/// What reading a config's ropes notes besides them: the keys of its rope dicts that nothing
/// reads, and where each value came from.
#[derive(Default)]
struct Notes {
    unknown: Vec<String>,
    sources: Vec<ValueSource>,
}

/// One rope the reader reads: for the layers of `layer_type` (every layer when `None`), its
/// `rope_theta` as `theta` says, and `unscaled` the source its rope type is noted with where no
/// dict gives one.
#[derive(Clone, Copy)]
struct RopeFor<'s> {
    layer_type: Option<&'s str>,
    theta: Theta<'s>,
    unscaled: &'static str,
}

/// Where a rope's `rope_theta` comes from.
#[derive(Clone, Copy)]
enum Theta<'s> {
    /// The rope dict's `rope_theta`, else the root's field of this name, else the model type's
    /// default.
    Field(&'s str),
    /// A value its caller read, whatever the dict gives, and where from (an older keyed-by-use
    /// config's theta per use, as its class converts it).
    Read(f64, &'s str),
}

impl<'s> RopeFor<'s> {
    /// The rope of the layers of `layer_type`, its theta from `rope_theta`.
    fn layers(layer_type: Option<&'s str>) -> Self {
        Self {
            layer_type,
            theta: Theta::Field(ROPE_THETA),
            unscaled: "default (unscaled)",
        }
    }

    fn theta(self, theta: Theta<'s>) -> Self {
        Self { theta, ..self }
    }

    fn unscaled(self, unscaled: &'static str) -> Self {
        Self { unscaled, ..self }
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

/// The layer types for `layers` layers, every `pattern`-th one full attention: the last of
/// each `pattern` (Gemma), or the first (`first_full`: ModernBERT); and the last layer too
/// where `last_full` (Gemma 4).
pub(crate) fn pattern_layer_types(
    layers: usize,
    pattern: usize,
    first_full: bool,
    last_full: bool,
) -> Vec<String> {
    (0..layers)
        .map(|i| {
            let at = if first_full { i } else { i + 1 };
            let full = (pattern > 0 && at % pattern == 0) || (last_full && i + 1 == layers);
            if full {
                "full_attention"
            } else {
                "sliding_attention"
            }
            .to_string()
        })
        .collect()
}

/// The top-level field a layer's `rope_theta` comes from when its rope dict does not give it:
/// `rope_theta`, or in the older form of layers of two types the field [`Sliding`] names
/// (Gemma 3's `rope_local_base_freq` for its sliding layers). Where none gives it, the model
/// type's default applies ([`HfModelType`]'s `rope_theta`).
const ROPE_THETA: &str = "rope_theta";

/// The ropes of the text config `root`, whose model type's row is `model_type`.
fn read_model(root: &ConfigFields, model_type: &HfModelType) -> Result<HfRope> {
    let overrides = Overrides::read(root)?;
    let mut notes = Notes::default();
    let (mut configs, layer_types) = read_layers(root, model_type, &overrides, &mut notes)?;
    let nope = read_nope(root, model_type, layer_types.as_deref())?;
    if let Some(layer_types) = layer_types {
        configs = configs.with_layer_types(layer_types);
    }
    if let Some(nope) = nope {
        configs = configs.with_nope_layers(nope);
    }
    if let Some(scale) = read_attn_temperature(root, model_type)? {
        configs = configs.with_nope_query_scale(scale)?;
    }
    // A dict read for several layer types reports its unknown keys once.
    let mut seen = BTreeSet::new();
    notes.unknown.retain(|key| seen.insert(key.clone()));
    Ok(HfRope {
        configs: configs.with_unknown_keys(notes.unknown),
        sources: notes.sources,
    })
}

/// Per layer, whether it is NoPE: every layer where the row's rope switch is off
/// (GraniteMoeHybrid's `position_embedding_type`, Zamba2's `use_mem_rope`, OLMo Hybrid's null
/// `rope_theta`); on a model whose attention turns only its sliding layers, the others
/// ([`SlidingOnly`]); else `no_rope_layers` (1 for rotary, 0 for none, as transformers reads
/// it), or where the model type's row says so (Llama 4, SmolLM3, Mistral Large 4) every
/// `no_rope_layer_interval`-th layer (the row's default).
fn read_nope(
    root: &ConfigFields,
    model_type: &HfModelType,
    layer_types: Option<&[String]>,
) -> Result<Option<Vec<bool>>> {
    if let Some(switch) = model_type.rope_switch {
        if !rope_is_on(root, switch) {
            let layers = num_layers(root)?.ok_or_else(|| {
                root.invalid(
                    "num_hidden_layers",
                    "required: the rope is switched off, and every layer is NoPE",
                )
            })?;
            return Ok(Some(vec![true; layers]));
        }
    }
    if let Some(rule) = model_type.sliding_only {
        return read_sliding_only(root, &rule, layer_types);
    }
    if let Some(list) = root.get::<Vec<i64>>("no_rope_layers")? {
        if !list.is_empty() {
            return Ok(Some(list.iter().map(|&r| r == 0).collect()));
        }
    }
    match model_type.nope_interval {
        Some(default_interval) => {
            every_nth_layer(root, Some("no_rope_layer_interval"), default_interval)
        }
        None => Ok(None),
    }
}

/// Whether a model that builds its rotary embedding on a condition builds it.
fn rope_is_on(root: &ConfigFields, switch: RopeSwitch) -> bool {
    match switch {
        RopeSwitch::Field(field, on) => match root.value(field) {
            Some(Value::String(s)) => s == on,
            Some(Value::Bool(b)) => b.to_string() == on,
            _ => false,
        },
        RopeSwitch::Theta => {
            let dict = ["rope_parameters", "rope_scaling"]
                .into_iter()
                .find_map(|key| root.value(key).and_then(Value::as_object));
            match dict.and_then(|d| d.get("rope_theta")) {
                Some(theta) => !theta.is_null(),
                None => !root.is_null("rope_theta"),
            }
        }
    }
}

/// The NoPE layers of a model that turns only its sliding layers: the `full_attention` ones of
/// `layer_types` (else of the row's pattern), every layer or none where `sliding_window` is
/// null (the row says which), less Cohere 2 MoE's dense prefix.
fn read_sliding_only(
    root: &ConfigFields,
    rule: &SlidingOnly,
    layer_types: Option<&[String]>,
) -> Result<Option<Vec<bool>>> {
    let full: Vec<bool> = match (layer_types, rule.pattern) {
        (Some(types), _) => types.iter().map(|t| t == "full_attention").collect(),
        (None, Some((field, default))) => match every_nth_layer(root, field, default)? {
            Some(full) => full,
            None => return Ok(None),
        },
        (None, None) if root.has("num_hidden_layers") => {
            return Err(root.invalid(
                "layer_types",
                "required: this model turns only its sliding layers, and its class's default \
                 pattern is not read",
            ))
        }
        (None, None) => return Ok(None),
    };
    // An absent window is the class's default, not none.
    let windowless = root.is_null("sliding_window");
    let mut nope = match (windowless, rule.windowless) {
        (true, Windowless::EveryLayer) => vec![false; full.len()],
        (true, Windowless::NoLayer) => vec![true; full.len()],
        _ => full,
    };
    if rule.dense_prefix
        && root
            .get::<u64>("prefix_dense_sliding_window_pattern")?
            .unwrap_or(1)
            == 1
    {
        for (layer, dense) in nope.iter_mut().zip(dense_layers(root)?) {
            *layer &= !dense;
        }
    }
    Ok(Some(nope))
}

/// Per layer, whether its MLP is dense: `mlp_layer_types` (`"dense"`), else the first
/// `first_k_dense_replace` layers (Cohere 2 MoE's class).
fn dense_layers(root: &ConfigFields) -> Result<Vec<bool>> {
    if let Some(types) = root.get::<Vec<String>>("mlp_layer_types")? {
        return Ok(types.iter().map(|t| t == "dense").collect());
    }
    let k = root.get::<usize>("first_k_dense_replace")?.unwrap_or(0);
    Ok((0..num_layers(root)?.unwrap_or(0)).map(|i| i < k).collect())
}

/// Per layer, whether it is the last of its period, `(i + 1) % n == 0`, `n` the count in
/// `field` (at least 1) or `default` (without a field, where the class fixes `n`); `None`
/// without `num_hidden_layers`.
fn every_nth_layer(
    root: &ConfigFields,
    field: Option<&str>,
    default: usize,
) -> Result<Option<Vec<bool>>> {
    let n = match field {
        Some(field) => match root.get::<usize>(field)?.unwrap_or(default) {
            0 => return Err(root.invalid(field, "must be at least 1, got 0")),
            n => n,
        },
        None => default,
    };
    let layers = num_layers(root)?;
    Ok(layers.map(|layers| (0..layers).map(|i| (i + 1) % n == 0).collect()))
}

/// `num_hidden_layers`, which per-layer lists are made from: at most [`MAX_LAYERS`].
fn num_layers(root: &ConfigFields) -> Result<Option<usize>> {
    match root.get::<usize>("num_hidden_layers")? {
        Some(n) if n > MAX_LAYERS => Err(root.invalid(
            "num_hidden_layers",
            format!("{n} layers: at most {MAX_LAYERS} are read"),
        )),
        n => Ok(n),
    }
}

/// Llama 4's query temperature on its NoPE layers: `attn_temperature_tuning` (default on, a
/// bool or, in early configs, a number), `floor_scale` (8192) and `attn_scale` (0.1), where the
/// model type's row says the model has it.
fn read_attn_temperature(
    root: &ConfigFields,
    model_type: &HfModelType,
) -> Result<Option<QueryScale>> {
    if !model_type.attn_temperature {
        return Ok(None);
    }
    let on = match root.value("attn_temperature_tuning") {
        None => true,
        Some(Value::Bool(b)) => *b,
        Some(Value::Number(n)) => n.as_f64() != Some(0.0),
        Some(other) => {
            return Err(root.invalid(
                "attn_temperature_tuning",
                format!("must be a bool, got {other}"),
            ))
        }
    };
    if !on {
        return Ok(None);
    }
    let scale = QueryScale::AttnTemperature {
        floor_scale: root.get("floor_scale")?.unwrap_or(8192),
        attn_scale: root.get("attn_scale")?.unwrap_or(0.1),
    };
    scale.check()?;
    Ok(Some(scale))
}

/// The fields a layer's rope is read from, which `per_layer_config` may override.
const ROPE_FIELDS: [&str; 12] = [
    "head_dim",
    "global_head_dim",
    "qk_rope_head_dim",
    "hidden_size",
    "num_attention_heads",
    "rope_theta",
    "rope_local_base_freq",
    "partial_rotary_factor",
    "max_position_embeddings",
    "mrope_section",
    "mrope_interleaved",
    "rope_interleave",
];

/// transformers 5's `per_layer_config`: per layer index, the fields of the root that layer
/// overrides (only those a rope reads are kept).
struct Overrides {
    /// Layer index, the override's path (`per_layer_config.5`) and its rope fields.
    layers: BTreeMap<usize, (String, Map<String, Value>)>,
}

/// A root to read a layer's rope from: the config's own, or one with a layer's overrides
/// (the root's fields with them, the root's path, and the entry's path and fields).
enum LayerRoot<'a, 'o> {
    Given(ConfigFields<'a>),
    Overridden {
        fields: Map<String, Value>,
        path: String,
        entry: &'o (String, Map<String, Value>),
    },
}

impl LayerRoot<'_, '_> {
    fn fields(&self) -> ConfigFields<'_> {
        match self {
            LayerRoot::Given(f) => f.clone(),
            LayerRoot::Overridden { fields, path, .. } => {
                ConfigFields::converted(fields, path.clone())
            }
        }
    }

    /// The path and fields of the `per_layer_config` entry, where the root holds one.
    fn overridden(&self) -> Option<(&str, &Map<String, Value>)> {
        match self {
            LayerRoot::Given(_) => None,
            LayerRoot::Overridden { entry, .. } => Some((entry.0.as_str(), &entry.1)),
        }
    }
}

impl Overrides {
    fn read(root: &ConfigFields) -> Result<Self> {
        let mut layers = BTreeMap::new();
        let Some(per_layer) = root.object("per_layer_config")? else {
            return Ok(Self { layers });
        };
        for key in per_layer.keys() {
            let index: usize = key
                .parse()
                .map_err(|_| per_layer.invalid(key, "keys must be layer indices (0, 1, ...)"))?;
            let Some(fields) = per_layer.object(key)? else {
                continue;
            };
            for refused in ["rope_parameters", "rope_scaling"] {
                if fields.has(refused) {
                    return Err(fields.invalid(
                        refused,
                        "a per-layer rope dict is not read; give it per layer type in \
                         rope_parameters",
                    ));
                }
            }
            let kept: Map<String, Value> = ROPE_FIELDS
                .iter()
                .filter_map(|&f| fields.value(f).map(|v| (f.to_string(), v.clone())))
                .collect();
            if !kept.is_empty() {
                layers.insert(index, (fields.path().to_string(), kept));
            }
        }
        Ok(Self { layers })
    }

    /// The rope fields layer `i` overrides (`None`: none, as an entry without any is not kept).
    fn of(&self, i: usize) -> Option<&Map<String, Value>> {
        self.layers.get(&i).map(|(_, fields)| fields)
    }

    /// Whether the first `count` layers do not all override the same fields alike.
    fn vary(&self, count: usize) -> bool {
        (1..count).any(|i| self.of(i) != self.of(0))
    }

    /// The root the layers of `layer_type` (every layer when `None`) read their rope from: the
    /// overrides they share; layers of one type whose overrides differ are an error naming two
    /// of them.
    fn root<'a>(
        &self,
        root: &ConfigFields<'a>,
        layer_types: Option<&[String]>,
        layer_type: Option<&str>,
    ) -> Result<LayerRoot<'a, '_>> {
        if self.layers.is_empty() {
            return Ok(LayerRoot::Given(root.clone()));
        }
        let of_type = |i: usize| match (layer_types, layer_type) {
            (Some(types), Some(t)) => types.get(i).is_some_and(|ti| ti == t),
            _ => true,
        };
        let count = layer_types.map(<[String]>::len);
        let Some(count) = count else {
            return Err(Error::Core(CoreError::MissingParameter {
                name: "layer_types",
                needed_by: "per_layer_config: which layers share a rope (give layer_types)",
            }));
        };
        let indices: Vec<usize> = (0..count).filter(|&i| of_type(i)).collect();
        if let Some(&first) = indices.first() {
            if let Some(&other) = indices.iter().find(|&&i| self.of(i) != self.of(first)) {
                let show = |i: usize| Value::Object(self.of(i).cloned().unwrap_or_default());
                return Err(Error::Core(CoreError::Config {
                    field: "per_layer_config".into(),
                    message: format!(
                        "layers {first} and {other} are both {} but override the rope's \
                         fields differently ({} vs {}): one rope per layer type",
                        layer_type.unwrap_or("layers of the one rope"),
                        show(first),
                        show(other)
                    ),
                }));
            }
            if let Some(&past) = self.layers.keys().find(|&&i| i >= count) {
                return Err(Error::Core(CoreError::Config {
                    field: format!("per_layer_config.{past}"),
                    message: format!("layer {past} is past the last of the {count} layers"),
                }));
            }
            if let Some(entry) = self.layers.get(&first) {
                let mut fields = root_map(root);
                if entry.1.contains_key("head_dim") {
                    // The layer's own head_dim replaces the global one Gemma 4 used to give.
                    fields.remove("global_head_dim");
                }
                fields.extend(entry.1.clone());
                let path = root.path().to_string();
                return Ok(LayerRoot::Overridden {
                    fields,
                    path,
                    entry,
                });
            }
        }
        Ok(LayerRoot::Given(root.clone()))
    }
}

/// The fields of `root` (the config's root, or any object in it) as a JSON map.
fn root_map(root: &ConfigFields) -> Map<String, Value> {
    root.keys()
        .filter_map(|k| root.value(k).map(|v| (k.to_string(), v.clone())))
        .collect()
}

/// The ropes of a model's layers, and its `layer_types`; `overrides` gives the root a layer type
/// reads its fields from (transformers 5's `per_layer_config`). The keys of the rope dicts that
/// nothing reads, and where each value came from, are noted in `notes`.
fn read_layers(
    root: &ConfigFields,
    model_type: &HfModelType,
    overrides: &Overrides,
    notes: &mut Notes,
) -> Result<(RopeConfigs, Option<Vec<String>>)> {
    let mut layer_types = read_layer_types(root, model_type)?;
    let given = rope_dict(root)?;
    // Without a rope dict, the one its config class fills in, if it has one.
    let filled = match given {
        Some(_) => None,
        None => model_type.filled_rope_dict()?,
    };
    let params = match &filled {
        Some(dict) => Some(ConfigFields::converted(
            dict,
            root.path_of("rope_parameters"),
        )),
        None => given,
    };
    let reader = Reader {
        root,
        model_type,
        overrides,
        filled: filled.is_some(),
    };
    if let Some(params) = params
        .as_ref()
        .filter(|p| is_nested(p, layer_types.as_deref()))
    {
        if let Some(sliding) = &model_type.sliding {
            implied_layer_types(root, sliding, &mut layer_types)?;
        }
        let layers = reader.per_layer_type(params, layer_types.as_deref(), notes)?;
        return Ok((layers, layer_types));
    }
    if let Some(legacy) = model_type.legacy_uses {
        if layer_types.is_none() {
            layer_types = legacy_layer_types(root, legacy)?;
        }
        let layers = reader.legacy_uses(legacy, params.as_ref(), layer_types.as_deref(), notes)?;
        return Ok((layers, layer_types));
    }
    if !model_type.rope_uses.is_empty() {
        let mut keys: Vec<&str> = model_type.rope_uses.iter().map(|(_, key)| *key).collect();
        keys.dedup();
        return Err(root.invalid(
            "rope_parameters",
            format!(
                "this model type's rope_parameters are keyed by use ({}), as transformers 5 \
                 saves them; a config without them is not read (its legacy rope_scaling \
                 would turn every layer alike)",
                keys.join(", ")
            ),
        ));
    }
    if model_type.sliding.is_some_and(|s| s.keyed_only) {
        // Here the config gives a flat dict (the filled one is keyed): name the one it gives.
        let field = match root.has("rope_parameters") {
            true => "rope_parameters",
            false => "rope_scaling",
        };
        return Err(root.invalid(
            field,
            "a Gemma 4 config's rope_parameters are keyed by layer type \
             (full_attention, sliding_attention); a flat rope dict is not read",
        ));
    }
    let sliding = match model_type.sliding {
        Some(sliding) => Some(sliding),
        None => root
            .has(Sliding::GEMMA3.thetas.1)
            .then_some(Sliding::GEMMA3),
    };
    if let Some(sliding) = sliding {
        implied_layer_types(root, &sliding, &mut layer_types)?;
        let layers =
            reader.legacy_sliding(&sliding, params.as_ref(), layer_types.as_deref(), notes)?;
        return Ok((layers, layer_types));
    }
    // One dict turns every layer alike; where per_layer_config gives the layer types heads
    // of their own (dots3's), each type reads it with its own, as transformers copies it to
    // each.
    if let Some(types) = layer_types.as_deref().filter(|t| overrides.vary(t.len())) {
        let layers = reader.each_type(params.as_ref(), types, notes)?;
        return Ok((layers, layer_types));
    }
    let every_layer = RopeFor::layers(None);
    let config = reader.one(params.as_ref(), layer_types.as_deref(), every_layer, notes)?;
    Ok((RopeConfigs::new(config), layer_types))
}

/// The config's `layer_types`, one per layer: where the model type's row says its saved list
/// gives an `"mlp"` block after each layer's type (Dory), those blocks are taken out, as its
/// config class takes them out.
fn read_layer_types(root: &ConfigFields, model_type: &HfModelType) -> Result<Option<Vec<String>>> {
    let Some(types) = root.get::<Vec<String>>("layer_types")? else {
        return Ok(None);
    };
    if !model_type.mlp_blocks || !types.iter().any(|t| t == "mlp") {
        return Ok(Some(types));
    }
    if let Some(i) = (0..types.len()).find(|&i| (i % 2 == 1) != (types[i] == "mlp")) {
        return Err(root.invalid(
            "layer_types",
            format!(
                "with \"mlp\" blocks, every other entry is \"mlp\", after each layer's type; \
                 entry {i} is {:?}",
                types[i]
            ),
        ));
    }
    Ok(Some(types.into_iter().step_by(2).collect()))
}

/// The layer types of an older keyed-by-use config (DeepSeek-V4's): those of its per-layer ints
/// (`compress_ratios`), an int the row does not know being an error naming its entry; `None`
/// where it gives none.
fn legacy_layer_types(root: &ConfigFields, legacy: &LegacyUses) -> Result<Option<Vec<String>>> {
    let (field, types) = legacy.layer_ints;
    let Some(ints) = root.get::<Vec<u64>>(field)? else {
        return Ok(None);
    };
    let layer_type = |(i, n): (usize, &u64)| {
        types
            .iter()
            .find(|(k, _)| k == n)
            .map(|(_, t)| t.to_string())
            .ok_or_else(|| {
                let known: Vec<String> = types.iter().map(|(k, _)| k.to_string()).collect();
                root.invalid(
                    field,
                    format!("entry {i} is {n}: each is one of {}", known.join(", ")),
                )
            })
    };
    ints.iter()
        .enumerate()
        .map(layer_type)
        .collect::<Result<Vec<_>>>()
        .map(Some)
}

/// The rope dict: `rope_parameters`, else `rope_scaling`. Both are read, so that either one not
/// being an object is an error.
fn rope_dict<'a>(root: &ConfigFields<'a>) -> Result<Option<ConfigFields<'a>>> {
    Ok(
        match (
            root.object("rope_parameters")?,
            root.object("rope_scaling")?,
        ) {
            (Some(p), _) | (None, Some(p)) => Some(p),
            (None, None) => None,
        },
    )
}

/// Without `layer_types`, the list `sliding`'s pattern field (Gemma's
/// `sliding_window_pattern`, ModernBERT's `global_attn_every_n_layers`, or its default) implies
/// for `num_hidden_layers` layers.
fn implied_layer_types(
    root: &ConfigFields,
    sliding: &Sliding,
    layer_types: &mut Option<Vec<String>>,
) -> Result<()> {
    if layer_types.is_none() {
        let (field, default) = sliding.pattern;
        let pattern = match field {
            Some(field) => root.get::<usize>(field)?.unwrap_or(default),
            None => default,
        };
        if let Some(layers) = num_layers(root)? {
            *layer_types = Some(pattern_layer_types(
                layers,
                pattern,
                sliding.first_full,
                sliding.last_full,
            ));
        }
    }
    Ok(())
}

/// What every rope of a config is read with: its root, its model type's row and the layers'
/// overrides; `filled` where the rope dict is the one the config class fills in.
struct Reader<'r, 'a> {
    root: &'r ConfigFields<'a>,
    model_type: &'r HfModelType,
    overrides: &'r Overrides,
    filled: bool,
}

impl Reader<'_, '_> {
    /// The rope `rope` asks for, from the rope dict `dict`.
    fn one(
        &self,
        dict: Option<&ConfigFields>,
        layer_types: Option<&[String]>,
        rope: RopeFor,
        notes: &mut Notes,
    ) -> Result<RopeConfig> {
        let layer_root = self
            .overrides
            .root(self.root, layer_types, rope.layer_type)?;
        let head = Head {
            root: &layer_root.fields().with_aliases(self.model_type.aliases),
            overridden: layer_root.overridden(),
            dict,
            model_type: self.model_type,
            filled: self.filled,
        };
        head.read(rope, notes)
    }

    /// transformers 5's form: one rope dict per layer type in `params` (`null` for a layer
    /// type without rotary); or, where the model type keys them by use (DeepSeek-V4's `main`
    /// and `compress`), each layer type of its row's `rope_uses` takes the dict of its key, and
    /// a key that no layer type uses is reported unknown.
    fn per_layer_type(
        &self,
        params: &ConfigFields,
        layer_types: Option<&[String]>,
        notes: &mut Notes,
    ) -> Result<RopeConfigs> {
        let uses: Vec<(&str, &str)> = match self.model_type.rope_uses {
            [] => params.keys().map(|t| (t, t)).collect(),
            uses => {
                if let Some((_, key)) = uses.iter().find(|(_, k)| !params.keys().any(|p| p == *k)) {
                    return Err(params.missing(key));
                }
                notes.unknown.extend(
                    params
                        .keys()
                        .filter(|p| !uses.iter().any(|(_, k)| k == p))
                        .map(|p| params.path_of(p)),
                );
                uses.to_vec()
            }
        };
        let mut configs = BTreeMap::new();
        for (layer_type, key) in uses {
            let config = match params.object(key)? {
                None => None,
                Some(dict) => {
                    let rope = RopeFor::layers(Some(layer_type));
                    Some(self.one(Some(&dict), layer_types, rope, notes)?)
                }
            };
            configs.insert(layer_type.to_string(), config);
        }
        Ok(RopeConfigs::per_layer_type(configs)?.with_field(params.path()))
    }

    /// The one rope dict `dict` (none: the root's fields alone) for each of the layer types
    /// `types`, each read with its layers' overrides.
    fn each_type(
        &self,
        dict: Option<&ConfigFields>,
        types: &[String],
        notes: &mut Notes,
    ) -> Result<RopeConfigs> {
        let mut configs = BTreeMap::new();
        for layer_type in types {
            if !configs.contains_key(layer_type) {
                let rope = RopeFor::layers(Some(layer_type));
                let config = self.one(dict, Some(types), rope, notes)?;
                configs.insert(layer_type.clone(), Some(config));
            }
        }
        let field = self.root.path_of("per_layer_config");
        Ok(RopeConfigs::per_layer_type(configs)?.with_field(field))
    }

    /// The older form of a keyed-by-use config, as its class converts it (DeepSeek-V4's
    /// original checkpoints): each use's `rope_theta` from its top-level field (its default when
    /// absent), the legacy rope dict `params` for the `scaled` use only (a YaRN there turning at
    /// `attention_factor` 1 unless the dict gives one), the other uses plain; each layer type
    /// of the row's `rope_uses` takes its use's rope.
    fn legacy_uses(
        &self,
        legacy: &LegacyUses,
        params: Option<&ConfigFields>,
        layer_types: Option<&[String]>,
        notes: &mut Notes,
    ) -> Result<RopeConfigs> {
        let mut configs = BTreeMap::new();
        for &(layer_type, key) in self.model_type.rope_uses {
            let Some((theta, default)) = legacy.theta_of(key) else {
                return Err(self
                    .root
                    .invalid("model_type", format!("no theta for the use {key}")));
            };
            // This use's theta, whatever the dict gives, as transformers converts it.
            let rope_theta = self.root.get::<f64>(theta)?.unwrap_or(default);
            let source = match self.root.has(theta) {
                true => self.root.path_of(theta),
                false => format!("default (the field's: {default})"),
            };
            let rope = RopeFor::layers(Some(layer_type)).theta(Theta::Read(rope_theta, &source));
            let config = match params.filter(|_| key == legacy.scaled) {
                Some(dict) => {
                    // A YaRN here turns at attention factor 1 where the dict gives none.
                    let mut fields = root_map(dict);
                    let kind = fields.get("rope_type").or(fields.get("type"));
                    if kind.and_then(Value::as_str) == Some("yarn") {
                        fields.entry("attention_factor").or_insert(1.0.into());
                    }
                    let converted = ConfigFields::converted(&fields, dict.path().to_string());
                    self.one(Some(&converted), layer_types, rope, notes)?
                }
                None => self.one(None, layer_types, rope, notes)?,
            };
            configs.insert(layer_type.to_string(), Some(config));
        }
        let field = self.root.path_of(legacy.layer_ints.0);
        Ok(RopeConfigs::per_layer_type(configs)?.with_field(field))
    }

    /// The older form of layers of two types (`sliding`): the full layers' `rope_theta` from
    /// its full field and the sliding layers' from its sliding one (each with the model type's
    /// default), the rope dict `params` turning the full layers (and the sliding ones where
    /// `sliding.scales_sliding`).
    fn legacy_sliding(
        &self,
        sliding: &Sliding,
        params: Option<&ConfigFields>,
        layer_types: Option<&[String]>,
        notes: &mut Notes,
    ) -> Result<RopeConfigs> {
        let (full_theta, sliding_theta) = sliding.thetas;
        let full = RopeFor::layers(Some("full_attention")).theta(Theta::Field(full_theta));
        let full = self.one(params, layer_types, full, notes)?;
        let mut of_sliding =
            RopeFor::layers(Some("sliding_attention")).theta(Theta::Field(sliding_theta));
        if !sliding.scales_sliding {
            of_sliding = of_sliding.unscaled(
                "default (unscaled: in this form the sliding layers take no rope_scaling)",
            );
        }
        let scaled = params.filter(|_| sliding.scales_sliding);
        let sliding_rope = self.one(scaled, layer_types, of_sliding, notes)?;
        let configs = [
            ("full_attention".to_string(), Some(full)),
            ("sliding_attention".to_string(), Some(sliding_rope)),
        ];
        let field = self.root.path_of(sliding_theta);
        Ok(RopeConfigs::per_layer_type(configs)?.with_field(field))
    }
}

/// The keys a rope dict may give whatever its type, read by [`Head::read`] and
/// [`RopeType::from_dict`].
const DICT_KEYS: [&str; 6] = [
    "rope_type",
    "type",
    "rope_theta",
    "partial_rotary_factor",
    "mrope_section",
    "mrope_interleaved",
];

/// The keys read with `llama_4_scaling_beta` (Ministral 3, Mistral 4), and the
/// `max_position_embeddings` their configs repeat in the dict (which their transformers config
/// classes ignore, as the top-level one is read).
const QUERY_SCALE_KEYS: [&str; 3] = [
    "llama_4_scaling_beta",
    "original_max_position_embeddings",
    "max_position_embeddings",
];

/// The paths of the keys of `dict` that nothing reads for `rope_type`: not one of
/// [`DICT_KEYS`], not a field of the type (as it writes itself), and not a query-scale key.
fn unknown_keys(dict: &ConfigFields, rope_type: &RopeType) -> Vec<String> {
    let fields = field_names(rope_type);
    let query_scale = dict.has("llama_4_scaling_beta");
    dict.keys()
        .filter(|&k| dict.has(k) && !DICT_KEYS.contains(&k) && !fields.iter().any(|f| f == k))
        .filter(|k| !(query_scale && QUERY_SCALE_KEYS.contains(k)))
        .map(|k| dict.path_of(k))
        .collect()
}

/// The fields one rope is read from: the root of its layers (with their overrides), its rope
/// dict, and the row of the model type; `filled` where the dict is the one the config class
/// fills in, whose fields win over the root's; `overridden`, the path and fields of the
/// `per_layer_config` entry the root holds, where it holds one.
struct Head<'r, 'a> {
    root: &'r ConfigFields<'a>,
    overridden: Option<(&'r str, &'r Map<String, Value>)>,
    dict: Option<&'r ConfigFields<'r>>,
    model_type: &'r HfModelType,
    filled: bool,
}

impl Head<'_, '_> {
    /// The rope `rope` asks for: the root's head and context fields with the rope dict, and
    /// its `rope_theta` ([`Head::theta`]); the keys of the dict that nothing reads, and where
    /// each value came from, are noted.
    fn read(&self, rope: RopeFor, notes: &mut Notes) -> Result<RopeConfig> {
        let (root, model_type) = (self.root, self.model_type);
        let layer_type = rope.layer_type;
        let (head_dim, partial_rotary_factor, head_source) = self.head(layer_type)?;
        let rope_type = match self.dict {
            Some(dict) => read_rope_dict(dict, root, model_type)?,
            None => RopeType::Default,
        };
        if let Some(dict) = self.dict.filter(|_| !self.filled) {
            notes.unknown.extend(unknown_keys(dict, &rope_type));
        }
        let mrope_section = self
            .either("mrope_section", "mrope_section")?
            .or_else(|| model_type.mrope_section.map(<[usize]>::to_vec));
        let interleaved: Option<bool> = self.either("mrope_interleaved", "mrope_interleaved")?;
        let query_scale = self.query_scale()?;
        let (rope_theta, theta_source) = self.theta(rope)?;
        self.note_sources(rope, theta_source, head_source, notes);
        Ok(RopeConfig {
            head_dim,
            rope_theta,
            partial_rotary_factor,
            max_position_embeddings: root.get("max_position_embeddings")?,
            rope_type,
            mrope_section,
            mrope_slots: match interleaved {
                Some(true) => MropeSlots::Alternating,
                _ => model_type.mrope_slots,
            },
            pair_layout: match root.get("rope_interleave")? {
                Some(true) => PairLayout::Interleaved,
                Some(false) => PairLayout::Halves,
                None => model_type.pair_layout,
            },
            query_scale,
        })
    }

    /// The rope's `rope_theta` and where it came from: the value `rope.theta` gives its caller
    /// read, or the dict's or the root's field (the model type's default where neither gives
    /// it).
    fn theta(&self, rope: RopeFor) -> Result<(f64, String)> {
        let theta = match rope.theta {
            Theta::Read(value, source) => return Ok((value, source.to_string())),
            Theta::Field(theta) => theta,
        };
        // Ropes keyed by use: the top-level rope_theta is the main rope's, and fills the
        // dicts that give none (transformers' setdefault), so it does not disagree with them.
        let given = match self.dict {
            Some(dict) if !self.model_type.rope_uses.is_empty() => {
                self.dict_else_root(dict, "rope_theta", theta)?
            }
            _ => self.either("rope_theta", theta)?,
        };
        let rope_theta = match given {
            Some(rope_theta) => rope_theta,
            None => self
                .model_type
                .rope_theta_default(rope.layer_type)
                .ok_or_else(|| match self.dict {
                    Some(dict) => dict.missing("rope_theta"),
                    None => self.root.missing(theta),
                })?,
        };
        let source = self
            .source("rope_theta", theta)
            .unwrap_or_else(|| format!("default (the model type's: {rope_theta})"));
        Ok((rope_theta, source))
    }

    /// The field `name` of the rope dict or `top_name` of the root; transformers 5 moves
    /// rope_theta, partial_rotary_factor and the M-RoPE fields into the rope dict, and a value
    /// given at both levels must agree. In the dict the config class fills in, the dict's
    /// value wins and the root's only fills a field it lacks (transformers' setdefault).
    fn either<T: DeserializeOwned + PartialEq>(
        &self,
        name: &str,
        top_name: &str,
    ) -> Result<Option<T>> {
        match self.dict {
            Some(dict) if self.filled => self.dict_else_root(dict, name, top_name),
            Some(dict) => dict.either(name, self.root, top_name),
            None => self.root.get(top_name),
        }
    }

    /// The field `name` of `dict`, else `top_name` of the root: transformers' setdefault, the
    /// root's value only filling a dict that gives none.
    fn dict_else_root<T: DeserializeOwned>(
        &self,
        dict: &ConfigFields,
        name: &str,
        top_name: &str,
    ) -> Result<Option<T>> {
        match dict.get(name)? {
            Some(value) => Ok(Some(value)),
            None => self.root.get(top_name),
        }
    }

    /// Where the values of the rope `rope` come from, as [`Head::read`] read them
    /// (`theta_source`, where [`Head::theta`] found its theta; `head_source`, where
    /// [`Head::head`] found the width).
    fn note_sources(
        &self,
        rope: RopeFor,
        theta_source: String,
        head_source: String,
        notes: &mut Notes,
    ) {
        let (model_type, layer_type) = (self.model_type, rope.layer_type);
        let partial = "partial_rotary_factor";
        let partial = self.source(partial, partial).unwrap_or_else(|| {
            match model_type.partial_rotary_factor_default(layer_type) {
                1.0 => "default (1)".into(),
                factor => format!("default (the model type's: {factor})"),
            }
        });
        let rope_type = ["rope_type", "type"]
            .into_iter()
            .find_map(|name| self.in_dict(name))
            .unwrap_or_else(|| rope.unscaled.into());
        let context = self.at_root("max_position_embeddings");
        let values = [
            ("rope_theta", theta_source),
            ("head_dim", head_source),
            ("partial_rotary_factor", partial),
            (
                "max_position_embeddings",
                context.unwrap_or_else(|| "none".into()),
            ),
            ("rope_type", rope_type),
        ];
        notes
            .sources
            .extend(values.map(|(value, source)| ValueSource {
                layer_type: layer_type.map(str::to_string),
                value,
                source,
            }));
    }

    /// The path of the rope dict's field `name`, where it gives it (the dict the config class
    /// fills in named as the model type's default).
    fn in_dict(&self, name: &str) -> Option<String> {
        let dict = self.dict.filter(|d| d.has(name))?;
        Some(match self.filled {
            true => format!("default (the model type's) {}", dict.path_of(name)),
            false => dict.path_of(name),
        })
    }

    /// The path of the root's field `name`: the `per_layer_config` entry's where that
    /// overrides it.
    fn root_path(&self, name: &str) -> String {
        match self.overridden {
            Some((path, fields)) if fields.contains_key(name) => format!("{path}.{name}"),
            _ => self.root.path_of(name),
        }
    }

    /// [`Head::root_path`] of `name`, where the root gives it.
    fn at_root(&self, name: &str) -> Option<String> {
        self.root.has(name).then(|| self.root_path(name))
    }

    /// Where [`Head::either`] (and `dict_else_root`) finds `name` or `top_name`.
    fn source(&self, name: &str, top_name: &str) -> Option<String> {
        self.in_dict(name).or_else(|| self.at_root(top_name))
    }

    /// Where the attention's width ([`HfModelType`]'s `head_dim`) comes from: `head_dim`, the
    /// model type's default, or the heads' share.
    fn attention_head_source(&self) -> String {
        self.at_root("head_dim")
            .unwrap_or_else(|| match self.model_type.head_dim_default() {
                Some(d) => format!("default (the model type's: {d})"),
                None => format!(
                    "{} / {}",
                    self.root_path("hidden_size"),
                    self.root_path("num_attention_heads")
                ),
            })
    }

    /// The fields that give `name`: the rope dict where it has it, else the root.
    fn holder(&self, name: &str) -> &ConfigFields<'_> {
        match self.dict {
            Some(dict) if dict.has(name) => dict,
            _ => self.root,
        }
    }

    /// The head's width and the share of it that turns (`partial_rotary_factor`, else the
    /// model type's default, 1 for most):
    /// Gemma 4's `global_head_dim` on full-attention layers, else DeepSeek's `qk_rope_head_dim`
    /// (multi-head latent attention: the slice of the head that turns, whole), else the
    /// attention's (`head_dim`, the model type's default, or `hidden_size /
    /// num_attention_heads`).
    ///
    /// A `partial_rotary_factor` beside `qk_rope_head_dim` is transformers' share of the whole
    /// head (Mistral 4, DeepSeek-V4: `head_dim` times the factor is `qk_rope_head_dim`), so it
    /// must come to that slice, which then turns whole. The width's source comes with them.
    fn head(&self, layer_type: Option<&str>) -> Result<(usize, f64, String)> {
        let name = "partial_rotary_factor";
        let partial = match self.either(name, name)? {
            Some(partial) => partial,
            None => self.model_type.partial_rotary_factor_default(layer_type),
        };
        if !(partial > 0.0 && partial <= 1.0) {
            return Err(self.holder(name).invalid(
                name,
                format!("the share of the head that turns, in (0, 1], got {partial}"),
            ));
        }
        let global = match layer_type {
            Some("full_attention") => self.root.get::<usize>("global_head_dim")?,
            _ => None,
        };
        let rope_head_dim = self.root.get::<usize>("qk_rope_head_dim")?;
        // Read even where another field wins, so that one of the wrong type is an error.
        self.root.get::<usize>("head_dim")?;
        match (global, rope_head_dim) {
            (Some(d), _) => Ok((d, partial, self.root_path("global_head_dim"))),
            (None, None) => {
                let d = self.model_type.head_dim(self.root)?;
                Ok((d, partial, self.attention_head_source()))
            }
            (None, Some(d)) if partial == 1.0 => Ok((d, 1.0, self.root_path("qk_rope_head_dim"))),
            (None, Some(d)) => {
                let whole = self.model_type.head_dim(self.root)?;
                if (whole as f64 * partial) as usize == d {
                    return Ok((d, 1.0, self.root_path("qk_rope_head_dim")));
                }
                Err(self.holder(name).invalid(
                    name,
                    format!(
                        "{partial} of the head's {whole} channels is not qk_rope_head_dim \
                         ({d}), the channels that turn"
                    ),
                ))
            }
        }
    }

    /// The query scale `llama_4_scaling_beta` gives (Ministral 3, Mistral 4), with its
    /// `original_max_position_embeddings`; read only beside a rope dict.
    fn query_scale(&self) -> Result<Option<QueryScale>> {
        let Some(dict) = self.dict else {
            return Ok(None);
        };
        let beta = "llama_4_scaling_beta";
        let Some(beta) = dict.either::<f64>(beta, self.root, beta)? else {
            return Ok(None);
        };
        let original = "original_max_position_embeddings";
        let original = dict
            .either::<usize>(original, self.root, original)?
            .ok_or(Error::Core(CoreError::MissingParameter {
                name: "original_max_position_embeddings",
                needed_by: "llama_4_scaling_beta's query scale",
            }))?;
        let scale = QueryScale::Llama4Scaling {
            beta,
            original_max_position_embeddings: original,
        };
        scale.check()?;
        Ok(Some(scale))
    }
}
