//! Where a plot's text goes, in pixels and nothing else (no drawing): the
//! names of level lines beside their lines' ends ([`place_labels`]), and a
//! label beside a point that no line crosses ([`clear_spot`]).
//!
//! Pixel coordinates grow rightwards and downwards, as in SVG.

/// A point in pixels, `(x, y)`.
pub type Point = (f64, f64);

/// A straight segment from one point to another.
pub type Segment = (Point, Point);

/// A rectangle in pixels: left, top, right, bottom.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rect {
    /// Left edge.
    pub left: f64,
    /// Top edge.
    pub top: f64,
    /// Right edge.
    pub right: f64,
    /// Bottom edge.
    pub bottom: f64,
}

impl Rect {
    /// The rectangle of `size` (width, height) centred on `centre`.
    pub fn centred(centre: (f64, f64), size: (f64, f64)) -> Rect {
        Rect {
            left: centre.0 - size.0 / 2.0,
            top: centre.1 - size.1 / 2.0,
            right: centre.0 + size.0 / 2.0,
            bottom: centre.1 + size.1 / 2.0,
        }
    }

    /// Whether `inner` lies wholly inside this rectangle.
    pub fn contains(&self, inner: &Rect) -> bool {
        inner.left >= self.left
            && inner.right <= self.right
            && inner.top >= self.top
            && inner.bottom <= self.bottom
    }

    /// Whether the two rectangles share any point.
    pub fn overlaps(&self, other: &Rect) -> bool {
        self.left <= other.right
            && other.left <= self.right
            && self.top <= other.bottom
            && other.top <= self.bottom
    }

    /// Whether the segment from `a` to `b` passes through the rectangle
    /// (Liang-Barsky clipping: the part of the segment inside the four
    /// edges' half-planes is not empty).
    pub fn crossed_by(&self, a: (f64, f64), b: (f64, f64)) -> bool {
        let (dx, dy) = (b.0 - a.0, b.1 - a.1);
        let (mut t0, mut t1) = (0.0f64, 1.0f64);
        for (p, q) in [
            (-dx, a.0 - self.left),
            (dx, self.right - a.0),
            (-dy, a.1 - self.top),
            (dy, self.bottom - a.1),
        ] {
            if p == 0.0 {
                // Parallel to this edge: inside its half-plane or never.
                if q < 0.0 {
                    return false;
                }
            } else {
                let t = q / p;
                if p < 0.0 {
                    t0 = t0.max(t);
                } else {
                    t1 = t1.min(t);
                }
            }
        }
        t0 <= t1
    }
}

/// The heights at which to write labels `height` pixels tall, one per
/// entry of `wanted` (the heights of the lines they name, in the same
/// order), inside `top..=bottom`: each at its line's height where there is
/// room, otherwise moved apart by as little as possible (the sum of the
/// squared moves is the least of any placement in which no two labels
/// overlap, keeping their order and staying in bounds).
///
/// Labels whose lines are at one height keep the order they are given in.
/// If all of them cannot fit between `top` and `bottom`, they are stacked
/// from `top`.
pub fn place_labels(wanted: &[f64], height: f64, top: f64, bottom: f64) -> Vec<f64> {
    let n = wanted.len();
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| wanted[a].total_cmp(&wanted[b]).then(a.cmp(&b)));
    // With the i-th label from the top at `z_i + i * height`, no overlap
    // is `z` not decreasing: the least-squares non-decreasing `z` for
    // `wanted - i * height` (pooling adjacent violators) is the placement.
    // Each block: the sum of its targets and its length.
    let mut blocks: Vec<(f64, usize)> = Vec::with_capacity(n);
    for (i, &at) in order.iter().enumerate() {
        blocks.push((wanted[at] - i as f64 * height, 1));
        while let [.., (s0, n0), (s1, n1)] = blocks[..] {
            if s0 / n0 as f64 <= s1 / n1 as f64 {
                break;
            }
            blocks.truncate(blocks.len() - 2);
            blocks.push((s0 + s1, n0 + n1));
        }
    }
    // Bounds common to every `z` keep the optimum when clamped into them.
    let (lo, hi) = (top, (bottom - (n.max(1) - 1) as f64 * height).max(top));
    let mut placed = vec![0.0; n];
    let mut i = 0;
    for (sum, len) in blocks {
        let z = (sum / len as f64).clamp(lo, hi);
        for _ in 0..len {
            placed[order[i]] = z + i as f64 * height;
            i += 1;
        }
    }
    placed
}

/// Where to centre a label of `size` (width, height) beside the point
/// `at`, clear of a ring of `radius` around it: the first of the spots
/// above, below, then to either side (nearer spots first) whose rectangle
/// lies inside `area`, crosses none of `segments` and overlaps none of
/// `boxes`. Failing that, the spot inside `area` with the fewest
/// crossings; failing that, just above the point.
pub fn clear_spot(
    at: (f64, f64),
    size: (f64, f64),
    radius: f64,
    area: &Rect,
    segments: &[Segment],
    boxes: &[Rect],
) -> (f64, f64) {
    let (w, h) = size;
    let gap = radius + 4.0;
    let mut spots = Vec::new();
    for step in 0..6 {
        let d = gap + step as f64 * h;
        let up = at.1 - d - h / 2.0;
        let down = at.1 + d + h / 2.0;
        for y in [up, down] {
            spots.push((at.0, y));
            spots.push((at.0 - w / 2.0 + radius, y));
            spots.push((at.0 + w / 2.0 - radius, y));
        }
        if step == 0 {
            spots.push((at.0 - gap - w / 2.0, at.1));
            spots.push((at.0 + gap + w / 2.0, at.1));
        }
    }
    let crossings = |c: (f64, f64)| {
        let r = Rect::centred(c, size);
        segments.iter().filter(|s| r.crossed_by(s.0, s.1)).count()
            + boxes.iter().filter(|b| r.overlaps(b)).count()
    };
    let inside: Vec<(f64, f64)> = spots
        .into_iter()
        .filter(|&c| area.contains(&Rect::centred(c, size)))
        .collect();
    inside
        .iter()
        .copied()
        .min_by_key(|&c| crossings(c))
        .unwrap_or((at.0, at.1 - gap - h / 2.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: f64 = 15.0;

    /// No two labels overlap, and their order is their lines' order.
    fn assert_apart(wanted: &[f64], placed: &[f64]) {
        for i in 0..wanted.len() {
            for j in 0..wanted.len() {
                if i != j {
                    assert!(
                        (placed[i] - placed[j]).abs() >= H - 1e-9,
                        "{wanted:?} -> {placed:?}: {i} and {j} overlap"
                    );
                }
                if wanted[i] < wanted[j] {
                    assert!(placed[i] < placed[j], "{wanted:?} -> {placed:?}");
                }
            }
        }
    }

    #[test]
    fn labels_with_room_stay_at_their_lines() {
        let wanted = [300.0, 100.0, 200.0, 115.0];
        assert_eq!(place_labels(&wanted, H, 0.0, 500.0), wanted);
    }

    #[test]
    fn two_labels_at_one_height_move_apart_by_half_each() {
        // The stacking that pushed the second one down a whole label kept
        // the first at its line and moved the second by 15 (squared: 225);
        // half each way moves both by 7.5 (squared: 112.5).
        assert_eq!(place_labels(&[100.0, 100.0], H, 0.0, 500.0), [92.5, 107.5]);
    }

    #[test]
    fn a_crowded_group_moves_around_its_mean_and_leaves_the_rest() {
        let wanted = [100.0, 102.0, 104.0, 300.0, 50.0];
        let placed = place_labels(&wanted, H, 0.0, 500.0);
        assert_apart(&wanted, &placed);
        // The three close ones: centred on their mean, 15 apart.
        assert_eq!(&placed[..3], [87.0, 102.0, 117.0]);
        // The others do not move.
        assert_eq!((placed[3], placed[4]), (300.0, 50.0));
    }

    #[test]
    fn groups_that_meet_when_spread_merge() {
        // 100, 101 spread to 92.5..107.5 and 118, 119 to 111..126, which
        // overlap: all four are spread around their common mean.
        let wanted = [100.0, 101.0, 118.0, 119.0];
        let placed = place_labels(&wanted, H, 0.0, 500.0);
        assert_apart(&wanted, &placed);
        assert_eq!(placed, [87.0, 102.0, 117.0, 132.0]);
    }

    #[test]
    fn labels_stay_inside_the_bounds() {
        let wanted = [2.0, 3.0, 495.0, 499.0];
        let placed = place_labels(&wanted, H, 0.0, 500.0);
        assert_apart(&wanted, &placed);
        assert_eq!(placed, [0.0, 15.0, 485.0, 500.0]);
        // Too many to fit: stacked from the top.
        let placed = place_labels(&[10.0; 4], H, 0.0, 30.0);
        assert_eq!(placed, [0.0, 15.0, 30.0, 45.0]);
    }

    #[test]
    fn the_placement_is_the_least_squared_move() {
        // Against every placement of the middle group on a fine grid:
        // none that keeps the labels apart moves them less.
        let wanted = [40.0, 47.0, 49.0, 60.0, 200.0];
        let placed = place_labels(&wanted, H, 0.0, 500.0);
        assert_apart(&wanted, &placed);
        let cost = |p: &[f64]| -> f64 { p.iter().zip(&wanted).map(|(a, b)| (a - b).powi(2)).sum() };
        let best = cost(&placed);
        for start in 0..400 {
            let z = start as f64 * 0.25;
            let p = [z, z + H, z + 2.0 * H, z + 3.0 * H, 200.0];
            assert!(cost(&p) >= best - 1e-9, "{p:?} moves less than {placed:?}");
        }
    }

    #[test]
    fn spread_labels_of_many_random_lines_never_overlap() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..200 {
            let wanted: Vec<f64> = (0..8)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    (x % 300) as f64
                })
                .collect();
            let placed = place_labels(&wanted, H, 0.0, 400.0);
            assert_apart(&wanted, &placed);
            assert!(placed.iter().all(|&p| (0.0..=400.0).contains(&p)));
        }
    }

    #[test]
    fn a_segment_crosses_a_rectangle_only_through_it() {
        let r = Rect {
            left: 10.0,
            top: 10.0,
            right: 20.0,
            bottom: 20.0,
        };
        assert!(r.crossed_by((0.0, 15.0), (30.0, 15.0)));
        assert!(r.crossed_by((12.0, 12.0), (13.0, 13.0)));
        assert!(r.crossed_by((0.0, 0.0), (30.0, 30.0)));
        assert!(!r.crossed_by((0.0, 25.0), (30.0, 25.0)));
        assert!(!r.crossed_by((0.0, 0.0), (9.0, 30.0)));
        assert!(!r.crossed_by((21.0, 0.0), (40.0, 5.0)));
    }

    #[test]
    fn containing_overlapping_and_crossing_are_decided_edge_by_edge() {
        let r = Rect {
            left: 10.0,
            top: 10.0,
            right: 20.0,
            bottom: 20.0,
        };
        let at = |left, top, right, bottom| Rect {
            left,
            top,
            right,
            bottom,
        };
        assert!(r.contains(&at(11.0, 11.0, 19.0, 19.0)));
        for out in [
            at(9.0, 11.0, 19.0, 19.0),
            at(11.0, 11.0, 21.0, 19.0),
            at(11.0, 9.0, 19.0, 19.0),
            at(11.0, 11.0, 19.0, 21.0),
        ] {
            assert!(!r.contains(&out), "{out:?}");
        }
        assert!(r.overlaps(&at(15.0, 15.0, 25.0, 25.0)));
        assert!(r.overlaps(&at(20.0, 20.0, 25.0, 25.0)), "a shared corner");
        for apart in [
            at(21.0, 10.0, 30.0, 20.0),
            at(0.0, 10.0, 9.0, 20.0),
            at(10.0, 21.0, 20.0, 30.0),
            at(10.0, 0.0, 20.0, 9.0),
        ] {
            assert!(!r.overlaps(&apart) && !apart.overlaps(&r), "{apart:?}");
        }
        // Either way along a line through it.
        assert!(r.crossed_by((30.0, 15.0), (0.0, 15.0)));
        assert!(r.crossed_by((15.0, 30.0), (15.0, 0.0)));
        // Along an edge: on it, so crossed.
        assert!(r.crossed_by((0.0, 10.0), (30.0, 10.0)));
        assert!(r.crossed_by((20.0, 0.0), (20.0, 30.0)));
        // Short of each edge, either way.
        for (a, b) in [
            ((0.0, 15.0), (5.0, 15.0)),
            ((25.0, 15.0), (30.0, 15.0)),
            ((15.0, 0.0), (15.0, 5.0)),
            ((15.0, 25.0), (15.0, 30.0)),
        ] {
            assert!(!r.crossed_by(a, b) && !r.crossed_by(b, a), "{a:?} {b:?}");
        }
    }

    #[test]
    fn the_spot_above_is_taken_when_nothing_crosses_it() {
        let area = Rect {
            left: 0.0,
            top: 0.0,
            right: 400.0,
            bottom: 400.0,
        };
        let spot = clear_spot((200.0, 200.0), (100.0, 16.0), 9.0, &area, &[], &[]);
        assert_eq!(spot, (200.0, 200.0 - 13.0 - 8.0));
    }

    #[test]
    fn a_level_line_above_sends_the_label_below() {
        let area = Rect {
            left: 0.0,
            top: 0.0,
            right: 400.0,
            bottom: 400.0,
        };
        // A line 20 px above the point, across the whole width.
        let line = ((0.0, 180.0), (400.0, 180.0));
        let spot = clear_spot((200.0, 200.0), (100.0, 16.0), 9.0, &area, &[line], &[]);
        let label = Rect::centred(spot, (100.0, 16.0));
        assert!(!label.crossed_by(line.0, line.1), "{spot:?}");
        assert_eq!(spot, (200.0, 200.0 + 13.0 + 8.0));
    }

    #[test]
    fn a_label_never_leaves_the_area_nor_sits_on_another() {
        // The point at the right edge: a label centred on it would stick
        // out, into the names of the level lines.
        let area = Rect {
            left: 0.0,
            top: 0.0,
            right: 400.0,
            bottom: 400.0,
        };
        let other = Rect {
            left: 200.0,
            top: 160.0,
            right: 400.0,
            bottom: 185.0,
        };
        let spot = clear_spot((395.0, 200.0), (100.0, 16.0), 9.0, &area, &[], &[other]);
        let label = Rect::centred(spot, (100.0, 16.0));
        assert!(area.contains(&label) && !label.overlaps(&other), "{spot:?}");
    }
}
