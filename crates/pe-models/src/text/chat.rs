//! [`ChatMessage`] and the chat templates of [`TextTokenizer`](crate::TextTokenizer): where a
//! checkpoint folder keeps its template, and the Jinja rendering (`minijinja`) as transformers
//! renders it (blocks trimmed, Python's string methods, `raise_exception`).

use std::path::Path;

use anyhow::{anyhow, bail, Context as _, Result};
use serde::Serialize;

/// One message of a chat: its role (`system`, `user`, `assistant`) and its text.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ChatMessage {
    /// `system`, `user`, `assistant`, ...
    pub role: String,
    /// The message's text.
    pub content: String,
}

impl ChatMessage {
    /// A message with this role.
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> Self {
        Self {
            role: role.into(),
            content: content.into(),
        }
    }

    /// A `user` message.
    pub fn user(content: impl Into<String>) -> Self {
        Self::new("user", content)
    }
}

/// The chat template of a checkpoint `folder`: its `chat_template.jinja`, else the
/// `chat_template` of its `tokenizer_config.json` (`config`, read from `config_path`): a string,
/// or the template named `default` of a list of named ones.
pub(crate) fn folder_template(
    folder: &Path,
    config: &serde_json::Value,
    config_path: &Path,
) -> Result<Option<String>> {
    let jinja = folder.join("chat_template.jinja");
    if jinja.is_file() {
        let text =
            std::fs::read_to_string(&jinja).with_context(|| format!("{}", jinja.display()))?;
        return Ok(Some(text));
    }
    Ok(match &config["chat_template"] {
        serde_json::Value::Null => None,
        serde_json::Value::String(s) => Some(s.clone()),
        // Named templates: [{"name": "default", "template": "..."}, ...].
        serde_json::Value::Array(named) => named
            .iter()
            .find(|t| t["name"] == "default")
            .and_then(|t| t["template"].as_str())
            .map(str::to_string),
        other => bail!(
            "{}: chat_template = {other}: not a string or a list of named templates",
            config_path.display()
        ),
    })
}

/// `messages` rendered by `template` (of the tokenizer `source`, for errors), with
/// `add_generation_prompt` and the `(bos_token, eos_token)` texts, as transformers'
/// `apply_chat_template(tokenize=False)` renders it.
pub(crate) fn render(
    template: &str,
    source: &str,
    messages: &[ChatMessage],
    add_generation_prompt: bool,
    (bos_token, eos_token): (&str, &str),
) -> Result<String> {
    let mut env = minijinja::Environment::new();
    env.set_trim_blocks(true);
    env.set_lstrip_blocks(true);
    env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
    env.add_function(
        "raise_exception",
        |message: String| -> Result<String, minijinja::Error> {
            Err(minijinja::Error::new(
                minijinja::ErrorKind::InvalidOperation,
                message,
            ))
        },
    );
    let template = env
        .template_from_str(template)
        .map_err(|e| anyhow!("{}: the chat template does not parse: {e}", source))?;
    template
        .render(minijinja::context! {
            messages => messages,
            add_generation_prompt => add_generation_prompt,
            bos_token => bos_token,
            eos_token => eos_token,
        })
        .map_err(|e| anyhow!("{}: the chat template fails: {e}", source))
}
