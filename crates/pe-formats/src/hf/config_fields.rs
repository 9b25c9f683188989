//! [`ConfigFields`]: the reader of JSON config fields (an HF `config.json`) behind every
//! `from_hf_config` of the workspace.
//!
//! A field that is `null` is absent. A field of the wrong type, a missing one, or one given
//! twice with different values (in a nested dict and at the top level, or under two names) is an
//! error naming it by its path from the config's root (`rope_scaling.factor`).
//!
//! ```
//! use candle_pe_core::Error as CoreError;
//! use candle_pe_formats::{ConfigFields, Error};
//!
//! let json = serde_json::json!({"d_model": 512, "rope_theta": 1e4,
//!                               "rope_scaling": {"factor": null, "rope_theta": 1e6}});
//! let root = ConfigFields::new(&json)?;
//! assert_eq!(root.get::<usize>("d_model")?, Some(512));
//! let scaling = root.object("rope_scaling")?.expect("given");
//! assert_eq!(scaling.get::<f64>("factor")?, None); // null is absent
//!
//! let err = root.get::<String>("d_model").unwrap_err();
//! assert!(matches!(err, Error::Core(CoreError::Config { ref field, .. }) if field == "d_model"));
//! let err = scaling.either::<f64>("rope_theta", &root, "rope_theta").unwrap_err();
//! assert!(matches!(err, Error::ConfigConflict { ref field, ref other, .. }
//!     if field == "rope_scaling.rope_theta" && other == "rope_theta"));
//! # Ok::<(), Error>(())
//! ```

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use candle_pe_core::Error as CoreError;

use crate::{Error, Result};

/// The fields of one JSON object of a config, read by name; errors name a field by its path
/// from the config's root.
#[derive(Clone, Debug)]
pub struct ConfigFields<'a> {
    fields: &'a Map<String, Value>,
    /// This object's path from the root; empty at the root.
    path: String,
    /// Fields this config gives under another name: (the name read, the config's name).
    aliases: &'static [(&'static str, &'static str)],
}

impl<'a> ConfigFields<'a> {
    /// The fields of a config's root object; any other JSON value is an error.
    pub fn new(config: &'a Value) -> Result<Self> {
        match config {
            Value::Object(fields) => Ok(Self {
                fields,
                path: String::new(),
                aliases: &[],
            }),
            other => Err(Error::Core(CoreError::Config {
                field: "(root)".into(),
                message: format!("a config must be a JSON object, got {other}"),
            })),
        }
    }

    /// The fields `fields` (a dict converted from a config's own, as transformers converts an
    /// older form) read as if they were the object at `path`, whose fields they mostly are, so
    /// that errors name the config's field.
    pub(crate) fn converted(fields: &'a Map<String, Value>, path: String) -> Self {
        Self {
            fields,
            path,
            aliases: &[],
        }
    }

    /// The same fields, where a field read as `name` is given as `alias` for each `(name, alias)`
    /// of `aliases` that the object does not give under its own name (transformers'
    /// `attribute_map`: JetMoe's `kv_channels` is its `head_dim`). An alias may be a path into
    /// a nested object (DBRX's `attn_config.rope_theta`). Errors name the alias.
    pub(crate) fn with_aliases(mut self, aliases: &'static [(&'static str, &'static str)]) -> Self {
        self.aliases = aliases;
        self
    }

    /// The value at `key`, a field's name or a dotted path into nested objects; `None` when
    /// absent or null, or when a step of the path is not an object.
    fn at(&self, key: &str) -> Option<&'a Value> {
        let mut steps = key.split('.');
        let first = self.fields.get(steps.next()?)?;
        steps
            .try_fold(first, |value, step| value.as_object()?.get(step))
            .filter(|v| !v.is_null())
    }

    /// The key that holds the field `name`: `name`, or its alias where only the alias is given.
    fn key<'n>(&self, name: &'n str) -> &'n str {
        let given = |k: &str| self.at(k).is_some();
        if given(name) {
            return name;
        }
        self.aliases
            .iter()
            .find(|(n, alias)| *n == name && given(alias))
            .map_or(name, |(_, alias)| alias)
    }

    /// This object's path from the root (`rope_scaling`); empty at the root.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The path of the field `name` from the root (`rope_scaling.factor`).
    pub fn path_of(&self, name: &str) -> String {
        let name = self.key(name);
        if self.path.is_empty() {
            name.to_string()
        } else {
            format!("{}.{name}", self.path)
        }
    }

    /// Whether the field `name` is given (and not null).
    pub fn has(&self, name: &str) -> bool {
        self.value(name).is_some()
    }

    /// Whether the field `name` is given as null, not absent: a class's default fills an absent
    /// field, while null can mean "none" (a model without a window).
    pub(crate) fn is_null(&self, name: &str) -> bool {
        self.fields.get(name).is_some_and(Value::is_null)
    }

    /// Every key of the object, null ones too.
    pub fn keys(&self) -> impl Iterator<Item = &'a str> {
        self.fields.keys().map(String::as_str)
    }

    /// The value of the field `name`, `None` when absent or null.
    pub fn value(&self, name: &str) -> Option<&'a Value> {
        self.at(self.key(name))
    }

    /// The field `name`, `None` when absent or null; a value of another type is an error naming
    /// the field.
    pub fn get<T: DeserializeOwned>(&self, name: &str) -> Result<Option<T>> {
        let Some(value) = self.value(name) else {
            return Ok(None);
        };
        T::deserialize(value)
            .map(Some)
            .map_err(|e| self.invalid(name, format!("{e}, got {}", Short(value))))
    }

    /// The field `name`; absent or null, an error naming it.
    pub fn require<T: DeserializeOwned>(&self, name: &str) -> Result<T> {
        self.get(name)?.ok_or_else(|| self.missing(name))
    }

    /// The object in the field `name`, `None` when absent or null; any other value is an error
    /// naming the field.
    pub fn object(&self, name: &str) -> Result<Option<ConfigFields<'a>>> {
        match self.value(name) {
            None => Ok(None),
            Some(Value::Object(fields)) => Ok(Some(ConfigFields {
                fields,
                path: self.path_of(name),
                aliases: &[],
            })),
            Some(other) => {
                Err(self.invalid(name, format!("must be an object, got {}", Short(other))))
            }
        }
    }

    /// One value given under two names, `name` here and `other_name` in `other` (a nested dict
    /// and the top level, or a field and its alias): either one, or both when they are equal
    /// once read; two different values are an error naming both.
    pub fn either<T: DeserializeOwned + PartialEq>(
        &self,
        name: &str,
        other: &ConfigFields<'_>,
        other_name: &str,
    ) -> Result<Option<T>> {
        match (self.get::<T>(name)?, other.get::<T>(other_name)?) {
            (Some(a), Some(b)) if a != b => Err(Error::ConfigConflict {
                field: self.path_of(name),
                value: self.value(name).map(Value::to_string).unwrap_or_default(),
                other: other.path_of(other_name),
                other_value: other
                    .value(other_name)
                    .map(Value::to_string)
                    .unwrap_or_default(),
            }),
            (Some(a), _) => Ok(Some(a)),
            (None, b) => Ok(b),
        }
    }

    /// The error for a field `name` whose value is wrong: `message` says how.
    pub fn invalid(&self, name: &str, message: impl Into<String>) -> Error {
        Error::Core(CoreError::Config {
            field: self.path_of(name),
            message: message.into(),
        })
    }

    /// The error for a field `name` that must be given.
    pub fn missing(&self, name: &str) -> Error {
        Error::MissingField {
            field: self.path_of(name),
        }
    }
}

/// A config value as a message quotes it: its JSON, cut to 60 characters (a field holding a
/// long list or a deep object is not printed whole).
struct Short<'a>(&'a Value);

impl std::fmt::Display for Short<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        const MAX: usize = 60;
        let text = self.0.to_string();
        match text.char_indices().nth(MAX) {
            Some((cut, _)) => write!(f, "{} ...", &text[..cut]),
            None => f.write_str(&text),
        }
    }
}
