//! `report` over many records: time grows as n log n (grouping by hash and
//! ordered maps), not with the square of the records. The benchmark at
//! 100,000 records is ignored by default (run it in release:
//! `cargo test --release --bin cnnbench report::scale_tests -- --ignored
//! --nocapture`).

use super::markdown::render;
use super::merge::{load_files, split};
use super::models;
use super::options::Options;
use std::fmt::Write;
use std::time::Instant;

/// A results folder of `n` records: conv runs of 10 records at 1, 2 and 4
/// threads on many hosts, and model runs pairing along batch, input and
/// GPU count.
fn store(n: usize) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let env = |host: usize, threads: usize| {
        format!(
            r#"{{"host":"h{host}","os":"linux","cpu":"Xeon","cores":2,"threads":{threads},"isa":"avx512","isa_detected":"avx512","timer":"wall","timestamp":"2026-11-26T00:00:00Z","cnnbench":{{"version":"0.1.0","git":"abc","profile":"release","target_features":""}}}}"#
        )
    };
    let conv_runs = n / 2 / 10;
    for i in 0..conv_runs {
        let mut recs = String::new();
        for k in 0..10 {
            if k > 0 {
                recs.push(',');
            }
            write!(
                recs,
                r#"{{"problem":"mb{}ic8ih9oc16oh7kh3","dir":"fwd","device":"cpu","dtype":"f32","layout":"nchw","algo":"direct","ms":{{"min":1,"median":{},"max":2,"mean":1.5,"stddev":0.1}},"runs":5,"gflops":3.0,"kernel":"x","bias":false,"workspace_bytes":0}}"#,
                1 + (i * 10 + k) % 997,
                1.0 + (i % 3) as f64
            )
            .unwrap();
        }
        let text = format!(
            r#"{{"format_version":1,"subcommand":"conv","environment":{},"records":[{recs}],"complete":true}}"#,
            env(i / 3, 1 << (i % 3))
        );
        std::fs::write(dir.path().join(format!("c{i}.json")), text).unwrap();
    }
    let model_rows = n - conv_runs * 10;
    let mut csv = String::from("model,batch,device,dtype,layout,params,macs,status,total_ms_min,total_ms_median,total_ms_max,images_per_sec,input,gpus\n");
    for i in 0..model_rows {
        writeln!(
            csv,
            "m{},{},cpu,f32,nchw,1,1,ok,1,{},2,{},{},{}",
            i % 5000,
            16 << (i % 2),
            1.0 + (i % 7) as f64,
            100.0 + (i % 11) as f64,
            if i % 3 == 0 { "folder" } else { "synthetic" },
            1 + i % 2
        )
        .unwrap();
    }
    std::fs::write(dir.path().join("models.csv"), csv).unwrap();
    dir
}

fn report_seconds(n: usize) -> (f64, usize) {
    let dir = store(n);
    let t0 = Instant::now();
    let inputs = split(&[dir.path().to_path_buf()]).unwrap();
    let mut unreadable = inputs.unreadable;
    let runs = load_files(inputs.layers, &mut unreadable);
    let model_runs = models::load_files(inputs.models, &mut unreadable);
    assert!(unreadable.is_empty(), "{unreadable:?}");
    let opts = Options {
        baseline: None,
        charts: None,
        price: None,
        epochs: 1,
        dataset_images: 1,
        published: false,
    };
    let md = render(&runs, &model_runs, &unreadable, &opts).unwrap();
    (t0.elapsed().as_secs_f64(), md.len())
}

#[test]
#[ignore = "a benchmark: 100,000 records, run in release"]
fn report_of_100k_records() {
    for n in [25_000, 50_000, 100_000] {
        let (s, bytes) = report_seconds(n);
        crate::note::note!("report of {n} records: {s:.2} s ({bytes} bytes of markdown)");
    }
}
