//! Built-in problem lists, in benchdnn batch-file form. The lists live in
//! `lists/` so the peer scripts read exactly the same problems. Each kind
//! of problem has its own table: `builtin:NAME` is looked up only among the
//! lists the subcommand can read.

/// Convolutions, for `cnnbench conv --from builtin:NAME`.
pub const CONV: &[(&str, &str)] = &[("resnet50", include_str!("lists/resnet50.txt"))];

/// Recurrent layers, for `cnnbench rnn --from builtin:NAME`.
pub const RNN: &[(&str, &str)] = &[
    (
        "deepbench-rnn",
        include_str!("lists/deepbench_rnn_training.txt"),
    ),
    ("small-rnn", include_str!("lists/small_rnn.txt")),
];

pub fn lookup(lists: &[(&str, &'static str)], name: &str) -> Option<&'static str> {
    lists.iter().find(|(n, _)| *n == name).map(|(_, l)| *l)
}

pub fn names(lists: &[(&str, &'static str)]) -> Vec<String> {
    lists.iter().map(|(n, _)| n.to_string()).collect()
}
