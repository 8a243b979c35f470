//! From a trigger in a message to a confirmed result: the runner's
//! admission steps, the dedupe marks behind "at most once per trigger id",
//! the slots of triggers in flight, and the task set the drain waits for.

pub(crate) mod dedupe;
pub(crate) mod intake;
pub(crate) mod runner;
pub(crate) mod slots;
