//! Who may do what: roles, the principal a request acts as, and the
//! secrets that prove it (password hashes, API tokens), written once for
//! the API, the CLI's set-up command and the MySQL owner.
//!
//! # Roles (XXL-JOB's admin / per-group user, made explicit)
//!
//! | role | may |
//! | --- | --- |
//! | `admin` | everything, users included |
//! | `operator` | read, create, edit, start, stop, trigger and kill the jobs of the groups granted to it, and edit those groups |
//! | `viewer` | read the groups granted to it and their jobs and logs |
//!
//! An API token acts as its creator, with the creator's rights as they are
//! when it is used (never more), or only the reading ones when it was made
//! read-only.
//!
//! # Secrets
//!
//! * Passwords are stored as Argon2id PHC strings (`$argon2id$v=19$…`,
//!   the crate's defaults: m = 19 MiB, t = 2, p = 1, OWASP's setting), each
//!   with its own random salt.
//! * API tokens are `rondo_pat_` and 43 characters of base64url (32 random
//!   bytes). Only their SHA-256 (hex) is stored: a token has 256 bits of
//!   entropy, so a fast hash is enough, and a lookup by hash finds it.

use std::collections::BTreeSet;
use std::fmt;

use argon2::Argon2;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::Error;

/// A user's role.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    utoipa::ToSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Viewer,
    Operator,
    Admin,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Operator => "operator",
            Role::Admin => "admin",
        }
    }

    /// Reads a role from input, naming `field` when it is not one.
    pub fn parse(field: &str, text: &str) -> Result<Role, Error> {
        match text {
            "viewer" => Ok(Role::Viewer),
            "operator" => Ok(Role::Operator),
            "admin" => Ok(Role::Admin),
            other => Err(Error::invalid(
                field,
                format!("unknown role {other:?}: admin, operator or viewer"),
            )),
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Who a request acts as, with the rights it carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub username: String,
    pub role: Role,
    /// The executor groups granted (ignored for an admin).
    pub groups: BTreeSet<String>,
    /// Acting through a read-only token: only reading rights remain.
    pub read_only: bool,
}

/// What a request wants to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access<'a> {
    /// Read something of one group (its jobs, logs, executors).
    ReadGroup(&'a str),
    /// Change or run something of one group (jobs, kill, edit the group).
    OperateGroup(&'a str),
    /// Read what is not one group's (the cluster's status, the report).
    ReadAny,
    /// Admin only: users, groups created or deleted, audit, maintenance.
    Admin,
    /// Admin only, reading: the users, the audit log, everyone's tokens
    /// (an admin's read-only token may).
    ReadAdmin,
}

impl Principal {
    /// Whether the principal may do `access`.
    pub fn may(&self, access: Access<'_>) -> bool {
        let admin = self.role == Role::Admin;
        match access {
            Access::ReadAny => true,
            Access::ReadGroup(app) => admin || self.groups.contains(app),
            Access::OperateGroup(app) => {
                !self.read_only
                    && (admin || (self.role == Role::Operator && self.groups.contains(app)))
            }
            Access::Admin => admin && !self.read_only,
            Access::ReadAdmin => admin,
        }
    }

    /// Whether the principal sees every group (an admin) or only its own.
    pub fn sees_every_group(&self) -> bool {
        self.role == Role::Admin
    }
}

/// Hashes a password for storage (Argon2id, a fresh salt).
pub fn hash_password(password: &str) -> Result<String, Error> {
    let bytes: [u8; 16] = rand::random();
    let salt = SaltString::encode_b64(&bytes)
        .map_err(|e| Error::internal(format!("a password salt: {e}")))?;
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|hash| hash.to_string())
        .map_err(|e| Error::internal(format!("hashing a password: {e}")))
}

/// The prefixes of a password hash imported from XXL-JOB: `xxl_job_user`
/// keeps the unsalted MD5 of the password (32 hex digits) up to 3.1, and
/// its unsalted SHA-256 (64 hex digits) from 3.2. Accepted once: the
/// sign-in that matches it replaces it with Argon2id.
pub const XXL_MD5_PREFIX: &str = "xxl-md5:";
pub const XXL_SHA256_PREFIX: &str = "xxl-sha256:";

/// The stored form of an imported XXL-JOB password hash, or why `hex` is
/// not one (32 or 64 hex digits).
pub fn xxl_password_hash(field: &str, hex: &str) -> Result<String, Error> {
    let prefix = match hex.len() {
        32 => XXL_MD5_PREFIX,
        64 => XXL_SHA256_PREFIX,
        _ => "",
    };
    if prefix.is_empty() || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(Error::invalid(
            field,
            "must be XXL-JOB's password hash: 32 hex digits (an MD5, up to 3.1) or 64 (a SHA-256, 3.2 on)",
        ));
    }
    Ok(format!("{prefix}{}", hex.to_ascii_lowercase()))
}

/// Whether a stored hash is an imported XXL-JOB hash, to be replaced at
/// the next successful sign-in.
pub fn is_xxl_hash(stored: &str) -> bool {
    stored.starts_with(XXL_MD5_PREFIX) || stored.starts_with(XXL_SHA256_PREFIX)
}

/// Whether `password` matches a stored hash; false for a hash that does
/// not parse (never an error an attacker could tell apart).
pub fn verify_password(password: &str, stored: &str) -> bool {
    if let Some(md5) = stored.strip_prefix(XXL_MD5_PREFIX) {
        use md5::{Digest, Md5};
        return same_secret(&hex(&Md5::digest(password.as_bytes())), md5);
    }
    if let Some(sha) = stored.strip_prefix(XXL_SHA256_PREFIX) {
        use sha2::{Digest, Sha256};
        return same_secret(&hex(&Sha256::digest(password.as_bytes())), sha);
    }
    let Ok(parsed) = PasswordHash::new(stored) else {
        return false;
    };
    Argon2::default()
        .verify_password(password.as_bytes(), &parsed)
        .is_ok()
}

pub use rondo_model::model::check_username;

/// Checks a new password: 12 to 256 characters.
pub fn check_new_password(field: &str, password: &str) -> Result<(), Error> {
    let chars = password.chars().count();
    if !(12..=256).contains(&chars) {
        return Err(Error::invalid(field, "must be 12 to 256 characters long"));
    }
    Ok(())
}

/// The prefix of every API token.
pub const TOKEN_PREFIX: &str = "rondo_pat_";

/// A new API token: `(the token, shown once; its hash, stored)`.
pub fn new_token() -> (String, String) {
    let bytes: [u8; 32] = rand::random();
    let token = format!("{TOKEN_PREFIX}{}", base64url(&bytes));
    let hash = token_hash(&token);
    (token, hash)
}

/// Whether `token` has the shape of one [`new_token`] makes (the prefix
/// and 43 base64url characters): anything else is refused unread.
pub fn is_token_shaped(token: &str) -> bool {
    token.strip_prefix(TOKEN_PREFIX).is_some_and(|rest| {
        rest.len() == 43
            && rest
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    })
}

/// The stored form of a token: its SHA-256, hex.
pub fn token_hash(token: &str) -> String {
    hex(&Sha256::digest(token.as_bytes()))
}

/// A new random secret for a session id or a CSRF token (32 bytes,
/// base64url).
pub fn new_secret() -> String {
    let bytes: [u8; 32] = rand::random();
    base64url(&bytes)
}

/// Compares two secrets in time that does not depend on where they differ.
pub fn same_secret(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn base64url(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::with_capacity(bytes.len() * 4 / 3 + 2);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        let chars = chunk.len() + 1;
        for i in 0..chars {
            out.push(char::from(ALPHABET[(n >> (18 - 6 * i) & 63) as usize]));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn principal(role: Role, groups: &[&str], read_only: bool) -> Principal {
        Principal {
            username: "u".into(),
            role,
            groups: groups.iter().map(|g| (*g).to_owned()).collect(),
            read_only,
        }
    }

    #[test]
    fn an_imported_xxl_hash_matches_its_password_only() {
        // XXL-JOB's default admin, "123456": its MD5 (to 3.1) and its
        // SHA-256 (3.2 on).
        let md5 = xxl_password_hash("h", "E10ADC3949BA59ABBE56E057F20F883E").unwrap();
        assert_eq!(md5, "xxl-md5:e10adc3949ba59abbe56e057f20f883e");
        let sha = xxl_password_hash(
            "h",
            "8d969eef6ecad3c29a3a629280e686cf0c3f5d5a86aff3ca12020c923adc6c92",
        )
        .unwrap();
        assert!(sha.starts_with("xxl-sha256:"));
        for stored in [&md5, &sha] {
            assert!(is_xxl_hash(stored));
            assert!(verify_password("123456", stored));
            assert!(!verify_password("1234567", stored));
            assert!(!verify_password("", stored));
        }
        assert!(!verify_password("123456", &sha.replace("c92", "c93")));
        assert!(xxl_password_hash("h", "not-a-hash").is_err());
        assert!(xxl_password_hash("h", &"g".repeat(32)).is_err());
        assert!(xxl_password_hash("h", &"a".repeat(40)).is_err());
        let argon = hash_password("123456").unwrap();
        assert!(!is_xxl_hash(&argon));
    }

    #[test]
    fn roles_grant_what_the_table_says() {
        use Access::*;
        let cases = [
            (
                principal(Role::Admin, &[], false),
                [true, true, true, true, true],
            ),
            (
                principal(Role::Operator, &["a"], false),
                [true, true, false, true, false],
            ),
            (
                principal(Role::Viewer, &["a"], false),
                [true, false, false, true, false],
            ),
            (
                principal(Role::Admin, &[], true),
                [true, false, false, true, false],
            ),
            (
                principal(Role::Operator, &["a"], true),
                [true, false, false, true, false],
            ),
        ];
        for (p, [read_a, operate_a, operate_b, read_any, admin]) in cases.clone() {
            assert_eq!(p.may(ReadGroup("a")), read_a, "{p:?} read a");
            assert_eq!(p.may(OperateGroup("a")), operate_a, "{p:?} operate a");
            assert_eq!(p.may(OperateGroup("b")), operate_b, "{p:?} operate b");
            assert_eq!(p.may(ReadAny), read_any, "{p:?} read any");
            assert_eq!(p.may(Admin), admin, "{p:?} admin");
        }
        assert!(!principal(Role::Viewer, &["a"], false).may(ReadGroup("b")));
        for (p, _) in cases {
            let reads_admin = p.role == Role::Admin;
            assert_eq!(p.may(ReadAdmin), reads_admin, "{p:?} read admin");
        }
    }

    #[test]
    fn passwords_hash_with_a_salt_each_and_verify() {
        let a = hash_password("correct horse battery").unwrap();
        let b = hash_password("correct horse battery").unwrap();
        assert!(a.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"), "{a}");
        assert_ne!(a, b, "a salt each");
        assert!(verify_password("correct horse battery", &a));
        assert!(!verify_password("correct horse batterz", &a));
        assert!(!verify_password("anything", "not a phc string"));
        assert!(check_new_password("password", "short").is_err());
        assert!(check_new_password("password", "twelve chars").is_ok());
    }

    #[test]
    fn tokens_are_random_prefixed_and_stored_by_hash() {
        let (token, hash) = new_token();
        let (other, _) = new_token();
        assert!(token.starts_with(TOKEN_PREFIX));
        assert_eq!(token.len(), TOKEN_PREFIX.len() + 43);
        assert_ne!(token, other);
        assert!(is_token_shaped(&token));
        assert!(!is_token_shaped(&token[1..]));
        assert!(!is_token_shaped(&format!("{token}x")));
        assert!(!is_token_shaped(&token.replace('_', "!")));
        assert_eq!(hash, token_hash(&token));
        assert_eq!(hash.len(), 64);
        assert!(
            token[TOKEN_PREFIX.len()..]
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        );
    }

    #[test]
    fn secrets_compare_whole() {
        assert!(same_secret("abc", "abc"));
        assert!(!same_secret("abc", "abd"));
        assert!(!same_secret("abc", "ab"));
        assert!(check_username("u", "ann.lee@corp").is_ok());
        assert!(check_username("u", "").is_err());
        assert!(check_username("u", "a b").is_err());
    }

    #[test]
    fn base64url_matches_the_rfc_vectors_without_padding() {
        assert_eq!(base64url(b"f"), "Zg");
        assert_eq!(base64url(b"fo"), "Zm8");
        assert_eq!(base64url(b"foo"), "Zm9v");
        assert_eq!(base64url(b"foobar"), "Zm9vYmFy");
        assert_eq!(base64url(&[0xfb, 0xff]), "-_8");
    }
}
