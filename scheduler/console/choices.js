// The choices the job form offers, each with a line saying what it does.
// The values are the API's own (the enums of docs/openapi.json): the
// browser test imports this file as served and fails when a value differs
// from the spec's, so a choice can never send a value the API would read
// differently. Plain data: no DOM, importable anywhere.

export const SCHEDULE_TYPES = [
  ['CRON', 'a Quartz cron expression, in the job’s zone'],
  ['FIX_RATE', 'every N seconds (or 250ms), counted from the last fire'],
  ['FIX_DELAY', 'N seconds after the previous run’s final result'],
  ['NONE', 'only when triggered (by hand, the API or a parent job)'],
];

export const ROUTING = [
  ['FIRST', 'the first live executor'],
  ['LAST', 'the last live executor'],
  ['ROUND', 'each executor in turn'],
  ['RANDOM', 'a random executor'],
  ['CONSISTENT_HASH', 'the same executor for this job while the set is stable'],
  ['LEAST_FREQUENTLY_USED', 'the executor that ran this job least often'],
  ['LEAST_RECENTLY_USED', 'the executor that ran this job longest ago'],
  ['FAILOVER', 'the first executor with a fresh heartbeat'],
  ['BUSYOVER', 'the first executor not busy with this job'],
  ['SHARDING_BROADCAST', 'every executor, each with its shard index'],
];

export const BLOCK = [
  ['SERIAL_EXECUTION', 'wait for the running trigger, then run'],
  ['DISCARD_LATER', 'drop a trigger while one runs'],
  ['COVER_EARLY', 'kill the running trigger and run the new one'],
];

export const MISFIRE = [
  ['DO_NOTHING', 'skip fires found later than the threshold'],
  ['FIRE_ONCE_NOW', 'fire once now for all the fires missed'],
];

export const GLUE = [
  ['BEAN', 'run the executor handler named below'],
  ['GLUE_SHELL', 'a shell script kept with the job (sh)'],
  ['GLUE_PYTHON', 'a Python script kept with the job'],
  ['GLUE_NODEJS', 'a Node.js script kept with the job'],
  ['GLUE_POWERSHELL', 'a PowerShell script kept with the job'],
  ['GLUE_PHP', 'a PHP script kept with the job'],
  ['GLUE_GROOVY', "Groovy, run by XXL-JOB's own executors (behind the XXL-JOB gateway)"],
];

export const ROLES = [
  ['viewer', 'reads the groups granted'],
  ['operator', 'reads and changes the jobs of the groups granted'],
  ['admin', 'everything, every group, users and the audit log'],
];
