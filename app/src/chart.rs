//! The arithmetic of the dashboard's hand-drawn charts (usage, analytics): round y axis
//! ticks and which x labels to show.

/// The labelled values of a chart's y axis whose largest value is `max`: 0 and equal steps
/// of 1, 2 or 5 times a power of ten, the last at or above `max`; 3 to 5 of them.
pub fn axis_ticks(max: u64) -> Vec<u64> {
    let mut magnitude = 1_u64;
    let step = loop {
        let fitting = [1, 2, 5]
            .into_iter()
            .map(|f: u64| f.saturating_mul(magnitude))
            .find(|step| max.div_ceil(*step) <= 4);
        if let Some(step) = fitting {
            break step;
        }
        magnitude = magnitude.saturating_mul(10);
    };
    let steps = max.div_ceil(step).max(2);
    (0..=steps).map(|i| i.saturating_mul(step)).collect()
}

/// The indices of the `len` intervals whose dates an x axis shows: the last (today) and
/// every so many before it, at most `most` in all.
pub fn labelled_indices(len: usize, most: usize) -> Vec<usize> {
    if len == 0 || most == 0 {
        return Vec::new();
    }
    let every = len.div_ceil(most);
    (0..len)
        .filter(|i| (len - 1 - i).is_multiple_of(every))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_y_axis_has_three_to_five_round_ticks() {
        assert_eq!(axis_ticks(0), vec![0, 1, 2]);
        assert_eq!(axis_ticks(1), vec![0, 1, 2]);
        assert_eq!(axis_ticks(3), vec![0, 1, 2, 3]);
        assert_eq!(axis_ticks(7), vec![0, 2, 4, 6, 8]);
        assert_eq!(axis_ticks(10), vec![0, 5, 10]);
        assert_eq!(axis_ticks(37), vec![0, 10, 20, 30, 40]);
        assert_eq!(axis_ticks(100), vec![0, 50, 100]);
        assert_eq!(axis_ticks(1_234), vec![0, 500, 1_000, 1_500]);
        for max in (0..5_000).chain([u64::MAX / 3, u64::MAX]) {
            let ticks = axis_ticks(max);
            assert!((3..=5).contains(&ticks.len()), "{max}: {ticks:?}");
            assert!(*ticks.last().unwrap() >= max, "{max}: {ticks:?}");
        }
    }

    #[test]
    fn the_x_axis_labels_today_and_about_a_week_apart() {
        assert_eq!(labelled_indices(30, 6), vec![4, 9, 14, 19, 24, 29]);
        assert_eq!(labelled_indices(7, 6), vec![0, 2, 4, 6]);
        assert_eq!(labelled_indices(3, 6), vec![0, 1, 2]);
        assert_eq!(labelled_indices(1, 6), vec![0]);
        assert!(labelled_indices(0, 6).is_empty());
        assert!(labelled_indices(90, 6).len() <= 6);
    }

    #[test]
    fn ticks_stay_round_and_cover_the_largest_value() {
        assert_eq!(axis_ticks(4), vec![0, 1, 2, 3, 4]);
        assert_eq!(axis_ticks(47_200), vec![0, 20_000, 40_000, 60_000]);
        assert_eq!(axis_ticks(u64::MAX).last(), Some(&u64::MAX));
        for max in (0..20_000).chain([999_999, 1_000_001, 123_456_789]) {
            let ticks = axis_ticks(max);
            assert!((3..=5).contains(&ticks.len()), "{max}: {ticks:?}");
            assert!(*ticks.last().unwrap() >= max, "{max}: {ticks:?}");
            let step = ticks[1];
            let power = 10_u64.pow(step.ilog10());
            assert!([1, 2, 5].contains(&(step / power)) && step.is_multiple_of(power));
            assert!(ticks.windows(2).all(|w| w[1] - w[0] == step));
        }
        for len in 1..400 {
            let labels = labelled_indices(len, 6);
            assert!((1..=6).contains(&labels.len()), "{len}");
            assert_eq!(labels.last(), Some(&(len - 1)));
        }
    }
}
