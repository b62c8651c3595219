//! The output and store options every measuring subcommand shares; what
//! is done with the records is [`crate::output::sink`].

use crate::output::{self, Format, RECORD_FORMATS};
use crate::report::cost;
use crate::results::atomic::{check_folder, check_target};
use crate::results::store::Store;
use crate::results::Environment;
use anyhow::Result;
use clap::Args;
use cnnbench_layers::DType;
use std::path::PathBuf;

pub use crate::output::sink::Output;

/// Output options shared by `conv` and `gemm`.
#[derive(Args, Clone, Debug)]
pub struct OutputArgs {
    #[arg(long, default_value = "table", value_parser = output::parser(RECORD_FORMATS))]
    pub format: Format,
    #[command(flatten)]
    pub store: StoreArgs,
}

/// Where results go besides stdout, and what the machine costs: shared by
/// every measuring subcommand.
#[derive(Args, Clone, Debug)]
pub struct StoreArgs {
    /// Write the output here instead of stdout (rewritten atomically after every record, or
    /// configuration in a sweep; a FIFO, a device or /dev/stdout gets it once, at the end)
    #[arg(long, value_name = "FILE", value_parser = writable_path)]
    pub out: Option<PathBuf>,
    /// Folder of the results store: every run writes one JSON file there
    #[arg(
        long,
        value_name = "DIR",
        env = "CNNBENCH_RESULTS",
        default_value = "results"
    )]
    pub results: PathBuf,
    /// Do not write a file into the results store
    #[arg(long)]
    pub no_save: bool,
    /// What the machine costs per hour, in US dollars (kept with the results)
    #[arg(long, value_name = "USD")]
    pub price_per_hour: Option<f64>,
    /// Look the price up by name in DIR/instances.toml (see --results)
    #[arg(long, value_name = "NAME")]
    pub instance: Option<String>,
}

impl OutputArgs {
    /// The sink of a run of `subcommand` in `env`, priced as asked.
    pub fn open(
        &self,
        mut env: Environment,
        subcommand: &'static str,
        dtype: DType,
    ) -> Result<Output> {
        env.price = self.store.price()?;
        let store = self.store.create(subcommand, &env)?;
        Output::new(
            env,
            self.format,
            self.store.out.clone(),
            store,
            subcommand,
            dtype,
        )
    }
}

impl StoreArgs {
    /// The price from `--price-per-hour` or `--instance`.
    pub fn price(&self) -> Result<Option<cost::Price>> {
        cost::resolve(
            self.price_per_hour,
            self.instance.as_deref(),
            &self.results.join("instances.toml"),
        )
    }

    /// The store file of this run, unless `--no-save`.
    pub fn create(&self, subcommand: &str, env: &Environment) -> Result<Option<Store>> {
        if self.no_save {
            return Ok(None);
        }
        let from_env = std::env::var_os("CNNBENCH_RESULTS")
            .is_some_and(|v| std::path::Path::new(&v) == self.results);
        Store::create(&self.results, subcommand, env)
            .map(Some)
            .map_err(|e| {
                if from_env {
                    e.context("CNNBENCH_RESULTS")
                } else {
                    e
                }
            })
    }
}

/// `--dump`'s parser: a folder cnnbench can make or write into, checked
/// before anything runs (see [`check_folder`]).
pub fn writable_folder(s: &str) -> Result<PathBuf, String> {
    let p = PathBuf::from(s);
    check_folder(&p).map_err(|e| e.to_string())?;
    Ok(p)
}

/// `report --out`'s parser: as [`writable_path`], but a missing folder
/// that can be made is accepted (the report makes it, as it makes its
/// charts folder).
pub fn report_path(s: &str) -> Result<PathBuf, String> {
    let p = PathBuf::from(s);
    match p.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(dir) if !dir.exists() => check_folder(dir).map_err(|e| e.to_string())?,
        _ => check_target(&p).map_err(|e| e.to_string())?,
    }
    Ok(p)
}

/// `--out`'s parser: a path cnnbench can write, checked before anything
/// runs (see [`check_target`]).
pub fn writable_path(s: &str) -> Result<PathBuf, String> {
    let p = PathBuf::from(s);
    check_target(&p).map_err(|e| e.to_string())?;
    Ok(p)
}
