//! Unavailability windows: the longest stretch of the fault phase in which no operation
//! succeeded, and which faults it overlapped. A `restart_all` or a `power_loss_all` stops every
//! node at once, so the windows around it are an outage by design; the longest window that
//! overlaps none of them is what the cluster gives while a majority of its nodes runs.

use std::collections::BTreeMap;

/// A fault as injected: its kind and the milliseconds it started and ended at, and when the
/// nodes it stopped were all running again (for the faults that stop nodes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FaultSpan<'a> {
    pub kind: &'a str,
    pub start: u64,
    pub end: u64,
    pub restarted: Option<u64>,
}

/// The kinds of fault that stop every node at once.
const WHOLE_CLUSTER: [&str; 2] = ["restart_all", "power_loss_all"];

/// Whether a fault of `kind` stops every node at once: one that failed part-way may have too.
fn whole_cluster(kind: &str) -> bool {
    WHOLE_CLUSTER.contains(&kind.trim_end_matches(" (failed)"))
}

/// One window without a successful operation.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Window {
    pub millis: u64,
    /// The kinds of the faults it overlapped, in injection order, each once.
    pub during: Vec<String>,
}

/// The longest window overall, the longest one that overlaps no whole-cluster restart, the
/// longest per kind of fault, and the longest per fault.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Unavailability {
    pub longest: Window,
    pub longest_with_majority: Window,
    /// For each kind of fault, the longest window that overlapped one of its kind.
    pub longest_by_kind: BTreeMap<String, u64>,
    /// For each fault but the whole-cluster restarts, in injection order, its kind and the
    /// longest window that overlapped it and no whole-cluster restart (0: none).
    pub per_fault: Vec<(String, u64)>,
    /// For each whole-cluster fault, its kind and the milliseconds from when every node was
    /// started again (its end when it does not say) to the first success after it, or to the
    /// end of the phase.
    pub after_whole_cluster: Vec<(String, u64)>,
}

impl Unavailability {
    /// The `q` quantile (0 to 1, nearest rank) of the per-fault windows; 0 without faults.
    pub fn per_fault_quantile(&self, q: f64) -> u64 {
        let mut millis: Vec<u64> = self.per_fault.iter().map(|(_, ms)| *ms).collect();
        millis.sort_unstable();
        let rank = (q * millis.len() as f64).ceil() as usize;
        millis
            .get(rank.saturating_sub(1).min(millis.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0)
    }
}

/// The windows between consecutive successes (times at which an operation succeeded), within
/// the fault phase `[phase_start, phase_end]`, whose edges count as successes.
pub fn unavailability(
    successes: &[u64],
    faults: &[FaultSpan<'_>],
    phase_start: u64,
    phase_end: u64,
) -> Unavailability {
    let mut times: Vec<u64> = successes
        .iter()
        .copied()
        .filter(|t| (phase_start..=phase_end).contains(t))
        .chain([phase_start, phase_end])
        .collect();
    times.sort_unstable();
    let mut out = Unavailability::default();
    let mut per_fault = vec![0u64; faults.len()];
    for pair in times.windows(2) {
        let (from, to) = (pair[0], pair[1]);
        let millis = to - from;
        let overlapping: Vec<&FaultSpan<'_>> = faults
            .iter()
            .filter(|f| f.start < to && f.end > from)
            .collect();
        let window = || {
            let mut during: Vec<String> = Vec::new();
            for f in &overlapping {
                if !during.iter().any(|k| k == f.kind) {
                    during.push(f.kind.to_string());
                }
            }
            Window { millis, during }
        };
        if millis > out.longest.millis {
            out.longest = window();
        }
        for f in &overlapping {
            let longest = out.longest_by_kind.entry(f.kind.to_string()).or_default();
            *longest = (*longest).max(millis);
        }
        let everyone_down = overlapping.iter().any(|f| whole_cluster(f.kind));
        if !everyone_down && millis > out.longest_with_majority.millis {
            out.longest_with_majority = window();
        }
        if !everyone_down {
            for (i, f) in faults.iter().enumerate() {
                if f.start < to && f.end > from {
                    per_fault[i] = per_fault[i].max(millis);
                }
            }
        }
    }
    out.per_fault = faults
        .iter()
        .zip(per_fault)
        .filter(|(f, _)| !whole_cluster(f.kind))
        .map(|(f, ms)| (f.kind.to_string(), ms))
        .collect();
    out.after_whole_cluster = faults
        .iter()
        .filter(|f| whole_cluster(f.kind))
        .map(|f| {
            let up = f.restarted.unwrap_or(f.end);
            let first = times.iter().find(|t| **t >= up).map_or(0, |t| t - up);
            (f.kind.to_string(), first)
        })
        .collect();
    out
}

impl std::fmt::Display for Window {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ms", self.millis)?;
        if self.during.is_empty() {
            write!(f, " (during no fault)")
        } else {
            write!(f, " (during {})", self.during.join(", "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fault(kind: &str, start: u64, end: u64) -> FaultSpan<'_> {
        FaultSpan {
            kind,
            start,
            end,
            restarted: None,
        }
    }

    #[test]
    fn names_the_faults_a_window_overlaps_and_sets_whole_cluster_restarts_apart() {
        let faults = [
            fault("kill_leader", 1_000, 3_000),
            fault("restart_all", 5_000, 8_000),
        ];
        // Successes at 1.1 s, then nothing until 2.9 s (kill_leader), then 4.5 s, then nothing
        // until 11 s (restart_all and its recovery).
        let got = unavailability(&[1_100, 2_900, 4_500, 11_000], &faults, 0, 12_000);
        assert_eq!(
            got.longest,
            Window {
                millis: 6_500,
                during: vec!["restart_all".into()]
            }
        );
        assert_eq!(
            got.longest_with_majority,
            Window {
                millis: 1_800,
                during: vec!["kill_leader".into()]
            }
        );
        assert_eq!(got.longest.to_string(), "6500 ms (during restart_all)");
        assert_eq!(
            got.longest_by_kind,
            BTreeMap::from([("kill_leader".into(), 1_800), ("restart_all".into(), 6_500)])
        );
        assert_eq!(got.per_fault, [("kill_leader".to_string(), 1_800)]);
        assert_eq!(
            got.after_whole_cluster,
            [("restart_all".to_string(), 3_000)]
        );
        assert_eq!(got.per_fault_quantile(0.5), 1_800);
    }

    #[test]
    fn the_phase_edges_bound_the_windows_and_later_successes_are_ignored() {
        let got = unavailability(&[20_000], &[], 1_000, 4_000);
        assert_eq!(got.longest.millis, 3_000);
        assert_eq!(got.longest.to_string(), "3000 ms (during no fault)");
        assert_eq!(got.longest_with_majority.millis, 3_000);
    }

    #[test]
    fn a_power_loss_of_every_node_is_an_outage_timed_from_its_restart() {
        // Every node killed at 1 s and started at 4 s; the fault ends at 9 s, once the nodes
        // were seen back; the first success after the restart is at 6.5 s.
        let all = FaultSpan {
            kind: "power_loss_all",
            start: 1_000,
            end: 9_000,
            restarted: Some(4_000),
        };
        let one = fault("power_loss", 10_000, 12_000);
        let got = unavailability(
            &[900, 6_500, 10_100, 11_400],
            &[all.clone(), one],
            0,
            13_000,
        );
        assert_eq!(got.longest.millis, 5_600);
        assert_eq!(got.longest.during, ["power_loss_all"]);
        assert_eq!(got.longest_with_majority.millis, 1_600);
        assert_eq!(got.longest_with_majority.during, ["power_loss"]);
        assert_eq!(
            got.after_whole_cluster,
            [("power_loss_all".to_string(), 2_500)]
        );
        assert_eq!(got.per_fault, [("power_loss".to_string(), 1_600)]);
        let failed = FaultSpan {
            kind: "power_loss_all (failed)",
            ..all
        };
        let got = unavailability(&[900, 6_500], &[failed], 0, 7_000);
        assert_eq!(got.longest_with_majority.millis, 900);
    }
}
