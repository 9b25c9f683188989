//! Every bad input gets an error naming the parameter and the value, never a panic.

use candle_core::{DType, Device, Tensor};
use candle_pe_core::{Error, Frequencies, OddWidth, PeSpec, SinusoidalEncoding, TableBackend};

/// Asserts `result` failed with a message containing every one of `needles`.
fn assert_error<T: std::fmt::Debug>(result: candle_pe_core::Result<T>, needles: &[&str]) -> Error {
    let err = result.expect_err("expected an error");
    let message = err.to_string();
    for needle in needles {
        assert!(
            message.contains(needle),
            "message {message:?} does not mention {needle:?}"
        );
    }
    err
}

#[test]
fn invalid_specs() {
    assert_error(
        SinusoidalEncoding::new(PeSpec::vaswani(0)),
        &["width", "got width 0"],
    );
    assert_error(
        SinusoidalEncoding::new(PeSpec::vaswani(usize::MAX)),
        &["width", &usize::MAX.to_string()],
    );
    assert_error(
        SinusoidalEncoding::new(PeSpec::whisper(7)),
        &["width 7", "odd"],
    );
    for width in [2, 3] {
        let err = assert_error(
            SinusoidalEncoding::new(PeSpec::fairseq(width)),
            &["h-1", &format!("width {width}"), "by 0"],
        );
        assert!(matches!(err, Error::DegenerateFrequencies { .. }));
        // tensor2tensor's guard makes the same widths valid.
        SinusoidalEncoding::new(PeSpec::tensor2tensor(width)).unwrap();
    }
    assert_error(
        SinusoidalEncoding::new(
            PeSpec::diffusers(8).with_frequencies(Frequencies::HalfShift { shift: 4.0 }),
        ),
        &["h-shift", "width 8"],
    );
    assert_error(
        SinusoidalEncoding::new(
            PeSpec::diffusers(8).with_frequencies(Frequencies::HalfShift { shift: f64::NAN }),
        ),
        &["shift", "NaN"],
    );
    for base in [0.0, -3.0, f64::INFINITY, f64::NAN] {
        assert_error(
            SinusoidalEncoding::new(PeSpec::marian(8).with_base(base)),
            &["base", &base.to_string()],
        );
    }
    assert_error(
        SinusoidalEncoding::new(PeSpec::marian(8).with_angle_scale(f64::INFINITY)),
        &["scale", "inf"],
    );
    // Odd widths are fine with the other policies.
    SinusoidalEncoding::new(PeSpec::whisper(7).with_odd_width(OddWidth::ZeroPad)).unwrap();
}

#[test]
fn invalid_positions() -> anyhow::Result<()> {
    let dev = Device::Cpu;
    for backend in [TableBackend::Cpu, TableBackend::Generic] {
        let pe = SinusoidalEncoding::new(PeSpec::fairseq(8))?.with_backend(backend);
        assert_error(
            pe.range(1 << 31, 1, DType::F32, &dev),
            &["offset + len", "2147483649"],
        );
        assert_error(pe.range(usize::MAX, 2, DType::F32, &dev), &["offset + len"]);
        pe.range((1 << 31) - 1, 1, DType::F32, &dev)?;

        let negative = Tensor::new(&[[0i64, -3]], &dev)?;
        assert_error(pe.at(&negative, DType::F32), &["position -3 is outside"]);
        let too_big = Tensor::new(&[5i64, 1 << 31], &dev)?;
        assert_error(
            pe.at(&too_big, DType::F32),
            &["position 2147483648 is outside"],
        );
        let float_ids = Tensor::new(&[1f32, 2.0], &dev)?;
        assert_error(
            pe.at(&float_ids, DType::F32),
            &["positions must be an integer tensor", "F32"],
        );

        for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            let t = Tensor::new(&[0.5, bad, 3.0], &dev)?;
            assert_error(
                pe.timesteps(&t, DType::F32),
                &["timesteps", &bad.to_string(), "index 1"],
            );
        }

        let float_tokens = Tensor::new(&[[1f32, 2.0]], &dev)?;
        assert_error(
            pe.padding_aware(&float_tokens, 1, 0, DType::F32),
            &["tokens", "F32"],
        );
        let scalar = Tensor::new(3u32, &dev)?;
        assert_error(
            pe.padding_aware(&scalar, 1, 0, DType::F32),
            &["tokens", "rank"],
        );
        let tokens = Tensor::new(&[[4u32, 5]], &dev)?;
        assert_error(
            pe.padding_aware(&tokens, 1, (1 << 31) - 3, DType::F32),
            &["padding_idx + past", "2147483648"],
        );

        for dtype in [DType::U32, DType::I64, DType::U8] {
            assert_error(
                pe.range(0, 4, dtype, &dev),
                &["dtype", &format!("{dtype:?}")],
            );
        }
    }
    Ok(())
}

#[test]
fn tables_too_large_for_memory_fail_before_allocating() -> anyhow::Result<()> {
    let pe = SinusoidalEncoding::new(PeSpec::vaswani(16384))?;
    // 2^31 rows x 16384 x 8 bytes = 256 TiB.
    let err = assert_error(
        pe.range(0, 1 << 31, DType::F64, &Device::Cpu),
        &["2147483648 rows", "width 16384", "bytes"],
    );
    assert!(matches!(err, Error::TooLarge { .. }));
    // The widest spec, with more rows than memory holds.
    let wide = SinusoidalEncoding::new(PeSpec::vaswani(candle_pe_core::MAX_WIDTH))?;
    assert_error(
        wide.range(0, 1 << 20, DType::F32, &Device::Cpu),
        &["1048576 rows", "bytes"],
    );
    Ok(())
}

#[test]
fn cpu_backend_is_refused_off_the_cpu() -> anyhow::Result<()> {
    let table = |backend| -> anyhow::Result<Vec<Vec<f64>>> {
        let pe = SinusoidalEncoding::new(PeSpec::marian(64))?.with_backend(backend);
        Ok(pe.range(1 << 20, 8, DType::F64, &Device::Cpu)?.to_vec2()?)
    };
    // On the CPU, Cpu is the CPU generator: Auto's bits, not the generic generator's.
    let cpu = table(TableBackend::Cpu)?;
    assert_eq!(cpu, table(TableBackend::Auto)?);
    assert_ne!(
        cpu,
        table(TableBackend::Generic)?,
        "the generators must differ for this check"
    );
    // Off the CPU (needs a GPU, so a cuda build), the variant naming the device.
    let message = Error::CpuBackendOnDevice(candle_core::DeviceLocation::Cuda { gpu_id: 0 });
    assert!(
        message
            .to_string()
            .contains("backend Cpu needs the CPU device"),
        "{message}"
    );
    #[cfg(feature = "cuda")]
    if let Ok(gpu) = Device::new_cuda(0) {
        let pe = SinusoidalEncoding::new(PeSpec::marian(4))?.with_backend(TableBackend::Cpu);
        let err = pe.range(0, 2, DType::F32, &gpu).unwrap_err();
        assert!(
            matches!(
                err,
                Error::CpuBackendOnDevice(candle_core::DeviceLocation::Cuda { .. })
            ),
            "{err}"
        );
    }
    Ok(())
}

#[test]
fn errors_compose_with_candle() {
    fn in_candle_code() -> candle_core::Result<Tensor> {
        let pe = SinusoidalEncoding::new(PeSpec::whisper(5))?;
        pe.range(0, 2, DType::F32, &Device::Cpu).map_err(Into::into)
    }
    let message = in_candle_code().unwrap_err().to_string();
    assert!(message.contains("width 5"), "{message}");
}
