// The console's one route table: each path, the screen (pages.js) that
// draws it, and its entry in the main menu (its label's catalog key, and who
// sees it there).
// The server reads this file too (scheduler/src/api/console.rs): every
// path listed here answers with the page, so a deep link or a reload opens
// its screen, and no other path does. A `:name` segment is a parameter
// (the screen gets it by name), optionally with its pattern in
// parentheses. Plain data: no DOM, importable anywhere.

export const ROUTES = [
  ['/login', 'login'],
  ['/', 'dashboard', 'nav.dashboard'],
  ['/jobs', 'jobs', 'nav.jobs'],
  ['/jobs/new', 'jobForm'],
  ['/jobs/:id(\\d+)', 'jobForm'],
  ['/logs', 'logs', 'nav.logs'],
  ['/logs/:trigger', 'logDetail'],
  ['/groups', 'groupsScreen', 'nav.groups'],
  ['/groups/:app', 'groupScreen'],
  ['/cluster', 'clusterScreen', 'nav.cluster'],
  ['/account', 'account'],
  ['/users', 'users', 'nav.users', 'admin'],
  ['/users/:name', 'userScreen'],
  ['/audit', 'audit', 'nav.audit', 'admin'],
  ['/channels', 'channels', 'nav.channels', 'admin'],
  ['/channels/:name', 'channelScreen'],
  ['/retention', 'retention', 'nav.retention', 'admin'],
  ['/deleted', 'deleted', 'nav.deleted', 'admin'],
];

/** The regular expression of a route's path, its parameters as named
 *  groups. */
export function pattern(route) {
  const source = route
    .split('/')
    .map((part) => {
      const param = part.match(/^:(\w+)(?:\((.+)\))?$/);
      if (!param) return part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
      return `(?<${param[1]}>${param[2] || '[^/]+'})`;
    })
    .join('\\/');
  return new RegExp(`^${source}$`);
}
