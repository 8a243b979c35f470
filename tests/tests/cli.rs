//! The `rondo` CLI against a real node: it signs in with a password, keeps
//! working with the saved token or `RONDO_TOKEN`, and signs out.

use std::process::Output;

use rondo_testkit::procs::binary;
use rondo_testkit::{Cluster, World};
use serde_json::Value;

/// Runs `rondo` with only the given environment (no saved credentials of
/// the machine's user can leak in).
fn rondo(env: &[(&str, &str)], args: &[&str]) -> Output {
    std::process::Command::new(binary("rondo"))
        .env_clear()
        .envs(env.iter().copied())
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run rondo")
}

fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_signs_in_works_with_its_token_and_signs_out() {
    let world = World::new("cli").await;
    let token = world.admin.token.clone();
    let mut cluster = Cluster::new(world);
    let node = cluster.start_node().await;
    let api = format!("http://{}", cluster.nodes[node].addr());
    let dir = std::env::temp_dir().join(format!("rondo-cli-{}", cluster.config().namespace));
    let creds = dir.join("credentials.json");
    let creds = creds.to_str().unwrap();
    let base = [("RONDO_API", api.as_str()), ("RONDO_CREDENTIALS", creds)];

    // Nothing saved, no token: 401, exit 2, and a hint.
    let out = rondo(&base, &["group", "list"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unauthenticated"));

    // A wrong password saves nothing.
    let wrong = [base[0], base[1], ("RONDO_PASSWORD", "not the password")];
    let out = rondo(&wrong, &["login", "--user", "admin"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(!std::path::Path::new(creds).exists());

    let login = [
        base[0],
        base[1],
        (
            "RONDO_PASSWORD",
            rondo_history::testing::users::TEST_PASSWORD,
        ),
    ];
    let out = rondo(&login, &["login", "--user", "admin", "--days", "7"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(json(&out)["username"], "admin");
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(creds).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "credentials readable by others");
    }

    // The saved token works for every command.
    let out = rondo(
        &base,
        &["group", "create", "cli", "--title", "from the cli"],
    );
    assert!(out.status.success(), "{out:?}");
    let out = rondo(&base, &["whoami"]);
    assert_eq!(json(&out)["via"], "token");
    let out = rondo(&base, &["token", "list"]);
    let tokens = json(&out)["items"].as_array().cloned().unwrap_or_default();
    assert!(tokens.iter().any(|t| {
        t["name"]
            .as_str()
            .is_some_and(|n| n.starts_with("rondo-cli@"))
    }));
    let saved: Value = serde_json::from_str(&std::fs::read_to_string(creds).unwrap()).unwrap();
    let saved_token = saved[&api]["token"].as_str().unwrap().to_owned();
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains(&saved_token),
        "a listed token shows its secret"
    );

    // RONDO_TOKEN works without the file.
    let other = dir.join("none.json");
    let with_token = [
        base[0],
        ("RONDO_CREDENTIALS", other.to_str().unwrap()),
        ("RONDO_TOKEN", token.as_str()),
    ];
    let out = rondo(&with_token, &["group", "get", "cli"]);
    assert_eq!(json(&out)["title"], "from the cli", "{out:?}");

    // Sign-out revokes the saved token.
    let out = rondo(&base, &["logout"]);
    assert!(out.status.success(), "{out:?}");
    let revoked = [
        base[0],
        ("RONDO_CREDENTIALS", other.to_str().unwrap()),
        ("RONDO_TOKEN", saved_token.as_str()),
    ];
    assert_eq!(rondo(&revoked, &["whoami"]).status.code(), Some(2));
    assert_eq!(rondo(&base, &["whoami"]).status.code(), Some(2));

    // A user moved from XXL-JOB sets a new password at sign-in: a weak
    // one saves nothing, a good one saves a token that works.
    let hash = rondo_testkit::xxl::XxlRelease::V2_1.password_hash("short1");
    let out = rondo(
        &with_token,
        &["user", "create", "moved", "--xxl-password-hash", &hash],
    );
    assert!(out.status.success(), "{out:?}");
    let as_moved = |new: &'static str| {
        let env = [
            base[0],
            base[1],
            ("RONDO_PASSWORD", "short1"),
            ("RONDO_NEW_PASSWORD", new),
        ];
        rondo(&env, &["login", "--user", "moved"])
    };
    let out = as_moved("short2");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert_eq!(
        rondo(&base, &["whoami"]).status.code(),
        Some(2),
        "nothing saved"
    );
    let out = as_moved("a long password of my own");
    assert!(out.status.success(), "{out:?}");
    assert_eq!(json(&rondo(&base, &["whoami"]))["username"], "moved");
    let _ = std::fs::remove_dir_all(&dir);
    cluster.stop().await;
}
