//! The `config.json` reader, each file importing only the ones above it in this list:
//!
//! - `config_fields.rs`: [`ConfigFields`](crate::ConfigFields), the typed reader of JSON
//!   fields behind every error that names a field;
//! - `model_types.rs`: one [`HfModelType`](crate::HfModelType) row per HF `model_type`, and
//!   [`HfTextConfig`](crate::HfTextConfig);
//! - `rope_dicts.rs`: how a rope dict names and spells each rope type;
//! - `config.rs`: [`FromHfConfig`](crate::FromHfConfig) and the reading of a model's ropes per
//!   layer, with where each value came from ([`HfRope`](crate::HfRope));
//! - `sinusoidal.rs`: candle-pe-nn's `SinusoidalEmbeddingConfig`;
//! - `overrides.rs`: a [`RopeOverride`](crate::RopeOverride) written into a `config.json`, as a
//!   transformers user would;
//! - `qwen_vl.rs`: [`QwenVlConfig`](crate::QwenVlConfig) (Qwen-VL's vision fields) and its
//!   M-RoPE position ids, [`QwenVlPositions`](crate::QwenVlPositions);
//! - `vision.rs`: [`VisionRopeConfig`](crate::VisionRopeConfig), the 2-D rope of a vision
//!   tower, one row per tower.

mod config;
mod config_fields;
mod model_types;
mod overrides;
mod qwen_vl;
mod rope_dicts;
mod sinusoidal;
mod vision;

pub(crate) use config::pattern_layer_types;
pub use config::{FromHfConfig, HfConfig, HfRope};
pub use config_fields::ConfigFields;
pub use model_types::{HfModelType, HfTextConfig, LegacyUses, QwenVlVersion, Sliding};
pub use qwen_vl::{QwenVlConfig, QwenVlPositions};
pub use vision::{VisionLayout, VisionRopeConfig};
