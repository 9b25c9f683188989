//! A [`RopeOverride`] on a `config.json`, as a transformers user applies one: by editing the
//! rope dict the config's rope is read from (`rope_parameters`, else `rope_scaling`; the
//! `full_attention` entry of one keyed by layer type) and `rope_theta`, then reading the
//! config as transformers does. Sliding-window layers with a rope of their own keep it.
//!
//! The fields are written as transformers names them: `rope_scale` is `factor`,
//! `yarn_orig_ctx` is `original_max_position_embeddings`, `yarn_beta_fast` and `yarn_beta_slow`
//! are `beta_fast` and `beta_slow`, and `yarn_attn_factor` is `attention_factor` (which replaces
//! YaRN's default magnitude, as in transformers). A new rope type starts from a dict holding
//! only what the override gives; the same type keeps the checkpoint's other parameters.

use serde_json::{Map, Value};

use candle_pe_core::{RopeConfigs, RopeType};

use super::rope_dicts::field_names;
use crate::rope_override::full_rope;
use crate::{FromHfConfig, HfTextConfig, Result, RopeOverride, RopeScaling};

impl RopeOverride {
    /// `config` (a parsed `config.json`) with the override written into its rope, as
    /// transformers would read it (see the module docs). An empty override returns it as it
    /// is; a field the rope type in use gives no meaning to is an error naming it.
    pub fn apply_to_config(&self, config: &Value) -> Result<Value> {
        self.check_values()?;
        let mut config = config.clone();
        if self.is_empty() {
            return Ok(config);
        }
        // The checkpoint's rope type as the reader reads it (Phi-3's `yarn` is longrope).
        let configs = RopeConfigs::from_hf_config(&config)?;
        let checkpoint = full_rope(&configs).map_or(RopeType::Default, |c| c.rope_type.clone());
        let kept = match &checkpoint {
            RopeType::Default => RopeScaling::None,
            RopeType::Linear(_) => RopeScaling::Linear,
            RopeType::Yarn(_) => RopeScaling::Yarn,
            RopeType::Dynamic(_) => RopeScaling::Dynamic,
            RopeType::Llama3(_) => RopeScaling::Llama3,
            // Types no override field applies to: every field but the base is refused.
            _ => RopeScaling::None,
        };
        match self.rope_scaling {
            Some(s) => self.check_meaning(s, s.name(), false)?,
            None => self.check_meaning(kept, checkpoint.name(), true)?,
        }
        let text_path = HfTextConfig::from_hf_config(&config)?
            .fields()
            .path()
            .to_string();
        let text = match text_path.as_str() {
            "" => &mut config,
            path => &mut config[path],
        };
        let Some(text) = text.as_object_mut() else {
            return Ok(config);
        };
        // transformers 5 writes rope_theta into rope_parameters; older configs at the top.
        let in_dict = text.get("rope_parameters").is_some_and(Value::is_object);
        let dict = rope_dict(text);
        self.write_dict(dict, &checkpoint);
        if let Some(base) = self.rope_freq_base {
            let base = Value::from(base);
            if in_dict || dict.contains_key("rope_theta") {
                dict.insert("rope_theta".into(), base.clone());
            }
            if text.contains_key("rope_theta") || !in_dict {
                text.insert("rope_theta".into(), base);
            }
        }
        Ok(config)
    }

    /// Writes the override's type and parameters into the rope dict `dict`, whose type was
    /// `checkpoint`. A new type drops the old one's keys (those it writes itself with, and the
    /// legacy `type`).
    fn write_dict(&self, dict: &mut Map<String, Value>, checkpoint: &RopeType) {
        if let Some(s) = self.rope_scaling {
            let name = match s {
                RopeScaling::None => "default",
                s => s.name(),
            };
            if name != checkpoint.name() {
                let keys = field_names(checkpoint);
                dict.retain(|k, _| k != "type" && !keys.contains(k));
            }
            dict.insert("rope_type".into(), name.into());
        }
        let numbers = [
            ("factor", self.rope_scale),
            ("beta_fast", self.yarn_beta_fast),
            ("beta_slow", self.yarn_beta_slow),
            ("attention_factor", self.yarn_attn_factor),
        ];
        for (key, value) in numbers {
            if let Some(v) = value {
                dict.insert(key.into(), v.into());
            }
        }
        if let Some(n) = self.yarn_orig_ctx {
            dict.insert("original_max_position_embeddings".into(), n.into());
        }
    }
}

/// The rope dict of the text config `text` (`rope_parameters`, its `full_attention` entry when
/// keyed by layer type, else `rope_scaling`), made when there is none.
fn rope_dict(text: &mut Map<String, Value>) -> &mut Map<String, Value> {
    let name = match text.get("rope_parameters") {
        Some(Value::Object(_)) => "rope_parameters",
        _ => "rope_scaling",
    };
    if !text.get(name).is_some_and(Value::is_object) {
        text.insert(name.into(), Value::Object(Map::new()));
    }
    let dict = text.get_mut(name).and_then(Value::as_object_mut);
    let dict = dict.expect("made an object above");
    if dict.get("full_attention").is_some_and(Value::is_object) {
        return dict
            .get_mut("full_attention")
            .and_then(Value::as_object_mut)
            .expect("checked an object");
    }
    dict
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_field_without_meaning_is_refused() {
        let json = serde_json::json!({"head_dim": 64, "rope_theta": 10000.0});
        let yarn_on_default = RopeOverride {
            yarn_beta_fast: Some(16.0),
            ..RopeOverride::default()
        };
        let err = yarn_on_default.apply_to_config(&json).unwrap_err();
        assert!(err.to_string().contains("yarn_beta_fast"), "{err}");
    }
}
