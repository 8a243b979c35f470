//! The executor's links to the outside: the AMQP session that consumes its
//! queue and control messages, decoding one queue message, confirmed
//! publishing of results and log lines, and the Redis registry entry.

pub mod control;
pub(crate) mod delivery;
pub(crate) mod publisher;
pub(crate) mod registration;
pub(crate) mod session;
pub(crate) mod shipper;
