//! The patch grids of `pe rope --input-ids`'s `--image-grid-thw` and `--video-grid-thw`:
//! `T,H,W;T,H,W;..`, one `(t, h, w)` per image or video, in order.

use std::str::FromStr;

/// Patch grids `T,H,W;T,H,W;..`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grids(pub Vec<[usize; 3]>);

impl FromStr for Grids {
    type Err = String;

    /// Grids separated by `;`, each three non-negative integers separated by `,`.
    fn from_str(s: &str) -> Result<Self, String> {
        s.split(';')
            .enumerate()
            .map(|(i, grid)| {
                let sizes: Vec<usize> = grid
                    .split(',')
                    .map(|v| v.trim().parse())
                    .collect::<Result<_, _>>()
                    .map_err(|_| format!("grid {} '{grid}' is not T,H,W", i + 1))?;
                <[usize; 3]>::try_from(sizes)
                    .map_err(|_| format!("grid {} '{grid}' is not three sizes T,H,W", i + 1))
            })
            .collect::<Result<_, _>>()
            .map(Grids)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grids_parse_and_name_the_bad_one() {
        assert_eq!(
            "1,4,6;3, 4,4".parse::<Grids>(),
            Ok(Grids(vec![[1, 4, 6], [3, 4, 4]]))
        );
        assert_eq!(
            "1,4,6;3,4".parse::<Grids>().unwrap_err(),
            "grid 2 '3,4' is not three sizes T,H,W"
        );
        assert!("1,-4,6".parse::<Grids>().unwrap_err().contains("grid 1"));
    }
}
