//! The six Keras examples the GPU-versus-CPU cost post (seed 001) trained,
//! each exactly as `keras-team/keras`'s `examples/` defines it: the same
//! layers, sizes and parameter counts as Keras's `model.summary()`. Layer
//! names are the ones Keras gives (`dense_1`, `conv2d_2`); an activation
//! inside a Keras layer (`Dense(512, activation='relu')`) is a node of its
//! own, named after it (`dense_1.relu`). The softmax or sigmoid of the
//! last layer is inside the loss.
//!
//! The recurrent layers use sigmoid gates, as `CuDNNLSTM` and Keras 2.3+
//! do (Keras 2.0-2.2's `LSTM` defaulted to a hard sigmoid), and one bias
//! per gate, as Keras counts them.

use crate::net::{Builder, Cell, ConvSpec, Dims, Graph, RecurrentSpec, TensorId};

/// `mnist_mlp.py`: 784 → 512 → 512 → 10, dropout 0.2; 669,706 parameters.
pub fn mnist_mlp() -> Graph {
    let (mut b, x) = Builder::new("mnist-mlp", Dims::new(1, 1, 784));
    let x = dense_relu(&mut b, "dense_1", x, 512);
    let x = b.dropout("dropout_1", x, 0.2);
    let x = dense_relu(&mut b, "dense_2", x, 512);
    let x = b.dropout("dropout_2", x, 0.2);
    let x = b.linear("dense_3", x, 10);
    b.finish(x)
}

/// `mnist_cnn.py`: two 3x3 convolutions (32, 64), 2x2 max pooling,
/// dropout 0.25, 128 → 10 with dropout 0.5; 1,199,882 parameters.
pub fn mnist_cnn() -> Graph {
    let (mut b, x) = Builder::new("mnist-cnn", Dims::new(28, 28, 1));
    let x = conv_relu(&mut b, "conv2d_1", "conv2d_1.relu", x, 32, 0);
    let x = conv_relu(&mut b, "conv2d_2", "conv2d_2.relu", x, 64, 0);
    let x = b.max_pool("max_pooling2d_1", x, 2, 2, 0);
    let x = b.dropout("dropout_1", x, 0.25);
    let x = b.flatten("flatten_1", x);
    let x = dense_relu(&mut b, "dense_1", x, 128);
    let x = b.dropout("dropout_2", x, 0.5);
    let x = b.linear("dense_2", x, 10);
    b.finish(x)
}

/// `cifar10_cnn.py`: two blocks of two 3x3 convolutions (the first
/// padded 'same'), 2x2 max pooling and dropout 0.25, then 512 → 10 with
/// dropout 0.5; 1,250,858 parameters. Its activations are Keras layers of
/// their own (`activation_1` ...).
pub fn cifar10_cnn() -> Graph {
    let (mut b, x) = Builder::new("cifar10-cnn", Dims::new(32, 32, 3));
    let x = conv_relu(&mut b, "conv2d_1", "activation_1", x, 32, 1);
    let x = conv_relu(&mut b, "conv2d_2", "activation_2", x, 32, 0);
    let x = b.max_pool("max_pooling2d_1", x, 2, 2, 0);
    let x = b.dropout("dropout_1", x, 0.25);
    let x = conv_relu(&mut b, "conv2d_3", "activation_3", x, 64, 1);
    let x = conv_relu(&mut b, "conv2d_4", "activation_4", x, 64, 0);
    let x = b.max_pool("max_pooling2d_2", x, 2, 2, 0);
    let x = b.dropout("dropout_2", x, 0.25);
    let x = b.flatten("flatten_1", x);
    let x = b.linear("dense_1", x, 512);
    let x = b.relu("activation_5", x);
    let x = b.dropout("dropout_3", x, 0.5);
    let x = b.linear("dense_2", x, 10);
    b.finish(x)
}

/// `imdb_fasttext.py` with unigrams: 400 token ids from a vocabulary of
/// 20,000, embedded in 50 features, averaged over the sequence, one
/// sigmoid unit; 1,000,051 parameters.
pub fn imdb_fasttext() -> Graph {
    let (mut b, x) = Builder::new("imdb-fasttext", Dims::new(1, 400, 1));
    let x = b.embedding("embedding_1", x, 20_000, 50);
    let x = b.global_avg_pool("global_average_pooling1d_1", x);
    let x = b.linear("dense_1", x, 1);
    b.finish_binary(x)
}

/// `imdb_bidirectional_lstm.py`: 100 token ids from a vocabulary of
/// 20,000, embedded in 128 features, a bidirectional LSTM of 64 units
/// (each direction's last output, concatenated), dropout 0.5, one sigmoid
/// unit; 2,658,945 parameters.
pub fn imdb_bilstm() -> Graph {
    let (mut b, x) = Builder::new("imdb-bilstm", Dims::new(1, 100, 1));
    let x = b.embedding("embedding_1", x, 20_000, 128);
    let lstm = RecurrentSpec {
        cell: Cell::Lstm,
        hidden: 64,
        bidirectional: true,
        sequences: false,
    };
    let x = b.recurrent("bidirectional_1", x, lstm);
    let x = b.dropout("dropout_1", x, 0.5);
    let x = b.linear("dense_1", x, 1);
    b.finish_binary(x)
}

/// Characters in `nietzsche.txt`, lowercased (the example prints "total
/// chars: 57").
pub const NIETZSCHE_CHARS: usize = 57;

/// `lstm_text_generation.py`: 40 one-hot characters, an LSTM of 128
/// units (its last output), a softmax over the 57 characters; 102,585
/// parameters.
pub fn lstm_text() -> Graph {
    let (mut b, x) = Builder::new("lstm-text", Dims::new(1, 40, NIETZSCHE_CHARS));
    let lstm = RecurrentSpec {
        cell: Cell::Lstm,
        hidden: 128,
        bidirectional: false,
        sequences: false,
    };
    let x = b.recurrent("lstm_1", x, lstm);
    let x = b.linear("dense_1", x, NIETZSCHE_CHARS);
    b.finish(x)
}

/// `Dense(n, activation='relu')`.
fn dense_relu(b: &mut Builder, name: &str, x: TensorId, n: usize) -> TensorId {
    let x = b.linear(name, x, n);
    b.relu(&format!("{name}.relu"), x)
}

/// `Conv2D(oc, (3, 3))` with bias, padded 1 ('same') or 0 ('valid'),
/// then its ReLU.
fn conv_relu(
    b: &mut Builder,
    name: &str,
    relu: &str,
    x: TensorId,
    oc: usize,
    pad: usize,
) -> TensorId {
    let x = b.conv(name, x, ConvSpec::square(oc, 3, 1, pad).with_bias());
    b.relu(relu, x)
}
