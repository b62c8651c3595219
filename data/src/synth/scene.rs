//! One synthetic photo's pixels. What makes a photo cost what it costs to
//! decode is its mix of smooth regions (sky), texture at every scale
//! (ground, surfaces), hard edges (objects) and a little sensor grain; a
//! scene here has all four, so its JPEG's size and decode time sit near a
//! photo's, where noise would be far larger and flat colour far smaller.

use crate::transform::Rng;

/// Per-pixel grain, in levels peak to peak: a camera's sensor noise.
const GRAIN: f32 = 16.0;
/// How much each finer octave of texture weighs against the last: 1,
/// all alike, as in the close-up textures much of ImageNet shows.
const PERSISTENCE: f32 = 1.0;
/// The finest texture's period, pixels: detail down to what JPEG keeps.
const FINEST: f32 = 2.0;
/// Objects in a scene, at least and at most.
const SHAPES: (usize, usize) = (6, 16);

/// A scene `w`x`h` for `class` (its palette), RGB8 packed.
pub fn scene(w: usize, h: usize, class: usize, rng: &mut Rng) -> Vec<u8> {
    let seed = rng.next_u64();
    // Half the scenes open onto a sky; the others are close-ups before a
    // textured backdrop (a wall, foliage, a far bank), as much of
    // ImageNet is.
    let upper = if rng.int(0, 1) == 0 {
        let top = palette(class + 3, rng);
        Upper::Sky {
            top,
            haze: [0, 1, 2].map(|c| 0.5 * top[c] + 110.0),
        }
    } else {
        Upper::Backdrop(Surface::random(class + 2, 0.9, rng))
    };
    let ground = Surface::random(class, 1.3, rng);
    let horizon = rng.uniform(0.1, 0.6) as f32 * h as f32;
    let scale = w.max(h) as f32;
    let mut shapes: Vec<Shape> = (0..rng.int(SHAPES.0, SHAPES.1))
        .map(|_| Shape::random(w as f32, h as f32, scale, class, rng))
        .collect();
    // Far (small) objects first, near (large) ones drawn over them.
    shapes.sort_by(|a, b| a.area().total_cmp(&b.area()));
    let mut px = vec![0u8; w * h * 3];
    for (y, row) in px.chunks_exact_mut(w * 3).enumerate() {
        let yf = y as f32;
        for (x, p) in row.chunks_exact_mut(3).enumerate() {
            let xf = x as f32;
            let hit = shapes
                .iter()
                .rev()
                .find_map(|s| s.local(xf, yf).map(|l| (s, l)));
            let color = match (hit, &upper) {
                (Some((s, (u, v))), _) => s.shade(xf, yf, u, v),
                (None, Upper::Sky { top, haze }) if yf < horizon => {
                    sky(xf, yf, horizon, *top, *haze, seed)
                }
                (None, Upper::Backdrop(b)) if yf < horizon => b.at(xf, yf, 1.0),
                (None, _) => ground.at(xf, yf, 1.0),
            };
            let grain = (lattice(x as i64, y as i64, seed ^ 7) - 0.5) * GRAIN;
            for (c, out) in color.iter().zip(p.iter_mut()) {
                *out = (c + grain).clamp(0.0, 255.0) as u8;
            }
        }
    }
    px
}

/// What lies above the horizon.
enum Upper {
    Sky { top: [f32; 3], haze: [f32; 3] },
    Backdrop(Surface),
}

/// A textured surface: two colours of a palette in patches, lit by a
/// texture.
struct Surface {
    colors: ([f32; 3], [f32; 3]),
    texture: Texture,
    /// The coarsest texture's period, pixels.
    period: f32,
    /// How far the texture swings the light.
    contrast: f32,
    seed: u64,
}

impl Surface {
    fn random(class: usize, contrast: f32, rng: &mut Rng) -> Surface {
        Surface {
            colors: (palette(class, rng), palette(class + 1, rng)),
            texture: Texture::random(rng),
            period: rng.uniform(6.0, 48.0) as f32,
            contrast,
            seed: rng.next_u64(),
        }
    }

    /// The colour at (x, y) under a `light` of 1 at the texture's mean.
    fn at(&self, x: f32, y: f32, light: f32) -> [f32; 3] {
        let patch = fractal(x, y, 4.0 * self.period, self.period, 0.5, self.seed ^ 2);
        let t = self.texture.at(x, y, self.period, self.seed);
        let light = light + self.contrast * (t - 0.5);
        mix(self.colors.0, self.colors.1, smooth(0.3, 0.7, patch)).map(|c| c * light)
    }
}

/// An object: an ellipse or a convex polygon, rotated, its surface lit
/// from the upper left.
struct Shape {
    cx: f32,
    cy: f32,
    rx: f32,
    ry: f32,
    /// The bounding radius: cheaper to test first.
    reach: f32,
    cos: f32,
    sin: f32,
    /// Corners on the unit circle, counter-clockwise; empty: an ellipse.
    corners: Vec<(f32, f32)>,
    surface: Surface,
}

impl Shape {
    fn random(w: f32, h: f32, scale: f32, class: usize, rng: &mut Rng) -> Shape {
        let angle = rng.uniform(0.0, std::f64::consts::PI) as f32;
        // Sizes spread log-uniformly: a few large objects, more small.
        let size = (rng.uniform(0.03f64.ln(), 0.3f64.ln())).exp() as f32 * scale;
        let (rx, ry) = (size, size * rng.uniform(0.4, 1.0) as f32);
        let corners = if rng.int(0, 2) == 0 {
            Vec::new()
        } else {
            let n = rng.int(3, 7);
            let mut a: Vec<f32> = (0..n)
                .map(|_| rng.uniform(0.0, std::f64::consts::TAU) as f32)
                .collect();
            a.sort_by(f32::total_cmp);
            a.iter().map(|t| (t.cos(), t.sin())).collect()
        };
        Shape {
            cx: rng.uniform(0.0, w as f64) as f32,
            cy: rng.uniform(0.15 * h as f64, h as f64) as f32,
            rx,
            ry,
            reach: rx.max(ry),
            cos: angle.cos(),
            sin: angle.sin(),
            corners,
            surface: Surface::random(class, 1.1, rng),
        }
    }

    fn area(&self) -> f32 {
        self.rx * self.ry
    }

    /// Where (x, y) falls in the shape's own frame (the unit disc's
    /// bounds), or `None` outside.
    fn local(&self, x: f32, y: f32) -> Option<(f32, f32)> {
        let (dx, dy) = (x - self.cx, y - self.cy);
        if dx.abs() > self.reach || dy.abs() > self.reach {
            return None;
        }
        let u = (dx * self.cos + dy * self.sin) / self.rx;
        let v = (-dx * self.sin + dy * self.cos) / self.ry;
        let inside = if self.corners.len() < 3 {
            u * u + v * v <= 1.0
        } else {
            let n = self.corners.len();
            (0..n).all(|i| {
                let (a, b) = (self.corners[i], self.corners[(i + 1) % n]);
                (b.0 - a.0) * (v - a.1) - (b.1 - a.1) * (u - a.0) >= 0.0
            })
        };
        inside.then_some((u, v))
    }

    /// The colour at (x, y), at (u, v) in the shape's frame: brighter
    /// towards the upper left.
    fn shade(&self, x: f32, y: f32, u: f32, v: f32) -> [f32; 3] {
        self.surface.at(x, y, 0.8 - 0.2 * (u + v))
    }
}

/// A surface's fine structure, what sets its cost in JPEG: mottled
/// (bark, skin, fur from afar), striped (wood, fabric, grass), or
/// pebbles (gravel, scales, foliage: a mosaic of small cells with dark
/// seams).
#[derive(Clone, Copy)]
enum Texture {
    Mottled,
    Stripes { cos: f32, sin: f32, period: f32 },
    Pebbles { size: f32 },
}

impl Texture {
    fn random(rng: &mut Rng) -> Texture {
        match rng.int(0, 2) {
            0 => Texture::Mottled,
            1 => {
                let a = rng.uniform(0.0, std::f64::consts::PI) as f32;
                Texture::Stripes {
                    cos: a.cos(),
                    sin: a.sin(),
                    period: rng.uniform(2.0, 7.0) as f32,
                }
            }
            _ => Texture::Pebbles {
                size: rng.uniform(2.0, 8.0) as f32,
            },
        }
    }

    /// The texture at (x, y), about [0, 1).
    fn at(self, x: f32, y: f32, period: f32, seed: u64) -> f32 {
        let mottle = fractal(x, y, period, FINEST, PERSISTENCE, seed);
        match self {
            Texture::Mottled => mottle,
            Texture::Stripes { cos, sin, period } => {
                // Warped by the mottle, as grain in wood.
                let phase = (x * cos + y * sin) / period + 2.0 * mottle;
                0.3 * mottle + 0.7 * (0.5 + 0.5 * (std::f32::consts::TAU * phase).sin())
            }
            Texture::Pebbles { size } => {
                let (shade, seam) = cells(x / size, y / size, seed ^ 5);
                (0.35 * mottle + 0.65 * shade) * smooth(0.0, 0.25, seam)
            }
        }
    }
}

/// The sky: a gradient from `top` to `haze` at the horizon, with soft
/// clouds.
fn sky(x: f32, y: f32, horizon: f32, top: [f32; 3], haze: [f32; 3], seed: u64) -> [f32; 3] {
    let base = mix(top, haze, y / horizon);
    // Clouds are wider than tall: squash the noise vertically.
    let c = fractal(x, 2.5 * y, 200.0, 4.0, 0.55, seed ^ 3);
    mix(base, [236.0, 236.0, 240.0], 0.85 * smooth(0.5, 0.8, c))
}

/// A colour of a class's palette: a hue of its own, varied by `rng`.
fn palette(class: usize, rng: &mut Rng) -> [f32; 3] {
    let hue = (class as f32 * 0.618_034).fract() * 6.0 + rng.uniform(-0.6, 0.6) as f32;
    let sat = rng.uniform(0.3, 0.85) as f32;
    let val = rng.uniform(80.0, 230.0) as f32;
    let h = hue.rem_euclid(6.0);
    let f = h - h.floor();
    let (p, q, t) = (
        val * (1.0 - sat),
        val * (1.0 - sat * f),
        val * (1.0 - sat * (1.0 - f)),
    );
    match h as u32 {
        0 => [val, t, p],
        1 => [q, val, p],
        2 => [p, val, t],
        3 => [p, q, val],
        4 => [t, p, val],
        _ => [val, p, q],
    }
}

fn mix(a: [f32; 3], b: [f32; 3], t: f32) -> [f32; 3] {
    [0, 1, 2].map(|c| a[c] + (b[c] - a[c]) * t)
}

/// 0 below `lo`, 1 above `hi`, a smooth step between.
fn smooth(lo: f32, hi: f32, x: f32) -> f32 {
    let t = ((x - lo) / (hi - lo)).clamp(0.0, 1.0);
    t * t * (3.0 - 2.0 * t)
}

/// A hash of a lattice point, in [0, 1).
fn lattice(x: i64, y: i64, seed: u64) -> f32 {
    let mut h = seed
        ^ (x as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ^ (y as u64).wrapping_mul(0xC2B2_AE3D_27D4_EB4F);
    h = (h ^ (h >> 31)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    h ^= h >> 29;
    (h >> 40) as f32 / (1u64 << 24) as f32
}

/// Smooth value noise in [0, 1).
fn value_noise(x: f32, y: f32, seed: u64) -> f32 {
    let (xi, yi) = (x.floor(), y.floor());
    let (fx, fy) = (x - xi, y - yi);
    let (sx, sy) = (fx * fx * (3.0 - 2.0 * fx), fy * fy * (3.0 - 2.0 * fy));
    let (xi, yi) = (xi as i64, yi as i64);
    let a = lattice(xi, yi, seed);
    let b = lattice(xi + 1, yi, seed);
    let c = lattice(xi, yi + 1, seed);
    let d = lattice(xi + 1, yi + 1, seed);
    let top = a + (b - a) * sx;
    let bottom = c + (d - c) * sx;
    top + (bottom - top) * sy
}

/// Cellular (Worley) noise on a unit grid of jittered points: the
/// nearest point's shade in [0, 1) and the distance to the seam between
/// it and the next nearest (0 on the seam).
fn cells(x: f32, y: f32, seed: u64) -> (f32, f32) {
    let (xi, yi) = (x.floor() as i64, y.floor() as i64);
    let (mut d1, mut d2, mut shade) = (f32::MAX, f32::MAX, 0.0);
    for cy in yi - 1..=yi + 1 {
        for cx in xi - 1..=xi + 1 {
            let px = cx as f32 + lattice(cx, cy, seed);
            let py = cy as f32 + lattice(cx, cy, seed ^ 0x55);
            let d = (px - x).hypot(py - y);
            if d < d1 {
                (d2, d1) = (d1, d);
                shade = lattice(cx, cy, seed ^ 0xAA);
            } else if d < d2 {
                d2 = d;
            }
        }
    }
    (shade, d2 - d1)
}

/// Fractal noise in [0, 1): octaves of value noise from a period of
/// `coarse` pixels down to `fine`, each `persistence` times the weight of
/// the last.
fn fractal(x: f32, y: f32, coarse: f32, fine: f32, persistence: f32, seed: u64) -> f32 {
    let (mut period, mut amp, mut sum, mut norm) = (coarse, 1.0, 0.0, 0.0);
    let mut octave = 0u64;
    loop {
        sum += amp * value_noise(x / period, y / period, seed.wrapping_add(octave));
        norm += amp;
        period *= 0.5;
        if period < fine {
            break;
        }
        amp *= persistence;
        octave += 1;
    }
    sum / norm
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn noise_stays_in_range() {
        for i in 0..2000 {
            let (x, y) = (i as f32 * 0.37, i as f32 * 1.13);
            let f = fractal(x, y, 64.0, 2.0, 0.75, 9);
            assert!((0.0..1.0).contains(&f), "{f}");
        }
    }

    #[test]
    fn polygons_hold_their_centre_and_not_far_points() {
        let mut rng = Rng::new(4);
        for _ in 0..50 {
            let s = Shape::random(200.0, 100.0, 200.0, 1, &mut rng);
            // A polygon on random corners may miss its centre; an ellipse
            // never does.
            if s.corners.is_empty() {
                assert!(s.local(s.cx, s.cy).is_some());
            }
            assert!(s.local(s.cx + 2.0 * s.reach, s.cy).is_none());
        }
    }
}
