//! The Redis ACL users `docs/security.md` gives each kind of process, read
//! from that page (so the tests run with exactly what operators are told to
//! type), made for one test's namespace and deleted when dropped.

const SECURITY: &str = include_str!("../../docs/security.md");

/// Whose user.
#[derive(Debug, Clone, Copy)]
pub enum Role<'a> {
    Scheduler,
    /// An executor of `app` with id `id`.
    Executor {
        app: &'a str,
        id: &'a str,
    },
    Gateway,
}

impl Role<'_> {
    /// The documented user name for namespace `rondo` (`<id>` unreplaced).
    fn documented_name(&self) -> &'static str {
        match self {
            Role::Scheduler => "rondo-scheduler",
            Role::Executor { .. } => "rondo-executor-<id>",
            Role::Gateway => "rondo-xxl-gateway",
        }
    }
}

/// Every `ACL SETUSER` line of the `redis-acl` block, as `(user, rules)`
/// with the shell's quoting and escapes undone, for namespace `rondo`.
pub fn documented() -> Vec<(String, Vec<String>)> {
    let block = crate::doc_block(SECURITY, "redis-acl").replace("\\\n", " ");
    block
        .lines()
        .filter(|l| l.trim_start().starts_with("redis-cli ACL SETUSER"))
        .map(|line| {
            let words: Vec<String> = line
                .split_whitespace()
                .map(|w| w.trim_matches('\'').replace("\\|", "|"))
                .collect();
            // redis-cli ACL SETUSER <user> on >PASSWORD <rules…>
            assert_eq!(words[4], "on", "{line}");
            assert_eq!(words[5], ">PASSWORD", "{line}");
            (words[3].clone(), words[6..].to_vec())
        })
        .collect()
}

/// The documented rules of `role` for namespace `ns`.
pub fn rules(role: Role<'_>, ns: &str) -> Vec<String> {
    let name = role.documented_name();
    let (_, rules) = documented()
        .into_iter()
        .find(|(user, _)| user == name)
        .unwrap_or_else(|| panic!("docs/security.md gives no user {name}"));
    rules
        .into_iter()
        .map(|rule| {
            let rule = match role {
                Role::Executor { app, id } => rule.replace("<app>", app).replace("<id>", id),
                _ => rule,
            };
            // Only key patterns carry the namespace.
            if rule.starts_with('~') || rule.starts_with("%R~") || rule.starts_with("%W~") {
                rule.replacen("rondo:", &format!("{ns}:"), 1)
            } else {
                rule
            }
        })
        .collect()
}

/// A Redis ACL user, deleted when dropped (also on a panic).
pub struct RedisUser {
    pub name: String,
    pub password: String,
    admin_url: String,
}

impl RedisUser {
    /// Makes user `name` with `rules` and a random password, through the
    /// administrator at `admin_url` (the tests' admin,
    /// [`rondo_core::testkit::redis_admin_url`]).
    pub fn create(admin_url: &str, name: &str, rules: &[String]) -> RedisUser {
        let user = RedisUser {
            name: name.to_owned(),
            password: format!("{:032x}", rand::random::<u128>()),
            admin_url: admin_url.to_owned(),
        };
        let mut conn = redis::Client::open(admin_url)
            .and_then(|c| c.get_connection())
            .expect("the admin's redis connection");
        let mut cmd = redis::cmd("ACL");
        cmd.arg("SETUSER")
            .arg(name)
            .arg("on")
            .arg(format!(">{}", user.password));
        for rule in rules {
            cmd.arg(rule);
        }
        let () = cmd
            .query(&mut conn)
            .unwrap_or_else(|e| panic!("ACL SETUSER {name} {rules:?}: {e}"));
        user
    }

    /// `base` (a `redis://[user:password@]host:port/…` URL) signed in as
    /// this user instead.
    pub fn url(&self, base: &str) -> String {
        format!("redis://{}:{}@{}", self.name, self.password, host_of(base))
    }
}

impl Drop for RedisUser {
    fn drop(&mut self) {
        let Ok(client) = redis::Client::open(self.admin_url.as_str()) else {
            return;
        };
        if let Ok(mut conn) = client.get_connection() {
            let _: redis::RedisResult<i64> = redis::cmd("ACL")
                .arg("DELUSER")
                .arg(&self.name)
                .query(&mut conn);
        }
    }
}

/// `host:port/…` of a `redis://[user:password@]host:port/…` URL.
fn host_of(url: &str) -> &str {
    let rest = url
        .strip_prefix("redis://")
        .unwrap_or_else(|| panic!("a redis:// url: {url}"));
    let authority_end = rest.find('/').unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => &rest[at + 1..],
        None => rest,
    }
}

/// For the URL of a process of a world that runs under ACL users (it names
/// the process's user): the same Redis signed in as the tests' admin
/// ([`rondo_core::testkit::redis_admin_url`]). `None` when it names no
/// user (the world keeps the admin's URL: a Redis Cluster).
pub fn admin_of(url: &str) -> Option<String> {
    let rest = url.strip_prefix("redis://")?;
    let (_, host) = rest.split_once('@')?;
    let admin = rondo_core::testkit::redis_admin_url();
    Some(match rondo_core::testkit::redis_userinfo(&admin) {
        Some((user, password)) => format!("redis://{user}:{password}@{host}"),
        None => format!("redis://{host}"),
    })
}

/// For a world on one Redis, from its admin's URL: the scheduler's user of
/// namespace `ns`, and the URL that signs in as it. `None` on a Redis
/// Cluster, whose nodes the tests restart (and the cluster's processes run
/// as its admin).
pub fn for_world(admin_url: &str, ns: &str) -> Option<(RedisUser, String)> {
    if !admin_url.starts_with("redis://") || admin_url.contains(',') {
        return None;
    }
    let name = format!("{ns}-scheduler");
    let user = RedisUser::create(admin_url, &name, &rules(Role::Scheduler, ns));
    let signed_in = user.url(admin_url);
    Some((user, signed_in))
}

/// For a process of a world that runs under ACL users (its URL names the
/// scheduler's): a user of `role` of its own, and its URL. `None` when the
/// world's processes run as the admin (on a Redis Cluster).
pub fn for_process(url: &str, ns: &str, role: Role<'_>) -> Option<(RedisUser, String)> {
    let admin = admin_of(url)?;
    let kind = match role {
        Role::Scheduler => "scheduler",
        Role::Executor { .. } => "executor",
        Role::Gateway => "gateway",
    };
    // A fresh name each time: a process started again under the same id
    // must not lose its user when the earlier one's is dropped.
    let name = format!("{ns}-{kind}-{:08x}", rand::random::<u32>());
    let user = RedisUser::create(&admin, &name, &rules(role, ns));
    let signed_in = user.url(&admin);
    Some((user, signed_in))
}
