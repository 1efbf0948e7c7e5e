mod effective_membership;
mod into_nodes;
#[allow(clippy::module_inception)]
mod membership;
mod stored_membership;

#[cfg(feature = "bench")]
#[cfg(test)]
mod bench;

#[cfg(test)]
mod effective_membership_test;
#[cfg(test)]
mod membership_test;

pub use effective_membership::EffectiveMembership;
pub use into_nodes::IntoNodes;
pub use membership::Membership;
pub use stored_membership::StoredMembership;
