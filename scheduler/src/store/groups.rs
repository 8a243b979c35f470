//! Executor groups (`groups`, one hash field each): what the API writes
//! and every view reads.

use std::collections::HashMap;

use redis::AsyncCommands;
use rondo_core::model::Group;
use rondo_core::{Error, ErrorKind};

use super::handle::Store;
use super::views::ApiStore;

impl ApiStore<'_> {
    /// Creates a group; `Conflict` if the app name is taken.
    pub async fn create_group(&self, group: &Group) -> Result<(), Error> {
        let json = serde_json::to_string(group)?;
        let created: bool = self
            .0
            .conn()
            .await?
            .hset_nx(self.0.names.groups(), &group.app, json)
            .await?;
        if !created {
            return Err(Error {
                kind: ErrorKind::Conflict,
                field: Some("app".into()),
                message: format!("group {} exists", group.app),
            });
        }
        Ok(())
    }

    pub async fn update_group(&self, group: &Group) -> Result<(), Error> {
        self.get_group(&group.app).await?;
        let json = serde_json::to_string(group)?;
        let _: () = self
            .0
            .conn()
            .await?
            .hset(self.0.names.groups(), &group.app, json)
            .await?;
        Ok(())
    }

    pub async fn get_group(&self, app: &str) -> Result<Group, Error> {
        let json: Option<String> = self
            .0
            .conn()
            .await?
            .hget(self.0.names.groups(), app)
            .await?;
        let json =
            json.ok_or_else(|| Error::not_found("group", format!("no executor group {app:?}")))?;
        Ok(serde_json::from_str(&json)?)
    }

    /// Deletes a group that has no job; `Conflict` otherwise (as XXL-JOB).
    pub async fn delete_group(&self, app: &str) -> Result<(), Error> {
        self.get_group(app).await?;
        let mut conn = self.0.conn().await?;
        let mut pipe = redis::pipe();
        for p in 0..self.0.names.partitions() {
            pipe.zcard(self.0.names.group_job_ids(p, app));
        }
        let counts: Vec<u64> = pipe.query_async(&mut conn).await?;
        let jobs: u64 = counts.iter().sum();
        if jobs > 0 {
            return Err(Error::new(
                ErrorKind::Conflict,
                format!("group {app} still has {jobs} job(s)"),
            ));
        }
        let _: () = conn.hdel(self.0.names.groups(), app).await?;
        Ok(())
    }
}

impl Store {
    pub async fn list_groups(&self) -> Result<Vec<Group>, Error> {
        let all: HashMap<String, String> = self.conn().await?.hgetall(self.names.groups()).await?;
        let mut groups: Vec<Group> = all
            .values()
            .filter_map(|j| serde_json::from_str(j).ok())
            .collect();
        groups.sort_by(|a, b| a.app.cmp(&b.app));
        Ok(groups)
    }
}
