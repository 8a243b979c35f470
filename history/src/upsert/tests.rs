use super::*;

#[test]
fn chunks_respect_the_placeholder_budget() {
    let rows = vec![1u8; 25_001];
    let parts = chunks(&rows, 4, |_| 1);
    assert_eq!(parts.len(), 11);
    assert!(parts.iter().all(|p| p.len() * 4 <= MAX_PLACEHOLDERS));
    assert_eq!(parts.iter().map(|p| p.len()).sum::<usize>(), rows.len());
}

#[test]
fn chunks_respect_the_byte_budget_and_keep_big_rows_alone() {
    let sizes = [
        MAX_STATEMENT_BYTES / 2,
        MAX_STATEMENT_BYTES / 2,
        1,
        MAX_STATEMENT_BYTES * 3,
        1,
    ];
    let parts = chunks(&sizes, 4, |s| *s);
    let lens: Vec<usize> = parts.iter().map(|p| p.len()).collect();
    assert_eq!(lens, vec![2, 1, 1, 1]);
}

#[test]
fn no_rows_no_statements() {
    assert!(chunks::<u8>(&[], 4, |_| 1).is_empty());
}

#[test]
fn versioned_update_assigns_the_version_columns_last() {
    let sql = versioned_update(&["title"]);
    let title = sql.find("title = IF((VALUES(updated_ms)").unwrap();
    let deleted = sql.find("deleted = IF((VALUES(updated_ms)").unwrap();
    let updated = sql
        .find("updated_ms = GREATEST(updated_ms, VALUES(updated_ms))")
        .unwrap();
    assert!(title < deleted && deleted < updated);
    assert!(sql.starts_with(" ON DUPLICATE KEY UPDATE "));
}

#[test]
fn log_side_clauses_assign_condition_columns_last() {
    let t = TRIGGER_UPDATE.as_str();
    assert!(t.find("trigger_msg = IF").unwrap() < t.find("trigger_time = IF").unwrap());
    assert!(t.find("trigger_time = IF").unwrap() < t.find("trigger_code = IF").unwrap());
    assert!(!t.contains("handle_"));
    let r = RESULT_UPDATE.as_str();
    assert!(r.find("handle_time = IF").unwrap() < r.find("handle_code = IF").unwrap());
    assert!(r.find("executor_id = IF").unwrap() < r.find("handle_time = IF").unwrap());
    assert!(!r.contains("trigger_msg") && !r.contains("trigger_time"));
    let a = ALARM_UPDATE.as_str();
    assert!(a.find("alarm_msg = IF").unwrap() < a.find("alarm_status = IF").unwrap());
    assert!(!a.contains("trigger_") && !a.contains("handle_") && !a.contains("job_id"));
}

#[test]
fn job_update_moves_the_new_columns() {
    let j = JOB_UPDATE.as_str();
    assert!(j.contains("retry_backoff_s = IF("));
    assert!(j.contains("alarm_webhook = IF("));
}
