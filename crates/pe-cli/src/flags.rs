//! The one map from pe-core's errors to the flags that set the value at fault, shared by every
//! subcommand of `pe` and the examples. It reads the error's variant and fields (a parameter's `name`), never its
//! message, so a change of wording in pe-core cannot change which flag the CLI names.
//!
//! A parameter's flag is its config field in kebab case (`rope_theta` is `--rope-theta`),
//! except for the names in [`FIELDS`]. What an error about a width, the frequencies or the
//! positions is called depends on the subcommand: its [`Flags`] say.

use candle_pe_core::Error;
use candle_pe_formats::Error as FormatsError;

/// pe-core parameter names whose flag is not the name in kebab case, and their flags.
const FIELDS: &[(&str, &str)] = &[
    ("frequencies shift", "--frequencies"),
    (
        "head_dim * partial_rotary_factor (the rotary dim)",
        "--head-dim / --partial-rotary-factor / --rotary-dim",
    ),
    ("grid height", "--grid"),
    ("grid width", "--grid"),
    ("grid frames", "--grid"),
    ("alibi_bias_max", "--max-bias"),
    ("base_height", "--crop-base"),
    ("base_width", "--crop-base"),
];

/// What a subcommand's flags are, for the errors pe-core reports without a parameter name.
#[derive(Clone, Debug, Default)]
pub struct Flags {
    /// The flag of the table's width ([`Error::InvalidWidth`]): `--width` or `--head-dim`.
    pub width: Option<&'static str>,
    /// The flags that scale the frequencies ([`Error::FrequencyOutOfRange`]).
    pub frequencies: Option<&'static str>,
    /// The flags that give the positions, with their values ([`Error::PositionOutOfRange`],
    /// and with the angle scale for [`Error::AngleOutOfRange`]).
    pub positions: Option<String>,
    /// The flag of the row count, with its value ([`Error::TooLarge`]).
    pub rows: Option<String>,
    /// The flag of the token ids ([`Error::TokenOutOfRange`]).
    pub tokens: Option<&'static str>,
    /// Whether a config's fields are flags here (`pe rope` without `--config`): an error about
    /// a config field ([`Error::Config`]) names the field's flag.
    pub config_fields: bool,
    /// The flag of the file a rope was read from, with its path (`--gguf model.gguf`), for the
    /// errors about a GGUF file's keys and tensors.
    pub file: Option<String>,
    /// The flag for every other pe-core error, if the subcommand has one.
    pub other: Option<&'static str>,
    /// Whether the subcommand takes the sinusoidal spec flags (`--odd`, `--frequencies`),
    /// which fix an odd or degenerate width.
    pub spec: bool,
}

impl Flags {
    /// The flag (or flags, `--a / --b`) that set the value `err` is about, `None` when no flag
    /// does.
    pub fn of(&self, err: &Error) -> Option<String> {
        let named = match err {
            Error::InvalidParameter { name, .. } | Error::MissingParameter { name, .. } => {
                parameter(name)
            }
            Error::InvalidWidth { .. } => self.width.map(str::to_string),
            Error::FrequencyOutOfRange { .. } => self.frequencies.map(str::to_string),
            Error::TimestepOutOfRange { .. } => Some("--timesteps".to_string()),
            Error::CoordinateOutOfRange { .. } => self.positions.clone(),
            Error::PositionOutOfRange { .. } => self.positions.clone(),
            Error::AngleOutOfRange { .. } => {
                let positions = self.positions.as_deref()?;
                Some(format!("{positions} / --angle-scale"))
            }
            Error::TooLarge { .. } => self.rows.clone(),
            Error::TokenOutOfRange { .. } => self.tokens.map(str::to_string),
            Error::Config { field, .. } if self.config_fields => {
                // `short_factor[3]` is set by `--short-factor`.
                parameter(field.split('[').next().unwrap_or(field))
            }
            _ => None,
        };
        named.or_else(|| self.other.map(str::to_string))
    }

    /// The flag (or flags) that set the value a reader's error `err` is about: the engine's
    /// error's ([`of`](Self::of)) for one it carries, the file's for a GGUF key.
    pub fn of_format(&self, err: &FormatsError) -> Option<String> {
        let named = match err {
            FormatsError::Core(core) => return self.of(core),
            // An override's fields are llama.cpp's flags in snake case.
            FormatsError::Override { field, .. } => Some(crate::override_flag(field)),
            FormatsError::GgufKey { .. }
            | FormatsError::GgufMissing { .. }
            | FormatsError::GgufConflict { .. } => self.file.clone(),
            _ => None,
        };
        named.or_else(|| self.other.map(str::to_string))
    }

    /// `err` with the flag at fault in front (`--base: base must be ...`) when it is one of
    /// pe-core's or pe-formats' errors (directly, or carried by a candle error) and a flag
    /// sets its value; otherwise unchanged. An odd or degenerate width gets the flags that fix
    /// it after it.
    pub fn name(&self, err: impl Into<anyhow::Error>) -> anyhow::Error {
        let err = err.into();
        let candle = err.downcast_ref::<candle_core::Error>();
        let format = err
            .downcast_ref::<FormatsError>()
            .or_else(|| candle.and_then(FormatsError::from_candle));
        let core = err
            .downcast_ref::<Error>()
            .or_else(|| candle.and_then(Error::from_candle))
            .or_else(|| format.and_then(FormatsError::core));
        let Some(core) = core else {
            return match format.and_then(|f| self.of_format(f)) {
                Some(flag) => err.context(flag),
                None => err,
            };
        };
        if let Some(fix) = fix(core).filter(|_| self.spec) {
            return anyhow::anyhow!("{core} (with pe: {fix})");
        }
        match (self.of(core), core) {
            // A field given as a flag is not a "config field": the flag, then what is wrong.
            (Some(flag), Error::Config { field, message }) => {
                let entry = field.find('[').map(|i| &field[i..]);
                match entry {
                    Some(entry) => anyhow::anyhow!("{flag}: entry {entry} {message}"),
                    None => anyhow::anyhow!("{flag}: {message}"),
                }
            }
            (Some(flag), _) => err.context(flag),
            (None, _) => err,
        }
    }
}

/// The flag of a pe-core parameter: [`FIELDS`], else a config field's name in kebab case;
/// `None` for a name that is not a field (a formula or a description).
fn parameter(name: &str) -> Option<String> {
    if let Some((_, flag)) = FIELDS.iter().find(|(field, _)| *field == name) {
        return Some(flag.to_string());
    }
    let is_field = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    is_field.then(|| format!("--{}", name.replace('_', "-")))
}

/// For errors whose fix is another choice of flags rather than one flag's value: the flags.
fn fix(err: &Error) -> Option<&'static str> {
    match err {
        Error::OddWidthRejected { .. } => {
            Some("pass --odd split or --odd zero-pad, or an even --width")
        }
        Error::DegenerateFrequencies { .. } => Some(
            "pass a larger --width, or --frequencies h-minus-1-guarded or \
             h-shift:S",
        ),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn invalid(name: &'static str) -> Error {
        Error::InvalidParameter {
            name,
            expected: "finite and > 0",
            value: -1.0,
        }
    }

    #[test]
    fn parameters_are_their_fields() {
        let none = Flags::default();
        assert_eq!(none.of(&invalid("factor")).as_deref(), Some("--factor"));
        assert_eq!(
            none.of(&invalid("low_freq_factor")).as_deref(),
            Some("--low-freq-factor")
        );
        assert_eq!(
            none.of(&invalid(
                "head_dim * partial_rotary_factor (the rotary dim)"
            ))
            .as_deref(),
            Some("--head-dim / --partial-rotary-factor / --rotary-dim")
        );
        assert_eq!(
            none.of(&invalid("frequencies shift")).as_deref(),
            Some("--frequencies")
        );
        assert_eq!(none.of(&invalid("attention factor")), None);
        let err = none.name(invalid("rope_theta"));
        assert_eq!(
            format!("{err:#}"),
            "--rope-theta: rope_theta must be finite and > 0, got -1"
        );
    }

    #[test]
    fn the_subcommand_names_the_rest() {
        let rope = Flags {
            width: Some("--head-dim"),
            rows: Some("--len".into()),
            ..Flags::default()
        };
        let width = Error::InvalidWidth { width: 0, max: 8 };
        assert_eq!(rope.of(&width).as_deref(), Some("--head-dim"));
        assert_eq!(Flags::default().of(&width), None);
        let grid = Flags {
            other: Some("--width"),
            ..Flags::default()
        };
        assert_eq!(grid.of(&width).as_deref(), Some("--width"));
        // Config fields are flags only where the subcommand says so.
        let field = |field: &str| Error::Config {
            field: field.into(),
            message: "must be finite and > 0, got -2".into(),
        };
        assert_eq!(rope.of(&field("short_factor[1]")), None);
        let flag_mode = Flags {
            config_fields: true,
            ..rope.clone()
        };
        assert_eq!(
            format!("{:#}", flag_mode.name(field("short_factor[1]"))),
            "--short-factor: entry [1] must be finite and > 0, got -2"
        );
        assert_eq!(
            format!("{:#}", flag_mode.name(field("long_factor"))),
            "--long-factor: must be finite and > 0, got -2"
        );
        let rope_nd = Flags {
            positions: Some("--positions".into()),
            ..Flags::default()
        };
        let coordinate = Error::CoordinateOutOfRange {
            value: f64::NAN,
            index: 4,
        };
        assert_eq!(rope_nd.of(&coordinate).as_deref(), Some("--positions"));
        // Carried through candle: found all the same.
        let carried: candle_core::Error = width.into();
        assert_eq!(
            format!("{:#}", rope.name(carried)),
            "--head-dim: width must be in 1 ..= 8, got width 0"
        );
    }
}
