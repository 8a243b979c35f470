//! Executor groups and jobs: what users define through the API, the enums
//! with XXL-JOB's names, and the validation that turns raw input into a job.
//!
//! * `vocabulary`: routing, block strategy, misfire, glue type;
//! * `text`: bounds and checks of free text;
//! * `group`: executor groups;
//! * `job`: a job as stored and fired;
//! * `spec`: a job as a user sends it, and its validation;
//! * `secrets`: a job's named secrets, masked wherever they would show.

pub mod channel;
mod diff;
mod group;
mod job;
pub mod secrets;
mod spec;
#[cfg(test)]
mod tests;
mod text;
mod vocabulary;

pub use crate::schedule::ScheduleType;
pub use channel::{AlarmChannel, AlarmChannelSpec, ChannelKind};
pub use diff::job_diff;
pub use group::{
    Group, GroupSpec, MAX_XXL_ADDRESSES, MAX_XXL_TOKEN, MIN_XXL_TOKEN, STOCK_XXL_TOKENS, XxlAccess,
    normalize_xxl_address, validate_xxl_token,
};
pub use job::{Job, JobSchedule};
pub use spec::{
    JobSpec, MAX_CHILD_JOBS, MAX_MISFIRE_THRESHOLD_MS, MAX_OWNER, MAX_RETRIES, MAX_RETRY_BACKOFF_S,
    MAX_TIMEOUT_S, MIN_MISFIRE_THRESHOLD_MS, SUPPORTED_ROUTING,
};
pub use text::{
    MAX_APP_NAME, MAX_PARAMS_BYTES, MAX_TEXT, MAX_URL, check_username, clip, prefix,
    validate_app_name,
};
pub use vocabulary::{BlockStrategy, GlueType, MAX_SCRIPT_BYTES, Misfire, Routing};
