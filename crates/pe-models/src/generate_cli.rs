//! The command line of `examples/generate.rs` (greedy generation from a local Hugging Face
//! Llama-family checkpoint), as a library so tests run it in process: the flags ([`Args`]),
//! their parsers (errors name the flag and the value), [`run`], which writes `ids: <new
//! ids>` (and, for a text prompt, `--prompt` or `--chat` through the checkpoint's
//! [`TextTokenizer`], `text: <new text as a JSON string>`) and the prefill's and the decode's speed to `out`, and [`main`], the whole program
//! (every failure one line on stderr, as `pe`'s).
//!
//! ```
//! use clap::Parser;
//! use pe_models::generate_cli::{run, Args};
//!
//! let args = Args::try_parse_from(["generate", "--prompt-ids", "1,2,3", "--max-new", "2"])?;
//! let mut out = vec![];
//! run(&args, &pe_testkit::fixture("models/llama31"), &mut out)?;
//! assert!(String::from_utf8(out)?.starts_with("ids: "));
//! # Ok::<(), anyhow::Error>(())
//! ```

use std::io::Write;
use std::path::{Path, PathBuf};

use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use candle_core::{DType, Device};
use candle_pe_cli::{error_line, finish, parse_args, Flags};
use clap::{ArgGroup, Parser, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};

use crate::{
    eos_token_ids, greedy, CachePolicy, ChatMessage, Family, Generation, LlamaFamily,
    SinkPositions, TextTokenizer,
};

/// Greedy generation with a Llama / Qwen2 / Qwen3 / Phi-3 / Mistral / Gemma 3 checkpoint.
#[derive(Parser, Debug)]
#[command(name = "generate")]
#[command(group(ArgGroup::new("input").required(true).args(["prompt_ids", "prompt", "chat"])))]
pub struct Args {
    /// Checkpoint folder or GGUF file (its help lists the GGUF architectures of the family
    /// rows).
    #[arg(long, value_name = "PATH", help = model_help())]
    pub model: Option<PathBuf>,
    /// Prompt token ids, comma separated; "" is an empty prompt (nothing is generated)
    #[arg(long, value_name = "IDS", value_parser = parse_ids, allow_hyphen_values = true)]
    pub prompt_ids: Option<Ids>,
    /// Prompt text, tokenized by the checkpoint's tokenizer as llama.cpp does by default (its
    /// BOS / EOS added, special tokens written in it parsed); the new text is printed too
    #[arg(long, value_name = "TEXT", allow_hyphen_values = true)]
    pub prompt: Option<String>,
    /// One user message, through the checkpoint's chat template (with the assistant's turn
    /// opened), then as --prompt (no second BOS when the template writes one)
    #[arg(long, value_name = "TEXT", allow_hyphen_values = true)]
    pub chat: Option<String>,
    /// New tokens to generate, at most
    #[arg(
        long,
        value_name = "N",
        default_value_t = 32,
        allow_negative_numbers = true
    )]
    pub max_new: usize,
    /// End-of-sequence ids that stop the generation, comma separated; "" for none [default: the
    /// eos_token_id of the folder's generation_config.json, else of its config.json]
    #[arg(long, value_name = "IDS", value_parser = parse_ids, allow_hyphen_values = true)]
    pub eos: Option<Ids>,
    /// Position of the prompt's first token (as HF's position_ids = offset + 0, 1, ...)
    #[arg(
        long,
        value_name = "N",
        default_value_t = 0,
        allow_negative_numbers = true
    )]
    pub position_offset: u32,
    /// Compute dtype of the weights and activations
    #[arg(long, value_enum, default_value_t = Dtype::F32)]
    pub dtype: Dtype,
    /// Where to run: cpu, cuda (GPU 0) or cuda:N (CUDA needs a build with --features cuda)
    #[arg(long, value_name = "DEVICE", value_parser = parse_device, default_value = "cpu")]
    pub device: DeviceArg,
    /// Attention-sink cache: keep the first N tokens (with --window); generation may then run
    /// past the model's context
    #[arg(
        long,
        value_name = "N",
        requires = "window",
        conflicts_with = "keep",
        allow_negative_numbers = true
    )]
    pub sink: Option<usize>,
    /// Attention-sink cache: keep the last W tokens besides the sinks (with --sink)
    #[arg(
        long,
        value_name = "W",
        requires = "sink",
        allow_negative_numbers = true
    )]
    pub window: Option<usize>,
    /// Positions of the sink cache: contiguous (StreamingLLM: each token at its index in the
    /// cache) or transformers (transformers 4.52.4's SinkCache, window_length = sink + window)
    #[arg(long, value_enum, requires = "sink")]
    pub sink_positions: Option<SinkPositions>,
    /// Context shift (llama.cpp): when the context is full, keep the first N tokens, drop half
    /// of the others and shift the rest
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub keep: Option<usize>,
    /// Tokens the --keep cache holds [default: the config's max_position_embeddings]
    #[arg(
        long,
        value_name = "N",
        requires = "keep",
        allow_negative_numbers = true
    )]
    pub context_size: Option<usize>,
    /// llama.cpp's rope override flags, laid over the model's rope (as llama.cpp runs a GGUF
    /// file, as transformers reads an edited config.json).
    #[command(flatten)]
    pub laid: candle_pe_cli::RopeOverrideArgs,
}

/// `--model`'s help: the GGUF architectures are those of the [`Family`] rows, so the list
/// cannot fall behind the decoder.
fn model_help() -> String {
    format!(
        "Checkpoint folder: config.json and model.safetensors (or model.safetensors.index.json \
         and its shards), or a GGUF file ({}; Mistral converts as llama; quantized as stored) \
         [default: the tiny llama31 test fixture]",
        Family::gguf_list()
    )
}

impl Args {
    /// The flag the prompt came from: `--prompt-ids`, `--prompt` or `--chat`.
    pub fn input_flag(&self) -> &'static str {
        match (&self.prompt, &self.chat) {
            (Some(_), _) => "--prompt",
            (_, Some(_)) => "--chat",
            _ => "--prompt-ids",
        }
    }

    /// The cache policy the flags ask for, `None` for the unbounded cache.
    pub fn cache_policy(
        &self,
        max_position_embeddings: Option<usize>,
    ) -> Result<Option<CachePolicy>> {
        let policy = match (self.sink, self.window, self.keep) {
            (Some(sink), Some(window), None) => CachePolicy::Sink {
                sink,
                window,
                positions: self.sink_positions.unwrap_or_default(),
            },
            (None, None, Some(keep)) => {
                let size = self.context_size.or(max_position_embeddings).context(
                    "--keep needs --context-size: the config gives no max_position_embeddings",
                )?;
                CachePolicy::Keep { keep, size }
            }
            (None, None, None) => return Ok(None),
            _ => anyhow::bail!("give --sink N --window W, or --keep N, not both"),
        };
        policy.check()?;
        Ok(Some(policy))
    }
}

/// The `--device` choice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceArg {
    /// The CPU.
    Cpu,
    /// The CUDA GPU of this ordinal.
    Cuda(usize),
}

fn parse_device(text: &str) -> Result<DeviceArg, String> {
    match text.split_once(':') {
        None if text == "cpu" => Ok(DeviceArg::Cpu),
        None if text == "cuda" => Ok(DeviceArg::Cuda(0)),
        Some(("cuda", n)) => n
            .parse()
            .map(DeviceArg::Cuda)
            .map_err(|e| format!("GPU ordinal {n:?}: {e}")),
        _ => Err(format!("{text:?} is not cpu, cuda or cuda:N")),
    }
}

impl DeviceArg {
    fn candle(self) -> Result<Device> {
        match self {
            DeviceArg::Cpu => Ok(Device::Cpu),
            DeviceArg::Cuda(n) => Device::new_cuda(n)
                .with_context(|| format!("--device cuda:{n}: cannot open the GPU")),
        }
    }
}

/// A `--prompt-ids` or `--eos` list.
#[derive(Clone, Debug, PartialEq)]
pub struct Ids(pub Vec<u32>);

fn parse_ids(text: &str) -> Result<Ids, String> {
    if text.trim().is_empty() {
        return Ok(Ids(vec![]));
    }
    text.split(',')
        .map(|part| {
            part.trim()
                .parse::<u32>()
                .map_err(|e| format!("token id {part:?}: {e}"))
        })
        .collect::<Result<_, _>>()
        .map(Ids)
}

/// The compute dtypes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Dtype {
    /// float32
    F32,
    /// bfloat16
    Bf16,
    /// float16
    F16,
}

impl Dtype {
    fn candle(self) -> DType {
        match self {
            Dtype::F32 => DType::F32,
            Dtype::Bf16 => DType::BF16,
            Dtype::F16 => DType::F16,
        }
    }
}

/// Loads the model (`--model`, else `default_model`), generates, and writes the ids and speeds
/// to `out`; the model line, the progress bar and notes go to stderr.
pub fn run(args: &Args, default_model: &Path, out: &mut impl Write) -> Result<()> {
    let dir = args
        .model
        .clone()
        .unwrap_or_else(|| default_model.to_path_buf());
    let device = args.device.candle()?;
    let gguf = dir.is_file();
    if gguf && !crate::checkpoint::is_gguf(&dir) {
        bail!(not_gguf(&dir));
    }
    let (prompt_ids, tokenizer) = prompt(args, &dir)?;
    let (mut model, policy) = load(args, &dir, gguf, &device)?;
    let eos = eos(args, &dir, gguf)?;
    let cfg = model.config();
    eprintln!(
        "model: {} ({}, {} layers, vocab {}), {} on {:?}, prompt of {} tokens at positions from {}, end-of-sequence ids {:?}",
        dir.display(),
        cfg.model_type.name(),
        cfg.num_hidden_layers,
        cfg.vocab_size,
        args.dtype.candle().as_str(),
        args.device,
        prompt_ids.len(),
        args.position_offset,
        eos,
    );
    let generation = generate(args, &mut model, &prompt_ids, &eos)?;
    let flag = args.input_flag();
    write_ids(out, &generation, tokenizer.as_ref(), flag)?;
    if policy.is_some() {
        writeln!(
            out,
            "cache: {} tokens held of {} seen",
            model.kv_len(),
            model.cached_len()
        )?;
    }
    write_speeds(out, &generation)
}

/// The error of a `--model` file that is not a GGUF file: a `config.json` or a safetensors file
/// given for its folder names the folder.
fn not_gguf(path: &Path) -> String {
    let folder = match (path.extension(), path.parent()) {
        (Some(ext), Some(parent)) if ext == "json" || ext == "safetensors" => {
            format!(" (its folder, {}, may be the checkpoint)", parent.display())
        }
        _ => String::new(),
    };
    format!(
        "--model {}: not a GGUF file; --model takes a checkpoint folder (with config.json and \
         model.safetensors) or a GGUF file{folder}",
        path.display()
    )
}

/// The model at `dir` (a GGUF file when `gguf`, else a checkpoint folder) on `device`, with the
/// cache policy the flags ask for.
fn load(
    args: &Args,
    dir: &Path,
    gguf: bool,
    device: &Device,
) -> Result<(LlamaFamily, Option<CachePolicy>)> {
    let laid = args.laid.rope_override()?;
    let mut model = if gguf {
        LlamaFamily::from_gguf_with_rope(dir, args.dtype.candle(), device, &laid)
    } else {
        LlamaFamily::from_dir_with_rope(dir, args.dtype.candle(), device, &laid)
    }
    .map_err(|e| name_override(e, dir))?;
    let policy = args.cache_policy(model.config().rope.max_position_embeddings)?;
    if let Some(policy) = policy {
        if args.position_offset != 0 {
            bail!(
                "--position-offset {}: with --sink or --keep the cache chooses the positions, from 0",
                args.position_offset
            )
        }
        model = model.with_cache_policy(policy)?;
        eprintln!("cache: {policy:?}");
    }
    Ok((model, policy))
}

/// A load error: an override field's as its flag, anything else as the checkpoint's.
fn name_override(err: anyhow::Error, dir: &Path) -> anyhow::Error {
    // pe-cli's one map from errors to flags names an override field's flag.
    let flag = err.chain().find_map(|e| match e.downcast_ref() {
        Some(e @ candle_pe_formats::Error::Override { .. }) => Flags::default().of_format(e),
        _ => None,
    });
    match flag {
        Some(flag) => anyhow::anyhow!(
            "{flag} (on --model {}): {}",
            dir.display(),
            error_line(&err)
        ),
        None => err.context(format!(
            "--model {}: cannot load the checkpoint",
            dir.display()
        )),
    }
}

/// The end-of-sequence ids: `--eos`, else the GGUF file's or the checkpoint folder's.
fn eos(args: &Args, dir: &Path, gguf: bool) -> Result<Vec<u32>> {
    let (ids, what) = match &args.eos {
        Some(ids) => return Ok(ids.0.clone()),
        None if gguf => (crate::gguf_eos_token_ids(dir), "id"),
        None => (eos_token_ids(dir), "ids"),
    };
    ids.with_context(|| {
        format!(
            "--model {}: cannot read the end-of-sequence {what} (or give --eos)",
            dir.display()
        )
    })
}

/// Greedy generation from `prompt_ids` with a progress bar on stderr; errors name the flags.
fn generate(
    args: &Args,
    model: &mut LlamaFamily,
    prompt_ids: &[u32],
    eos: &[u32],
) -> Result<Generation> {
    if prompt_ids.is_empty() && args.max_new > 0 {
        eprintln!("empty prompt: no logits to continue from, nothing generated");
    }
    let bar = ProgressBar::new(args.max_new as u64).with_style(ProgressStyle::with_template(
        "{bar:40} {pos}/{len} tokens, {per_sec}, eta {eta}",
    )?);
    let flag = args.input_flag();
    let generation = greedy(
        model,
        prompt_ids,
        args.position_offset,
        args.max_new,
        eos,
        |_| bar.inc(1),
    )
    .map_err(|e| {
        let flags = Flags {
            positions: Some("--position-offset / --max-new".into()),
            tokens: Some(flag),
            ..Flags::default()
        };
        flags.name(e).context(format!(
            "cannot generate from {flag} at --position-offset {} with --max-new {}",
            args.position_offset, args.max_new
        ))
    })?;
    bar.finish_and_clear();
    if generation.ended_at_eos {
        eprintln!(
            "stopped at end-of-sequence id {} after {} tokens",
            generation.ids[generation.ids.len() - 1],
            generation.ids.len()
        );
    }
    Ok(generation)
}

/// Writes the new ids, and their text when the prompt was (`flag`, for the error).
fn write_ids(
    out: &mut impl Write,
    generation: &Generation,
    tokenizer: Option<&TextTokenizer>,
    flag: &str,
) -> Result<()> {
    let ids: Vec<String> = generation.ids.iter().map(u32::to_string).collect();
    writeln!(out, "ids: {}", ids.join(" "))?;
    if let Some(tokenizer) = tokenizer {
        let text = tokenizer
            .decode(&generation.ids)
            .with_context(|| format!("cannot decode the new ids of {flag}"))?;
        // One line, as a JSON string: the text may hold newlines.
        writeln!(out, "text: {}", serde_json::Value::String(text))?;
    }
    Ok(())
}

/// Writes the prefill's and the decode's speed, when anything was generated.
fn write_speeds(out: &mut impl Write, generation: &Generation) -> Result<()> {
    if generation.ids.is_empty() {
        return Ok(());
    }
    writeln!(
        out,
        "prefill: {} tokens in {:.2} ms, {:.1} tokens/s",
        generation.prompt_len,
        generation.prefill.as_secs_f64() * 1e3,
        generation.prefill_tokens_per_second()
    )?;
    writeln!(
        out,
        "decode: {} tokens in {:.2} ms, {:.1} tokens/s",
        generation.ids.len().saturating_sub(1),
        generation.decode.as_secs_f64() * 1e3,
        generation.decode_tokens_per_second()
    )?;
    Ok(())
}

/// The prompt's ids, and the tokenizer of the checkpoint at `model` when the prompt is text
/// (`--prompt`, `--chat`). `--prompt` is tokenized as llama.cpp does by default (BOS / EOS
/// as the tokenizer adds them, special tokens parsed); `--chat` is one user message rendered
/// by the chat template with the assistant's turn opened, tokenized with special tokens
/// parsed, and a BOS added only when the tokenizer adds one and the template did not write it.
fn prompt(args: &Args, model: &Path) -> Result<(Vec<u32>, Option<TextTokenizer>)> {
    let given = [
        args.prompt_ids.is_some(),
        args.prompt.is_some(),
        args.chat.is_some(),
    ];
    if given.iter().filter(|&&g| g).count() != 1 {
        bail!("give exactly one of --prompt-ids, --prompt and --chat");
    }
    if let Some(ids) = &args.prompt_ids {
        return Ok((ids.0.clone(), None));
    }
    let flag = args.input_flag();
    let tokenizer = TextTokenizer::for_model(model)
        .with_context(|| format!("{flag} needs the tokenizer of --model {}", model.display()))?;
    let ids = match (&args.prompt, &args.chat) {
        (Some(text), _) => tokenizer.encode(text, true),
        (_, Some(message)) => {
            let text = tokenizer
                .apply_chat_template(&[ChatMessage::user(message.as_str())], true)
                .context("--chat: cannot render the chat template")?;
            let has_bos = tokenizer
                .bos_token()
                .is_some_and(|bos| !bos.is_empty() && text.starts_with(bos));
            tokenizer.tokenize(&text, !has_bos, true)
        }
        _ => bail!("give one of --prompt-ids, --prompt and --chat"),
    }
    .with_context(|| format!("{flag}: cannot tokenize the text"))?;
    Ok((ids, Some(tokenizer)))
}

/// The `generate` program: parses the command line, runs it with `default_model` when no
/// `--model` is given, and prints any failure as one line on stderr, exiting 2 for a bad
/// command line and 1 for anything else.
pub fn main(default_model: &Path) -> ExitCode {
    let (mut out, mut err) = (std::io::stdout().lock(), std::io::stderr());
    main_with(std::env::args_os(), default_model, &mut out, &mut err)
}

/// [`main`] with the command line `argv` (the program's name first), the ids and speeds
/// written to `out` and any failure, one line, to `err`; the model line and the progress bar
/// still go to stderr.
pub fn main_with(
    argv: impl IntoIterator<Item = impl Into<std::ffi::OsString> + Clone>,
    default_model: &Path,
    out: &mut impl Write,
    err: &mut impl Write,
) -> ExitCode {
    match parse_args::<Args>("generate", argv, out, err) {
        Ok(args) => finish("generate", run(&args, default_model, out), err),
        Err(code) => code,
    }
}
