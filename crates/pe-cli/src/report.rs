//! Every failure on one line: clap's errors without their usage block, and an error's chain
//! (`what was tried: why it failed`) without the backtraces candle attaches when
//! `RUST_BACKTRACE` is set in the user's shell.
//!
//! ```
//! use anyhow::Context;
//!
//! let err = candle_core::Error::Msg("shape mismatch".into()).bt();
//! let err = Err::<(), _>(err).context("loading tensor lm_head.weight").unwrap_err();
//! assert_eq!(
//!     candle_pe_cli::error_line(&err),
//!     "loading tensor lm_head.weight: shape mismatch"
//! );
//! ```

use std::process::ExitCode;

/// A command-line error from clap on one line: the problem and any hint, without the usage
/// block.
pub fn clap_line(err: &clap::Error) -> String {
    let rendered = err.render().to_string();
    let parts: Vec<&str> = rendered
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("Usage:") && !l.starts_with("For more"))
        .collect();
    let mut line = String::new();
    for part in parts {
        if !line.is_empty() {
            // "...not provided:" continues on the next line; other lines are separate hints.
            line.push_str(if line.ends_with(':') { " " } else { "; " });
        }
        line.push_str(part);
    }
    line.strip_prefix("error: ").unwrap_or(&line).to_string()
}

/// The command line `argv` (the program's name first) parsed as `P`, or the exit code once
/// what it asked for is printed: `--help` and `--version` to `out` (0), the help to `err` for a
/// program run without its subcommand (2), and any other problem as one line,
/// `<program>: error: ...`, to `err` (2).
pub fn parse_args<P: clap::Parser>(
    program: &str,
    argv: impl IntoIterator<Item = impl Into<std::ffi::OsString> + Clone>,
    out: &mut impl std::io::Write,
    err: &mut impl std::io::Write,
) -> Result<P, ExitCode> {
    use clap::error::ErrorKind;
    P::try_parse_from(argv).map_err(|e| {
        // Nothing more can be said if stdout or stderr is closed.
        if !e.use_stderr() {
            let _ = write!(out, "{}", e.render());
            ExitCode::SUCCESS
        } else if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
            let _ = write!(err, "{}", e.render());
            ExitCode::from(2)
        } else {
            let _ = writeln!(err, "{program}: error: {}", clap_line(&e));
            ExitCode::from(2)
        }
    })
}

/// The exit code of a run: 0, or 1 once its error is printed as one line,
/// `<program>: error: ...`, to `err`.
pub fn finish(
    program: &str,
    result: anyhow::Result<()>,
    err: &mut impl std::io::Write,
) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let _ = writeln!(err, "{program}: error: {}", error_line(&e));
            ExitCode::from(1)
        }
    }
}

/// `err` and its causes on one line, `: ` between them, without candle's backtraces.
pub fn error_line(err: &anyhow::Error) -> String {
    let mut parts = vec![];
    for cause in err.chain() {
        if let Some(candle) = cause.downcast_ref::<candle_core::Error>() {
            // Its message holds its own causes.
            parts.push(candle_text(candle));
            break;
        }
        parts.push(cause.to_string());
    }
    parts.join(": ").replace('\n', " ")
}

/// A candle error's message, its context and path first, without its backtrace.
fn candle_text(err: &candle_core::Error) -> String {
    use candle_core::Error as C;
    match err {
        C::WithBacktrace { inner, .. } => candle_text(inner),
        C::Context { inner, context } => format!("{context}: {}", candle_text(inner)),
        C::WithPath { inner, path } => format!("{}: {}", path.display(), candle_text(inner)),
        C::WrappedContext { wrapped, context } => format!("{context}: {wrapped}"),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backtraces_and_line_breaks_are_left_out() {
        let inner = candle_core::Error::Msg("no such tensor".into());
        let err = candle_core::Error::WithBacktrace {
            inner: Box::new(inner.context("layer 3")),
            backtrace: Box::new(std::backtrace::Backtrace::force_capture()),
        };
        let err = anyhow::Error::from(err).context("--model m");
        assert_eq!(error_line(&err), "--model m: layer 3: no such tensor");
    }
}
