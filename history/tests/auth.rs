//! Users, API tokens and the audit log against a real MySQL.

mod common;

use common::fresh_database;
use rondo_core::Event;
use rondo_core::auth::{self, Role};
use rondo_core::event::AuditRecord;
use rondo_history::History;
use rondo_history::auth::{AuditFilter, NewToken, UserRow};

fn user(name: &str, role: Role, groups: &[&str]) -> UserRow {
    UserRow {
        username: name.into(),
        role,
        groups: groups.iter().map(|g| (*g).to_owned()).collect(),
        enabled: true,
        must_change_password: false,
        created_ms: 1,
        updated_ms: 1,
    }
}

#[tokio::test]
async fn users_are_stored_once_read_back_changed_and_deleted() {
    let (pool, _db) = fresh_database().await;
    let h = History::from_pool(pool);
    let hash = auth::hash_password("a long enough password").unwrap();
    let ann = user("ann", Role::Operator, &["billing", "reports"]);
    assert!(h.create_user(&ann, &hash).await.unwrap());
    assert!(
        !h.create_user(&ann, &hash).await.unwrap(),
        "a username once"
    );
    let (read, stored) = h.user("ann").await.unwrap().expect("ann");
    assert_eq!(read, ann);
    assert!(auth::verify_password("a long enough password", &stored));
    assert_eq!(h.user("nobody").await.unwrap(), None);

    let changed = UserRow {
        role: Role::Viewer,
        groups: vec!["billing".into()],
        enabled: false,
        updated_ms: 2,
        ..ann.clone()
    };
    assert!(h.update_user(&changed).await.unwrap());
    assert_eq!(h.users().await.unwrap(), vec![changed]);
    assert_eq!(h.enabled_admins().await.unwrap(), 0);
    let new_hash = auth::hash_password("another long password").unwrap();
    assert!(h.set_password("ann", &new_hash, 3).await.unwrap());
    let (_, stored) = h.user("ann").await.unwrap().unwrap();
    assert!(auth::verify_password("another long password", &stored));
    assert!(h.delete_user("ann", 4).await.unwrap());
    assert_eq!(h.user_count().await.unwrap(), 0);
}

#[tokio::test]
async fn a_users_language_is_stored_cleared_and_kept_apart_from_other_users() {
    let (pool, _db) = fresh_database().await;
    let h = History::from_pool(pool);
    let hash = auth::hash_password("a long enough password").unwrap();
    for name in ["ann", "bob"] {
        assert!(
            h.create_user(&user(name, Role::Viewer, &[]), &hash)
                .await
                .unwrap()
        );
    }
    assert_eq!(h.user_language("ann").await.unwrap(), None, "none chosen");
    assert!(h.set_user_language("ann", Some("zh-TW"), 2).await.unwrap());
    assert_eq!(
        h.user_language("ann").await.unwrap().as_deref(),
        Some("zh-TW")
    );
    assert_eq!(h.user_language("bob").await.unwrap(), None);
    let (ann, _) = h.user("ann").await.unwrap().unwrap();
    assert_eq!(ann.updated_ms, 2);
    assert!(h.set_user_language("ann", None, 3).await.unwrap());
    assert_eq!(h.user_language("ann").await.unwrap(), None, "cleared");
    assert!(!h.set_user_language("nobody", Some("en"), 4).await.unwrap());
    assert_eq!(h.user_language("nobody").await.unwrap(), None);
}

#[tokio::test]
async fn a_token_is_found_by_its_hash_only_while_valid() {
    let (pool, _db) = fresh_database().await;
    let h = History::from_pool(pool);
    let hash = auth::hash_password("a long enough password").unwrap();
    assert!(
        h.create_user(&user("bob", Role::Admin, &[]), &hash)
            .await
            .unwrap()
    );
    let (token, token_hash) = auth::new_token();
    let new = |hash, expires_ms| NewToken {
        username: "bob",
        name: "ci",
        hash,
        prefix: &token[..14],
        read_only: false,
        parent_id: None,
        created_ms: 10,
        expires_ms,
    };
    let id = h
        .create_token(&new(&token_hash, Some(1_000)))
        .await
        .unwrap();
    let (found, owner) = h
        .valid_token(&token_hash, 999)
        .await
        .unwrap()
        .expect("valid");
    assert_eq!((found.id, owner.role), (id, Role::Admin));
    assert_eq!(
        h.valid_token(&token_hash, 1_000).await.unwrap(),
        None,
        "expired"
    );
    assert_eq!(
        h.valid_token(&auth::token_hash("rondo_pat_guess"), 5)
            .await
            .unwrap(),
        None
    );

    let (_, forever) = auth::new_token();
    let id2 = h.create_token(&new(&forever, None)).await.unwrap();
    assert!(
        h.valid_token(&forever, i64::MAX - 1)
            .await
            .unwrap()
            .is_some()
    );
    assert!(
        !h.revoke_token(id2, Some("someone-else"), 20).await.unwrap(),
        "only its owner's"
    );
    assert!(h.revoke_token(id2, Some("bob"), 20).await.unwrap());
    assert!(!h.revoke_token(id2, None, 21).await.unwrap(), "once");
    assert_eq!(h.valid_token(&forever, 30).await.unwrap(), None, "revoked");
    let listed = h.tokens(Some("bob")).await.unwrap();
    assert_eq!(listed.iter().map(|t| t.id).collect::<Vec<_>>(), [id2, id]);
    assert_eq!(listed[0].revoked_ms, Some(20));

    // A disabled user's tokens stop working; a deleted user's are revoked.
    let (_, live) = auth::new_token();
    h.create_token(&new(&live, None)).await.unwrap();
    let disabled = UserRow {
        enabled: false,
        ..user("bob", Role::Admin, &[])
    };
    h.update_user(&disabled).await.unwrap();
    assert_eq!(
        h.valid_token(&live, 40).await.unwrap(),
        None,
        "user disabled"
    );
    h.delete_user("bob", 50).await.unwrap();
    assert!(
        h.tokens(Some("bob"))
            .await
            .unwrap()
            .iter()
            .all(|t| t.revoked_ms.is_some())
    );
}

#[tokio::test]
async fn audit_events_are_stored_once_and_read_back_newest_first_by_filter() {
    let (pool, _db) = fresh_database().await;
    let h = History::from_pool(pool);
    let entry = |at_ms, who: &str, action: &str, target: &str, group: Option<&str>| AuditRecord {
        id: format!("audit-{at_ms}"),
        at_ms,
        username: who.into(),
        action: action.into(),
        target: target.into(),
        group: group.map(str::to_owned),
        address: "127.0.0.1".into(),
        detail: None,
    };
    let rows = [
        entry(1, "ann", "job.create", "job:1", Some("billing")),
        entry(2, "bob", "job.trigger", "job:1", Some("billing")),
        entry(3, "ann", "user.create", "user:cid", None),
        entry(4, "ann", "job.delete", "job:2", Some("reports")),
    ];
    let events: Vec<Event> = rows.iter().cloned().map(Event::Audit).collect();
    rondo_history::write_events(h.pool(), &events)
        .await
        .unwrap();
    // A redelivery stores nothing twice.
    rondo_history::write_events(h.pool(), &events[..2])
        .await
        .unwrap();
    let all = h
        .audit_log(&AuditFilter {
            limit: 10,
            ..AuditFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(
        all.iter().map(|e| e.at_ms).collect::<Vec<_>>(),
        [4, 3, 2, 1]
    );
    let filter = AuditFilter {
        username: Some("ann".into()),
        group: Some("billing".into()),
        limit: 10,
        ..AuditFilter::default()
    };
    assert_eq!(h.audit_log(&filter).await.unwrap(), vec![rows[0].clone()]);
    let window = AuditFilter {
        since_ms: Some(2),
        until_ms: Some(4),
        limit: 10,
        ..AuditFilter::default()
    };
    assert_eq!(h.audit_log(&window).await.unwrap().len(), 2);
    let target = AuditFilter {
        target: Some("job:1".into()),
        limit: 1,
        ..AuditFilter::default()
    };
    assert_eq!(h.audit_log(&target).await.unwrap(), vec![rows[1].clone()]);
}
