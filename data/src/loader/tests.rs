//! The loader over small synthetic trees: labels, epochs, the buffer
//! bound, bad files, failure, stopping, reproducibility.

use super::*;
use crate::synth::{synth, SynthOptions};
use crate::transform::TransformKind;
use std::collections::HashSet;
use std::path::Path;
use std::time::{Duration, Instant};

/// A tree of `images` 48x40 JPEGs in `classes` classes, under `t/tree`.
fn tree(images: usize, classes: usize) -> (tempfile::TempDir, Arc<ImageFolder>) {
    let t = tempfile::tempdir().expect("tmp");
    let dir = t.path().join("tree");
    let opts = SynthOptions {
        images,
        classes,
        size: Some((48, 40)),
        quality: 90,
        seed: 3,
    };
    synth(&dir, &opts, &|_| {}).expect("a synthetic tree");
    let f = ImageFolder::scan(&dir).expect("a tree");
    (t, Arc::new(f))
}

fn cfg(batch: usize, shuffle: bool) -> LoaderConfig {
    LoaderConfig {
        batch,
        threads: 2,
        prefetch: 2,
        transform: Transform {
            kind: TransformKind::Eval,
            size: 16,
        },
        seed: 9,
        shuffle,
    }
}

/// Runs `f` on another thread; its answer, or a failure after `secs`
/// instead of a hung test.
fn within<T: Send + 'static>(secs: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(secs))
        .expect("an answer, not a hang")
}

#[test]
fn an_epoch_in_order_delivers_every_image_once_with_its_label() {
    let (_t, f) = tree(12, 3);
    let l = Loader::start(f.clone(), cfg(4, false)).expect("a loader");
    let (mut labels, mut samples) = (Vec::new(), Vec::new());
    for _ in 0..3 {
        let b = l.next().expect("a batch");
        assert_eq!(b.images().len(), 4 * 16 * 16 * 3);
        assert!(b.images().iter().all(|v| v.is_finite()));
        labels.extend_from_slice(b.labels());
        samples.extend_from_slice(b.samples());
    }
    assert_eq!(samples, (0..12).collect::<Vec<_>>());
    let want: Vec<u32> = f.samples().iter().map(|s| s.class).collect();
    assert_eq!(labels, want);
    // The labels are the class folders' places in sorted order.
    for (s, &label) in f.samples().iter().zip(&labels) {
        let folder = s
            .path
            .parent()
            .and_then(Path::file_name)
            .expect("a class folder");
        assert_eq!(folder.to_string_lossy(), f.classes()[label as usize]);
    }
    let s = l.stats();
    assert_eq!(s.batches, 3);
    assert!(s.images >= 12 && s.skipped == 0, "{s:?}");
    assert!(s.bytes > 0 && s.decode > 0.0 && s.busy >= s.decode, "{s:?}");
    assert!(s.capacity_images_per_sec() > 0.0);
}

#[test]
fn shuffled_epochs_are_new_orders_and_reproduce_with_the_seed() {
    let (_t, f) = tree(8, 2);
    let run = |seed| {
        let mut c = cfg(4, true);
        c.seed = seed;
        c.transform.kind = TransformKind::Train;
        let l = Loader::start(f.clone(), c).expect("a loader");
        let mut out = Vec::new();
        for _ in 0..4 {
            let b = l.next().expect("a batch");
            out.push((
                b.images().to_vec(),
                b.labels().to_vec(),
                b.samples().to_vec(),
            ));
        }
        out
    };
    let a = run(1);
    assert!(a == run(1), "the same seed, the same batches");
    assert!(a != run(2), "another seed, other batches");
    let epoch = |e: usize| -> Vec<usize> {
        a[2 * e..2 * e + 2]
            .iter()
            .flat_map(|b| b.2.clone())
            .collect()
    };
    for e in 0..2 {
        let mut s = epoch(e);
        s.sort_unstable();
        assert_eq!(s, (0..8).collect::<Vec<_>>(), "each image once an epoch");
    }
    assert_ne!(epoch(0), epoch(1), "a new order each epoch");
}

#[test]
fn the_loader_never_holds_more_than_prefetch_batches() {
    let (_t, f) = tree(8, 2);
    let mut c = cfg(2, false);
    c.prefetch = 3;
    let l = Loader::start(f, c).expect("a loader");
    // Batch after batch, only the three buffers come back.
    let mut buffers = HashSet::new();
    for _ in 0..10 {
        let b = l.next().expect("a batch");
        buffers.insert(b.images().as_ptr() as usize);
    }
    assert_eq!(buffers.len(), 3, "three buffers in circulation");
    let held: Vec<Batch> = (0..3).map(|_| l.next().expect("a batch")).collect();
    std::thread::sleep(Duration::from_millis(100));
    let before = l.stats().images;
    let e = l.next().err().expect("a fourth batch while three are held");
    assert!(e.0.contains("all 3 batch buffers are held"), "{e}");
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(
        l.stats().images,
        before,
        "nothing loaded without a free buffer"
    );
    drop(held);
    l.next().expect("a batch once one is back");
}

/// A JPEG of the tree, cut short or with its frame header broken.
fn broken_copies(good: &Path, dir: &Path) {
    let bytes = std::fs::read(good).expect("read");
    std::fs::write(dir.join("truncated.jpg"), &bytes[..bytes.len() / 2]).expect("write");
    let mut corrupt = bytes.clone();
    let sof = corrupt
        .windows(2)
        .position(|w| w == [0xFF, 0xC0])
        .expect("a baseline frame header");
    // Height and width 0.
    corrupt[sof + 5..sof + 9].copy_from_slice(&[0, 0, 0, 0]);
    std::fs::write(dir.join("corrupt.jpg"), corrupt).expect("write");
    std::fs::write(dir.join("notes.jpg"), b"not an image at all").expect("write");
    std::fs::write(dir.join("empty.png"), b"").expect("write");
    std::os::unix::fs::symlink(dir.join("gone"), dir.join("dangling.jpg")).expect("link");
}

#[test]
fn bad_files_are_skipped_counted_and_named() {
    let (t, good) = tree(6, 2);
    broken_copies(
        &good.samples()[0].path,
        &t.path().join("tree").join("class_001"),
    );
    let f = Arc::new(ImageFolder::scan(&t.path().join("tree")).expect("a tree"));
    assert_eq!(f.len(), 11);
    // One buffer: nothing is loaded past the first batch while it is held.
    let mut c = cfg(6, false);
    c.prefetch = 1;
    let l = Loader::start(f.clone(), c).expect("a loader");
    // class_001 sorts as corrupt, dangling, empty, img_ x3, notes,
    // truncated: the first batch meets the first three bad files.
    let b = l.next().expect("a full batch despite the broken files");
    let good: Vec<usize> = (0..f.len())
        .filter(|&k| {
            let name = f.samples()[k].path.file_name().expect("a name");
            name.to_string_lossy().starts_with("img_")
        })
        .collect();
    assert_eq!(good, [0, 1, 2, 6, 7, 8]);
    assert_eq!(b.samples(), good, "each bad slot took the next sample");
    assert_eq!(l.stats().skipped, 3);
    drop(b);
    // The second: 9, 10 | 0, 1, 2, 3 (a new epoch); 9, 10 and 3 fail and
    // take 4, 5 and 6; 4 and 5 fail and take 7 and 8.
    let b = l.next().expect("another full batch");
    assert_eq!(b.samples(), [7, 8, 0, 1, 2, 6]);
    let s = l.stats();
    assert_eq!(s.skipped, 8, "each failure counted: {:?}", s.first_skipped);
    let named: Vec<String> = s
        .first_skipped
        .iter()
        .map(|(p, why)| {
            assert!(!why.is_empty() && !why.contains('\n'), "{p:?}: {why}");
            p.file_name()
                .expect("a name")
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    assert_eq!(
        named,
        [
            "corrupt.jpg",
            "dangling.jpg",
            "empty.png",
            "notes.jpg",
            "truncated.jpg"
        ],
        "each bad file once, in the order met"
    );
}

#[test]
fn a_tree_of_broken_files_is_an_error_not_a_hang() {
    let t = tempfile::tempdir().expect("tmp");
    std::fs::create_dir(t.path().join("a")).expect("mkdir");
    for k in 0..3 {
        std::fs::write(t.path().join("a").join(format!("{k}.jpg")), b"\xff\xd8\xff").expect("w");
    }
    let f = Arc::new(ImageFolder::scan(t.path()).expect("a tree"));
    for shuffle in [false, true] {
        let f = f.clone();
        let (first, again) = within(20, move || {
            let l = Loader::start(f, cfg(2, shuffle)).expect("a loader");
            (l.next().err(), l.next().err())
        });
        let e = first.expect("an error");
        assert!(
            e.0.contains("none of the 3 files") && !e.0.contains('\n'),
            "{e}"
        );
        assert_eq!(again, Some(e), "the same error again");
    }
}

#[test]
fn dropping_the_loader_is_prompt_whether_waiting_or_working() {
    let (_t, f) = tree(8, 2);
    // Never asked: the producer fills both buffers, then waits.
    let l = Loader::start(f.clone(), cfg(2, false)).expect("a loader");
    std::thread::sleep(Duration::from_millis(100));
    let t = Instant::now();
    within(10, move || drop(l));
    assert!(t.elapsed() < Duration::from_secs(2));
    // Dropped while filling a large batch: it stops at the next image.
    let mut c = cfg(64, true);
    c.transform.kind = TransformKind::Train;
    let l = Loader::start(f, c).expect("a loader");
    let t = Instant::now();
    within(10, move || drop(l));
    assert!(t.elapsed() < Duration::from_secs(2));
}

#[test]
fn a_loader_that_cannot_work_says_so_in_a_line() {
    let (_t, f) = tree(2, 1);
    for c in [
        LoaderConfig {
            batch: 0,
            ..cfg(1, false)
        },
        LoaderConfig {
            threads: 0,
            ..cfg(1, false)
        },
        LoaderConfig {
            prefetch: 0,
            ..cfg(1, false)
        },
        LoaderConfig {
            transform: Transform {
                kind: TransformKind::Eval,
                size: usize::MAX / 2,
            },
            ..cfg(1, false)
        },
    ] {
        let e = Loader::start(f.clone(), c).err().expect("refused");
        assert!(!e.0.contains('\n'), "{e}");
    }
}
