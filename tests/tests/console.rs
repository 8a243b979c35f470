//! The web console end to end: a real cluster (a scheduler node, two
//! executors that may run `sh` scripts, the persistence worker) and the
//! browser tests `tests/e2e/console.test.mjs` (in English) then
//! `tests/e2e/console-zh.test.mjs` (in Chinese, with the catalogs'
//! checks), run one after the other by Node's test runner driving
//! Debian's chromium through playwright-core. Screenshots of every screen
//! land in `target/console-screenshots/`.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use rondo_core::auth::Role;
use rondo_history::testing::users::TEST_PASSWORD;
use rondo_testkit::{Cluster, World};

/// The browser tests' own bound is 300 s a file; this one only guards a
/// hang.
const BROWSER_TIMEOUT: Duration = Duration::from_secs(420);

fn workspace_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate is in the workspace")
}

/// `scripts/e2e-env.sh`: chromium, Node and the test's packages; prints
/// the chromium executable.
fn e2e_env() -> String {
    let root = workspace_root();
    let out = std::process::Command::new("bash")
        .arg(root.join("scripts/e2e-env.sh"))
        .current_dir(root)
        .output()
        .expect("running scripts/e2e-env.sh");
    assert!(
        out.status.success(),
        "scripts/e2e-env.sh failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_console_works_in_a_real_browser() {
    let chromium = e2e_env();
    let mut world = World::new("console").await;
    world.config.executor.app = "web".into();
    world.config.executor.script_handlers = vec!["sh".into()];
    world.user("vivian", Role::Viewer, &["web"], false).await;
    let (admin_user, admin_password) = (world.admin.username.clone(), world.admin.password.clone());
    let mut cluster = Cluster::new(world);
    cluster.spawn_executor("web-1");
    // A second executor of the group: a trigger on a chosen executor
    // shows where it ran.
    cluster.spawn_executor("web-2");
    cluster.start_persist_worker();
    let node = cluster.start_node().await;
    let base = format!("http://{}", cluster.addr(node));
    let shots = workspace_root().join("target/console-screenshots");

    // The page and its files are open, hold no data, and forbid inline
    // and foreign scripts; the data behind them is not open.
    let http = reqwest::Client::new();
    for path in ["/", "/jobs/7", "/assets/app.js"] {
        let answer = http.get(format!("{base}{path}")).send().await.unwrap();
        assert_eq!(answer.status(), 200, "{path}");
        let csp = answer.headers()["content-security-policy"]
            .to_str()
            .unwrap();
        assert!(csp.contains("script-src 'self'"), "{path}: {csp}");
    }
    let missing = http
        .get(format!("{base}/assets/nope.js"))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
    let data = http
        .get(format!("{base}/api/v1/jobs"))
        .send()
        .await
        .unwrap();
    assert_eq!(data.status(), 401);

    // One file after the other: the Chinese one works on the group the
    // English one creates.
    let mut outcome = Vec::new();
    for file in ["console.test.mjs", "console-zh.test.mjs"] {
        let run = tokio::process::Command::new("node")
            .args(["--test", "--test-reporter=spec", file])
            .current_dir(workspace_root().join("tests/e2e"))
            .env("RONDO_URL", &base)
            .env("RONDO_ADMIN_USER", &admin_user)
            .env("RONDO_ADMIN_PASSWORD", &admin_password)
            .env("RONDO_VIEWER_USER", "vivian")
            .env("RONDO_VIEWER_PASSWORD", TEST_PASSWORD)
            .env("RONDO_APP", "web")
            .env("RONDO_SCREENSHOTS", &shots)
            .env("CHROMIUM", &chromium)
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output();
        let out = tokio::time::timeout(BROWSER_TIMEOUT, run)
            .await
            .expect("the browser test ends")
            .expect("node runs");
        let failed = !out.status.success();
        outcome.push((file, out));
        if failed {
            break;
        }
    }
    cluster.stop().await;
    for (file, out) in outcome {
        assert!(
            out.status.success(),
            "the browser test {file} failed ({}):\n{}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
