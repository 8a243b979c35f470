// The console's screens by name, as routes.js names them; each draws into
// `main` from the API's answers, and a write goes through the API, whose
// refusal is shown next to its field. The screens live by family:
// jobs-pages.js, logs-pages.js, groups-pages.js, admin-pages.js,
// ops-pages.js, with the pieces they share in widgets.js.

import { jobs, jobForm } from './jobs-pages.js';
import { dashboard, logs, logDetail } from './logs-pages.js';
import { groupsScreen, groupScreen, clusterScreen } from './groups-pages.js';
import { login, account, users, userScreen, audit } from './admin-pages.js';
import { channels, channelScreen, retention, deleted } from './ops-pages.js';

/** The screens by name, as routes.js names them. */
export const screens = {
  login, dashboard, jobs, jobForm, logs, logDetail, groupsScreen, groupScreen,
  clusterScreen, account, users, userScreen, audit,
  channels, channelScreen, retention, deleted,
};
