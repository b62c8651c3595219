//! Who this process is among the ranks an existing launcher started.
//!
//! cnnbench does not start processes itself: torchrun (with `--no-python`)
//! or Slurm's `srun` starts one per GPU and tells each, through variables,
//! its rank, how many ranks there are and where rank 0 listens for the
//! rendezvous. This module reads those variables into a [`World`], and
//! refuses, in one line naming the variable, anything it cannot trust.

use std::cell::RefCell;
use std::ffi::OsString;

use anyhow::{anyhow, bail, Result};
use clap::ValueEnum;

/// torchrun's default `--master-port`, used under Slurm when no job id is
/// there to derive a port from.
const DEFAULT_PORT: u16 = 29500;

/// The lowest port derived from a Slurm job id (see [`slurm_port`]).
const SLURM_PORT_BASE: u16 = 20000;

/// How many ports the job id is spread over, from [`SLURM_PORT_BASE`].
const SLURM_PORT_SPAN: u64 = 10000;

/// The launcher that started this process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Launcher {
    Torchrun,
    Slurm,
}

impl Launcher {
    /// The launcher's name as the CLI and messages spell it.
    pub fn name(self) -> &'static str {
        match self {
            Launcher::Torchrun => "torchrun",
            Launcher::Slurm => "slurm",
        }
    }

    /// How a user starts cnnbench under this launcher, for messages.
    fn how_to_start(self) -> &'static str {
        match self {
            Launcher::Torchrun => "torchrun --no-python",
            Launcher::Slurm => "srun",
        }
    }
}

/// The `--launcher` value: which launcher's variables to read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LauncherChoice {
    /// torchrun's variables when set, else Slurm's
    Auto,
    /// torchrun --no-python: RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT
    Torchrun,
    /// srun: SLURM_PROCID, SLURM_STEP_NUM_TASKS or SLURM_NTASKS, SLURM_LOCALID, the node list
    Slurm,
}

/// This process's place among the launched ranks.
#[derive(Clone, Debug, PartialEq)]
pub struct World {
    /// The launcher whose variables were read.
    pub launcher: Launcher,
    /// This process's rank, below `world_size`; rank 0 hosts the rendezvous.
    pub rank: usize,
    /// How many ranks were launched, at least 1.
    pub world_size: usize,
    /// This process's rank on its node, below `world_size`: which GPU it drives.
    pub local_rank: usize,
    /// Where rank 0 listens for the rendezvous: a host name or address, never empty.
    pub master_addr: String,
    /// The port rank 0 listens on, never 0.
    pub master_port: u16,
}

/// The world described by the variables `env` returns (`None` for a
/// variable that is not set), as `choice` says to read them.
pub fn from_env(choice: LauncherChoice, env: &dyn Fn(&str) -> Option<String>) -> Result<World> {
    let launcher = match choice {
        LauncherChoice::Auto => detect(env)?,
        LauncherChoice::Torchrun => Launcher::Torchrun,
        LauncherChoice::Slurm => Launcher::Slurm,
    };
    match launcher {
        Launcher::Torchrun => torchrun(env),
        Launcher::Slurm => slurm(env),
    }
}

/// The world described by this process's environment; a variable that is
/// not valid UTF-8 is an error naming it.
pub fn from_process_env(choice: LauncherChoice) -> Result<World> {
    from_os_env(choice, &|name| std::env::var_os(name))
}

/// [`from_env`] over raw values. A non-UTF-8 value reads as unset to
/// [`from_env`] and is reported afterwards, in place of whatever that
/// caused: only variables actually read can fail, so a stray unrelated
/// variable never stops a run.
fn from_os_env(choice: LauncherChoice, env: &dyn Fn(&str) -> Option<OsString>) -> Result<World> {
    let not_utf8 = RefCell::new(None::<(String, OsString)>);
    let read = |name: &str| match env(name)?.into_string() {
        Ok(value) => Some(value),
        Err(raw) => {
            not_utf8.borrow_mut().get_or_insert((name.to_string(), raw));
            None
        }
    };
    let world = from_env(choice, &read);
    match not_utf8.into_inner() {
        Some((name, raw)) => bail!("{name}={:?} is not valid UTF-8", raw.to_string_lossy()),
        None => world,
    }
}

/// `--launcher auto`: torchrun wins when both are present, since torchrun
/// run inside a Slurm allocation sees Slurm's variables too but sets its
/// own for the processes it starts.
fn detect(env: &dyn Fn(&str) -> Option<String>) -> Result<Launcher> {
    if env("RANK").is_some() && env("WORLD_SIZE").is_some() {
        Ok(Launcher::Torchrun)
    } else if env("SLURM_PROCID").is_some() {
        Ok(Launcher::Slurm)
    } else {
        bail!(
            "--launcher auto: neither torchrun's variables (RANK, WORLD_SIZE) nor Slurm's \
             (SLURM_PROCID) are set; start cnnbench with torchrun --no-python or srun"
        )
    }
}

/// torchrun sets all five variables for every process it starts, so a
/// missing one means cnnbench was not started by torchrun.
fn torchrun(env: &dyn Fn(&str) -> Option<String>) -> Result<World> {
    let launcher = Launcher::Torchrun;
    let get = |name: &'static str| required(launcher, env, name);
    let rank = number(get("RANK")?)?;
    let world_size = number(get("WORLD_SIZE")?)?;
    let local_rank = number(get("LOCAL_RANK")?)?;
    let master_addr = address(get("MASTER_ADDR")?)?;
    let master_port = port(get("MASTER_PORT")?)?;
    check_ranks(rank, world_size, local_rank)?;
    Ok(World {
        launcher,
        rank: rank.value,
        world_size: world_size.value,
        local_rank: local_rank.value,
        master_addr,
        master_port,
    })
}

/// srun sets the rank variables; the rendezvous address and port come from
/// `MASTER_ADDR` and `MASTER_PORT` when the user set them, else from the
/// node list and the job id.
fn slurm(env: &dyn Fn(&str) -> Option<String>) -> Result<World> {
    let launcher = Launcher::Slurm;
    let rank = number(required(launcher, env, "SLURM_PROCID")?)?;
    // A step's task count is the one that matters: an `srun` inside a
    // larger allocation may start fewer tasks than the job has.
    let world_size = match var(env, "SLURM_STEP_NUM_TASKS") {
        Some(v) => number(v)?,
        None => number(required(launcher, env, "SLURM_NTASKS")?)?,
    };
    let local_rank = number(required(launcher, env, "SLURM_LOCALID")?)?;
    let master_addr = slurm_master_addr(env)?;
    let master_port = slurm_port(env)?;
    check_ranks(rank, world_size, local_rank)?;
    Ok(World {
        launcher,
        rank: rank.value,
        world_size: world_size.value,
        local_rank: local_rank.value,
        master_addr,
        master_port,
    })
}

/// `MASTER_ADDR` when set, else the first host of the step's node list,
/// else of the job's: with srun's default block distribution rank 0 runs
/// on the first node.
fn slurm_master_addr(env: &dyn Fn(&str) -> Option<String>) -> Result<String> {
    if let Some(v) = var(env, "MASTER_ADDR") {
        return address(v);
    }
    let list = var(env, "SLURM_STEP_NODELIST")
        .or_else(|| var(env, "SLURM_JOB_NODELIST"))
        .ok_or_else(|| {
            anyhow!(
                "slurm: none of MASTER_ADDR, SLURM_STEP_NODELIST and SLURM_JOB_NODELIST is set \
                 (was cnnbench started by srun?)"
            )
        })?;
    first_host(&list.value).map_err(|why| {
        anyhow!(
            "{}={:?} is not a Slurm hostlist ({why})",
            list.name,
            list.value
        )
    })
}

/// `MASTER_PORT` when set; else a port derived from the job id,
/// `20000 + SLURM_JOB_ID % 10000`, so that two jobs sharing a node do not
/// try to listen on the same port; else torchrun's default, 29500.
fn slurm_port(env: &dyn Fn(&str) -> Option<String>) -> Result<u16> {
    if let Some(v) = var(env, "MASTER_PORT") {
        return port(v);
    }
    let Some(job) = var(env, "SLURM_JOB_ID") else {
        return Ok(DEFAULT_PORT);
    };
    let id: u64 = job.value.parse().map_err(|e| not_whole(&job, &e))?;
    // Below 30000: fits a u16.
    Ok(SLURM_PORT_BASE + (id % SLURM_PORT_SPAN) as u16)
}

/// A variable's name and value, kept together so that every message about
/// the value names where it came from.
struct Var {
    name: &'static str,
    value: String,
}

/// A parsed number and the variable it came from.
#[derive(Clone, Copy)]
struct Num {
    name: &'static str,
    value: usize,
}

fn var(env: &dyn Fn(&str) -> Option<String>, name: &'static str) -> Option<Var> {
    env(name).map(|value| Var { name, value })
}

fn required(
    launcher: Launcher,
    env: &dyn Fn(&str) -> Option<String>,
    name: &'static str,
) -> Result<Var> {
    var(env, name).ok_or_else(|| {
        anyhow!(
            "{}: {name} is not set (was cnnbench started by {}?)",
            launcher.name(),
            launcher.how_to_start()
        )
    })
}

fn number(v: Var) -> Result<Num> {
    match v.value.trim().parse::<usize>() {
        Ok(value) => Ok(Num {
            name: v.name,
            value,
        }),
        Err(e) => Err(not_whole(&v, &e)),
    }
}

/// Why a variable's value is not a count: not a whole number, or one too
/// large (`18446744073709551616` is whole).
fn not_whole(v: &Var, e: &std::num::ParseIntError) -> anyhow::Error {
    match e.kind() {
        std::num::IntErrorKind::PosOverflow => anyhow!(
            "{}={:?} is too large (at most {})",
            v.name,
            v.value,
            usize::MAX
        ),
        _ => anyhow!("{}={:?} is not a whole number", v.name, v.value),
    }
}

fn port(v: Var) -> Result<u16> {
    match v.value.trim().parse::<u64>() {
        Ok(p @ 1..=65535) => Ok(p as u16),
        _ => bail!("{}={:?} is not a TCP port (1 to 65535)", v.name, v.value),
    }
}

fn address(v: Var) -> Result<String> {
    match v.value.trim() {
        "" => bail!("{} is set but empty; it should name rank 0's host", v.name),
        addr => Ok(addr.to_string()),
    }
}

/// That the rank numbers agree with each other.
fn check_ranks(rank: Num, world_size: Num, local_rank: Num) -> Result<()> {
    if world_size.value == 0 {
        bail!("{}=0: a world needs at least one rank", world_size.name);
    }
    for n in [rank, local_rank] {
        if n.value >= world_size.value {
            bail!(
                "{}={} is not below {}={}",
                n.name,
                n.value,
                world_size.name,
                world_size.value
            );
        }
    }
    Ok(())
}

/// The first host of a Slurm hostlist (`gpu[3,5-6],login1` is `gpu3`,
/// `rack[1-2]-n[01-02]` is `rack1-n01`), with zero padding kept as
/// written; or why the list is not one.
fn first_host(list: &str) -> std::result::Result<String, String> {
    let entry = &list[..first_entry_end(list)?];
    let mut host = String::new();
    let mut rest = entry;
    while let Some(open) = rest.find('[') {
        // Brackets were checked to pair up and not nest.
        let close = open + rest[open..].find(']').ok_or("'[' without ']'")?;
        host.push_str(&rest[..open]);
        host.push_str(first_of_ranges(&rest[open + 1..close])?);
        rest = &rest[close + 1..];
    }
    host.push_str(rest);
    if host.trim().is_empty() {
        return Err("the first host is empty".to_string());
    }
    Ok(host)
}

/// Where the list's first host ends: at the first comma outside brackets.
/// Checks the brackets of the whole list, so that a list broken further on
/// is not half-trusted.
fn first_entry_end(list: &str) -> std::result::Result<usize, String> {
    let mut open = false;
    let mut end = None;
    for (i, c) in list.char_indices() {
        match c {
            '[' if open => return Err("'[' inside brackets".to_string()),
            '[' => open = true,
            ']' if !open => return Err("']' without '['".to_string()),
            ']' => open = false,
            ',' if !open => {
                end.get_or_insert(i);
            }
            _ => {}
        }
    }
    if open {
        return Err("'[' without ']'".to_string());
    }
    Ok(end.unwrap_or(list.len()))
}

/// The first number of a bracket's ranges (`01-04,07` gives `01`), as
/// written; every range is checked to be digits, low to high.
fn first_of_ranges(ranges: &str) -> std::result::Result<&str, String> {
    if ranges.is_empty() {
        return Err("empty brackets".to_string());
    }
    let mut first = None;
    for item in ranges.split(',') {
        let (lo, hi) = item.split_once('-').unwrap_or((item, item));
        let bound = |s: &str| -> std::result::Result<u64, String> {
            if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
                return Err(format!("'{item}' in brackets is not a number or a range"));
            }
            s.parse()
                .map_err(|_| format!("'{s}' in brackets is too large"))
        };
        if bound(lo)? > bound(hi)? {
            return Err(format!("range '{item}' runs backwards"));
        }
        first.get_or_insert(lo);
    }
    // `split` yields at least one item: `first` is set.
    first.ok_or_else(|| "empty brackets".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env_of(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn world(choice: LauncherChoice, vars: &HashMap<String, String>) -> Result<World> {
        from_env(choice, &|name| vars.get(name).cloned())
    }

    fn err(choice: LauncherChoice, vars: &HashMap<String, String>) -> String {
        match world(choice, vars) {
            Ok(w) => panic!("expected an error, got {w:?}"),
            Err(e) => {
                let msg = e.to_string();
                assert!(!msg.contains('\n'), "not one line: {msg}");
                msg
            }
        }
    }

    const TORCHRUN: &[(&str, &str)] = &[
        ("RANK", "3"),
        ("WORLD_SIZE", "8"),
        ("LOCAL_RANK", "1"),
        ("MASTER_ADDR", "node01"),
        ("MASTER_PORT", "29400"),
    ];

    const SLURM: &[(&str, &str)] = &[
        ("SLURM_PROCID", "5"),
        ("SLURM_NTASKS", "8"),
        ("SLURM_LOCALID", "1"),
        ("SLURM_JOB_NODELIST", "gpu[3,5-6],login1"),
        ("SLURM_JOB_ID", "1234567"),
    ];

    #[test]
    fn launcher_names() {
        assert_eq!(Launcher::Torchrun.name(), "torchrun");
        assert_eq!(Launcher::Slurm.name(), "slurm");
    }

    #[test]
    fn torchrun_reads_its_five_variables() {
        let w = world(LauncherChoice::Torchrun, &env_of(TORCHRUN)).unwrap();
        assert_eq!(
            w,
            World {
                launcher: Launcher::Torchrun,
                rank: 3,
                world_size: 8,
                local_rank: 1,
                master_addr: "node01".to_string(),
                master_port: 29400,
            }
        );
    }

    #[test]
    fn torchrun_names_each_missing_variable() {
        for (name, _) in TORCHRUN {
            let mut vars = env_of(TORCHRUN);
            vars.remove(*name);
            let msg = err(LauncherChoice::Torchrun, &vars);
            assert!(msg.contains(&format!("{name} is not set")), "{msg}");
            assert!(msg.contains("torchrun --no-python"), "{msg}");
        }
    }

    #[test]
    fn slurm_reads_its_variables() {
        let w = world(LauncherChoice::Slurm, &env_of(SLURM)).unwrap();
        assert_eq!(
            w,
            World {
                launcher: Launcher::Slurm,
                rank: 5,
                world_size: 8,
                local_rank: 1,
                master_addr: "gpu3".to_string(),
                master_port: 24567,
            }
        );
    }

    #[test]
    fn slurm_prefers_the_step_to_the_job() {
        let mut vars = env_of(SLURM);
        vars.insert("SLURM_STEP_NUM_TASKS".into(), "6".into());
        vars.insert("SLURM_STEP_NODELIST".into(), "gpu[5-6],gpu9".into());
        let w = world(LauncherChoice::Slurm, &vars).unwrap();
        assert_eq!((w.world_size, w.master_addr.as_str()), (6, "gpu5"));
        // The step's count alone is enough.
        vars.remove("SLURM_NTASKS");
        assert_eq!(world(LauncherChoice::Slurm, &vars).unwrap().world_size, 6);
    }

    #[test]
    fn slurm_names_each_missing_variable() {
        for name in ["SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"] {
            let mut vars = env_of(SLURM);
            vars.remove(name);
            let msg = err(LauncherChoice::Slurm, &vars);
            assert!(msg.contains(&format!("slurm: {name} is not set")), "{msg}");
            assert!(msg.contains("srun"), "{msg}");
        }
        let mut vars = env_of(SLURM);
        vars.remove("SLURM_JOB_NODELIST");
        let msg = err(LauncherChoice::Slurm, &vars);
        assert!(
            msg.contains("MASTER_ADDR, SLURM_STEP_NODELIST and SLURM_JOB_NODELIST"),
            "{msg}"
        );
    }

    #[test]
    fn slurm_master_addr_and_port_may_be_given() {
        let mut vars = env_of(SLURM);
        vars.insert("MASTER_ADDR".into(), "10.0.0.7".into());
        vars.insert("MASTER_PORT".into(), "31000".into());
        vars.insert("SLURM_JOB_NODELIST".into(), "broken[".into());
        let w = world(LauncherChoice::Slurm, &vars).unwrap();
        assert_eq!((w.master_addr.as_str(), w.master_port), ("10.0.0.7", 31000));
    }

    #[test]
    fn slurm_port_derivation() {
        let mut vars = env_of(SLURM);
        vars.insert("SLURM_JOB_ID".into(), "42".into());
        assert_eq!(
            world(LauncherChoice::Slurm, &vars).unwrap().master_port,
            20042
        );
        vars.insert("SLURM_JOB_ID".into(), "99999".into());
        assert_eq!(
            world(LauncherChoice::Slurm, &vars).unwrap().master_port,
            29999
        );
        vars.remove("SLURM_JOB_ID");
        assert_eq!(
            world(LauncherChoice::Slurm, &vars).unwrap().master_port,
            29500
        );
        vars.insert("SLURM_JOB_ID".into(), "12a".into());
        let msg = err(LauncherChoice::Slurm, &vars);
        assert_eq!(msg, r#"SLURM_JOB_ID="12a" is not a whole number"#);
    }

    #[test]
    fn bad_values_are_named() {
        let cases: &[(&str, &str, &str)] = &[
            ("RANK", "abc", r#"RANK="abc" is not a whole number"#),
            ("RANK", "-1", r#"RANK="-1" is not a whole number"#),
            ("RANK", "", r#"RANK="" is not a whole number"#),
            (
                "WORLD_SIZE",
                "0",
                "WORLD_SIZE=0: a world needs at least one rank",
            ),
            ("RANK", "8", "RANK=8 is not below WORLD_SIZE=8"),
            ("LOCAL_RANK", "8", "LOCAL_RANK=8 is not below WORLD_SIZE=8"),
            (
                "MASTER_PORT",
                "0",
                r#"MASTER_PORT="0" is not a TCP port (1 to 65535)"#,
            ),
            (
                "MASTER_PORT",
                "65536",
                r#"MASTER_PORT="65536" is not a TCP port (1 to 65535)"#,
            ),
            (
                "MASTER_PORT",
                "http",
                r#"MASTER_PORT="http" is not a TCP port (1 to 65535)"#,
            ),
            (
                "MASTER_ADDR",
                " ",
                "MASTER_ADDR is set but empty; it should name rank 0's host",
            ),
        ];
        for (name, value, want) in cases {
            let mut vars = env_of(TORCHRUN);
            vars.insert(name.to_string(), value.to_string());
            assert_eq!(err(LauncherChoice::Torchrun, &vars), *want);
        }
        // The local rank may be above the rank: another node's GPU layout.
        let mut vars = env_of(TORCHRUN);
        vars.insert("LOCAL_RANK".into(), "7".into());
        assert_eq!(
            world(LauncherChoice::Torchrun, &vars).unwrap().local_rank,
            7
        );

        let mut vars = env_of(SLURM);
        vars.insert("SLURM_PROCID".into(), "8".into());
        assert_eq!(
            err(LauncherChoice::Slurm, &vars),
            "SLURM_PROCID=8 is not below SLURM_NTASKS=8"
        );
        vars.insert("SLURM_STEP_NUM_TASKS".into(), "x".into());
        assert_eq!(
            err(LauncherChoice::Slurm, &vars),
            r#"SLURM_STEP_NUM_TASKS="x" is not a whole number"#
        );
    }

    #[test]
    fn first_hosts_of_hostlists() {
        let cases = [
            ("node01", "node01"),
            ("node[01-04,07]", "node01"),
            ("gpu[3,5-6],login1", "gpu3"),
            ("a-b[010-012]", "a-b010"),
            ("n[1-2]-ib", "n1-ib"),
            ("rack[1-2]-n[01-02]", "rack1-n01"),
            ("login1,gpu[3-4]", "login1"),
            ("node[7]", "node7"),
            ("x[09-10],y[1-3,5]", "x09"),
        ];
        for (list, want) in cases {
            assert_eq!(first_host(list).as_deref(), Ok(want), "{list}");
        }
    }

    #[test]
    fn broken_hostlists_are_refused() {
        for list in [
            "",
            ",node1",
            "node[01",
            "node01]",
            "node[]",
            "node[a-b]",
            "node[3-1]",
            "node[1-]",
            "node[1,,2]",
            "node[[1]]",
            "node[1-2],gpu[3",
            "[1-2",
        ] {
            assert!(first_host(list).is_err(), "{list:?} was accepted");
        }
        let mut vars = env_of(SLURM);
        vars.insert("SLURM_JOB_NODELIST".into(), "node[01".into());
        assert_eq!(
            err(LauncherChoice::Slurm, &vars),
            r#"SLURM_JOB_NODELIST="node[01" is not a Slurm hostlist ('[' without ']')"#
        );
    }

    #[test]
    fn auto_prefers_torchrun() {
        let mut both = env_of(TORCHRUN);
        both.extend(env_of(SLURM));
        assert_eq!(
            world(LauncherChoice::Auto, &both).unwrap().launcher,
            Launcher::Torchrun
        );
        assert_eq!(
            world(LauncherChoice::Auto, &env_of(SLURM))
                .unwrap()
                .launcher,
            Launcher::Slurm
        );
        // RANK alone is not torchrun: Slurm's variables decide.
        let mut slurm_and_rank = env_of(SLURM);
        slurm_and_rank.insert("RANK".into(), "0".into());
        assert_eq!(
            world(LauncherChoice::Auto, &slurm_and_rank)
                .unwrap()
                .launcher,
            Launcher::Slurm
        );
        // An explicit choice reads only its own launcher's variables.
        assert!(err(LauncherChoice::Slurm, &env_of(TORCHRUN)).contains("SLURM_PROCID is not set"));
    }

    #[test]
    fn auto_with_neither_says_how_to_start() {
        let msg = err(LauncherChoice::Auto, &env_of(&[("RANK", "0")]));
        assert_eq!(
            msg,
            "--launcher auto: neither torchrun's variables (RANK, WORLD_SIZE) nor Slurm's \
             (SLURM_PROCID) are set; start cnnbench with torchrun --no-python or srun"
        );
    }

    #[test]
    fn non_utf8_values_are_named() {
        use std::os::unix::ffi::OsStringExt;
        let mut vars: HashMap<String, OsString> = env_of(TORCHRUN)
            .into_iter()
            .map(|(k, v)| (k, OsString::from(v)))
            .collect();
        let read = |vars: &HashMap<String, OsString>| {
            from_os_env(LauncherChoice::Torchrun, &|name| vars.get(name).cloned())
        };
        assert_eq!(read(&vars).unwrap().rank, 3);
        vars.insert(
            "MASTER_ADDR".into(),
            OsString::from_vec(b"node\xff".to_vec()),
        );
        let msg = read(&vars).unwrap_err().to_string();
        assert_eq!(msg, "MASTER_ADDR=\"node\u{fffd}\" is not valid UTF-8");
        // A variable the launcher does not read may hold anything.
        vars.insert("MASTER_ADDR".into(), "node01".into());
        vars.insert("SLURM_JOB_NODELIST".into(), OsString::from_vec(vec![0xff]));
        assert!(read(&vars).is_ok());
    }
}
