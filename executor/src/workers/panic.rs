//! The message of a panic caught at a task boundary (a handler's run, a
//! hook), for its result or log line.

use std::any::Any;

pub(crate) fn panic_message(payload: Box<dyn Any + Send>) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        return (*s).to_owned();
    }
    match payload.downcast::<String>() {
        Ok(s) => *s,
        Err(_) => "(a non-string panic payload)".to_owned(),
    }
}
