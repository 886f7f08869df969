//! What the process may use: cores and memory, read from the machine and
//! from the container it runs in (cgroup v2 or v1 limits), and the defaults
//! that follow from them: the thread count every parallel command uses and
//! the memory each command's budget is a share of (docs/OPERATIONS.md,
//! "Sizing").
//!
//! The files are read below a root directory, `/` unless
//! `TOKSCOPE_SYSTEM_ROOT` names another one: tests give a directory laid out
//! like `/proc` and `/sys/fs/cgroup` to run the product as a machine with
//! other limits would, through the same code.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde::Serialize;

use crate::error::Result;

/// The variable that sets the thread count (below `--threads`).
pub const THREADS_VAR: &str = "TOKSCOPE_THREADS";

/// The variable naming another root for `/proc` and `/sys` (tests).
pub const SYSTEM_ROOT_VAR: &str = "TOKSCOPE_SYSTEM_ROOT";

/// Memory assumed when neither `/proc/meminfo` nor a cgroup says (not Linux).
const UNKNOWN_MEMORY: u64 = 4 << 30;

/// What the process may use, as read from the machine and its cgroup.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Machine {
    /// Cores the process may run on: the CPUs online and in its affinity
    /// mask, lowered by a cgroup CPU quota (rounded up).
    pub cores: usize,
    /// Memory the process may hold in all: the machine's (`MemTotal`), or
    /// its cgroup's limit when lower.
    pub memory_total: u64,
    /// Memory free for it now: the machine's `MemAvailable`, or what its
    /// cgroup's limit leaves above the cgroup's usage when lower.
    pub memory_available: u64,
    /// Whether a cgroup limit lowered `memory_total`.
    pub memory_limited_by_cgroup: bool,
    /// Whether a cgroup quota lowered `cores`.
    pub cores_limited_by_cgroup: bool,
}

impl Machine {
    /// Reads the machine this process runs on (below `TOKSCOPE_SYSTEM_ROOT`
    /// when set).
    pub fn detect() -> Machine {
        match std::env::var_os(SYSTEM_ROOT_VAR) {
            Some(root) => Machine::read(Path::new(&root), None),
            None => {
                let std_cores = std::thread::available_parallelism().map(usize::from).ok();
                Machine::read(Path::new("/"), std_cores)
            }
        }
    }

    /// The machine as the files below `root` describe it. `std_cores` is
    /// the standard library's count (affinity mask and cgroup quota
    /// included) when `root` is the real one; below another root the CPUs
    /// online (`/sys/devices/system/cpu/online`) stand for it.
    pub fn read(root: &Path, std_cores: Option<usize>) -> Machine {
        let cgroup = Cgroup::find(root);
        let online = std_cores.or_else(|| cpus_online(root)).unwrap_or(1).max(1);
        let quota = cgroup.as_ref().and_then(Cgroup::cpu_quota);
        let cores = quota.map_or(online, |q| online.min(q.ceil().max(1.0) as usize));

        let meminfo = read(root, "proc/meminfo");
        let field = |name: &str| meminfo.as_deref().and_then(|m| meminfo_bytes(m, name));
        let total = field("MemTotal:").unwrap_or(UNKNOWN_MEMORY);
        let available = field("MemAvailable:").unwrap_or(total).min(total);
        let (limit, usage) = cgroup.as_ref().map_or((None, None), |c| (c.memory_limit(), c.memory_usage()));
        let limited = limit.is_some_and(|l| l < total);
        let memory_total = limit.map_or(total, |l| l.min(total));
        let left_in_cgroup = limit.map(|l| l.saturating_sub(usage.unwrap_or(0)));
        let memory_available = left_in_cgroup.map_or(available, |left| left.min(available)).min(memory_total);
        Machine {
            cores,
            memory_total,
            memory_available,
            memory_limited_by_cgroup: limited,
            cores_limited_by_cgroup: quota.is_some_and(|q| (q.ceil() as usize) < online),
        }
    }
}

/// The thread count of this process's parallel work, set once (see
/// [`configure_threads`]).
static THREADS: OnceLock<usize> = OnceLock::new();

/// The machine as read once per process.
static MACHINE: OnceLock<Machine> = OnceLock::new();

/// The machine this process runs on, read once.
pub fn machine() -> Machine {
    *MACHINE.get_or_init(Machine::detect)
}

/// Where a thread count came from, for `--verbose` and summaries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ThreadsFrom {
    /// `--threads` (or a run file's `threads`).
    Flag,
    /// `TOKSCOPE_THREADS`.
    Environment,
    /// `RAYON_NUM_THREADS`, honoured as rayon itself would.
    Rayon,
    /// The cores the process may use ([`Machine::cores`]).
    Machine,
}

/// The thread count to use: `flag`, else `TOKSCOPE_THREADS`, else
/// `RAYON_NUM_THREADS`, else the machine's cores. A value that is not a
/// positive integer is an error naming where it came from.
pub fn choose_threads(flag: Option<usize>) -> Result<(usize, ThreadsFrom)> {
    if let Some(n) = flag {
        return positive(n, "--threads").map(|n| (n, ThreadsFrom::Flag));
    }
    for (var, from) in [(THREADS_VAR, ThreadsFrom::Environment), ("RAYON_NUM_THREADS", ThreadsFrom::Rayon)] {
        if let Some(value) = std::env::var_os(var) {
            let text = value.to_string_lossy();
            let n: usize =
                text.trim().parse().map_err(|_| config_err!("{var}={text:?} is not a thread count (a number >= 1)"))?;
            if from == ThreadsFrom::Rayon && n == 0 {
                // rayon reads 0 as "the default": so does tokscope.
                break;
            }
            return positive(n, var).map(|n| (n, from));
        }
    }
    Ok((machine().cores, ThreadsFrom::Machine))
}

fn positive(n: usize, what: &str) -> Result<usize> {
    if n == 0 {
        return Err(config_err!("{what} 0: the thread count must be at least 1"));
    }
    Ok(n)
}

/// Sets this process's thread count (from [`choose_threads`]) and builds
/// rayon's global pool with it: ingest's parsing, compaction and the CPU
/// decoder run there, DataFusion's `target_partitions` and the ingest
/// writers follow it. Call once, before any parallel work; a second call
/// with another count is an error (rayon's pool is built once).
pub fn configure_threads(threads: usize) -> Result<()> {
    let set = *THREADS.get_or_init(|| threads);
    if set != threads {
        return Err(internal_err!("threads already set to {set}, not {threads}"));
    }
    // Already built (a library user or a test built it): it keeps its size.
    let _ = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("{POOL_THREAD}-{i}"))
        .build_global();
    Ok(())
}

/// Name of the threads of the pool parallel work runs on (ingest's parsing,
/// compaction, the CPU decoder), numbered from 0 (`top -H`, `ps -L`).
pub const POOL_THREAD: &str = "tokscope-pool";

/// The thread count parallel work uses: the configured one, else what
/// [`choose_threads`] gives without a flag (its error ignored: the machine's cores).
pub fn threads() -> usize {
    *THREADS.get_or_init(|| choose_threads(None).map_or(machine().cores, |(n, _)| n))
}

/// A share of the memory available now, for a command's default budget:
/// `fraction` of [`Machine::memory_available`], at least `floor` and at
/// most `ceiling` (the floor wins over a smaller machine: a default budget
/// is never refused, see `ingest::MemoryPlan`).
pub fn memory_share(fraction: f64, floor: u64, ceiling: u64) -> u64 {
    let share = (machine().memory_available as f64 * fraction) as u64;
    share.clamp(floor, ceiling.max(floor))
}

/// A command's `--memory-limit` as given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MemoryBudget {
    /// A share of the memory the process may use ([`auto_budget`]); never refused.
    #[default]
    Auto,
    /// This many bytes; refused when the command cannot work within it.
    Bytes(usize),
    /// No limit.
    Unlimited,
}

impl MemoryBudget {
    /// Parses `auto`, `none` or a size (`512M`, `2G`).
    pub fn parse(text: &str) -> Result<MemoryBudget> {
        if text.trim().eq_ignore_ascii_case("auto") {
            return Ok(MemoryBudget::Auto);
        }
        Ok(match crate::size::parse_size(text)? {
            0 => MemoryBudget::Unlimited,
            bytes => MemoryBudget::Bytes(bytes),
        })
    }

    /// The budget in bytes (`None`: unlimited); `auto` is [`auto_budget`].
    pub fn bytes(self) -> Option<usize> {
        match self {
            MemoryBudget::Auto => Some(auto_budget()),
            MemoryBudget::Bytes(b) => Some(b),
            MemoryBudget::Unlimited => None,
        }
    }
}

/// The automatic budget of the commands that write (ingest, compaction): a
/// quarter of the memory available to the process (its cgroup's limit
/// included), between 256 MiB (the floor wins on smaller machines: see
/// `ingest::MemoryPlan`) and 8 GiB (more than a 90-day log's buffered row
/// groups use).
pub fn auto_budget() -> usize {
    memory_share(0.25, 256 << 20, 8 << 30) as usize
}

/// Bytes of one `/proc/meminfo` field (`MemTotal:` ... ` kB`).
fn meminfo_bytes(meminfo: &str, name: &str) -> Option<u64> {
    let line = meminfo.lines().find_map(|l| l.strip_prefix(name))?;
    let kib: u64 = line.trim().strip_suffix("kB")?.trim().parse().ok()?;
    Some(kib.saturating_mul(1024))
}

/// CPUs listed in `/sys/devices/system/cpu/online` (`0-15,32-47`).
fn cpus_online(root: &Path) -> Option<usize> {
    let list = read(root, "sys/devices/system/cpu/online")?;
    let mut n = 0;
    for range in list.trim().split(',').filter(|r| !r.is_empty()) {
        let (lo, hi) = range.split_once('-').unwrap_or((range, range));
        let (lo, hi): (usize, usize) = (lo.trim().parse().ok()?, hi.trim().parse().ok()?);
        n += hi.checked_sub(lo)? + 1;
    }
    (n > 0).then_some(n)
}

fn read(root: &Path, relative: &str) -> Option<String> {
    std::fs::read_to_string(root.join(relative)).ok()
}

/// The cgroup directories that limit this process: with cgroup v2, its
/// group in the unified hierarchy and every ancestor; with v1, the same in
/// the `memory` and `cpu` hierarchies. A limit anywhere on the way up
/// applies, so the lowest one counts.
#[derive(Debug)]
enum Cgroup {
    V2 { dirs: Vec<PathBuf> },
    V1 { memory: Vec<PathBuf>, cpu: Vec<PathBuf> },
}

impl Cgroup {
    fn find(root: &Path) -> Option<Cgroup> {
        let mount = root.join("sys/fs/cgroup");
        let membership = read(root, "proc/self/cgroup").unwrap_or_default();
        // "hierarchy-id:controllers:path" per line; v2 is "0::path".
        let path_of = |wanted: &dyn Fn(&str, &str) -> bool| {
            membership.lines().find_map(|l| {
                let mut parts = l.splitn(3, ':');
                let (id, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
                wanted(id, controllers).then(|| path.to_string())
            })
        };
        if mount.join("cgroup.controllers").is_file() {
            let path = path_of(&|id, c| id == "0" && c.is_empty()).unwrap_or_default();
            return Some(Cgroup::V2 { dirs: ancestry(&mount, &path) });
        }
        let v1 = |controller: &str, dir: &str| {
            let path = path_of(&|_, c| c.split(',').any(|x| x == controller)).unwrap_or_default();
            ancestry(&mount.join(dir), &path)
        };
        let memory = v1("memory", "memory");
        let cpu = [v1("cpu", "cpu"), v1("cpu", "cpu,cpuacct")].into_iter().find(|d| !d.is_empty()).unwrap_or_default();
        (!memory.is_empty() || !cpu.is_empty()).then_some(Cgroup::V1 { memory, cpu })
    }

    /// The lowest memory limit on the way up (none: unlimited).
    fn memory_limit(&self) -> Option<u64> {
        let (dirs, file) = match self {
            Cgroup::V2 { dirs } => (dirs, "memory.max"),
            Cgroup::V1 { memory, .. } => (memory, "memory.limit_in_bytes"),
        };
        // v1 writes "unlimited" as a page-rounded i64::MAX: anything beyond 2^60 is no limit.
        dirs.iter().filter_map(|d| number(&d.join(file))).filter(|&b| b < 1 << 60).min()
    }

    /// The memory charged to the process's own group now.
    fn memory_usage(&self) -> Option<u64> {
        match self {
            Cgroup::V2 { dirs } => dirs.first().and_then(|d| number(&d.join("memory.current"))),
            Cgroup::V1 { memory, .. } => memory.first().and_then(|d| number(&d.join("memory.usage_in_bytes"))),
        }
    }

    /// The lowest CPU quota on the way up, in cores (none: unlimited).
    fn cpu_quota(&self) -> Option<f64> {
        let quotas: Vec<f64> = match self {
            Cgroup::V2 { dirs } => dirs
                .iter()
                .filter_map(|d| {
                    let text = std::fs::read_to_string(d.join("cpu.max")).ok()?;
                    let mut fields = text.split_whitespace();
                    let (quota, period) = (fields.next()?, fields.next().unwrap_or("100000"));
                    cores_of(quota.parse().ok()?, period.parse().ok()?)
                })
                .collect(),
            Cgroup::V1 { cpu, .. } => cpu
                .iter()
                .filter_map(|d| {
                    let quota: i64 = std::fs::read_to_string(d.join("cpu.cfs_quota_us")).ok()?.trim().parse().ok()?;
                    let period = number(&d.join("cpu.cfs_period_us"))?;
                    cores_of(u64::try_from(quota).ok()?, period)
                })
                .collect(),
        };
        quotas.into_iter().reduce(f64::min)
    }
}

fn cores_of(quota: u64, period: u64) -> Option<f64> {
    (quota > 0 && period > 0).then(|| quota as f64 / period as f64)
}

/// `dir` joined with the cgroup `path` and each of its ancestors up to
/// `dir`, the deepest first, keeping those that exist (inside a container
/// the path often names a group of the host, not visible there: then the
/// mount's own root is the container's group).
fn ancestry(dir: &Path, path: &str) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    let mut current = PathBuf::from(path.trim_start_matches('/'));
    loop {
        let candidate = dir.join(&current);
        if candidate.is_dir() {
            dirs.push(candidate);
        }
        if !current.pop() {
            break;
        }
    }
    dirs
}

fn number(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::Machine;

    fn write(root: &Path, relative: &str, text: &str) {
        let path = root.join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    fn meminfo(total_gib: u64, available_gib: u64) -> String {
        format!("MemTotal:       {} kB\nMemFree:  1 kB\nMemAvailable:   {} kB\n", total_gib << 20, available_gib << 20)
    }

    #[test]
    fn a_bare_machine_is_its_cpus_and_meminfo() {
        let root = tempfile::tempdir().unwrap();
        write(root.path(), "proc/meminfo", &meminfo(128, 100));
        write(root.path(), "sys/devices/system/cpu/online", "0-15\n");
        let m = Machine::read(root.path(), None);
        assert_eq!((m.cores, m.memory_total, m.memory_available), (16, 128 << 30, 100 << 30));
        assert!(!m.memory_limited_by_cgroup && !m.cores_limited_by_cgroup);
    }

    #[test]
    fn cgroup_v2_limits_lower_cores_and_memory() {
        let root = tempfile::tempdir().unwrap();
        write(root.path(), "proc/meminfo", &meminfo(128, 100));
        write(root.path(), "sys/devices/system/cpu/online", "0-63");
        write(root.path(), "proc/self/cgroup", "0::/kubepods/pod1/c1\n");
        write(root.path(), "sys/fs/cgroup/cgroup.controllers", "cpu memory\n");
        // The pod's limit (above the container's group) is the lower one.
        write(root.path(), "sys/fs/cgroup/kubepods/pod1/memory.max", "2147483648\n");
        write(root.path(), "sys/fs/cgroup/kubepods/pod1/c1/memory.max", "max\n");
        write(root.path(), "sys/fs/cgroup/kubepods/pod1/c1/memory.current", "536870912\n");
        write(root.path(), "sys/fs/cgroup/kubepods/pod1/c1/cpu.max", "250000 100000\n");
        let m = Machine::read(root.path(), None);
        assert_eq!(m.cores, 3, "2.5 cores of quota round up to 3");
        assert_eq!(m.memory_total, 2 << 30);
        assert_eq!(m.memory_available, (2 << 30) - (512 << 20));
        assert!(m.memory_limited_by_cgroup && m.cores_limited_by_cgroup);
    }

    #[test]
    fn cgroup_v1_limits_and_unlimited_values() {
        let root = tempfile::tempdir().unwrap();
        write(root.path(), "proc/meminfo", &meminfo(16, 12));
        write(root.path(), "sys/devices/system/cpu/online", "0-7");
        write(root.path(), "proc/self/cgroup", "4:memory:/docker/abc\n2:cpu,cpuacct:/docker/abc\n");
        // The container sees its own group at the mount's root.
        write(root.path(), "sys/fs/cgroup/memory/memory.limit_in_bytes", "1073741824\n");
        write(root.path(), "sys/fs/cgroup/memory/memory.usage_in_bytes", "104857600\n");
        write(root.path(), "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "-1\n");
        write(root.path(), "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000\n");
        let m = Machine::read(root.path(), None);
        assert_eq!((m.cores, m.memory_total, m.memory_available), (8, 1 << 30, (1 << 30) - (100 << 20)));

        write(root.path(), "sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
        write(root.path(), "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "50000\n");
        let m = Machine::read(root.path(), None);
        assert_eq!((m.cores, m.memory_total, m.memory_available), (1, 16 << 30, 12 << 30));
    }

    #[test]
    fn the_standard_librarys_count_stands_for_the_real_machine() {
        let root = tempfile::tempdir().unwrap();
        write(root.path(), "sys/devices/system/cpu/online", "0-63");
        assert_eq!(Machine::read(root.path(), Some(6)).cores, 6);
        assert_eq!(Machine::read(root.path(), None).cores, 64);
    }
}
