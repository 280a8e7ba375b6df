//! Who may connect: checked on every connection with the peer's `SO_PEERCRED` (the kernel's
//! record of the connecting process, which the client cannot forge), after the socket file's
//! own mode (0600/0660) already kept others out: a socket made reachable by mistake still
//! refuses them.
use super::DaemonError;
use nix::unistd::{Gid, Group, Uid, User, getgrouplist};
use std::ffi::CString;

/// The rule: the daemon's own user, the uids listed, and with a group the users in it (as
/// primary group or member).
#[derive(Debug, Clone)]
pub struct Access {
    owner: Uid,
    group: Option<(String, Gid)>,
    allowed: Vec<Uid>,
}

impl Access {
    /// Only the daemon's own (effective) user.
    pub fn owner_only() -> Self {
        Access {
            owner: Uid::effective(),
            group: None,
            allowed: Vec::new(),
        }
    }

    /// Adds the members of group `name` (looked up now: an unknown group is an error).
    pub fn with_group(mut self, name: &str) -> Result<Self, DaemonError> {
        let g = Group::from_name(name)
            .map_err(|e| DaemonError::io(format!("looking up group {name:?}"), e))?
            .ok_or_else(|| DaemonError::Config(format!("no group named {name:?}")))?;
        self.group = Some((name.to_owned(), g.gid));
        Ok(self)
    }

    /// Adds one uid.
    pub fn with_uid(mut self, uid: u32) -> Self {
        self.allowed.push(Uid::from_raw(uid));
        self
    }

    /// The group whose members are allowed, with its id.
    pub fn group(&self) -> Option<(&str, Gid)> {
        self.group.as_ref().map(|(n, g)| (n.as_str(), *g))
    }

    /// Whether a peer of `uid`/`gid` (its `SO_PEERCRED`) may connect; `Err` says why not.
    pub fn check(&self, uid: u32, gid: u32) -> Result<(), String> {
        let uid = Uid::from_raw(uid);
        if uid == self.owner || self.allowed.contains(&uid) {
            return Ok(());
        }
        if let Some((_, g)) = &self.group
            && (Gid::from_raw(gid) == *g || member(uid, *g))
        {
            return Ok(());
        }
        let also = match &self.group {
            Some((name, _)) => format!(" or in group {name}"),
            None => String::new(),
        };
        Err(format!(
            "uid {uid} is not allowed (the daemon's user is uid {}{also}; see --group and --allow-uid)",
            self.owner
        ))
    }
}

/// Whether `uid`'s user is in group `g` according to the group database.
fn member(uid: Uid, g: Gid) -> bool {
    let Ok(Some(user)) = User::from_uid(uid) else {
        return false;
    };
    let Ok(name) = CString::new(user.name) else {
        return false;
    };
    getgrouplist(&name, user.gid).is_ok_and(|gs| gs.contains(&g))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_owner_the_listed_and_the_group_get_in() {
        let me = Uid::effective().as_raw();
        let other = me.wrapping_add(12_345);
        let a = Access::owner_only();
        assert!(a.check(me, 0).is_ok());
        let e = a.check(other, 0).unwrap_err();
        assert!(e.contains(&format!("uid {other} is not allowed")), "{e}");
        assert!(a.clone().with_uid(other).check(other, 0).is_ok());
        let Ok(g) = Access::owner_only().with_group("root") else {
            return; // no group 0 named root here: nothing to check by group
        };
        assert_eq!(g.group().map(|x| x.1), Some(Gid::from_raw(0)));
        assert!(g.check(other, 0).is_ok(), "primary group");
        assert!(g.check(other, 1).unwrap_err().contains("or in group root"));
        assert!(matches!(
            Access::owner_only().with_group("no-such-group-here"),
            Err(DaemonError::Config(_))
        ));
    }
}
