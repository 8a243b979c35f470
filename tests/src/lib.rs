//! rondo's integration tests across crates live in `tests/`, one file per
//! behaviour, against the real Redis, RabbitMQ, ZooKeeper and MySQL. Their
//! harness is the `rondo-testkit` crate.
