//! `EVALSHA` commands built in one buffer, and run with a reload when Redis
//! forgot the script.

use redis::aio::ConnectionLike;
use redis::{Cmd, RedisResult};

/// An `EVALSHA` of `script` with `numkeys` keys, to which the caller adds
/// the keys and arguments; run it with [`run_script`]. Arguments go
/// straight into the command's one buffer, where a
/// [`redis::ScriptInvocation`] allocates each and copies them all once
/// more: it matters for scripts called with thousands of them.
///
/// `capacity`, (arguments, bytes), is what the caller expects to add: the
/// command's buffers are made that large at once, where growing them by
/// doubling touches (and has the kernel zero) about twice the memory.
pub fn script_cmd(script: &redis::Script, numkeys: usize, capacity: (usize, usize)) -> Cmd {
    let (args, bytes) = capacity;
    let mut cmd = Cmd::with_capacity(args + 3, bytes + 64);
    cmd.arg("EVALSHA");
    cmd.arg(script.get_hash()).arg(numkeys);
    cmd
}

/// Runs a command from [`script_cmd`]. When Redis does not know the script
/// (a restart, a replica promoted, `SCRIPT FLUSH`) it is loaded and the
/// command sent again, as [`redis::ScriptInvocation`] does.
pub async fn run_script<T: redis::FromRedisValue>(
    conn: &mut impl ConnectionLike,
    script: &redis::Script,
    cmd: &Cmd,
) -> RedisResult<T> {
    match cmd.query_async(conn).await {
        Err(e) if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) => {
            script.load_async(conn).await?;
            cmd.query_async(conn).await
        }
        other => other,
    }
}
