//! Running a daemon binary in a test: to its end with a time limit, and
//! with a throw-away config file. Each binary's `tests/daemon.rs` checks
//! the daemon shape of `crate::daemon` with these.

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

/// Runs `binary` with `args` and only the environment `env` until it
/// exits; panics (after killing it) if it still runs after `limit`.
pub fn run_binary(binary: &str, args: &[&str], env: &[(&str, &str)], limit: Duration) -> Output {
    let child = Command::new(binary)
        .args(args)
        .env_clear()
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary starts");
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(output) => output.expect("the binary's output"),
        Err(_) => {
            let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
            panic!("{binary} still runs after {limit:?}");
        }
    }
}

/// A config file with the given text, removed when dropped.
pub struct ConfigFile(PathBuf);

impl ConfigFile {
    pub fn new(text: &str) -> ConfigFile {
        let nonce: u64 = rand::random();
        let path = std::env::temp_dir().join(format!("rondo-test-{nonce:016x}.toml"));
        std::fs::write(&path, text).expect("write the config file");
        ConfigFile(path)
    }

    pub fn path(&self) -> &str {
        self.0.to_str().expect("a UTF-8 temp path")
    }
}

impl Drop for ConfigFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The config texts every daemon refuses with exit 64: a value of the
/// wrong type, an unknown key, a file that is not TOML, a value out of
/// range.
pub const BAD_CONFIGS: [&str; 4] = [
    "partitions = \"many\"",
    "nope = 1",
    "[redis\n",
    "partitions = 0",
];

/// Asserts the shape every daemon shares: `--help` and `--version` answer
/// and exit 0; a bad config file, a missing one, a bad `RONDO_*` value and
/// an unknown flag exit 64.
pub fn assert_daemon_shape(binary: &str) {
    let limit = Duration::from_secs(30);
    let help = run_binary(binary, &["--help"], &[], limit);
    assert!(help.status.success(), "--help: {help:?}");
    assert!(
        String::from_utf8_lossy(&help.stdout).contains("--config"),
        "{help:?}"
    );
    let version = run_binary(binary, &["--version"], &[], limit);
    assert!(version.status.success(), "--version: {version:?}");
    let config = crate::daemon::EXIT_CONFIG;
    for text in BAD_CONFIGS {
        let file = ConfigFile::new(text);
        let out = run_binary(binary, &["--config", file.path()], &[], limit);
        assert_eq!(
            out.status.code(),
            Some(i32::from(config)),
            "{text:?}: {out:?}"
        );
    }
    let missing = run_binary(binary, &["--config", "/nonexistent/rondo.toml"], &[], limit);
    assert_eq!(
        missing.status.code(),
        Some(i32::from(config)),
        "{missing:?}"
    );
    let env = run_binary(binary, &[], &[("RONDO_PARTITIONS", "zero")], limit);
    assert_eq!(env.status.code(), Some(i32::from(config)), "{env:?}");
    let usage = run_binary(binary, &["--no-such-flag"], &[], limit);
    assert_eq!(usage.status.code(), Some(i32::from(config)), "{usage:?}");
}
