//! Leader election on a `coordination.k8s.io/v1` Lease, as client-go does
//! it: the holder renews `renewTime` every retry period; a candidate takes
//! the Lease once it has seen no renewal for a whole lease duration — timed
//! on its own clock from when it last saw the record change, so clock skew
//! between nodes does not matter. Every write carries the resourceVersion
//! it read, so two candidates can never both win.
//!
//! Hand-written: the crates that do this (kube-leader-election,
//! kube-lease-manager) pin older kube releases than the kube 5 used here, and
//! the protocol is a page of code.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, PostParams};
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

pub const LEASE_DURATION: Duration = Duration::from_secs(15);
/// A holder that cannot renew within this long stops leading (before
/// anyone else may take over at [`LEASE_DURATION`]).
pub const RENEW_DEADLINE: Duration = Duration::from_secs(10);
pub const RETRY_PERIOD: Duration = Duration::from_secs(2);

pub struct Elector {
    api: Api<Lease>,
    name: String,
    identity: String,
    /// The last record seen and when (local clock) it was seen to change.
    observed: Mutex<Option<(Observed, Instant)>>,
}

#[derive(Debug, Clone, PartialEq)]
struct Observed {
    holder: Option<String>,
    renew: Option<MicroTime>,
}

fn now() -> MicroTime {
    MicroTime(k8s_openapi::jiff::Timestamp::now())
}

impl Elector {
    pub fn new(client: kube::Client, namespace: &str, name: &str, identity: &str) -> Self {
        Elector {
            api: Api::namespaced(client, namespace),
            name: name.to_string(),
            identity: identity.to_string(),
            observed: Mutex::new(None),
        }
    }

    /// Returns once this replica holds the Lease.
    pub async fn acquire(&self) {
        loop {
            match self.try_acquire_or_renew().await {
                Ok(true) => return,
                Ok(false) => {}
                Err(e) => tracing::warn!(error = %e, lease = %self.name, "leader election"),
            }
            tokio::time::sleep(RETRY_PERIOD).await;
        }
    }

    /// Renews until that fails for [`RENEW_DEADLINE`] or someone else holds
    /// the Lease; then cancels `lost` and returns.
    pub async fn keep(&self, lost: CancellationToken) {
        let mut last_renewed = Instant::now();
        loop {
            tokio::select! {
                _ = lost.cancelled() => return,
                _ = tokio::time::sleep(RETRY_PERIOD) => {}
            }
            match self.try_acquire_or_renew().await {
                Ok(true) => last_renewed = Instant::now(),
                Ok(false) => break,
                Err(e) => {
                    tracing::warn!(error = %e, lease = %self.name, "renewing the lease");
                    if last_renewed.elapsed() > RENEW_DEADLINE {
                        break;
                    }
                }
            }
        }
        lost.cancel();
    }

    /// Gives the Lease up so another replica takes over at once.
    pub async fn release(&self) {
        let Ok(Some(mut lease)) = self.api.get_opt(&self.name).await else {
            return;
        };
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        if spec.holder_identity.as_deref() != Some(&self.identity) {
            return;
        }
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        if let Err(e) = self
            .api
            .replace(&self.name, &PostParams::default(), &lease)
            .await
        {
            tracing::warn!(error = %e, "releasing the lease");
        }
    }

    /// One round: true if this replica holds the Lease afterwards.
    /// [`acquire`](Self::acquire) and [`keep`](Self::keep) loop over it;
    /// public so tests can drive replicas round by round.
    pub async fn try_acquire_or_renew(&self) -> Result<bool, kube::Error> {
        let duration_s = LEASE_DURATION.as_secs() as i32;
        let Some(mut lease) = self.api.get_opt(&self.name).await? else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.name.clone()),
                    ..Default::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(self.identity.clone()),
                    lease_duration_seconds: Some(duration_s),
                    acquire_time: Some(now()),
                    renew_time: Some(now()),
                    lease_transitions: Some(0),
                    ..Default::default()
                }),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(true),
                Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
                Err(e) => Err(e),
            };
        };
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        let seen = Observed {
            holder: spec.holder_identity.clone(),
            renew: spec.renew_time.clone(),
        };
        let held_by_me = seen.holder.as_deref() == Some(&self.identity);
        let expired = {
            let mut observed = self.observed.lock().await;
            let since = match observed.as_ref() {
                Some((o, at)) if *o == seen => *at,
                _ => {
                    *observed = Some((seen.clone(), Instant::now()));
                    Instant::now()
                }
            };
            let their_duration = spec
                .lease_duration_seconds
                .map(|s| Duration::from_secs(s.max(0) as u64))
                .unwrap_or(LEASE_DURATION);
            seen.holder.is_none() || since.elapsed() > their_duration
        };
        if !held_by_me && !expired {
            return Ok(false);
        }
        if !held_by_me {
            spec.acquire_time = Some(now());
            spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
        }
        spec.holder_identity = Some(self.identity.clone());
        spec.lease_duration_seconds = Some(duration_s);
        spec.renew_time = Some(now());
        match self
            .api
            .replace(&self.name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
            Err(e) => Err(e),
        }
    }
}
