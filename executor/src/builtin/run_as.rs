//! `executor.run_as`: the OS user shell and script jobs run as, through
//! util-linux `setpriv` (no `unsafe`), with no capability kept and
//! `no_new_privs`.

use std::process::Stdio;

use tokio::process::Command;

/// An OS user jobs run as (`executor.run_as`), as `getent passwd` has it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunAs {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
    pub home: String,
}

impl RunAs {
    /// Looks `name` up and checks that this process can become it: it
    /// runs as root (a process with only `CAP_SETUID` could switch, but
    /// not signal the job's processes nor hand it its script file), and a
    /// `setpriv` to the user runs `true`. The error names
    /// `executor.run_as`.
    pub fn resolve(name: &str) -> Result<RunAs, String> {
        let key = "executor.run_as";
        let me = std::process::Command::new("id")
            .arg("-u")
            .output()
            .map_err(|e| format!("{key}: cannot run id: {e}"))?;
        if String::from_utf8_lossy(&me.stdout).trim() != "0" {
            return Err(format!(
                "{key}: running jobs as {name:?} needs the executor to run as root"
            ));
        }
        let out = std::process::Command::new("getent")
            .args(["passwd", name])
            .output()
            .map_err(|e| format!("{key}: cannot run getent to find {name:?}: {e}"))?;
        let line = String::from_utf8_lossy(&out.stdout);
        let fields: Vec<&str> = line.trim_end().split(':').collect();
        let user = match fields.as_slice() {
            [_, _, uid, gid, _, home, _] if out.status.success() => RunAs {
                name: name.to_owned(),
                uid: uid
                    .parse()
                    .map_err(|_| format!("{key}: {name:?} has uid {uid:?}"))?,
                gid: gid
                    .parse()
                    .map_err(|_| format!("{key}: {name:?} has gid {gid:?}"))?,
                home: (*home).to_owned(),
            },
            _ => return Err(format!("{key}: no user {name:?} on this host")),
        };
        let mut trial = std::process::Command::new("setpriv");
        trial
            .args(user.switch_args())
            .arg("true")
            .current_dir("/")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let tried = trial
            .output()
            .map_err(|e| format!("{key}: cannot run setpriv (util-linux): {e}"))?;
        if !tried.status.success() {
            return Err(format!(
                "{key}: this executor cannot run jobs as {name:?} (setpriv refused): {}",
                String::from_utf8_lossy(&tried.stderr).trim()
            ));
        }
        Ok(user)
    }

    /// The user's ids and groups, no capability left to inherit, and no
    /// way back up through a setuid program (`no_new_privs`).
    fn switch_args(&self) -> [String; 9] {
        [
            "--reuid".into(),
            self.uid.to_string(),
            "--regid".into(),
            self.gid.to_string(),
            "--init-groups".into(),
            "--inh-caps=-all".into(),
            "--ambient-caps=-all".into(),
            "--no-new-privs".into(),
            "--".into(),
        ]
    }

    pub(super) fn switch(&self, cmd: &mut Command) {
        cmd.args(self.switch_args());
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_user_that_does_not_exist_is_refused_naming_the_key() {
        let refused = super::RunAs::resolve("no-such-user-rondo").unwrap_err();
        assert!(refused.starts_with("executor.run_as: "), "{refused}");
        assert!(refused.contains("no-such-user-rondo"), "{refused}");
    }
}
