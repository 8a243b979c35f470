//! Sign-in as an attacker tries it (issue 47, attacks 7 and 9, and the
//! smaller ones), each written as the attack: the attacker's requests,
//! then what they got. Against a real node, Redis and MySQL.
//!
//! * Attack 7: a password moved from XXL-JOB (unsalted, never held to the
//!   12-character rule) is taken once, and then nothing but a new password
//!   is; XXL-JOB's stock `123456` is never taken.
//! * Attack 9: guesses spread over many addresses stop at
//!   `auth.login_max_addresses_per_user`, and the user still signs in from
//!   a browser they signed in with before, even from the attacker's own
//!   address (a shared proxy or NAT).
//! * Made-up API tokens: past `auth.token_max_per_address` from one
//!   address, 429 without a database look-up; a sign-in the server could
//!   not judge is not a failed guess.

use reqwest::Method;
use rondo_core::auth::Role;
use rondo_history::testing::users::{TEST_PASSWORD, create_user};
use rondo_testkit::browser::Browser;
use rondo_testkit::xxl::XxlRelease;
use rondo_testkit::{Cluster, World};
use serde_json::json;

/// XXL-JOB's hash of a password before 3.2: unsalted MD5, hex.
fn xxl_md5(password: &str) -> String {
    XxlRelease::V2_1.password_hash(password)
}

/// A node whose clients are named by `X-Forwarded-For` (the test's
/// loopback is the trusted proxy).
async fn node(world: World) -> (Cluster, std::net::SocketAddr) {
    let mut world = world;
    world.config.auth.trusted_proxies = vec!["127.0.0.1".into(), "::1".into()];
    let mut cluster = Cluster::new(world);
    let node = cluster.start_node().await;
    let addr = cluster.nodes[node].addr();
    (cluster, addr)
}

/// Attack 7: an imported admin signed in with `123456`, again after the
/// re-hash, and the 12-character rule never reached them.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn attack_7_an_imported_password_is_taken_once_and_the_stock_one_never() {
    let (cluster, addr) = node(World::new("signin-imported").await).await;
    let admin = cluster.api(0);
    // Two users moved from XXL-JOB as the importer moves them: one who
    // kept the stock password, one with a short one of their own.
    for (name, password) in [("stock", "123456"), ("moved", "short1")] {
        let user = json!({
            "username": name, "role": "admin", "xxl_password_hash": xxl_md5(password),
        });
        let (status, answer) = admin.post("/api/v1/users", user).await;
        assert_eq!(status, 201, "{answer}");
    }

    // The attacker: the stock credentials, twice (the first success would
    // have re-hashed them).
    let mut attacker = Browser::new(addr);
    for _ in 0..2 {
        let (status, answer) = attacker.login("stock", "123456").await;
        assert_eq!(status, 401, "{answer}");
        assert_eq!(answer["error"]["field"], "password");
    }
    assert_eq!(attacker.me().await, 401, "no session");

    // The user with a short password signs in once with it…
    let mut moved = Browser::new(addr);
    let (status, session) = moved.login("moved", "short1").await;
    assert_eq!(status, 200, "{session}");
    assert_eq!(session["must_change_password"], true);
    // …and may do nothing but set a new one: not read, not write, not
    // make a token that would outlive the session.
    for (method, path, body) in [
        (Method::GET, "/api/v1/users", None),
        (Method::GET, "/api/v1/jobs", None),
        (Method::POST, "/api/v1/groups", Some(json!({ "app": "x" }))),
        (Method::POST, "/api/v1/tokens", Some(json!({ "name": "t" }))),
    ] {
        let (status, answer) = moved.send(method, path, body, true).await;
        assert_eq!(
            (status, &answer["error"]["field"]),
            (403, &json!("password")),
            "{path}: {answer}"
        );
    }
    let (status, me) = moved
        .send(Method::GET, "/api/v1/auth/me", None, false)
        .await;
    assert_eq!((status, &me["must_change_password"]), (200, &json!(true)));
    // Signing in again does not shed the duty.
    let mut again = Browser::new(addr);
    let (status, session) = again.login("moved", "short1").await;
    assert_eq!(
        (status, &session["must_change_password"]),
        (200, &json!(true))
    );
    assert_eq!(
        again.send(Method::GET, "/api/v1/jobs", None, false).await.0,
        403
    );
    // The new password is held to the rule, and must be new.
    let change = |new: &str| json!({ "current_password": "short1", "new_password": new });
    for weak in ["short2", "short1"] {
        let (status, answer) = moved
            .send(
                Method::PUT,
                "/api/v1/auth/password",
                Some(change(weak)),
                true,
            )
            .await;
        assert_eq!(
            (status, &answer["error"]["field"]),
            (400, &json!("new_password")),
            "{answer}"
        );
    }
    let good = "a long one of my own choosing";
    let (status, answer) = moved
        .send(
            Method::PUT,
            "/api/v1/auth/password",
            Some(change(good)),
            true,
        )
        .await;
    assert_eq!(status, 204, "{answer}");
    // Now the session may act, and the old password is not theirs.
    let (status, answer) = moved.send(Method::GET, "/api/v1/jobs", None, false).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(Browser::new(addr).login("moved", "short1").await.0, 401);
    let (status, session) = Browser::new(addr).login("moved", good).await;
    assert_eq!(
        (status, &session["must_change_password"]),
        (200, &json!(false))
    );
    let (_, listed) = admin.get("/api/v1/users/moved").await;
    assert_eq!(listed["must_change_password"], false, "{listed}");
}

/// Attack 9: 60 guesses for one username from 60 fresh addresses all got
/// a guess (401), none 429; behind a shared address the user was locked
/// out with the attacker.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn attack_9_guesses_over_many_addresses_stop_and_the_user_still_signs_in() {
    let world = World::new("signin-spread").await;
    let cap = world.config.auth.login_max_addresses_per_user;
    let per_address = world.config.auth.login_max_per_address;
    create_user(&world.db, "vic", Role::Viewer, &[]).await;
    create_user(&world.db, "bob", Role::Viewer, &[]).await;
    let (_cluster, addr) = node(world).await;
    let from = |ip: &str| {
        let mut b = Browser::new(addr);
        b.from = Some(ip.to_owned());
        b
    };
    // The user signs in from their own browser before the attack.
    let mut own = from("10.9.0.1");
    assert_eq!(own.login("vic", TEST_PASSWORD).await.0, 200);
    let mut bobs = from("10.9.0.2");
    assert_eq!(bobs.login("bob", TEST_PASSWORD).await.0, 200);

    // The attacker: one guess from each of 60 fresh addresses.
    let mut answers = Vec::new();
    for i in 0..60 {
        answers.push(from(&format!("10.8.0.{i}")).login("vic", "guess").await.0);
    }
    let guesses = answers.iter().filter(|s| **s == 401).count();
    let refused = answers.iter().filter(|s| **s == 429).count();
    assert_eq!(
        (guesses, refused),
        (cap as usize, 60 - cap as usize),
        "{answers:?}"
    );

    // The right password from a browser that never signed vic in waits
    // too; so does another user's browser.
    assert_eq!(from("10.8.1.1").login("vic", TEST_PASSWORD).await.0, 429);
    let mut borrowed = from("10.8.1.2");
    borrowed.device = bobs.device.clone();
    assert_eq!(borrowed.login("vic", TEST_PASSWORD).await.0, 429);
    // The user's own browser signs in, from the attacker's address too.
    own.from = Some("10.8.0.0".into());
    let (status, answer) = own.login("vic", TEST_PASSWORD).await;
    assert_eq!(status, 200, "{answer}");

    // Behind one NAT: the attacker exhausts the address…
    let nat = "10.7.0.1";
    for i in 0..per_address {
        let who = format!("nobody{i}");
        assert_eq!(from(nat).login(&who, "guess").await.0, 401);
    }
    assert_eq!(from(nat).login("bob", TEST_PASSWORD).await.0, 429);
    // …and its users still sign in from their browsers.
    bobs.from = Some(nat.into());
    assert_eq!(bobs.login("bob", TEST_PASSWORD).await.0, 200);
    // A stolen device cookie is its own count: a few guesses, then 429.
    let mut thief = from("10.6.0.1");
    thief.device = bobs.device.clone();
    let mut statuses = Vec::new();
    for _ in 0..12 {
        statuses.push(thief.login("bob", "guess").await.0);
    }
    assert_eq!(
        statuses.iter().filter(|s| **s == 401).count(),
        10,
        "{statuses:?}"
    );
}

/// Made-up tokens cost a MySQL query each, unthrottled: now an address
/// that sent `token_max_per_address` unknown ones gets 429, and the
/// others are not held up.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn made_up_tokens_are_refused_unread_past_a_limit_per_address() {
    let mut world = World::new("signin-tokens").await;
    world.config.auth.token_max_per_address = 5;
    let (cluster, addr) = node(world).await;
    let send = |token: String, ip: &'static str| async move {
        let resp = reqwest::Client::new()
            .get(format!("http://{addr}/api/v1/jobs"))
            .bearer_auth(token)
            .header("x-forwarded-for", ip)
            .send()
            .await
            .expect("an answer");
        resp.status().as_u16()
    };
    let made_up = || rondo_core::auth::new_token().0;
    // Tokens of the wrong shape are refused unread and not counted.
    for _ in 0..10 {
        assert_eq!(send("rondo_pat_short".into(), "10.5.0.1").await, 401);
    }
    let mut statuses = Vec::new();
    for _ in 0..8 {
        statuses.push(send(made_up(), "10.5.0.1").await);
    }
    assert_eq!(statuses, [401, 401, 401, 401, 401, 429, 429, 429]);
    // Another address, and a real token, are not held up.
    assert_eq!(send(made_up(), "10.5.0.2").await, 401);
    let (status, token) = cluster
        .api(0)
        .post("/api/v1/tokens", json!({ "name": "ci" }))
        .await;
    assert_eq!(status, 201, "{token}");
    let real = token["token"].as_str().expect("the token").to_owned();
    assert_eq!(send(real, "10.5.0.2").await, 200);
}

/// A sign-in the server could not judge (no user table) answers 503 and
/// does not count as a failed guess: the right password is taken when
/// the table is back, however many were tried meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_sign_in_the_server_could_not_judge_is_not_a_failed_guess() {
    let mut world = World::new("signin-down").await;
    world.config.auth.login_max_per_user = 3;
    world.config.auth.login_max_per_address = 3;
    create_user(&world.db, "ann", Role::Viewer, &[]).await;
    let db = world.db.clone();
    let (_cluster, addr) = node(world).await;
    sqlx::query("RENAME TABLE `user` TO user_away")
        .execute(&db)
        .await
        .expect("the table moved away");
    let mut browser = Browser::new(addr);
    for i in 0..6 {
        let (status, answer) = browser.login("ann", TEST_PASSWORD).await;
        assert_eq!(status, 503, "{i}: {answer}");
    }
    sqlx::query("RENAME TABLE user_away TO `user`")
        .execute(&db)
        .await
        .expect("the table back");
    let (status, answer) = browser.login("ann", TEST_PASSWORD).await;
    assert_eq!(status, 200, "{answer}");
}
