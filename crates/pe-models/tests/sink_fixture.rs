//! `--sink-positions transformers` against transformers 4.52.4's `SinkCache`: the greedy ids of
//! tiny random Llamas (llama3 rope; a 32-token context generated 200 tokens past), made by
//! `scripts/fixtures/sink.py` (`bash scripts/make-fixtures.sh sink`), driven as the class's
//! docstring shows, with transformers choosing the positions.

use candle_core::{DType, Device};
use pe_models::{greedy, CachePolicy, LlamaFamily, SinkPositions};

fn check(case: &str) -> anyhow::Result<()> {
    let dir = pe_testkit::fixture(&format!("sink/{case}"));
    let outputs: serde_json::Value = pe_testkit::read_json(dir.join("outputs.json"));
    let number = |key: &str| outputs[key].as_u64().expect(key) as usize;
    let list = |key: &str| -> Vec<u32> {
        outputs[key]
            .as_array()
            .expect(key)
            .iter()
            .map(|v| v.as_u64().expect(key) as u32)
            .collect()
    };
    let (total, sink) = (number("window_length"), number("num_sink_tokens"));
    let (prompt, want) = (list("prompt"), list("ids"));
    let policy = CachePolicy::Sink {
        sink,
        window: total - sink,
        positions: SinkPositions::Transformers,
    };
    let mut model =
        LlamaFamily::from_dir(&dir, DType::F32, &Device::Cpu)?.with_cache_policy(policy)?;
    let got = greedy(&mut model, &prompt, 0, want.len(), &[], |_| {})?;
    assert_eq!(
        got.ids, want,
        "{case}: ids of transformers {}",
        outputs["versions"]["transformers"]
    );
    // The same model with contiguous positions diverges: the bookkeeping is what is matched.
    let contiguous = CachePolicy::Sink {
        sink,
        window: total - sink,
        positions: SinkPositions::Contiguous,
    };
    let mut model =
        LlamaFamily::from_dir(&dir, DType::F32, &Device::Cpu)?.with_cache_policy(contiguous)?;
    let other = greedy(&mut model, &prompt, 0, want.len(), &[], |_| {})?;
    assert_ne!(other.ids, want, "{case}: contiguous positions");
    Ok(())
}

#[test]
fn transformers_positions_give_sink_cache_ids_llama3() -> anyhow::Result<()> {
    check("llama3")
}

#[test]
fn transformers_positions_give_sink_cache_ids_past_a_short_context() -> anyhow::Result<()> {
    check("short_context")
}
