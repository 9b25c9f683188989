//! `pe presets`: every named convention, its four choices and the models that use it.

use std::io::Write;

use anyhow::Result;
use candle_pe_core::Preset;

use crate::options::{frequencies_name, layout_name, odd_name};

/// Writes one block per preset to `out`, in the order of `Preset::ALL`.
pub fn print(out: &mut impl Write) -> Result<()> {
    writeln!(
        out,
        "{:<17} {:<18} {:<12} {:<9} {:>6}  models",
        "preset", "frequencies", "layout", "odd", "base"
    )?;
    for preset in Preset::ALL {
        // The width does not change any of the listed choices.
        let spec = preset.spec(512);
        let mut frequencies = frequencies_name(spec.frequencies);
        if spec.angle_scale != 1.0 {
            frequencies.push_str(&format!(" angle_scale={}", spec.angle_scale));
        }
        writeln!(
            out,
            "{:<17} {:<18} {:<12} {:<9} {:>6}  {}",
            preset.name(),
            frequencies,
            layout_name(spec.layout),
            odd_name(spec.odd_width),
            spec.base,
            preset.models()
        )?;
    }
    writeln!(
        out,
        "\nfrequencies: d = base^(-2i/d); h-minus-1 = base^(-i/(h-1)), h = d/2 \
         (-guarded: max(h-1, 1)); h-shift:S = base^(-i/(h-S))"
    )?;
    writeln!(
        out,
        "Override any choice with --frequencies, --layout, --odd, --base, --angle-scale."
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_every_preset() {
        let mut out = Vec::new();
        print(&mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        for preset in Preset::ALL {
            assert!(text.contains(preset.name()));
            assert!(text.contains(preset.models()));
        }
    }
}
