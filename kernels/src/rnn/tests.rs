//! Every cell, direction and ISA against the f64 reference: outputs,
//! final states and every gradient.

use super::matrix::PER_STEP_INPUT_BYTES;
use super::*;
use crate::conv::reference::rel_l2_error;
use crate::rng::fill_uniform;
use crate::Isa;

/// Seeded inputs of `shape`: weights at PyTorch's init scale (1/sqrt(h)).
struct Case {
    x: Vec<f32>,
    hx: Vec<f32>,
    cx: Vec<f32>,
    weights: Vec<Weights>,
    dy: Vec<f32>,
    dhy: Vec<f32>,
    dcy: Vec<f32>,
}

impl Case {
    fn new(shape: &RnnShape, seed: u64) -> Case {
        let filled = |len: usize, k: u64, scale: f32| {
            let mut v = vec![0.0; len];
            fill_uniform(&mut v, seed * 100 + k, scale);
            v
        };
        let scale = 1.0 / (shape.hidden as f32).sqrt();
        let weights = (0..shape.sets())
            .map(|s| {
                let mut w = Weights::zeros(shape, s);
                for (i, t) in w.tensors_mut().into_iter().enumerate() {
                    let n = t.len();
                    *t = filled(n, 10 + 4 * s as u64 + i as u64, scale);
                }
                w
            })
            .collect();
        Case {
            x: filled(shape.x_len(), 1, 1.0),
            hx: filled(shape.state_len(), 2, 0.5),
            cx: filled(shape.state_len(), 3, 0.5),
            weights,
            dy: filled(shape.y_len(), 4, 1.0),
            dhy: filled(shape.state_len(), 5, 0.5),
            dcy: filled(shape.state_len(), 6, 0.5),
        }
    }
}

fn close(what: &str, shape: &RnnShape, isa: Isa, got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len(), "{what}: {shape:?} {isa}");
    let e = rel_l2_error(got, want);
    assert!(e < 1e-5, "{what}: {shape:?} {isa}: relative L2 {e}");
}

fn check_against_reference(shape: &RnnShape, isa: Isa) {
    let c = Case::new(shape, 7);
    let want = reference::run(shape, &c.x, &c.hx, &c.cx, &c.weights, &c.dy, &c.dhy, &c.dcy);
    let inp = Inputs {
        x: &c.x,
        hx: &c.hx,
        cx: &c.cx,
        weights: &c.weights,
    };
    let mut ws = Workspace::new(shape);
    assert_eq!(Workspace::bytes_for(shape), Some(ws.bytes()), "{shape:?}");
    let state = shape.state_len();
    let lstm = shape.cell == Cell::Lstm;
    let (mut y, mut hy, mut cy) = (
        vec![f32::NAN; shape.y_len()],
        vec![f32::NAN; state],
        vec![f32::NAN; if lstm { state } else { 0 }],
    );
    forward(isa, shape, &inp, &mut ws, &mut y, &mut hy, &mut cy);
    close("y", shape, isa, &y, &want.y);
    close("hy", shape, isa, &hy, &want.hy);
    close("cy", shape, isa, &cy, &want.cy);
    let grads = OutputGrads {
        dy: &c.dy,
        dhy: &c.dhy,
        dcy: &c.dcy,
    };
    let (mut dx, mut dhx, mut dcx) = (
        vec![f32::NAN; shape.x_len()],
        vec![f32::NAN; state],
        vec![f32::NAN; if lstm { state } else { 0 }],
    );
    backward_data(
        isa, shape, &inp, &grads, &mut ws, &mut dx, &mut dhx, &mut dcx,
    );
    close("dx", shape, isa, &dx, &want.dx);
    close("dhx", shape, isa, &dhx, &want.dhx);
    close("dcx", shape, isa, &dcx, &want.dcx);
    let mut dw: Vec<Weights> = (0..shape.sets())
        .map(|s| {
            let mut w = Weights::zeros(shape, s);
            for t in w.tensors_mut() {
                t.fill(f32::NAN);
            }
            w
        })
        .collect();
    backward_weights(isa, shape, &inp, &mut ws, &mut dw);
    // Nothing grew during the passes: every buffer was there beforehand.
    assert_eq!(
        Workspace::bytes_for(shape),
        Some(ws.bytes()),
        "{shape:?} after"
    );
    for (s, (got, want)) in dw.iter().zip(&want.dw).enumerate() {
        for (name, (g, w)) in ["dw_ih", "dw_hh", "db_ih", "db_hh"]
            .iter()
            .zip(got.tensors().iter().zip(want.tensors()))
        {
            close(&format!("{name} of set {s}"), shape, isa, g, w);
        }
    }
}

#[test]
fn every_cell_direction_and_isa_matches_the_reference() {
    for isa in Isa::supported() {
        for cell in Cell::ALL {
            for direction in Direction::ALL {
                let shape = RnnShape {
                    cell,
                    direction,
                    layers: 2,
                    t: 4,
                    mb: 3,
                    input: 5,
                    hidden: 7,
                };
                check_against_reference(&shape, isa);
            }
        }
    }
}

#[test]
fn large_steps_take_the_parallel_gate_pass() {
    // mb·h above the serial threshold, so the gate passes split in ranges.
    for cell in Cell::ALL {
        let shape = RnnShape {
            cell,
            direction: Direction::Left2Right,
            layers: 1,
            t: 2,
            mb: 33,
            input: 8,
            hidden: 520,
        };
        check_against_reference(&shape, Isa::detect());
    }
}

#[test]
fn states_and_outputs_wide_enough_for_register_transposes() {
    // A batch and sizes of at least 16 (AVX-512 transposes them 16 x 16 in
    // registers), not whole blocks of 16; two layers both ways, the
    // outputs side by side (the steps' outputs land `2h` apart); a batch
    // of a vector or more, whose forward packs its weights only from
    // `FWD_PACK_MIN_STEPS` steps.
    for cell in Cell::ALL {
        for direction in [Direction::Left2Right, Direction::Concat] {
            // 3 steps forward on unpacked weights, 10 on packed ones.
            for t in [3, 10] {
                let shape = RnnShape {
                    cell,
                    direction,
                    layers: 2,
                    t,
                    mb: 17,
                    input: 19,
                    hidden: 33,
                };
                for isa in Isa::supported() {
                    check_against_reference(&shape, isa);
                }
            }
        }
    }
}

#[test]
fn one_step_one_layer_and_no_steps() {
    for cell in Cell::ALL {
        for t in [0, 1] {
            let shape = RnnShape {
                cell,
                direction: Direction::Concat,
                layers: 1,
                t,
                mb: 2,
                input: 3,
                hidden: 4,
            };
            check_against_reference(&shape, Isa::detect());
        }
    }
}

#[test]
fn flops_count_both_gemms_per_layer_and_direction() {
    // DeepBench's LSTM h=512, mb=16, t=25 with a full input GEMM:
    // 2·(25·16)·(4·512)·(512+512) per direction.
    let s = RnnShape {
        cell: Cell::Lstm,
        direction: Direction::Left2Right,
        layers: 1,
        t: 25,
        mb: 16,
        input: 512,
        hidden: 512,
    };
    assert_eq!(s.flops(), 2 * 400 * 2048 * 1024);
    let bi = RnnShape {
        direction: Direction::Concat,
        layers: 2,
        ..s
    };
    // The second layer reads 2h features.
    assert_eq!(
        bi.flops(),
        2 * (2 * 400 * 2048 * 1024 + 2 * 400 * 2048 * 1536)
    );
}

#[test]
fn three_layers_cycle_the_layer_gradient_buffers() {
    for cell in Cell::ALL {
        for direction in [Direction::Concat, Direction::Sum, Direction::Right2Left] {
            let shape = RnnShape {
                cell,
                direction,
                layers: 3,
                t: 3,
                mb: 2,
                input: 3,
                hidden: 5,
            };
            check_against_reference(&shape, Isa::detect());
        }
    }
}

#[test]
fn repeated_passes_give_the_same_outputs() {
    // The timing loop runs each pass many times on one workspace: every
    // run must compute the same thing, not build on the last.
    for cell in Cell::ALL {
        let shape = RnnShape {
            cell,
            direction: Direction::Concat,
            layers: 2,
            t: 4,
            mb: 3,
            input: 5,
            hidden: 6,
        };
        let c = Case::new(&shape, 3);
        let inp = Inputs {
            x: &c.x,
            hx: &c.hx,
            cx: &c.cx,
            weights: &c.weights,
        };
        let grads = OutputGrads {
            dy: &c.dy,
            dhy: &c.dhy,
            dcy: &c.dcy,
        };
        let mut ws = Workspace::new(&shape);
        let state = shape.state_len();
        let c_len = if cell == Cell::Lstm { state } else { 0 };
        let isa = Isa::detect();
        let mut run = || {
            let (mut y, mut hy, mut cy) =
                (vec![0.0; shape.y_len()], vec![0.0; state], vec![0.0; c_len]);
            let (mut dx, mut dhx, mut dcx) =
                (vec![0.0; shape.x_len()], vec![0.0; state], vec![0.0; c_len]);
            let mut dw: Vec<Weights> = (0..shape.sets())
                .map(|s| Weights::zeros(&shape, s))
                .collect();
            forward(isa, &shape, &inp, &mut ws, &mut y, &mut hy, &mut cy);
            backward_data(
                isa, &shape, &inp, &grads, &mut ws, &mut dx, &mut dhx, &mut dcx,
            );
            backward_data(
                isa, &shape, &inp, &grads, &mut ws, &mut dx, &mut dhx, &mut dcx,
            );
            backward_weights(isa, &shape, &inp, &mut ws, &mut dw);
            backward_weights(isa, &shape, &inp, &mut ws, &mut dw);
            (y, hy, cy, dx, dhx, dcx, dw)
        };
        let first = run();
        let again = run();
        assert!(first == again, "{cell:?}: a second run differs");
    }
}

#[test]
fn an_input_without_a_gradient_skips_only_dx() {
    // A network's own input needs no gradient: an empty `dx` leaves the
    // states' and weights' gradients as they were.
    for direction in [Direction::Left2Right, Direction::Concat] {
        let shape = RnnShape {
            cell: Cell::Lstm,
            direction,
            layers: 2,
            t: 3,
            mb: 2,
            input: 4,
            hidden: 5,
        };
        let c = Case::new(&shape, 5);
        let want = reference::run(
            &shape, &c.x, &c.hx, &c.cx, &c.weights, &c.dy, &c.dhy, &c.dcy,
        );
        let inp = Inputs {
            x: &c.x,
            hx: &c.hx,
            cx: &c.cx,
            weights: &c.weights,
        };
        let grads = OutputGrads {
            dy: &c.dy,
            dhy: &c.dhy,
            dcy: &c.dcy,
        };
        let isa = Isa::detect();
        let mut ws = Workspace::new(&shape);
        let state = shape.state_len();
        let (mut y, mut hy, mut cy) =
            (vec![0.0; shape.y_len()], vec![0.0; state], vec![0.0; state]);
        forward(isa, &shape, &inp, &mut ws, &mut y, &mut hy, &mut cy);
        let (mut dhx, mut dcx) = (vec![0.0; state], vec![0.0; state]);
        backward_data(
            isa,
            &shape,
            &inp,
            &grads,
            &mut ws,
            &mut [],
            &mut dhx,
            &mut dcx,
        );
        close("dhx", &shape, isa, &dhx, &want.dhx);
        close("dcx", &shape, isa, &dcx, &want.dcx);
        let mut dw: Vec<Weights> = (0..shape.sets())
            .map(|s| Weights::zeros(&shape, s))
            .collect();
        backward_weights(isa, &shape, &inp, &mut ws, &mut dw);
        for (got, want) in dw.iter().zip(&want.dw) {
            for (g, w) in got.tensors().iter().zip(want.tensors()) {
                close("dw", &shape, isa, g, w);
            }
        }
    }
}

#[test]
fn both_input_product_paths_match_the_reference() {
    // W_ih of 4·64 x 4200 floats (4.1 MiB) packs neither: one GEMM over
    // every step; 4·64 x 600 (600 KiB, past PER_STEP_INPUT_BYTES) runs per
    // step on packed weights, as W_hh packs; 4·64 x 16 per step anyway.
    // At a batch of one, both larger ones run as one GEMM over every step
    // whose rows are the steps.
    for mb in [17, 1] {
        for input in [4200, 600, 16] {
            assert_eq!(4 * 64 * input * 4 > PER_STEP_INPUT_BYTES, input != 16);
            for (cell, direction) in [
                (Cell::Lstm, Direction::Concat),
                (Cell::Gru, Direction::Left2Right),
            ] {
                let shape = RnnShape {
                    cell,
                    direction,
                    layers: 2,
                    t: 3,
                    mb,
                    input,
                    hidden: 64,
                };
                check_against_reference(&shape, Isa::detect());
            }
        }
    }
}

#[test]
fn the_input_gradient_reads_every_steps_gate_gradients_in_place() {
    // Layer 0's input gradient, 156 x 1024 (t·mb x input), takes the
    // packed GEMM where AVX-512 is, reading step by step (13 rows each:
    // two micro-tiles and one row); layer 1's, 156 x 64, gathers the
    // steps first. Both directions add into it.
    let shape = |cell, direction| RnnShape {
        cell,
        direction,
        layers: 2,
        t: 12,
        mb: 13,
        input: 1024,
        hidden: 32,
    };
    // One step's product: 13 x input x 3·32.
    let dx = |input| crate::gemm::GemmShape {
        m: 13,
        n: input,
        k: 3 * 32,
        trans_a: true,
        trans_b: false,
    };
    let isa = Isa::detect();
    let packed = crate::conv::im2col_gemm::packed::available_for_all(isa);
    assert_eq!(crate::gemm::batch_packs(isa, &dx(1024), 12), packed);
    assert!(!crate::gemm::batch_packs(isa, &dx(64), 12));
    for (cell, direction) in [
        (Cell::Lstm, Direction::Concat),
        (Cell::Gru, Direction::Sum),
        (Cell::RnnTanh, Direction::Left2Right),
    ] {
        check_against_reference(&shape(cell, direction), isa);
    }
}

#[test]
fn team_steps_match_the_reference_on_two_and_three_threads() {
    // Shapes whose steps run on a team (asserted): wide and narrow panel
    // tiles, a batch that is not whole vectors, the input's product per
    // step and over every step.
    // From outside a pool (the global one), and from inside one of three
    // threads (where a member that does not come in time is left out).
    // (An input of 3700 is too long a reduction to pack: its product runs
    // over every step at once; so does a batch of one's of 600, whose rows
    // are the steps.)
    // (batch, hidden, input, steps): one case of 24 steps, an even
    // number, long enough for a whole team to run work ahead; the others
    // at the fewest steps whose forward packs at any batch
    // (`FWD_PACK_MIN_STEPS`).
    let steps = super::forward::FWD_PACK_MIN_STEPS;
    let cases = [
        (13, 72, 5, steps),
        (5, 120, 6, steps),
        (13, 72, 500, steps),
        (13, 72, 3700, steps),
        (1, 256, 600, steps),
        (16, 64, 24, 24),
        // W_ih of exactly 4 MiB (4·256 x 1024) beside a 1 MiB W_hh: on
        // AVX-512 each alone would pack in other panels (halves against
        // the narrow tile); W_ih packs in W_hh's.
        (16, 256, 1024, steps),
    ];
    let three = rayon::ThreadPoolBuilder::new()
        .num_threads(3)
        .build()
        .unwrap();
    for inside in [false, true] {
        let run = |f: &(dyn Fn() + Sync)| if inside { three.install(f) } else { f() };
        run(&|| {
            for isa in Isa::supported() {
                for cell in Cell::ALL {
                    for direction in [Direction::Left2Right, Direction::Concat] {
                        for &(mb, hidden, input, t) in &cases {
                            let shape = RnnShape {
                                cell,
                                direction,
                                layers: 2,
                                t,
                                mb,
                                input,
                                hidden,
                            };
                            assert!(packed_and_team(&shape, isa).1, "{shape:?} {isa}: no team");
                            check_against_reference(&shape, isa);
                        }
                    }
                }
            }
        });
    }
}

#[test]
fn large_recurrent_weights_pack_for_a_narrow_batch() {
    // W_hh past the small packs' 4 MiB (4·600² and 3·600² floats), for
    // batches narrow enough for the column tile (AVX-512 up to 8, and 9-16
    // in halves, as the weights are past HALVES_MIN_BYTES; AVX2 up to 4),
    // or on AVX2 for the narrow panel tile (8) where 5.8 MB fit in the
    // largest cache: packed at every batch the ISA's column tile takes,
    // and the passes match the reference on a team of two and on one
    // thread. An input of 700 keeps W_ih large and unpacked (one product
    // over every step, or its rows at a batch of one); one of 64 packs it
    // too, in W_hh's panels (alone it would take the narrow tile), and
    // its product runs per step on the team.
    let hidden = 600;
    let cases = [Cell::Lstm, Cell::Gru]
        .into_iter()
        .flat_map(|cell| [1, 3, 8, 12, 16].map(|mb| (cell, mb)))
        .flat_map(|(cell, mb)| [700, 64].map(|input| (cell, mb, input)));
    let cases: Vec<_> = cases.collect();
    for threads in [2, 1] {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| {
            for isa in Isa::supported() {
                for &(cell, mb, input) in &cases {
                    let shape = RnnShape {
                        cell,
                        direction: Direction::Left2Right,
                        layers: 1,
                        t: super::forward::FWD_PACK_MIN_STEPS,
                        mb,
                        input,
                        hidden,
                    };
                    assert!(cell.gates() * hidden * hidden * 4 > 4 << 20);
                    let (packed, team) = packed_and_team(&shape, isa);
                    // On the column tile: AVX-512 in halves up to 16.
                    let by_columns = match isa {
                        Isa::Avx512 => true,
                        _ => isa != Isa::Scalar && 2 * mb <= isa.f32_lanes(),
                    };
                    assert!(!by_columns || packed, "{shape:?} {isa}");
                    assert!(!packed || threads == 1 || team, "{shape:?} {isa}: no team");
                    check_against_reference(&shape, isa);
                }
            }
        });
    }
}

/// Whether `shape`'s `W_hh` packs for its per-step products on `isa`, and
/// whether its steps then run on a team (of the current pool), in both
/// passes: a case whose forward would not pack (too few steps, see
/// `FWD_PACK_MIN_STEPS`) is a mistake in the test.
fn packed_and_team(shape: &RnnShape, isa: Isa) -> (bool, bool) {
    assert!(
        super::forward::packs_forward(isa, shape.t, shape.mb),
        "{shape:?} {isa}: too few steps for the forward to pack"
    );
    let (gates, h) = (shape.cell.gates(), shape.hidden);
    let mut packed = crate::conv::direct::PackedRows::default();
    let w = vec![0.0; gates * h * h];
    let p = super::matrix::pack_for_steps(isa, &w, gates, h, h, shape.mb, &mut packed);
    let team = super::team_steps::team_size(shape, p, true).is_some();
    (p.is_some(), team)
}
