//! Where each Raft group's storage lives: its column families in the node's one database and
//! its directories under the node's data directory.
//!
//! Group 1 keeps the names a node of one group always had (`raft_meta`, `sm_state`, `sm_meta`,
//! `log/`, `snapshots/`), so a directory written before groups is group 1's as it stands and an
//! upgrade copies nothing. Every other group `g` has families of its own named with a `.g`
//! suffix and its files under `groups/g/`. Node-level records (the node's enrolment, the
//! formats) stay in group 1's log family.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::types::GroupId;

/// Group 1's column family of the log's vote, committed and last purged log ids.
pub const META_CF: &str = "raft_meta";
/// Group 1's column family of engine rows and payloads.
pub const STATE_CF: &str = "sm_state";
/// Group 1's column family of the applied marker, membership and last snapshot.
pub const SM_META_CF: &str = "sm_meta";

/// Group 1's families, whose names the other groups' carry with a suffix.
const FIRST_FAMILIES: [&str; 3] = [META_CF, STATE_CF, SM_META_CF];

/// The names of one group's column families.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupFamilies {
    /// The group they hold.
    pub group: GroupId,
    /// The log's vote, committed and last purged log ids.
    pub log_meta: Arc<str>,
    /// The state machine's rows and payloads.
    pub state: Arc<str>,
    /// The state machine's applied marker, membership and current snapshot.
    pub meta: Arc<str>,
}

impl GroupFamilies {
    /// The families of `group`.
    pub fn of(group: GroupId) -> GroupFamilies {
        let name = |base: &str| -> Arc<str> {
            if group == GroupId::FIRST {
                base.into()
            } else {
                format!("{base}.{group}").into()
            }
        };
        GroupFamilies {
            group,
            log_meta: name(META_CF),
            state: name(STATE_CF),
            meta: name(SM_META_CF),
        }
    }

    /// Every family, in a fixed order.
    pub fn all(&self) -> [&str; 3] {
        [&self.log_meta, &self.state, &self.meta]
    }

    /// The group whose families `name` is one of (none for a family of no group).
    pub fn group_of(name: &str) -> Option<GroupId> {
        if FIRST_FAMILIES.contains(&name) {
            return Some(GroupId::FIRST);
        }
        let (base, group) = name.rsplit_once('.')?;
        let group = group.parse().ok().map(GroupId)?;
        (FIRST_FAMILIES.contains(&base) && group != GroupId::FIRST).then_some(group)
    }
}

/// Where one group's files live under a node's data directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupDirs {
    /// What holds the two below: the data directory for group 1, `groups/N` for group N.
    pub base: PathBuf,
    /// The log's segment files.
    pub log: PathBuf,
    /// Snapshot files.
    pub snapshots: PathBuf,
}

impl GroupDirs {
    /// The directories of `group` under `data_dir`.
    pub fn of(data_dir: &Path, group: GroupId) -> GroupDirs {
        let base = if group == GroupId::FIRST {
            data_dir.to_path_buf()
        } else {
            data_dir.join("groups").join(group.to_string())
        };
        GroupDirs {
            log: base.join("log"),
            snapshots: base.join("snapshots"),
            base,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_one_keeps_the_names_of_a_node_without_groups() {
        let families = GroupFamilies::of(GroupId::FIRST);
        assert_eq!(families.all(), ["raft_meta", "sm_state", "sm_meta"]);
        let dirs = GroupDirs::of(Path::new("/data"), GroupId::FIRST);
        assert_eq!(dirs.log, Path::new("/data/log"));
        assert_eq!(dirs.snapshots, Path::new("/data/snapshots"));
    }

    #[test]
    fn other_groups_have_names_of_their_own() {
        let families = GroupFamilies::of(GroupId(7));
        assert_eq!(families.all(), ["raft_meta.7", "sm_state.7", "sm_meta.7"]);
        let dirs = GroupDirs::of(Path::new("/data"), GroupId(7));
        assert_eq!(dirs.log, Path::new("/data/groups/7/log"));
        assert_eq!(dirs.snapshots, Path::new("/data/groups/7/snapshots"));
    }

    #[test]
    fn a_family_name_tells_its_group() {
        for group in [GroupId::FIRST, GroupId(2), GroupId(64)] {
            for name in GroupFamilies::of(group).all() {
                assert_eq!(GroupFamilies::group_of(name), Some(group), "{name}");
            }
        }
        for name in [
            "raft_logs",
            "sm_state.x",
            "other.2",
            "sm_state.1",
            "default",
        ] {
            assert_eq!(GroupFamilies::group_of(name), None, "{name}");
        }
    }
}
