//! Handlers: the async functions users register by name, their optional
//! `init` / `destroy` hooks, and the validated set of them an executor
//! serves.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;

use futures_util::future::BoxFuture;

use crate::context::JobContext;
use crate::error::{ExecutorError, JobError};
use crate::workers::hooks::{HookKind, SharedHook};

/// The built-in handlers that run commands (see `builtin`): offered only
/// when the executor enables them, and named in the refusal otherwise.
pub const COMMAND_HANDLERS: &[&str] = &["shell"];

/// The longest handler name (as the job model allows).
const MAX_NAME_BYTES: usize = rondo_core::model::MAX_TEXT;

/// A job handler: called once per trigger with the trigger's context.
///
/// Implemented for every `Fn(JobContext) -> impl Future<Output = Result<(),
/// JobError>>` that is `Send + Sync + 'static`, so a plain `async fn
/// demo(ctx: JobContext) -> Result<(), JobError>` or a closure returning an
/// `async move` block is a handler. Implement it by hand only for handlers
/// that are structs.
pub trait Handler: Send + Sync + 'static {
    /// Starts one run.
    fn call(&self, ctx: JobContext) -> BoxFuture<'static, Result<(), JobError>>;
}

impl<F, Fut> Handler for F
where
    F: Fn(JobContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), JobError>> + Send + 'static,
{
    fn call(&self, ctx: JobContext) -> BoxFuture<'static, Result<(), JobError>> {
        Box::pin(self(ctx))
    }
}

/// A handler shared between the runs of one executor.
pub(crate) type SharedHandler = Arc<dyn Handler>;

/// A hook as registered on the builder, before validation.
pub(crate) struct HookRegistration {
    pub(crate) handler: String,
    pub(crate) kind: HookKind,
    pub(crate) hook: SharedHook,
}

/// One handler and its hooks.
#[derive(Clone)]
struct Spec {
    handler: SharedHandler,
    init: Option<SharedHook>,
    destroy: Option<SharedHook>,
}

/// The handlers of one executor, by name. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Handlers {
    by_name: Arc<BTreeMap<String, Spec>>,
}

impl Handlers {
    /// Validates the names (non-empty, unique, advertisable) and the hooks
    /// (each for a registered handler, at most one of each kind), and
    /// builds the set.
    pub(crate) fn new(
        list: Vec<(String, SharedHandler)>,
        hooks: Vec<HookRegistration>,
    ) -> Result<Self, ExecutorError> {
        if list.is_empty() {
            return Err(ExecutorError::NoHandlers);
        }
        let mut by_name = BTreeMap::new();
        for (name, handler) in list {
            if let Err(reason) = check_name(&name) {
                return Err(ExecutorError::InvalidHandlerName { name, reason });
            }
            if by_name.contains_key(&name) {
                return Err(ExecutorError::DuplicateHandler(name));
            }
            let spec = Spec {
                handler,
                init: None,
                destroy: None,
            };
            by_name.insert(name, spec);
        }
        for registration in hooks {
            add_hook(&mut by_name, registration)?;
        }
        Ok(Handlers {
            by_name: Arc::new(by_name),
        })
    }

    pub(crate) fn get(&self, name: &str) -> Option<SharedHandler> {
        self.by_name.get(name).map(|spec| spec.handler.clone())
    }

    /// The handler's hook of `kind`, if it has one.
    pub(crate) fn hook(&self, name: &str, kind: HookKind) -> Option<SharedHook> {
        let spec = self.by_name.get(name)?;
        match kind {
            HookKind::Init => spec.init.clone(),
            HookKind::Destroy => spec.destroy.clone(),
        }
    }

    /// The names, sorted, comma-separated (the registry's `handlers` field).
    /// The handler names, sorted.
    pub(crate) fn names(&self) -> Vec<String> {
        self.by_name.keys().cloned().collect()
    }
}

fn add_hook(
    by_name: &mut BTreeMap<String, Spec>,
    registration: HookRegistration,
) -> Result<(), ExecutorError> {
    let HookRegistration {
        handler,
        kind,
        hook,
    } = registration;
    let Some(spec) = by_name.get_mut(&handler) else {
        return Err(ExecutorError::InvalidHooks {
            name: handler,
            reason: format!("{kind} hook given, but no handler of that name is registered"),
        });
    };
    let slot = match kind {
        HookKind::Init => &mut spec.init,
        HookKind::Destroy => &mut spec.destroy,
    };
    if slot.is_some() {
        return Err(ExecutorError::InvalidHooks {
            name: handler,
            reason: format!("{kind} hook registered twice"),
        });
    }
    *slot = Some(hook);
    Ok(())
}

/// A handler name is advertised in a comma-separated registry field and
/// matched against a job's `handler`, which may not contain white space.
fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("must not be empty".into());
    }
    if name.len() > MAX_NAME_BYTES {
        return Err(format!("is longer than {MAX_NAME_BYTES} bytes"));
    }
    if name.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("must not contain white space or control characters".into());
    }
    if name.contains(',') {
        return Err("must not contain ','".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn ok(_ctx: JobContext) -> Result<(), JobError> {
        Ok(())
    }

    fn named(names: &[&str]) -> Vec<(String, SharedHandler)> {
        names
            .iter()
            .map(|n| ((*n).to_owned(), Arc::new(ok) as SharedHandler))
            .collect()
    }

    #[test]
    fn valid_names_are_listed_sorted() {
        let handlers = Handlers::new(named(&["shell", "demo", "a.b-c_d"]), vec![]).unwrap();
        assert_eq!(handlers.names(), ["a.b-c_d", "demo", "shell"]);
        assert!(handlers.get("demo").is_some());
        assert!(handlers.get("nope").is_none());
    }

    #[test]
    fn empty_duplicate_and_unadvertisable_names_are_refused() {
        assert_eq!(
            Handlers::new(vec![], vec![]).err(),
            Some(ExecutorError::NoHandlers)
        );
        assert_eq!(
            Handlers::new(named(&["a", "b", "a"]), vec![]).err(),
            Some(ExecutorError::DuplicateHandler("a".into()))
        );
        for bad in ["", "two words", "a,b", "tab\there", &"x".repeat(300)] {
            let err = Handlers::new(named(&[bad]), vec![]).err();
            assert!(
                matches!(err, Some(ExecutorError::InvalidHandlerName { .. })),
                "{bad:?} was accepted"
            );
        }
    }

    #[test]
    fn closures_are_handlers() {
        let counter = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let handler = move |_ctx: JobContext| {
            let counter = counter.clone();
            async move {
                counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                Ok(())
            }
        };
        assert!(Handlers::new(vec![("count".into(), Arc::new(handler))], vec![]).is_ok());
    }

    fn hook(handler: &str, kind: HookKind) -> HookRegistration {
        let noop = |_ctx: crate::HookContext| async { Ok(()) };
        HookRegistration {
            handler: handler.into(),
            kind,
            hook: Arc::new(noop),
        }
    }

    #[test]
    fn hooks_attach_to_their_handler() {
        let hooks = vec![hook("a", HookKind::Init), hook("a", HookKind::Destroy)];
        let handlers = Handlers::new(named(&["a", "b"]), hooks).unwrap();
        assert!(handlers.hook("a", HookKind::Init).is_some());
        assert!(handlers.hook("a", HookKind::Destroy).is_some());
        assert!(handlers.hook("b", HookKind::Init).is_none());
        assert!(handlers.hook("nope", HookKind::Init).is_none());
    }

    #[test]
    fn hooks_of_unknown_handlers_or_twice_are_refused() {
        let err = Handlers::new(named(&["a"]), vec![hook("b", HookKind::Init)]).err();
        assert!(
            matches!(&err, Some(ExecutorError::InvalidHooks { name, reason }) if name == "b" && reason.contains("no handler")),
            "{err:?}"
        );
        let twice = vec![hook("a", HookKind::Destroy), hook("a", HookKind::Destroy)];
        let err = Handlers::new(named(&["a"]), twice).err();
        assert!(
            matches!(&err, Some(ExecutorError::InvalidHooks { reason, .. }) if reason == "destroy hook registered twice"),
            "{err:?}"
        );
    }
}
