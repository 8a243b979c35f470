//! Alarm channels (`alarm:channels`, one hash field each): the API writes
//! them, the monitor reads those a failed job names.

use std::collections::HashMap;

use redis::AsyncCommands;
use rondo_core::model::AlarmChannel;
use rondo_core::{Error, ErrorKind};

use super::handle::Store;
use super::views::ApiStore;

impl ApiStore<'_> {
    /// Stores a channel: a new one (`Conflict` if the name is taken) or a
    /// change of one that exists (`NotFound` otherwise).
    pub async fn put_channel(&self, channel: &AlarmChannel, new: bool) -> Result<(), Error> {
        let json = serde_json::to_string(channel)?;
        let key = self.0.names.alarm_channels();
        let mut conn = self.0.conn().await?;
        if new {
            let created: bool = conn.hset_nx(&key, &channel.name, json).await?;
            if !created {
                return Err(Error {
                    kind: ErrorKind::Conflict,
                    field: Some("name".into()),
                    message: format!("alarm channel {} exists", channel.name),
                });
            }
        } else {
            self.0.channel(&channel.name).await?;
            let _: () = conn.hset(&key, &channel.name, json).await?;
        }
        Ok(())
    }

    pub async fn delete_channel(&self, name: &str) -> Result<(), Error> {
        self.0.channel(name).await?;
        let _: () = self
            .0
            .conn()
            .await?
            .hdel(self.0.names.alarm_channels(), name)
            .await?;
        Ok(())
    }
}

impl Store {
    /// One channel, or `NotFound`.
    pub async fn channel(&self, name: &str) -> Result<AlarmChannel, Error> {
        let json: Option<String> = self
            .conn()
            .await?
            .hget(self.names.alarm_channels(), name)
            .await?;
        let json =
            json.ok_or_else(|| Error::not_found("name", format!("no alarm channel {name:?}")))?;
        Ok(serde_json::from_str(&json)?)
    }

    /// Every channel, by name.
    pub async fn channels(&self) -> Result<Vec<AlarmChannel>, Error> {
        let all: HashMap<String, String> = self
            .conn()
            .await?
            .hgetall(self.names.alarm_channels())
            .await?;
        let mut channels: Vec<AlarmChannel> = all
            .values()
            .filter_map(|j| serde_json::from_str(j).ok())
            .collect();
        channels.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(channels)
    }

    /// The channels of `names` that exist (a missing one is `None`, in
    /// place).
    pub async fn channels_named(
        &self,
        names: &[String],
    ) -> Result<Vec<Option<AlarmChannel>>, Error> {
        if names.is_empty() {
            return Ok(Vec::new());
        }
        let found: Vec<Option<String>> = redis::cmd("HMGET")
            .arg(self.names.alarm_channels())
            .arg(names)
            .query_async(&mut self.conn().await?)
            .await?;
        Ok(found
            .into_iter()
            .map(|j| j.and_then(|j| serde_json::from_str(&j).ok()))
            .collect())
    }
}
