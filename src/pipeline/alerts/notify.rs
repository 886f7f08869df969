//! `on_alert = "COMMAND"`: the fired alerts as one JSON document on the
//! command's stdin (docs/OPERATIONS.md, "Budgets and alerts"). The command
//! runs under `sh -c` in the run file's directory; what it prints goes to
//! tokscope's stderr, never into the run's own stdout (`--json`); it runs
//! in a process group of its own, killed whole at the timeout. Its
//! failure (an exit status other than 0, a signal, not starting, running
//! past its timeout) is reported, and the alerts stay pending for the next
//! run; the run itself goes on.

use std::io::Write;
use std::os::fd::AsFd;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::Serialize;

/// What became of one `on_alert` call.
#[derive(Debug, Clone, Serialize)]
pub struct Notification {
    /// The command.
    pub command: String,
    /// Alerts handed to it.
    pub alerts: usize,
    /// Whether it exited with status 0.
    pub ok: bool,
    /// Why not, when it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Wall time, seconds.
    pub elapsed_s: f64,
}

/// Runs `command` with `payload` on its stdin, for at most `timeout`.
pub fn run(command: &str, dir: &Path, payload: Vec<u8>, alerts: usize, timeout: Duration) -> Notification {
    let started = Instant::now();
    let error = call(command, dir, payload, timeout).err();
    Notification {
        command: command.to_string(),
        alerts,
        ok: error.is_none(),
        error,
        elapsed_s: started.elapsed().as_secs_f64(),
    }
}

fn call(command: &str, dir: &Path, payload: Vec<u8>, timeout: Duration) -> Result<(), String> {
    // The command's stdout joins tokscope's stderr: stdout is the run's report.
    let stdout = std::io::stderr().as_fd().try_clone_to_owned().map_err(|e| format!("cannot pass stderr on: {e}"))?;
    let mut child = Command::new("sh")
        .args(["-c", command])
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::from(stdout))
        .stderr(Stdio::inherit())
        // Its own process group, so that a timeout ends whatever it started too
        // (a `sleep` left behind would hold the run's stderr open).
        .process_group(0)
        .spawn()
        .map_err(|e| format!("cannot start `sh -c`: {e}"))?;
    let mut stdin = child.stdin.take();
    // Written on a thread: a command that does not read stdin must not block the timeout.
    let writer = std::thread::spawn(move || {
        if let Some(stdin) = stdin.as_mut() {
            // A command that exits without reading it all closes the pipe: not an error of ours.
            let _ = stdin.write_all(&payload);
        }
    });
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() >= deadline => {
                if let Ok(group) = i32::try_from(child.id()) {
                    // SAFETY: kill(2) with a process group id and a signal; no memory is touched.
                    unsafe { libc::kill(-group, libc::SIGKILL) };
                }
                let _ = child.kill();
                let _ = child.wait();
                let _ = writer.join();
                return Err(format!("still running after {}s: killed", timeout.as_secs()));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(format!("cannot wait for it: {e}")),
        }
    };
    let _ = writer.join();
    if status.success() {
        return Ok(());
    }
    match status.code() {
        Some(code) => Err(format!("exited with status {code}")),
        None => Err(format!("ended by a signal ({status})")),
    }
}
