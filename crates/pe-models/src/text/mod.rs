//! Text in and out of `generate`: [`TextTokenizer`] (`tokenizer.rs`) runs a checkpoint's
//! `tokenizer.json` through Hugging Face's `tokenizers`, or a GGUF file's vocabulary as
//! llama.cpp does (`gguf_vocab.rs`, with llama.cpp's pre-tokenizer regexes as a table in
//! `pre_tokenizers.rs`); `chat.rs` holds [`ChatMessage`] and renders the chat templates.
//! Runtime for the reference decoders, not part of what they prove.

mod chat;
mod gguf_vocab;
mod pre_tokenizers;
mod tokenizer;

pub use chat::ChatMessage;
pub use tokenizer::TextTokenizer;
