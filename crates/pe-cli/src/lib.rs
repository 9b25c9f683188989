//! What `pe` and the workspace's example programs share about their command lines: the one
//! map from the libraries' errors to the flags that set the value at fault ([`Flags`]), and
//! the one-line rendering of every failure ([`parse_args`] and [`finish`], which a program's
//! `main` calls, and [`clap_line`] and [`error_line`] under them), and llama.cpp's rope
//! override flags ([`RopeOverrideArgs`]). The `pe` binary
//! itself is `src/main.rs`.
//!
//! ```
//! use candle_pe_cli::{error_line, Flags};
//!
//! let flags = Flags {
//!     width: Some("--head-dim"),
//!     ..Flags::default()
//! };
//! let err = candle_pe_core::Error::InvalidWidth { width: 0, max: 8 };
//! assert_eq!(
//!     error_line(&flags.name(err)),
//!     "--head-dim: width must be in 1 ..= 8, got width 0"
//! );
//! ```

mod flags;
mod report;
mod rope_override_args;

pub use flags::Flags;
pub use report::{clap_line, error_line, finish, parse_args};
pub use rope_override_args::{override_flag, RopeOverrideArgs};
