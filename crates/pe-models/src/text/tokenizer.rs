//! [`TextTokenizer`]: text to token ids and back for the checkpoints pe-models runs, and their
//! chat templates.
//!
//! - From a GGUF file ([`TextTokenizer::from_gguf`]): the `tokenizer.ggml.*` keys, tokenized
//!   exactly as llama.cpp does: `tokenizer.ggml.model` `gpt2` (byte-level BPE through Hugging
//!   Face's `tokenizers`, the regexes that `tokenizer.ggml.pre` names in llama.cpp's table) or
//!   `llama` (llama.cpp's SentencePiece merges by `tokenizer.ggml.scores`, byte fallback,
//!   `tokenizer.ggml.add_space_prefix`); control (type 3) and unknown tokens are split out of
//!   the text when special tokens are parsed, user-defined ones (type 4) always; BOS and EOS as
//!   `tokenizer.ggml.add_bos_token` / `add_eos_token` say, with llama.cpp's defaults.
//! - From a checkpoint folder ([`TextTokenizer::from_file`]): its `tokenizer.json`, run by
//!   `tokenizers` as transformers runs it, and `tokenizer_config.json`'s BOS, EOS and chat
//!   template when present.
//!
//! [`TextTokenizer::apply_chat_template`] renders the checkpoint's Jinja chat template
//! (`tokenizer.chat_template`, or `chat_template` in `tokenizer_config.json`) with
//! `minijinja`, as transformers renders it (blocks trimmed, Python's string methods,
//! `raise_exception`).
//!
//! ```
//! use candle_core::quantized::gguf_file::{self, Value};
//! use pe_models::{ChatMessage, TextTokenizer};
//!
//! // A byte-level BPE vocabulary of four tokens and one merge, as a GGUF file's keys.
//! let tokens = ["h", "i", "hi", "<|end|>"].map(|t| Value::String(t.into())).to_vec();
//! let metadata = [
//!     ("tokenizer.ggml.model", Value::String("gpt2".into())),
//!     ("tokenizer.ggml.pre", Value::String("gpt-2".into())),
//!     ("tokenizer.ggml.tokens", Value::Array(tokens)),
//!     ("tokenizer.ggml.token_type", Value::Array([1, 1, 1, 3].map(Value::I32).to_vec())),
//!     ("tokenizer.ggml.merges", Value::Array(vec![Value::String("h i".into())])),
//!     ("tokenizer.ggml.eos_token_id", Value::U32(3)),
//!     ("tokenizer.chat_template", Value::String(
//!         "{% for m in messages %}{{ m.content | trim }}{{ eos_token }}{% endfor %}".into(),
//!     )),
//! ];
//! let mut file = std::io::Cursor::new(vec![]);
//! gguf_file::write(&mut file, &metadata.iter().map(|(k, v)| (*k, v)).collect::<Vec<_>>(), &[])?;
//! file.set_position(0);
//! let tok = TextTokenizer::from_gguf(&gguf_file::Content::read(&mut file)?)?;
//!
//! assert_eq!(tok.encode("hih<|end|>", true)?, [2, 0, 3]); // "hi", "h", the parsed "<|end|>"
//! assert_eq!(tok.decode(&[2, 0, 3])?, "hih<|end|>");
//! let chat = tok.apply_chat_template(&[ChatMessage::user(" hi ")], true)?;
//! assert_eq!(chat, "hi<|end|>");
//! # Ok::<(), anyhow::Error>(())
//! ```

use std::path::Path;

use super::chat::{self, ChatMessage};
use super::gguf_vocab::GgufVocab;
use anyhow::{anyhow, bail, Context as _, Result};
use candle_core::quantized::gguf_file::Content;
use candle_pe_formats::GgufMeta;

/// Where the tokens come from.
enum Backend {
    /// A GGUF file's vocabulary, tokenized as llama.cpp does.
    Gguf(Box<GgufVocab>),
    /// A `tokenizer.json`, as transformers runs it; the second copy does not parse special
    /// tokens.
    Json {
        parse: Box<tokenizers::Tokenizer>,
        plain: Box<tokenizers::Tokenizer>,
    },
}

/// A checkpoint's tokenizer: text to ids ([`encode`](Self::encode),
/// [`tokenize`](Self::tokenize)), ids to text ([`decode`](Self::decode),
/// [`detokenize`](Self::detokenize)) and its chat template
/// ([`apply_chat_template`](Self::apply_chat_template)). Named so as not to be confused with
/// `tokenizers::Tokenizer`, which it wraps.
pub struct TextTokenizer {
    backend: Backend,
    bos_token: Option<String>,
    eos_token: Option<String>,
    chat_template: Option<String>,
    source: String,
}

impl std::fmt::Debug for TextTokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TextTokenizer")
            .field("source", &self.source)
            .field("vocab_size", &self.vocab_size())
            .field("bos_token", &self.bos_token)
            .field("eos_token", &self.eos_token)
            .field("chat_template", &self.chat_template.is_some())
            .finish()
    }
}

impl TextTokenizer {
    /// The tokenizer of a GGUF file's metadata (`tokenizer.ggml.*`, and
    /// `tokenizer.chat_template` when present). Errors name the key and its value: no or an
    /// unsupported `tokenizer.ggml.model` (this reads `gpt2` and `llama`), an unknown
    /// `tokenizer.ggml.pre`, missing tokens, merges or scores.
    pub fn from_gguf(content: &Content) -> Result<Self> {
        let vocab = GgufVocab::from_gguf(content)?;
        let name = |id: Option<u32>| id.and_then(|id| vocab.token(id)).map(str::to_string);
        let key = "tokenizer.chat_template";
        let chat_template = GgufMeta::new(content).string(key)?.map(str::to_string);
        Ok(Self {
            bos_token: name(vocab.bos),
            eos_token: name(vocab.eos),
            chat_template,
            source: "GGUF metadata".into(),
            backend: Backend::Gguf(Box::new(vocab)),
        })
    }

    /// The tokenizer of the GGUF file at `path`.
    pub fn from_gguf_file(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let mut file = std::fs::File::open(path).with_context(|| format!("{}", path.display()))?;
        let content = Content::read(&mut file).with_context(|| format!("{}", path.display()))?;
        let mut tok = Self::from_gguf(&content).with_context(|| format!("{}", path.display()))?;
        tok.source = path.display().to_string();
        Ok(tok)
    }

    /// The tokenizer of a `tokenizer.json` file, with the BOS and EOS tokens and the chat
    /// template of the `tokenizer_config.json` beside it, when there is one (a
    /// `chat_template.jinja` there takes precedence over its `chat_template`).
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let parse = tokenizers::Tokenizer::from_file(path)
            .map_err(|e| anyhow!("{}: {e}", path.display()))?;
        let mut plain = parse.clone();
        plain.set_encode_special_tokens(true);
        let folder = path.parent().unwrap_or(Path::new("."));
        let config_path = folder.join("tokenizer_config.json");
        let config: serde_json::Value = match std::fs::read_to_string(&config_path) {
            Ok(text) => {
                serde_json::from_str(&text).with_context(|| format!("{}", config_path.display()))?
            }
            Err(_) => serde_json::Value::Null,
        };
        // A token is written as "text" or {"content": "text", ...}.
        let token = |key: &str| match &config[key] {
            serde_json::Value::String(s) => Some(s.clone()),
            serde_json::Value::Object(o) => o.get("content")?.as_str().map(str::to_string),
            _ => None,
        };
        let chat_template = chat::folder_template(folder, &config, &config_path)?;
        Ok(Self {
            bos_token: token("bos_token"),
            eos_token: token("eos_token"),
            chat_template,
            source: path.display().to_string(),
            backend: Backend::Json {
                parse: Box::new(parse),
                plain: Box::new(plain),
            },
        })
    }

    /// The tokenizer of a checkpoint: a GGUF file's metadata, or the `tokenizer.json` of a
    /// folder (as `generate --model` takes either).
    pub fn for_model(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        if path.is_file() {
            return Self::from_gguf_file(path);
        }
        let json = path.join("tokenizer.json");
        if !json.is_file() {
            bail!(
                "{}: no tokenizer.json in the checkpoint folder (text needs a tokenizer; \
                 --prompt-ids takes token ids)",
                path.display()
            );
        }
        Self::from_file(json)
    }

    /// Text to ids as llama.cpp's `common_tokenize(text, add_special, parse_special =
    /// add_special)`: with `add_special`, the BOS / EOS the tokenizer adds and the special
    /// tokens written in the text; without, the text alone, special tokens spelled out.
    pub fn encode(&self, text: &str, add_special: bool) -> Result<Vec<u32>> {
        self.tokenize(text, add_special, add_special)
    }

    /// Text to ids as llama.cpp's `tokenize(text, add_special, parse_special)`: `add_special`
    /// adds the BOS and EOS tokens the file asks for, `parse_special` turns the control tokens
    /// written in the text into their ids (user-defined tokens always are). A `tokenizer.json`
    /// adds what its post-processor adds.
    pub fn tokenize(&self, text: &str, add_special: bool, parse_special: bool) -> Result<Vec<u32>> {
        match &self.backend {
            Backend::Gguf(vocab) => vocab.tokenize(text, add_special, parse_special),
            Backend::Json { parse, plain } => {
                let tok = if parse_special { parse } else { plain };
                Ok(tok
                    .encode(text, add_special)
                    .map_err(|e| anyhow!("cannot tokenize {text:?}: {e}"))?
                    .get_ids()
                    .to_vec())
            }
        }
    }

    /// Ids to text as llama.cpp's `detokenize(ids, remove_special = false, unparse_special =
    /// true)`: every token written, control tokens included. An id beyond the vocabulary is
    /// an error naming it.
    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        self.detokenize(ids, false, true)
    }

    /// Ids to text as llama.cpp's `detokenize(ids, remove_special, unparse_special)`:
    /// `remove_special` drops a leading BOS and a trailing EOS the tokenizer adds,
    /// `unparse_special` writes control tokens (else they are left out). A `tokenizer.json`
    /// decodes through its decoder, skipping special tokens unless `unparse_special`.
    pub fn detokenize(
        &self,
        ids: &[u32],
        remove_special: bool,
        unparse_special: bool,
    ) -> Result<String> {
        match &self.backend {
            Backend::Gguf(vocab) => vocab.detokenize(ids, remove_special, unparse_special),
            Backend::Json { parse, .. } => {
                let size = parse.get_vocab_size(true);
                if let Some(id) = ids.iter().find(|&&id| id as usize >= size) {
                    bail!("token id {id}: the vocabulary has {size} tokens");
                }
                parse
                    .decode(ids, !unparse_special)
                    .map_err(|e| anyhow!("cannot decode {ids:?}: {e}"))
            }
        }
    }

    /// The number of tokens.
    pub fn vocab_size(&self) -> usize {
        match &self.backend {
            Backend::Gguf(vocab) => vocab.len(),
            Backend::Json { parse, .. } => parse.get_vocab_size(true),
        }
    }

    /// The BOS token's text, if the tokenizer names one.
    pub fn bos_token(&self) -> Option<&str> {
        self.bos_token.as_deref()
    }

    /// The EOS token's text, if the tokenizer names one.
    pub fn eos_token(&self) -> Option<&str> {
        self.eos_token.as_deref()
    }

    /// The Jinja chat template, if the checkpoint has one.
    pub fn chat_template(&self) -> Option<&str> {
        self.chat_template.as_deref()
    }

    /// Whether [`encode`](Self::encode)`(text, true)` puts the BOS token first itself (a GGUF
    /// file's `add_bos_token`).
    pub fn adds_bos(&self) -> bool {
        match &self.backend {
            Backend::Gguf(vocab) => vocab.add_bos && vocab.bos.is_some(),
            Backend::Json { parse, .. } => {
                let with = parse
                    .encode("", true)
                    .map(|e| e.get_ids().len())
                    .unwrap_or(0);
                with > 0
            }
        }
    }

    /// `messages` rendered by the checkpoint's chat template, with `add_generation_prompt`
    /// (the opening of the assistant's turn), `bos_token` and `eos_token` (`""` when the
    /// tokenizer has none), as transformers' `apply_chat_template(tokenize=False)` renders
    /// it. A tokenizer without a template, or a template that fails (its `raise_exception`
    /// included), is an error.
    pub fn apply_chat_template(
        &self,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
    ) -> Result<String> {
        let template = self.chat_template.as_deref().with_context(|| {
            format!(
                "{}: no chat template (tokenizer.chat_template in a GGUF file, chat_template in \
                 tokenizer_config.json)",
                self.source
            )
        })?;
        let tokens = (
            self.bos_token.as_deref().unwrap_or(""),
            self.eos_token.as_deref().unwrap_or(""),
        );
        chat::render(
            template,
            &self.source,
            messages,
            add_generation_prompt,
            tokens,
        )
    }
}
