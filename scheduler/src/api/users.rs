//! Users (admins only): create, list, read, change (role, groups granted,
//! enabled, a new password) and delete. The last enabled admin cannot be
//! demoted, disabled or deleted.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::{Extension, Json};
use rondo_core::auth::{self, Access, Role};
use rondo_core::model::validate_app_name;
use rondo_core::{Error, ErrorKind, clock};
use rondo_history::auth::UserRow;
use serde::{Deserialize, Serialize};

use super::auth::Caller;
use super::doc::ApiErrors;
use super::input::parse_body;
use super::state::{ApiResult, AppState};

/// The most groups one user may be granted.
const MAX_GROUPS: usize = 256;

/// The fields of a user to change (a partial update; the username cannot
/// change). [`NewUser`] is the same with the ways to set a first password.
#[derive(Deserialize, Default, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct UserSpec {
    /// The user's name, if given, must be the one in the path.
    #[schema(pattern = "^[A-Za-z0-9._@-]{1,64}$")]
    username: Option<String>,
    /// 12 to 256 characters. Changing it ends the
    /// user's sessions and revokes their API tokens (as a disable and a
    /// demotion do).
    #[schema(format = Password, min_length = 12, max_length = 256)]
    password: Option<String>,
    /// Default `viewer`.
    #[schema(value_type = Option<Role>)]
    role: Option<String>,
    /// Executor groups granted (operators and viewers): at most 256 app
    /// names.
    #[schema(max_items = 256)]
    groups: Option<Vec<String>>,
    /// Default true; a disabled user cannot sign in, and their tokens are
    /// revoked.
    enabled: Option<bool>,
}

/// A user to create.
#[derive(Deserialize, Default, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct NewUser {
    /// Required to create.
    #[schema(pattern = "^[A-Za-z0-9._@-]{1,64}$")]
    username: Option<String>,
    /// Required unless `xxl_password_hash` is given; 12 to 256 characters.
    #[schema(format = Password, min_length = 12, max_length = 256)]
    password: Option<String>,
    /// Instead of `password`, for a user moved from XXL-JOB: its
    /// `xxl_job_user.password`, the unsalted MD5 (32 hex digits, to 3.1)
    /// or SHA-256 (64, from 3.2). The user signs in once with their
    /// XXL-JOB password, which is then stored as Argon2id; the old hash is
    /// never taken again nor shown.
    #[schema(min_length = 32, max_length = 64)]
    #[serde(alias = "xxl_md5")]
    xxl_password_hash: Option<String>,
    /// Default `viewer`.
    #[schema(value_type = Option<Role>)]
    role: Option<String>,
    /// Executor groups granted (operators and viewers): at most 256 app
    /// names.
    #[schema(max_items = 256)]
    groups: Option<Vec<String>>,
    /// Default true; a disabled user cannot sign in, and their tokens are
    /// revoked.
    enabled: Option<bool>,
}

/// Users.
#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct UserList {
    items: Vec<UserRow>,
}

/// The `{username}` path parameter.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)] // only describes the path; handlers read it as text
struct UsernameParam {
    #[param(pattern = "^[A-Za-z0-9._@-]{1,64}$")]
    username: String,
}

fn check_groups(groups: &[String]) -> Result<Vec<String>, Error> {
    if groups.len() > MAX_GROUPS {
        let msg = format!("at most {MAX_GROUPS} groups");
        return Err(Error::invalid("groups", msg));
    }
    for (i, g) in groups.iter().enumerate() {
        validate_app_name(&format!("groups[{i}]"), g)?;
    }
    let mut out = groups.to_vec();
    out.sort();
    out.dedup();
    Ok(out)
}

async fn hash(password: String) -> Result<String, Error> {
    auth::check_new_password("password", &password)?;
    tokio::task::spawn_blocking(move || auth::hash_password(&password))
        .await
        .map_err(|e| Error::internal(format!("hashing a password: {e}")))?
}

fn admin(caller: &Caller) -> Result<(), Error> {
    caller.require(Access::Admin, "user")
}

/// Reading users: an admin's read-only token may.
fn admin_reading(caller: &Caller) -> Result<(), Error> {
    caller.require(Access::ReadAdmin, "user")
}

#[utoipa::path(get, path = "/api/v1/users", tag = "users",
    responses((status = 200, description = "Every user.", body = UserList), ApiErrors))]
pub(super) async fn list_users(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
) -> ApiResult<Json<UserList>> {
    admin_reading(&caller)?;
    Ok(Json(UserList {
        items: s.history.users().await?,
    }))
}

#[utoipa::path(post, path = "/api/v1/users", tag = "users",
    request_body = NewUser,
    responses((status = 201, description = "The user, created.", body = UserRow), ApiErrors))]
pub(super) async fn create_user(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    body: Bytes,
) -> ApiResult<(StatusCode, Json<UserRow>)> {
    admin(&caller)?;
    let spec = parse_body::<NewUser>(&body)?;
    let username = spec
        .username
        .ok_or_else(|| Error::invalid("username", "is required"))?;
    auth::check_username("username", &username)?;
    let role = Role::parse("role", spec.role.as_deref().unwrap_or("viewer"))?;
    let groups = check_groups(&spec.groups.unwrap_or_default())?;
    let hash = match (spec.password, spec.xxl_password_hash) {
        (Some(_), Some(_)) => {
            return Err(Error::invalid(
                "xxl_password_hash",
                "give password or xxl_password_hash, not both",
            )
            .into());
        }
        (Some(password), None) => hash(password).await?,
        (None, Some(hex)) => auth::xxl_password_hash("xxl_password_hash", &hex)?,
        (None, None) => return Err(Error::invalid("password", "is required").into()),
    };
    let now = clock::now_ms();
    let user = UserRow {
        username,
        role,
        groups,
        enabled: spec.enabled.unwrap_or(true),
        must_change_password: false,
        created_ms: now,
        updated_ms: now,
    };
    if !s.history.create_user(&user, &hash).await? {
        let msg = format!("user {:?} exists", user.username);
        return Err(Error {
            kind: ErrorKind::Conflict,
            field: Some("username".into()),
            message: msg,
        }
        .into());
    }
    let detail = format!("role {}, groups {:?}", user.role, user.groups);
    s.events
        .publish(&[caller.audit(
            "user.create",
            format!("user:{}", user.username),
            None,
            Some(detail),
        )])
        .await?;
    Ok((StatusCode::CREATED, Json(user)))
}

async fn existing(s: &AppState, username: &str) -> Result<UserRow, Error> {
    auth::check_username("username", username)?;
    s.history
        .user(username)
        .await?
        .map(|(u, _)| u)
        .ok_or_else(|| Error::not_found("username", format!("no user {username:?}")))
}

#[utoipa::path(get, path = "/api/v1/users/{username}", tag = "users",
    params(UsernameParam),
    responses((status = 200, description = "The user.", body = UserRow), ApiErrors))]
pub(super) async fn get_user(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(username): Path<String>,
) -> ApiResult<Json<UserRow>> {
    admin_reading(&caller)?;
    Ok(Json(existing(&s, &username).await?))
}

/// Whether `old` is an enabled admin that `new` (None: deleted) would no
/// longer be.
fn loses_admin(old: &UserRow, new: Option<&UserRow>) -> bool {
    let admin = |u: &UserRow| u.role == Role::Admin && u.enabled;
    admin(old) && !new.is_some_and(admin)
}

async fn keep_an_admin(s: &AppState, old: &UserRow, new: Option<&UserRow>) -> Result<(), Error> {
    if loses_admin(old, new) && s.history.enabled_admins().await? <= 1 {
        return Err(Error {
            kind: ErrorKind::Conflict,
            field: Some("role".into()),
            message: format!("{:?} is the last enabled admin", old.username),
        });
    }
    Ok(())
}

#[utoipa::path(put, path = "/api/v1/users/{username}", tag = "users",
    params(UsernameParam), request_body(content = Option<UserSpec>, description = "The fields to change (not `username`); no body changes nothing."),
    responses((status = 200, description = "The user, changed.", body = UserRow), ApiErrors))]
pub(super) async fn update_user(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(username): Path<String>,
    body: Bytes,
) -> ApiResult<Json<UserRow>> {
    admin(&caller)?;
    let spec = parse_body::<UserSpec>(&body)?;
    if spec.username.as_deref().is_some_and(|u| u != username) {
        return Err(Error::invalid("username", "cannot rename a user").into());
    }
    let old = existing(&s, &username).await?;
    let mut user = old.clone();
    if let Some(role) = &spec.role {
        user.role = Role::parse("role", role)?;
    }
    if let Some(groups) = &spec.groups {
        user.groups = check_groups(groups)?;
    }
    if let Some(enabled) = spec.enabled {
        user.enabled = enabled;
    }
    let new_hash = match spec.password {
        Some(p) => Some(hash(p).await?),
        None => None,
    };
    keep_an_admin(&s, &old, Some(&user)).await?;
    let now = clock::now_ms();
    user.updated_ms = now;
    s.history.update_user(&user).await?;
    if let Some(hash) = &new_hash {
        s.history.set_password(&username, hash, now).await?;
    }
    // A reset, a disable or a demotion ends what the user signed in with:
    // their sessions and every API token they made.
    let ends = !user.enabled || new_hash.is_some() || demoted(&old, &user);
    if ends {
        s.history.revoke_user_tokens(&username, now).await?;
    }
    s.auth.forget();
    if ends {
        s.auth.close_sessions_of(&username, None).await?;
    }
    let mut detail = format!(
        "role {}, groups {:?}, enabled {}",
        user.role, user.groups, user.enabled
    );
    if new_hash.is_some() {
        detail.push_str(", password reset");
    }
    s.events
        .publish(&[caller.audit(
            "user.update",
            format!("user:{username}"),
            None,
            Some(detail),
        )])
        .await?;
    Ok(Json(user))
}

#[utoipa::path(delete, path = "/api/v1/users/{username}", tag = "users",
    params(UsernameParam),
    responses((status = 204, description = "Deleted, with its sessions and tokens."), ApiErrors))]
pub(super) async fn delete_user(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(username): Path<String>,
) -> ApiResult<StatusCode> {
    admin(&caller)?;
    let old = existing(&s, &username).await?;
    keep_an_admin(&s, &old, None).await?;
    s.history.delete_user(&username, clock::now_ms()).await?;
    s.auth.forget();
    s.auth.close_sessions_of(&username, None).await?;
    s.events
        .publish(&[caller.audit("user.delete", format!("user:{username}"), None, None)])
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Whether `new` may do less than `old`: a lower role, or a group taken
/// away.
fn demoted(old: &UserRow, new: &UserRow) -> bool {
    let rank = |r: Role| match r {
        Role::Admin => 2,
        Role::Operator => 1,
        Role::Viewer => 0,
    };
    rank(new.role) < rank(old.role) || old.groups.iter().any(|g| !new.groups.contains(g))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(role: Role, enabled: bool) -> UserRow {
        UserRow {
            username: "u".into(),
            role,
            groups: Vec::new(),
            enabled,
            must_change_password: false,
            created_ms: 0,
            updated_ms: 0,
        }
    }

    #[test]
    fn an_admin_is_lost_by_demotion_disabling_or_deletion_only() {
        let a = user(Role::Admin, true);
        assert!(loses_admin(&a, None));
        assert!(loses_admin(&a, Some(&user(Role::Operator, true))));
        assert!(loses_admin(&a, Some(&user(Role::Admin, false))));
        assert!(!loses_admin(&a, Some(&user(Role::Admin, true))));
        assert!(!loses_admin(&user(Role::Viewer, true), None));
    }

    #[test]
    fn groups_are_checked_sorted_and_unique() {
        let g = check_groups(&["b".into(), "a".into(), "b".into()]).unwrap();
        assert_eq!(g, ["a", "b"]);
        let e = check_groups(&["ok".into(), "bad name".into()]).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("groups[1]"));
    }
}
