//! Users, API tokens and the audit log (migrations `…_auth.sql`,
//! `…_audit_event_id.sql`, `…_user_language.sql`; audit rows are written as `Event::Audit` by
//! `write_events`, read here): the rows
//! sign-in reads and writes. What they mean (roles, rights, how secrets are
//! made) is `rondo_core::auth`; only hashes of secrets come here. (Over
//! 500 lines: users, tokens and the audit share the rows' decoding and
//! the one user table; each family is a short run of queries.)

use rondo_core::auth::Role;
use rondo_core::event::AuditRecord;
use serde::Serialize;
use sqlx::Row;
use sqlx::mysql::MySqlRow;

use crate::{Error, History};

/// A user as stored, without the password hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct UserRow {
    pub username: String,
    pub role: Role,
    /// Executor groups granted (empty for an admin, who has them all).
    pub groups: Vec<String>,
    pub enabled: bool,
    /// Signed in once with a password moved from XXL-JOB: until a new one
    /// is set (`PUT /api/v1/auth/password`), the user may do nothing else.
    pub must_change_password: bool,
    pub created_ms: i64,
    pub updated_ms: i64,
}

/// An API token as stored (its hash stays inside this crate).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct TokenRow {
    pub id: u64,
    pub username: String,
    pub name: String,
    /// The token's first characters, to tell tokens apart.
    pub prefix: String,
    pub read_only: bool,
    pub created_ms: i64,
    pub expires_ms: Option<i64>,
    pub revoked_ms: Option<i64>,
    pub last_used_ms: Option<i64>,
}

/// A token to store.
#[derive(Debug, Clone)]
pub struct NewToken<'a> {
    pub username: &'a str,
    pub name: &'a str,
    pub hash: &'a str,
    pub prefix: &'a str,
    pub read_only: bool,
    /// The token it was made with, if any.
    pub parent_id: Option<u64>,
    pub created_ms: i64,
    pub expires_ms: Option<i64>,
}

/// Which audit rows to read, newest first.
#[derive(Debug, Clone, Default)]
pub struct AuditFilter {
    pub username: Option<String>,
    pub action: Option<String>,
    pub target: Option<String>,
    pub group: Option<String>,
    pub since_ms: Option<i64>,
    pub until_ms: Option<i64>,
    pub limit: u32,
}

const USER_COLUMNS: &str = "username, role, groups_granted, enabled, must_change_password, created_ms, updated_ms, \
     password_hash";
const TOKEN_COLUMNS: &str = "id, username, name, prefix, read_only, created_ms, expires_ms, \
                             revoked_ms, last_used_ms";

fn user_row(row: &MySqlRow) -> Result<(UserRow, String), Error> {
    let role: String = row.try_get("role")?;
    let role = Role::parse("role", &role).map_err(Error::Decode)?;
    let groups = decode_groups(row)?;
    let user = UserRow {
        username: row.try_get("username")?,
        role,
        groups,
        enabled: row.try_get::<i8, _>("enabled")? != 0,
        must_change_password: row.try_get::<i8, _>("must_change_password")? != 0,
        created_ms: row.try_get("created_ms")?,
        updated_ms: row.try_get("updated_ms")?,
    };
    Ok((user, row.try_get("password_hash")?))
}

/// A user's `groups_granted`: a JSON array of names (NULL or empty: none).
fn decode_groups(row: &MySqlRow) -> Result<Vec<String>, Error> {
    let groups: Option<String> = row.try_get("groups_granted")?;
    match groups.as_deref() {
        None | Some("") => Ok(Vec::new()),
        Some(json) => serde_json::from_str(json).map_err(|e| {
            Error::Decode(rondo_core::Error::internal(format!(
                "user groups_granted is not a JSON array of names: {e}"
            )))
        }),
    }
}

fn token_row(row: &MySqlRow) -> Result<TokenRow, Error> {
    Ok(TokenRow {
        id: row.try_get("id")?,
        username: row.try_get("username")?,
        name: row.try_get("name")?,
        prefix: row.try_get("prefix")?,
        read_only: row.try_get::<i8, _>("read_only")? != 0,
        created_ms: row.try_get("created_ms")?,
        expires_ms: row.try_get("expires_ms")?,
        revoked_ms: row.try_get("revoked_ms")?,
        last_used_ms: row.try_get("last_used_ms")?,
    })
}

/// Inserts a user row (with `pool` or within a transaction).
async fn insert_user<'e>(
    executor: impl sqlx::MySqlExecutor<'e>,
    user: &UserRow,
    password_hash: &str,
) -> Result<sqlx::mysql::MySqlQueryResult, sqlx::Error> {
    sqlx::query(
        "INSERT INTO `user` (username, password_hash, role, groups_granted, enabled, created_ms, updated_ms) \
         VALUES (?, ?, ?, ?, ?, ?, ?)",
    )
    .bind(&user.username)
    .bind(password_hash)
    .bind(user.role.as_str())
    .bind(groups_json(&user.groups))
    .bind(user.enabled)
    .bind(user.created_ms)
    .bind(user.updated_ms)
    .execute(executor)
    .await
}

fn groups_json(groups: &[String]) -> String {
    serde_json::to_string(groups).unwrap_or_else(|_| "[]".into())
}

/// MySQL's duplicate-key error.
fn is_duplicate(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(db) if db.code().as_deref() == Some("23000"))
}

impl History {
    /// Stores a new user; false when the username is taken.
    pub async fn create_user(&self, user: &UserRow, password_hash: &str) -> Result<bool, Error> {
        match insert_user(self.pool(), user, password_hash).await {
            Ok(_) => Ok(true),
            Err(e) if is_duplicate(&e) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Creates `user` as the database's first admin, once in its life: in
    /// one transaction, the `first_admin` mark is set (if it already is,
    /// nothing is made), and the user is created if the user table is
    /// empty. Whether the user was made.
    pub async fn create_first_admin(
        &self,
        user: &UserRow,
        password_hash: &str,
        now_ms: i64,
    ) -> Result<bool, Error> {
        let mut tx = self.pool().begin().await?;
        let marked = sqlx::query(
            "INSERT IGNORE INTO rondo_meta (name, value, set_ms) VALUES ('first_admin', ?, ?)",
        )
        .bind(&user.username)
        .bind(now_ms)
        .execute(&mut *tx)
        .await?;
        if marked.rows_affected() == 0 {
            return Ok(false);
        }
        let users: u64 = sqlx::query_scalar("SELECT CAST(COUNT(*) AS UNSIGNED) FROM `user`")
            .fetch_one(&mut *tx)
            .await?;
        if users == 0 {
            insert_user(&mut *tx, user, password_hash).await?;
        }
        tx.commit().await?;
        Ok(users == 0)
    }

    /// A user and its password hash.
    pub async fn user(&self, username: &str) -> Result<Option<(UserRow, String)>, Error> {
        let sql = format!("SELECT {USER_COLUMNS} FROM `user` WHERE username = ?");
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(username)
            .fetch_optional(self.pool())
            .await?;
        row.as_ref().map(user_row).transpose()
    }

    /// Every user, by name.
    pub async fn users(&self) -> Result<Vec<UserRow>, Error> {
        let sql = format!("SELECT {USER_COLUMNS} FROM `user` ORDER BY username");
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .fetch_all(self.pool())
            .await?;
        rows.iter().map(|r| user_row(r).map(|(u, _)| u)).collect()
    }

    /// How many enabled admins there are (the last one may not go).
    pub async fn enabled_admins(&self) -> Result<u64, Error> {
        Ok(sqlx::query_scalar(
            "SELECT CAST(COUNT(*) AS UNSIGNED) FROM `user` WHERE role = 'admin' AND enabled = 1",
        )
        .fetch_one(self.pool())
        .await?)
    }

    /// How many users there are.
    pub async fn user_count(&self) -> Result<u64, Error> {
        Ok(
            sqlx::query_scalar("SELECT CAST(COUNT(*) AS UNSIGNED) FROM `user`")
                .fetch_one(self.pool())
                .await?,
        )
    }

    /// Changes a user's role, groups and enabled flag; false when no such
    /// user.
    pub async fn update_user(&self, user: &UserRow) -> Result<bool, Error> {
        let done = sqlx::query(
            "UPDATE `user` SET role = ?, groups_granted = ?, enabled = ?, updated_ms = ? WHERE username = ?",
        )
        .bind(user.role.as_str())
        .bind(groups_json(&user.groups))
        .bind(user.enabled)
        .bind(user.updated_ms)
        .bind(&user.username)
        .execute(self.pool())
        .await?;
        Ok(done.rows_affected() > 0)
    }

    /// Replaces a user's password hash (a password the user or an admin
    /// chose: no longer one to change); false when no such user.
    pub async fn set_password(
        &self,
        username: &str,
        password_hash: &str,
        now_ms: i64,
    ) -> Result<bool, Error> {
        let done = sqlx::query(
            "UPDATE `user` SET password_hash = ?, must_change_password = 0, updated_ms = ? \
                 WHERE username = ?",
        )
        .bind(password_hash)
        .bind(now_ms)
        .bind(username)
        .execute(self.pool())
        .await?;
        Ok(done.rows_affected() > 0)
    }

    /// A user's console language as stored; `None` when not chosen, or
    /// when there is no such user.
    pub async fn user_language(&self, username: &str) -> Result<Option<String>, Error> {
        let language: Option<Option<String>> =
            sqlx::query_scalar("SELECT language FROM `user` WHERE username = ?")
                .bind(username)
                .fetch_optional(self.pool())
                .await?;
        Ok(language.flatten())
    }

    /// Sets a user's console language (`None` clears it); false when no
    /// such user. The value is checked by the caller
    /// (`rondo_core::language::Language`).
    pub async fn set_user_language(
        &self,
        username: &str,
        language: Option<&str>,
        now_ms: i64,
    ) -> Result<bool, Error> {
        let done = sqlx::query("UPDATE `user` SET language = ?, updated_ms = ? WHERE username = ?")
            .bind(language)
            .bind(now_ms)
            .bind(username)
            .execute(self.pool())
            .await?;
        Ok(done.rows_affected() > 0)
    }

    /// Replaces `username`'s password hash `old` by `new` (an imported
    /// hash upgraded at sign-in), and the user must then choose a new
    /// password; false when it is no longer `old`.
    pub async fn replace_password_hash(
        &self,
        username: &str,
        old: &str,
        new: &str,
        now_ms: i64,
    ) -> Result<bool, Error> {
        let done = sqlx::query(
            "UPDATE `user` SET password_hash = ?, must_change_password = 1, updated_ms = ? \
             WHERE username = ? AND password_hash = ?",
        )
        .bind(new)
        .bind(now_ms)
        .bind(username)
        .bind(old)
        .execute(self.pool())
        .await?;
        Ok(done.rows_affected() > 0)
    }

    /// Revokes every token of `username` not revoked yet (a password
    /// change or reset, a disable, a demotion); how many.
    pub async fn revoke_user_tokens(&self, username: &str, now_ms: i64) -> Result<u64, Error> {
        let done = sqlx::query(
            "UPDATE api_token SET revoked_ms = ? WHERE username = ? AND revoked_ms IS NULL",
        )
        .bind(now_ms)
        .bind(username)
        .execute(self.pool())
        .await?;
        Ok(done.rows_affected())
    }

    /// Deletes a user and revokes its tokens; false when no such user.
    pub async fn delete_user(&self, username: &str, now_ms: i64) -> Result<bool, Error> {
        let mut tx = self.pool().begin().await?;
        sqlx::query(
            "UPDATE api_token SET revoked_ms = ? WHERE username = ? AND revoked_ms IS NULL",
        )
        .bind(now_ms)
        .bind(username)
        .execute(&mut *tx)
        .await?;
        let done = sqlx::query("DELETE FROM `user` WHERE username = ?")
            .bind(username)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(done.rows_affected() > 0)
    }

    /// Stores a new token; returns its id.
    pub async fn create_token(&self, token: &NewToken<'_>) -> Result<u64, Error> {
        let done = sqlx::query(
            "INSERT INTO api_token (username, name, token_hash, prefix, read_only, parent_id, created_ms, expires_ms) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(token.username)
        .bind(token.name)
        .bind(token.hash)
        .bind(token.prefix)
        .bind(token.read_only)
        .bind(token.parent_id)
        .bind(token.created_ms)
        .bind(token.expires_ms)
        .execute(self.pool())
        .await?;
        Ok(done.last_insert_id())
    }

    /// The token with this hash and its user, if the token is neither
    /// revoked nor expired at `now_ms` and its user exists and is enabled.
    pub async fn valid_token(
        &self,
        hash: &str,
        now_ms: i64,
    ) -> Result<Option<(TokenRow, UserRow)>, Error> {
        let sql = format!(
            "SELECT {} FROM api_token t JOIN `user` u ON u.username = t.username \
             WHERE t.token_hash = ? AND t.revoked_ms IS NULL \
             AND (t.expires_ms IS NULL OR t.expires_ms > ?) AND u.enabled = 1",
            "t.id, t.username, t.name, t.prefix, t.read_only, t.created_ms, t.expires_ms, \
             t.revoked_ms, t.last_used_ms, u.role, u.groups_granted, u.enabled, \
             u.must_change_password, \
             u.created_ms AS user_created_ms, u.updated_ms AS user_updated_ms"
        );
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(hash)
            .bind(now_ms)
            .fetch_optional(self.pool())
            .await?;
        let Some(row) = row else { return Ok(None) };
        let token = token_row(&row)?;
        let role: String = row.try_get("role")?;
        let user = UserRow {
            username: token.username.clone(),
            role: Role::parse("role", &role).map_err(Error::Decode)?,
            groups: decode_groups(&row)?,
            enabled: true,
            must_change_password: row.try_get::<i8, _>("must_change_password")? != 0,
            created_ms: row.try_get("user_created_ms")?,
            updated_ms: row.try_get("user_updated_ms")?,
        };
        Ok(Some((token, user)))
    }

    /// Notes a token's use (at most once a minute per token, by the
    /// caller's choice).
    pub async fn touch_token(&self, id: u64, now_ms: i64) -> Result<(), Error> {
        sqlx::query("UPDATE api_token SET last_used_ms = ? WHERE id = ?")
            .bind(now_ms)
            .bind(id)
            .execute(self.pool())
            .await?;
        Ok(())
    }

    /// Tokens, newest first: one user's, or everyone's.
    pub async fn tokens(&self, username: Option<&str>) -> Result<Vec<TokenRow>, Error> {
        let rows = match username {
            Some(user) => {
                let sql = format!(
                    "SELECT {TOKEN_COLUMNS} FROM api_token WHERE username = ? ORDER BY id DESC"
                );
                sqlx::query(sqlx::AssertSqlSafe(sql))
                    .bind(user)
                    .fetch_all(self.pool())
                    .await?
            }
            None => {
                let sql = format!("SELECT {TOKEN_COLUMNS} FROM api_token ORDER BY id DESC");
                sqlx::query(sqlx::AssertSqlSafe(sql))
                    .fetch_all(self.pool())
                    .await?
            }
        };
        rows.iter().map(token_row).collect()
    }

    /// Revokes a token (of `username` only, when given), and the tokens
    /// made with it, and theirs; false when there is no such token not
    /// revoked yet.
    pub async fn revoke_token(
        &self,
        id: u64,
        username: Option<&str>,
        now_ms: i64,
    ) -> Result<bool, Error> {
        let mut tx = self.pool().begin().await?;
        let done = sqlx::query(
            "UPDATE api_token SET revoked_ms = ? \
             WHERE id = ? AND revoked_ms IS NULL AND (? IS NULL OR username = ?)",
        )
        .bind(now_ms)
        .bind(id)
        .bind(username)
        .bind(username)
        .execute(&mut *tx)
        .await?;
        if done.rows_affected() == 0 {
            return Ok(false);
        }
        // Down the whole tree of tokens made with tokens, however deep. It
        // ends: a parent is always older (no cycle), and a token is taken
        // only while not revoked, so each is revoked once.
        let mut parents = vec![id];
        while !parents.is_empty() {
            let list = parents
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(",");
            let children: Vec<u64> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
                "SELECT id FROM api_token WHERE parent_id IN ({list}) AND revoked_ms IS NULL"
            )))
            .fetch_all(&mut *tx)
            .await?;
            if !children.is_empty() {
                let ids = children
                    .iter()
                    .map(u64::to_string)
                    .collect::<Vec<_>>()
                    .join(",");
                sqlx::query(sqlx::AssertSqlSafe(format!(
                    "UPDATE api_token SET revoked_ms = ? WHERE id IN ({ids})"
                )))
                .bind(now_ms)
                .execute(&mut *tx)
                .await?;
            }
            parents = children;
        }
        tx.commit().await?;
        Ok(true)
    }

    /// Audit rows matching `filter`, newest first.
    pub async fn audit_log(&self, filter: &AuditFilter) -> Result<Vec<AuditRecord>, Error> {
        let rows = sqlx::query(
            "SELECT event_id, at_ms, username, action, target, group_app, address, detail FROM audit_log \
             WHERE (? IS NULL OR username = ?) AND (? IS NULL OR action = ?) \
             AND (? IS NULL OR target = ?) AND (? IS NULL OR group_app = ?) \
             AND (? IS NULL OR at_ms >= ?) AND (? IS NULL OR at_ms < ?) \
             ORDER BY at_ms DESC, id DESC LIMIT ?",
        )
        .bind(&filter.username)
        .bind(&filter.username)
        .bind(&filter.action)
        .bind(&filter.action)
        .bind(&filter.target)
        .bind(&filter.target)
        .bind(&filter.group)
        .bind(&filter.group)
        .bind(filter.since_ms)
        .bind(filter.since_ms)
        .bind(filter.until_ms)
        .bind(filter.until_ms)
        .bind(filter.limit)
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|r| {
                Ok(AuditRecord {
                    id: r
                        .try_get::<Option<String>, _>("event_id")?
                        .unwrap_or_default(),
                    at_ms: r.try_get("at_ms")?,
                    username: r.try_get("username")?,
                    action: r.try_get("action")?,
                    target: r.try_get("target")?,
                    group: r.try_get("group_app")?,
                    address: r.try_get("address")?,
                    detail: r.try_get("detail")?,
                })
            })
            .collect()
    }
}
