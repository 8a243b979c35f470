//! A Redis server of the test's own: `redis-server` on a free loopback
//! port, nothing saved, with Redis's defaults (its `default` user open),
//! stopped when the guard drops, also when the test panics. For what the
//! shared test Redis must not be: open, or changed by the test.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a started redis-server may take to answer (a loaded machine).
const STARTUP: Duration = Duration::from_secs(20);

/// A running `redis-server`, killed when dropped.
pub struct ThrowawayRedis {
    pub port: u16,
    child: Child,
}

impl ThrowawayRedis {
    /// Starts `redis-server` (on the `PATH`) on a free port and waits until
    /// it answers.
    pub fn start() -> ThrowawayRedis {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--dir"])
            .arg(std::env::temp_dir())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server starts (scripts/services.sh installs it)");
        let redis = ThrowawayRedis { port, child };
        redis.until_answering();
        redis
    }

    /// `redis://127.0.0.1:<port>`, as Redis's `default` user.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// A blocking connection as `default`.
    pub fn connect(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .and_then(|c| c.get_connection())
            .expect("the throwaway redis answers")
    }

    fn until_answering(&self) {
        let deadline = Instant::now() + STARTUP;
        loop {
            let pong = redis::Client::open(self.url())
                .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(1)))
                .and_then(|mut c| redis::cmd("PING").query::<String>(&mut c));
            if pong.is_ok() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "redis-server on port {} does not answer: {pong:?}",
                self.port
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for ThrowawayRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
