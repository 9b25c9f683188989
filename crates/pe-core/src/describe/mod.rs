//! The description of a table, checked before anything is generated: the sinusoidal
//! conventions ([`spec`]), the frequencies and where each lands in a row (`freq`, computed in
//! double-double by `exact::dd`; its limits are [`MAX_POSITION`](crate::MAX_POSITION),
//! [`MAX_WIDTH`](crate::MAX_WIDTH) and [`MAX_ANGLE`](crate::MAX_ANGLE)), the positions a
//! request asks for ([`positions`]), what can go wrong ([`error`]), the reader of a config's
//! JSON fields ([`config_fields`]), what each HF `model_type` changes in how its config reads,
//! one row per model type ([`model_types`]), the reader of a GGUF file's metadata
//! ([`gguf_meta`]) and the table of GGUF architectures ([`gguf_arch`]).

pub(crate) mod config_fields;
pub(crate) mod error;
pub(crate) mod freq;
pub(crate) mod gguf_arch;
pub(crate) mod gguf_meta;
pub(crate) mod model_types;
pub(crate) mod positions;
pub(crate) mod spec;
