//! The enums with XXL-JOB's names (routing, block strategy, misfire, what a
//! job runs), each owning its list of names.

use crate::error::Error;
use crate::named::named_enum;
use crate::schedule::MisfireRule;

named_enum!(
    /// How the dispatcher picks executors of the group for a trigger.
    Routing {
        First = "FIRST",
        Last = "LAST",
        Round = "ROUND",
        Random = "RANDOM",
        ConsistentHash = "CONSISTENT_HASH",
        LeastFrequentlyUsed = "LEAST_FREQUENTLY_USED",
        LeastRecentlyUsed = "LEAST_RECENTLY_USED",
        Failover = "FAILOVER",
        Busyover = "BUSYOVER",
        ShardingBroadcast = "SHARDING_BROADCAST",
    }
);

named_enum!(
    /// What an executor does with a trigger while the job still runs.
    BlockStrategy {
        SerialExecution = "SERIAL_EXECUTION",
        DiscardLater = "DISCARD_LATER",
        CoverEarly = "COVER_EARLY",
    }
);

named_enum!(
    /// What the leader does with a fire it finds more than the threshold late.
    Misfire {
        DoNothing = "DO_NOTHING",
        FireOnceNow = "FIRE_ONCE_NOW",
    }
);

named_enum!(
    /// What a job runs (XXL-JOB's `glue_type`): a handler of the executor
    /// (`BEAN`), or a script kept with the job. `GLUE_GROOVY` is Java code
    /// that only XXL-JOB's own executor runs: its jobs belong in a group of
    /// `xxl-job-core` executors behind the XXL-JOB gateway.
    #[derive(Default)]
    GlueType {
        #[default]
        Bean = "BEAN",
        Shell = "GLUE_SHELL",
        Python = "GLUE_PYTHON",
        NodeJs = "GLUE_NODEJS",
        PowerShell = "GLUE_POWERSHELL",
        Php = "GLUE_PHP",
        Groovy = "GLUE_GROOVY",
    }
);

impl GlueType {
    /// The interpreter a script runs with, for a script type (`groovy`
    /// for `GLUE_GROOVY`, which runs inside XXL-JOB's executor).
    pub fn interpreter(self) -> Option<&'static str> {
        match self {
            GlueType::Bean => None,
            GlueType::Shell => Some("sh"),
            GlueType::Python => Some("python3"),
            GlueType::NodeJs => Some("node"),
            GlueType::PowerShell => Some("pwsh"),
            GlueType::Php => Some("php"),
            GlueType::Groovy => Some("groovy"),
        }
    }

    /// The handler name executors register a script type under:
    /// `script:<interpreter>`.
    pub fn handler(self) -> Option<String> {
        self.interpreter().map(|i| format!("script:{i}"))
    }

    /// Whether a rondo executor can run it (`GLUE_GROOVY` runs only in
    /// XXL-JOB's own executor, reached through the gateway).
    pub fn runs_on_rondo_executors(self) -> bool {
        self != GlueType::Groovy
    }

    /// The script types a rondo executor runs, by interpreter name (`sh`,
    /// `python3`, …).
    pub fn by_interpreter(name: &str) -> Option<GlueType> {
        Self::NAMES
            .iter()
            .filter_map(|n| GlueType::parse("glue_type", n).ok())
            .filter(|g| g.runs_on_rondo_executors())
            .find(|g| g.interpreter() == Some(name))
    }
}

/// The largest script kept with a job (XXL-JOB's `glue_source` is a
/// MEDIUMTEXT; a script this size belongs in the executor's image).
pub const MAX_SCRIPT_BYTES: usize = 64 * 1024;

impl Misfire {
    pub fn rule(self) -> MisfireRule {
        match self {
            Misfire::DoNothing => MisfireRule::DoNothing,
            Misfire::FireOnceNow => MisfireRule::FireOnceNow,
        }
    }
}

/// Parses a `glue_type` (empty: `BEAN`).
pub(crate) fn parse_glue_type(text: Option<&str>) -> Result<GlueType, Error> {
    match text {
        None | Some("") => Ok(GlueType::Bean),
        Some(other) => GlueType::parse("glue_type", other),
    }
}
