use super::*;
use crate::ops::recurrent::cudnn_weights::lin_layers_in;
use crate::ops::recurrent::RecurrentSpec;

fn spec(cell: Cell, bidirectional: bool) -> RecurrentSpec {
    RecurrentSpec {
        cell,
        hidden: 6,
        bidirectional,
        sequences: true,
    }
}

/// Slots as cuDNN lays a pseudo-layer out: every matrix in `linLayerID`
/// order, then every bias; `gap` bytes between consecutive ones.
fn slots_laid_out(spec: &RecurrentSpec, input: usize, elem: usize, gap: usize) -> Vec<Slot> {
    let shape = spec.shape(crate::core::shape::Dims::new(1, 4, input), 2);
    let lins = lin_layers_in(&shape, RnnForm::Network);
    let mut at = 0;
    let mut slots: Vec<Slot> = lins
        .iter()
        .map(|&lin| {
            let s = Slot {
                lin,
                matrix: at,
                bias: None,
            };
            at += lin.rows * lin.cols * elem + gap;
            s
        })
        .collect();
    for s in slots.iter_mut().filter(|s| s.lin.bias > 0) {
        s.bias = Some(at);
        at += s.lin.bias * elem + gap;
    }
    slots
}

#[test]
fn contiguous_gates_make_three_pieces_per_direction() {
    for cell in Cell::ALL {
        for bidirectional in [false, true] {
            let s = spec(cell, bidirectional);
            let sizes = s.param_sizes(5);
            for elem in [2, 4] {
                let slots = slots_laid_out(&s, 5, elem, 0);
                let p = pieces(&slots, elem, &sizes).expect("placed");
                assert_eq!(p.len(), sizes.len(), "{cell:?} {bidirectional}");
                for (k, piece) in p.iter().enumerate() {
                    assert_eq!((piece.param, piece.at, piece.len), (k, 0, sizes[k]));
                }
            }
        }
    }
}

#[test]
fn gaps_between_gates_split_the_pieces_but_still_cover_every_value() {
    let s = spec(Cell::Lstm, true);
    let sizes = s.param_sizes(5);
    let slots = slots_laid_out(&s, 5, 4, 16);
    let p = pieces(&slots, 4, &sizes).expect("placed");
    // 4 gates × (W, R, bias) × 2 directions.
    assert_eq!(p.len(), 24);
    for (k, &size) in sizes.iter().enumerate() {
        let total: usize = p.iter().filter(|q| q.param == k).map(|q| q.len).sum();
        assert_eq!(total, size);
    }
}

#[test]
fn a_missing_bias_or_a_recurrent_one_is_refused() {
    let s = spec(Cell::Gru, false);
    let sizes = s.param_sizes(5);
    let mut slots = slots_laid_out(&s, 5, 4, 0);
    let first_input = slots.iter().position(|s| !s.lin.recurrent).unwrap();
    let mut missing = slots.clone();
    missing[first_input].bias = None;
    let e = pieces(&missing, 4, &sizes).unwrap_err().to_string();
    assert!(e.contains("parameter 2") && !e.contains('\n'), "{e}");
    let r = slots.iter().position(|s| s.lin.recurrent).unwrap();
    slots[r].bias = Some(0);
    let e = pieces(&slots, 4, &sizes).unwrap_err().to_string();
    assert!(e.contains("recurrent bias"), "{e}");
}
