//! How HF `config.json` names and reads each rope type ([`RopeType`]): a `ReadRope` impl per
//! type gives the names a config uses for it (its `rope_type`, then legacy ones) and how it
//! reads the type's fields from the rope dict (`rope_scaling` / `rope_parameters`): defaults,
//! fields also taken from the top level, and what a model type's row changes. The engine
//! (`candle-pe-core`) owns each type's parameters and mathematics; this file owns its spelling.
//!
//! A new rope type is, here, its `ReadRope` impl and a line of `TYPES`.
//!
//! ```
//! use candle_pe_core::{RopeConfig, RopeType};
//! use candle_pe_formats::FromHfConfig;
//!
//! // HunYuan labels fixed NTK `dynamic` with an `alpha`.
//! let json = serde_json::json!({"head_dim": 128, "rope_theta": 10000.0,
//!     "max_position_embeddings": 32768,
//!     "rope_scaling": {"type": "dynamic", "alpha": 1000.0, "factor": 1.0}});
//! let config = RopeConfig::from_hf_config(&json)?;
//! assert!(matches!(config.rope_type, RopeType::NtkAlpha(a) if a.alpha == 1000.0));
//! # Ok::<(), candle_pe_formats::Error>(())
//! ```

use candle_pe_core::{
    Dynamic, LinearScaling, Llama3, Longrope, NtkAlpha, Proportional, RopeType, Yarn,
};
use serde::de::DeserializeOwned;

use crate::{ConfigFields, Error, HfModelType, Result};

/// A rope type as a config names and reads it.
pub(crate) trait ReadRope: Sized {
    /// Its HF `rope_type`, then the older names transformers reads as it.
    const NAMES: &'static [&'static str];
    /// Whether `dict` is of this type; by default, whether its name is one of [`Self::NAMES`].
    fn claims(dict: &RopeDict) -> bool {
        Self::NAMES.contains(&dict.name())
    }
    /// The type's fields, from `dict`.
    fn read(dict: &RopeDict) -> Result<Self>;
}

/// A rope dict (HF `rope_scaling` / `rope_parameters`) as a type reads it: its fields, the
/// type's name as the config spells it, and the model's top-level fields.
pub(crate) struct RopeDict<'a> {
    name: String,
    fields: &'a ConfigFields<'a>,
    top: &'a ConfigFields<'a>,
    /// The row of the config's `model_type`: some names read differently per model, as
    /// transformers' config classes read them.
    model_type: &'a HfModelType,
}

impl RopeDict<'_> {
    /// The type's name as the config spells it (`rope_type`, or the older `type`), or the type
    /// the model type's row reads that spelling as (Phi-3's `yarn`: `longrope`).
    fn name(&self) -> &str {
        &self.name
    }

    /// Whether the dict gives the field `name`.
    fn has(&self, name: &str) -> bool {
        self.fields.has(name)
    }

    /// The dict's field `name`, `None` when absent.
    fn get<T: DeserializeOwned>(&self, name: &str) -> Result<Option<T>> {
        self.fields.get(name)
    }

    /// The dict's field `name`, which must be given.
    fn require<T: DeserializeOwned>(&self, name: &str) -> Result<T> {
        self.fields.require(name)
    }

    /// The field `name` of the dict or of the top level (Phi-3 gives
    /// `original_max_position_embeddings` there); both must agree.
    fn either<T: DeserializeOwned + PartialEq>(&self, name: &str) -> Result<Option<T>> {
        self.fields.either(name, self.top, name)
    }

    /// The top level's field `name`.
    fn top<T: DeserializeOwned>(&self, name: &str) -> Result<Option<T>> {
        self.top.get(name)
    }

    fn missing(&self, name: &str) -> Error {
        self.fields.missing(name)
    }
}

/// The type a rope dict gives (`fields`, in a config whose top level is `top`), read by
/// the type that claims its `rope_type` (or legacy `type`; `default` when neither is given).
pub(crate) fn read_rope_dict(
    fields: &ConfigFields,
    top: &ConfigFields,
    model_type: &HfModelType,
) -> Result<RopeType> {
    // transformers 5 saves a legacy `type` beside the `rope_type` it maps it to (Qwen2-VL's
    // `"type": "mrope"` beside `"rope_type": "default"`): two names of one type agree.
    let aliases = match (
        fields.get::<String>("rope_type")?,
        fields.get::<String>("type")?,
    ) {
        (Some(a), Some(b)) => TYPES
            .iter()
            .any(|(names, _)| names.contains(&a.as_str()) && names.contains(&b.as_str()))
            .then_some(a),
        _ => None,
    };
    let name: Option<String> = match aliases {
        Some(name) => Some(name),
        None => fields.either("rope_type", fields, "type")?,
    };
    let name = name.unwrap_or_else(|| Unscaled::NAMES[0].into());
    let dict = RopeDict {
        name: model_type.rope_type_name(&name).to_string(),
        fields,
        top,
        model_type,
    };
    for (_, read) in TYPES {
        if let Some(rope_type) = read(&dict) {
            return rope_type;
        }
    }
    let key = if fields.has("rope_type") {
        "rope_type"
    } else {
        "type"
    };
    let supported: Vec<&str> = TYPES.iter().map(|(names, _)| names[0]).collect();
    Err(fields.invalid(
        key,
        format!(
            "rope type {:?} is not supported (supported: {})",
            dict.name,
            supported.join(", ")
        ),
    ))
}

/// Reads a rope dict as one type, if it claims it.
type Reader = fn(&RopeDict) -> Option<Result<RopeType>>;

/// Every rope type, with its names, as config reading looks them up.
const TYPES: [(&[&str], Reader); 8] = [
    (Unscaled::NAMES, |d| {
        read_as(d, |Unscaled| RopeType::Default)
    }),
    (LinearScaling::NAMES, |d| read_as(d, RopeType::Linear)),
    (Dynamic::NAMES, |d| read_as(d, RopeType::Dynamic)),
    (NtkAlpha::NAMES, |d| read_as(d, RopeType::NtkAlpha)),
    (Llama3::NAMES, |d| read_as(d, RopeType::Llama3)),
    (Yarn::NAMES, |d| read_as(d, RopeType::Yarn)),
    (Longrope::NAMES, |d| read_as(d, RopeType::Longrope)),
    (Proportional::NAMES, |d| read_as(d, RopeType::Proportional)),
];

fn read_as<T: ReadRope>(dict: &RopeDict, variant: fn(T) -> RopeType) -> Option<Result<RopeType>> {
    T::claims(dict).then(|| T::read(dict).map(variant))
}

/// The keys a rope dict of `rope_type` has when the type writes itself (its `rope_type` and its
/// fields): the keys it reads.
pub(crate) fn field_names(rope_type: &RopeType) -> Vec<String> {
    match serde_json::to_value(rope_type) {
        Ok(serde_json::Value::Object(fields)) => fields.keys().cloned().collect(),
        _ => Vec::new(),
    }
}

/// [`RopeType::Default`], as a config names it.
struct Unscaled;

/// The field Phi-3 gives at the top level, and which llama3, yarn and longrope read there too.
const ORIGINAL: &str = "original_max_position_embeddings";

impl ReadRope for Unscaled {
    /// transformers reads Qwen2-VL's legacy `mrope` as `default` with `mrope_section`.
    const NAMES: &'static [&'static str] = &["default", "mrope"];

    fn read(dict: &RopeDict) -> Result<Self> {
        if dict.name() == "mrope" && !dict.has("mrope_section") {
            return Err(dict
                .fields
                .invalid("mrope_section", "rope type \"mrope\" needs it"));
        }
        Ok(Unscaled)
    }
}

impl ReadRope for LinearScaling {
    const NAMES: &'static [&'static str] = &["linear"];

    fn read(dict: &RopeDict) -> Result<Self> {
        Ok(Self {
            factor: dict.require("factor")?,
        })
    }
}

impl ReadRope for Dynamic {
    const NAMES: &'static [&'static str] = &["dynamic"];

    /// A `dynamic` dict with `alpha` is [`NtkAlpha`]'s (HunYuan).
    fn claims(dict: &RopeDict) -> bool {
        Self::NAMES.contains(&dict.name()) && !dict.has("alpha")
    }

    fn read(dict: &RopeDict) -> Result<Self> {
        Ok(Self {
            factor: dict.require("factor")?,
        })
    }
}

impl ReadRope for NtkAlpha {
    /// transformers' name, then the one HunYuan's configs give it (with `alpha`).
    const NAMES: &'static [&'static str] = &["ntk_alpha", "dynamic"];

    fn claims(dict: &RopeDict) -> bool {
        dict.name() == Self::NAMES[0] || (dict.name() == Self::NAMES[1] && dict.has("alpha"))
    }

    fn read(dict: &RopeDict) -> Result<Self> {
        Ok(Self {
            alpha: dict.require("alpha")?,
        })
    }
}

impl ReadRope for Llama3 {
    const NAMES: &'static [&'static str] = &["llama3"];

    fn read(dict: &RopeDict) -> Result<Self> {
        Ok(Self {
            factor: dict.require("factor")?,
            low_freq_factor: dict.require("low_freq_factor")?,
            high_freq_factor: dict.require("high_freq_factor")?,
            original_max_position_embeddings: dict
                .either(ORIGINAL)?
                .ok_or_else(|| dict.missing(ORIGINAL))?,
        })
    }
}

impl ReadRope for Yarn {
    const NAMES: &'static [&'static str] = &["yarn"];

    /// A missing `factor` is `max_position_embeddings / original_max_position_embeddings`, as
    /// transformers takes it.
    fn read(dict: &RopeDict) -> Result<Self> {
        let original: Option<usize> = dict.either(ORIGINAL)?;
        let factor = match dict.get("factor")? {
            Some(factor) => factor,
            None => match (dict.top::<usize>("max_position_embeddings")?, original) {
                (Some(max), Some(original)) if original > 0 => max as f64 / original as f64,
                _ => return Err(dict.missing("factor")),
            },
        };
        Ok(Self {
            factor,
            original_max_position_embeddings: original,
            beta_fast: dict.get("beta_fast")?.unwrap_or(Yarn::DEFAULT_BETA_FAST),
            beta_slow: dict.get("beta_slow")?.unwrap_or(Yarn::DEFAULT_BETA_SLOW),
            attention_factor: dict.get("attention_factor")?,
            mscale: dict.get("mscale")?,
            mscale_all_dim: dict.get("mscale_all_dim")?,
            truncate: dict.get("truncate")?.unwrap_or(true),
        })
    }
}

impl ReadRope for Longrope {
    /// Phi-3's legacy `su`.
    const NAMES: &'static [&'static str] = &["longrope", "su"];

    /// A config whose model type's row reads the mscales (`phimoe`) needs `short_mscale` and
    /// `long_mscale` (transformers' `PhimoeConfig.validate_rope` refuses it without them);
    /// other models' configs do not read them.
    fn read(dict: &RopeDict) -> Result<Self> {
        let (short_mscale, long_mscale) = if dict.model_type.mscales {
            (
                Some(dict.require("short_mscale")?),
                Some(dict.require("long_mscale")?),
            )
        } else {
            (None, None)
        };
        Ok(Self {
            short_factor: dict.require("short_factor")?,
            long_factor: dict.require("long_factor")?,
            factor: dict.get("factor")?,
            original_max_position_embeddings: dict.either(ORIGINAL)?,
            attention_factor: dict.get("attention_factor")?,
            short_mscale,
            long_mscale,
        })
    }
}

impl ReadRope for Proportional {
    const NAMES: &'static [&'static str] = &["proportional"];

    fn read(dict: &RopeDict) -> Result<Self> {
        Ok(Self {
            factor: dict.get("factor")?.unwrap_or(1.0),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Each type's first name is the `rope_type` the engine writes for it, so what a config
    /// writes reads back as the same type; a dict of each name is read by its line of `TYPES`.
    #[test]
    fn each_type_reads_under_the_engine_name() {
        let dicts = [
            json!({"rope_type": "default"}),
            json!({"rope_type": "linear", "factor": 2.0}),
            json!({"rope_type": "dynamic", "factor": 2.0}),
            json!({"rope_type": "ntk_alpha", "alpha": 2.0}),
            json!({"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                   "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}),
            json!({"rope_type": "yarn", "factor": 4.0}),
            json!({"rope_type": "longrope", "short_factor": [1.0], "long_factor": [2.0]}),
            json!({"rope_type": "proportional"}),
        ];
        assert_eq!(dicts.len(), TYPES.len());
        for (dict, (names, _)) in dicts.iter().zip(TYPES) {
            let fields = ConfigFields::new(dict).unwrap();
            let rope_type = read_rope_dict(&fields, &fields, HfModelType::of("")).unwrap();
            assert_eq!(rope_type.name(), names[0], "{dict}");
        }
    }
}
