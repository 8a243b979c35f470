//! The fence every write a leader makes under its term goes through.

use redis::Script;

/// A script that acts for a leader term: the fence first, then `body`.
pub(crate) fn fenced(body: &str) -> Script {
    Script::new(&format!("{}\n{body}", include_str!("../../lua/fence.lua")))
}
