//! The fixed reference values of docs/conventions.md, verbatim, on every backend.

use candle_core::{DType, Device, Tensor};
use candle_pe_core::{PeSpec, TableBackend};
use pe_testkit::{assert_matches, backend_tests, encoding, oracle_row};

/// Asserts each row of `table` (rows of f64 output) equals `expected` to `tol`.
fn assert_rows(table: &Tensor, expected: &[&[f64]], tol: f64, what: &str) -> anyhow::Result<()> {
    let got = table
        .to_dtype(DType::F64)?
        .to_device(&Device::Cpu)?
        .to_vec2::<f64>()?;
    for (r, (g, e)) in got.iter().zip(expected).enumerate() {
        assert_eq!(g.len(), e.len(), "{what}: row {r} width");
        for (c, (g, e)) in g.iter().zip(e.iter()).enumerate() {
            assert!(
                (g - e).abs() <= tol,
                "{what}: row {r} column {c}: got {g}, reference {e}"
            );
        }
    }
    Ok(())
}

fn seeds_table(dev: &Device, backend: TableBackend) -> anyhow::Result<()> {
    let pe = encoding(PeSpec::vaswani(4).with_base(100.0), backend);
    let expected: [&[f64]; 4] = [
        &[0.0, 1.0, 0.0, 1.0],
        &[0.84147098, 0.54030231, 0.09983342, 0.99500417],
        &[0.90929743, -0.41614684, 0.19866933, 0.98006658],
        &[0.14112001, -0.9899925, 0.29552021, 0.95533649],
    ];
    assert_rows(&pe.range(0, 4, DType::F64, dev)?, &expected, 1e-8, "seeds")
}

fn burn_and_keras_hub(dev: &Device, backend: TableBackend) -> anyhow::Result<()> {
    let pe = encoding(PeSpec::vaswani(6), backend);
    let ids = Tensor::new(&[1u32, 3, 11], dev)?;
    let expected: [&[f64]; 3] = [
        &[0.84147, 0.54030, 0.04640, 0.99892, 0.00215, 1.00000],
        &[0.14112, -0.98999, 0.13880, 0.99032, 0.00646, 0.99998],
        &[-0.99999, 0.00443, 0.48868, 0.87246, 0.02370, 0.99972],
    ];
    for dtype in [DType::F64, DType::F32] {
        assert_rows(&pe.at(&ids, dtype)?, &expected, 5e-6, "burn/keras-hub")?;
    }
    Ok(())
}

fn one_row_per_convention(dev: &Device, backend: TableBackend) -> anyhow::Result<()> {
    let h1: &[f64] = &[
        0.841470985,
        0.046399223,
        0.002154433,
        0.000100000,
        0.540302306,
        0.998922976,
        0.999997679,
        0.999999995,
    ];
    let marian: &[f64] = &[
        0.841470985,
        0.099833417,
        0.009999833,
        0.001000000,
        0.540302306,
        0.995004165,
        0.999950000,
        0.999999500,
    ];
    let vaswani: &[f64] = &[
        0.841470985,
        0.540302306,
        0.099833417,
        0.995004165,
        0.009999833,
        0.999950000,
        0.001000000,
        0.999999500,
    ];
    let sd: &[f64] = &[
        0.540302306,
        0.995004165,
        0.999950000,
        0.999999500,
        0.841470985,
        0.099833417,
        0.009999833,
        0.001000000,
    ];
    let cases = [
        (PeSpec::tensor2tensor(8), h1),
        (PeSpec::fairseq(8), h1),
        (PeSpec::whisper(8), h1),
        (PeSpec::diffusers(8), h1),
        (PeSpec::marian(8), marian),
        (PeSpec::vaswani(8), vaswani),
        (PeSpec::stable_diffusion(8), sd),
    ];
    for (spec, row) in cases {
        let table = encoding(spec, backend).range(1, 1, DType::F64, dev)?;
        assert_rows(&table, &[row], 1e-9, &format!("{spec:?}"))?;
    }
    Ok(())
}

fn odd_width_seven(dev: &Device, backend: TableBackend) -> anyhow::Result<()> {
    let cases: [(PeSpec, &[f64]); 3] = [
        (
            PeSpec::fairseq(7),
            &[
                0.841470985,
                0.009999833,
                0.000100000,
                0.540302306,
                0.999950000,
                0.999999995,
                0.0,
            ],
        ),
        (
            PeSpec::marian(7),
            &[
                0.841470985,
                0.071906457,
                0.005179452,
                0.000372759,
                0.540302306,
                0.997411380,
                0.999986587,
            ],
        ),
        (
            PeSpec::vaswani(7),
            &[
                0.841470985,
                0.540302306,
                0.071906457,
                0.997411380,
                0.005179452,
                0.999986587,
                0.000372759,
            ],
        ),
    ];
    for (spec, row) in cases {
        let table = encoding(spec, backend).range(1, 1, DType::F64, dev)?;
        assert_rows(&table, &[row], 1e-9, &format!("{spec:?}"))?;
    }
    Ok(())
}

fn large_positions_d512(dev: &Device, backend: TableBackend) -> anyhow::Result<()> {
    // (spec, position, [(column, reference value)]).
    type Case = (PeSpec, u32, [(usize, f64); 4]);
    let cases: [Case; 4] = [
        (
            PeSpec::fairseq(512),
            65535,
            [
                (1, 0.972592329278),
                (3, 0.643683216799),
                (256, 0.192344018606),
                (511, 0.963686910177),
            ],
        ),
        (
            PeSpec::fairseq(512),
            1_000_000,
            [
                (1, 0.032297896763),
                (3, -0.664985991005),
                (256, 0.936752127533),
                (511, 0.862318872288),
            ],
        ),
        (
            PeSpec::vaswani(512),
            65535,
            [
                (2, -0.738128870930),
                (127, 0.119927516344),
                (258, -0.667517116340),
                (511, 0.872554741285),
            ],
        ),
        (
            PeSpec::vaswani(512),
            1_000_000,
            [
                (2, -0.861444541605),
                (127, -0.987218795510),
                (258, 0.937313671821),
                (511, -0.999957082745),
            ],
        ),
    ];
    for (spec, p, columns) in cases {
        let pe = encoding(spec, backend);
        // The references are exact values rounded to 12 decimals (5e-13); the frequencies are
        // real-number ones here too, so f64 output agrees to that rounding.
        for (dtype, tol) in [(DType::F64, 6e-13), (DType::F32, 1e-6)] {
            let row = pe
                .range(p as usize, 1, dtype, dev)?
                .squeeze(0)?
                .to_dtype(DType::F64)?
                .to_vec1::<f64>()?;
            for (c, want) in columns {
                let got = row[c];
                assert!(
                    (got - want).abs() <= tol,
                    "{spec:?} p={p} {dtype:?} column {c}: got {got}, reference {want}"
                );
            }
        }
        // The whole row agrees with the oracle too, in every dtype.
        for dtype in [DType::F64, DType::F32, DType::F16, DType::BF16] {
            let table = pe.range(p as usize, 1, dtype, dev)?;
            assert_matches(
                &table,
                &[oracle_row(&spec, p as f64)],
                &format!("{spec:?} p={p}"),
            )?;
        }
    }
    Ok(())
}

/// The oracle itself reproduces the reference values (so it can judge everything else).
#[test]
fn oracle_reproduces_the_reference_rows() {
    let row = oracle_row(&PeSpec::vaswani(6), 11.0);
    let want = [-0.99999, 0.00443, 0.48868, 0.87246, 0.02370, 0.99972];
    for (g, w) in row.iter().zip(want) {
        assert!((g - w).abs() < 5e-6, "oracle {g} vs {w}");
    }
    let row = oracle_row(&PeSpec::fairseq(512), 1e6);
    assert!((row[511] - 0.862318872288).abs() < 6e-13);
    let row = oracle_row(&PeSpec::marian(7), 1.0);
    assert!((row[3] - 0.000372759).abs() < 1e-9);
}

backend_tests!(
    seeds_table,
    burn_and_keras_hub,
    one_row_per_convention,
    odd_width_seven,
    large_positions_d512,
);
