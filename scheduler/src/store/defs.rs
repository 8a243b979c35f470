//! Reading many job definitions at once from the per-partition hashes
//! `{pK}:defs` ([`Names::defs`]): one `HMGET` per partition, so the claim,
//! the node's load and the monitor read a thousand definitions with a
//! handful of commands instead of a thousand `HGET`s.

use rondo_core::{Error, Names};

/// The `HMGET`s a pipeline holds for the definitions of `ids`, and where
/// each answer goes.
pub(crate) struct DefReads {
    /// Per `HMGET`, in pipeline order: the positions in `ids` it answers.
    positions: Vec<Vec<usize>>,
    len: usize,
}

impl DefReads {
    /// Adds one `HMGET` per partition of `ids` to `pipe`.
    pub(crate) fn add(pipe: &mut redis::Pipeline, names: &Names, ids: &[u64]) -> DefReads {
        let mut by_partition: Vec<Vec<usize>> = vec![Vec::new(); names.partitions() as usize];
        for (i, id) in ids.iter().enumerate() {
            by_partition[names.partition_of(*id) as usize].push(i);
        }
        let mut positions = Vec::new();
        for (p, at) in by_partition.into_iter().enumerate() {
            if at.is_empty() {
                continue;
            }
            let mut cmd = redis::cmd("HMGET");
            cmd.arg(names.defs(p as u32));
            for i in &at {
                cmd.arg(ids[*i]);
            }
            pipe.add_command(cmd);
            positions.push(at);
        }
        DefReads {
            positions,
            len: ids.len(),
        }
    }

    /// Replies this adds to the pipeline.
    pub(crate) fn replies(&self) -> usize {
        self.positions.len()
    }

    /// The definitions in the order of `ids`, from this read's replies;
    /// `None` where a job has none.
    pub(crate) fn assemble(
        &self,
        replies: Vec<redis::Value>,
    ) -> Result<Vec<Option<String>>, Error> {
        if replies.len() != self.positions.len() {
            return Err(Error::internal(format!(
                "redis answered {} replies to {} HMGETs",
                replies.len(),
                self.positions.len()
            )));
        }
        let mut defs = vec![None; self.len];
        for (at, reply) in self.positions.iter().zip(replies) {
            let values: Vec<Option<String>> = redis::from_redis_value(reply)
                .map_err(|e| Error::internal(format!("redis reply: {e}")))?;
            if values.len() != at.len() {
                return Err(Error::internal(
                    "HMGET answered a different number of fields",
                ));
            }
            for (i, value) in at.iter().zip(values) {
                defs[*i] = value;
            }
        }
        Ok(defs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_hmget_per_partition_and_answers_back_in_order() {
        let names = Names::new("ns", 4);
        let ids = [5, 8, 9, 1, 4];
        let mut pipe = redis::pipe();
        let reads = DefReads::add(&mut pipe, &names, &ids);
        assert_eq!(reads.replies(), 2, "partitions 0 and 1");
        let packed = String::from_utf8_lossy(&pipe.get_packed_pipeline()).into_owned();
        assert_eq!(packed.matches("HMGET").count(), 2, "{packed}");
        assert!(packed.contains("ns:{p0}:defs") && packed.contains("ns:{p1}:defs"));
        let bulk = |s: &str| redis::Value::BulkString(s.as_bytes().to_vec());
        // Partition 0 holds 8 and 4 (4 has no definition); 1 holds 5, 9, 1.
        let replies = vec![
            redis::Value::Array(vec![bulk("d8"), redis::Value::Nil]),
            redis::Value::Array(vec![bulk("d5"), bulk("d9"), bulk("d1")]),
        ];
        let defs = reads.assemble(replies).unwrap();
        let want = [Some("d5"), Some("d8"), Some("d9"), Some("d1"), None];
        assert_eq!(
            defs,
            want.map(|d| d.map(str::to_owned)).to_vec(),
            "in the order of the ids"
        );
    }

    #[test]
    fn no_ids_no_commands() {
        let names = Names::new("ns", 4);
        let mut pipe = redis::pipe();
        let reads = DefReads::add(&mut pipe, &names, &[]);
        assert_eq!(reads.replies(), 0);
        assert!(reads.assemble(Vec::new()).unwrap().is_empty());
    }
}
