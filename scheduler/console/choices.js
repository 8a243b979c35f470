// The choices the job and user forms offer. The values are the API's own
// (the enums of docs/openapi.json): the browser test imports this file as
// served and fails when a value differs from the spec's, so a choice can
// never send a value the API would read differently. Each value's label
// and one-line explanation are in the catalogs, as
// `choice.<list>.<value>` and `choice.<list>.<value>.hint`. Plain data: no
// DOM, importable anywhere.

export const SCHEDULE_TYPES = ['CRON', 'FIX_RATE', 'FIX_DELAY', 'NONE'];

export const ROUTING = [
  'FIRST', 'LAST', 'ROUND', 'RANDOM', 'CONSISTENT_HASH', 'LEAST_FREQUENTLY_USED',
  'LEAST_RECENTLY_USED', 'FAILOVER', 'BUSYOVER', 'SHARDING_BROADCAST',
];

export const BLOCK = ['SERIAL_EXECUTION', 'DISCARD_LATER', 'COVER_EARLY'];

export const MISFIRE = ['DO_NOTHING', 'FIRE_ONCE_NOW'];

export const GLUE = [
  'BEAN', 'GLUE_SHELL', 'GLUE_PYTHON', 'GLUE_NODEJS', 'GLUE_POWERSHELL', 'GLUE_PHP', 'GLUE_GROOVY',
];

export const ROLES = ['viewer', 'operator', 'admin'];
