//! [`ValueSource`]: where one value of a rope read from a checkpoint came from, as the readers
//! of both formats record it (a GGUF key or tensor, a `config.json` field, or a default).

/// Where one value of a resolved rope came from.
#[derive(Clone, Debug, PartialEq)]
pub struct ValueSource {
    /// The layer type it applies to (`full_attention`, `sliding_attention`), `None` for all.
    pub layer_type: Option<String>,
    /// The value, in the words of [`RopeConfig`](candle_pe_core::RopeConfig) (`rope_theta`,
    /// `rotary_dim`, `factor`, ...).
    pub value: &'static str,
    /// The key, field or tensor it was read from, or `default (...)` when none was given.
    pub source: String,
}
