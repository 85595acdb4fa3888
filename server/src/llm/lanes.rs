//! The HTTP clients that carry streamed replies to one provider: lanes of at most
//! [`STREAMS_PER_LANE`] requests in flight each.
//!
//! Over TLS a client offers HTTP/2 and HTTP/1.1 (ALPN, RFC 7301), so a hosted provider's
//! replies share a connection. A server caps the streams of one connection
//! (`SETTINGS_MAX_CONCURRENT_STREAMS`, RFC 9113 § 6.5.2, recommended no fewer than 100),
//! and a client at that cap opens no second connection: its next requests wait for a
//! stream to end (<https://github.com/hyperium/hyper/issues/3623>). So a lane takes at most
//! [`STREAMS_PER_LANE`] requests, the first lane with room first, and a request finding
//! every lane full opens a new one. The protocol is known once the TLS handshake is done,
//! so a lane's first request goes alone and the others wait for its answer's headers;
//! otherwise requests started together would each open a connection. Plain `http://`
//! speaks HTTP/1.1, a connection per request: one lane, no cap, no wait.
//!
//! Certificates are checked against the system's roots (`SSL_CERT_FILE` or `SSL_CERT_DIR`
//! name others, as OpenSSL reads them), or against the Mozilla roots built in where the
//! system has none (a minimal container). One TLS configuration serves every lane.

use std::sync::{
    atomic::{AtomicUsize, Ordering},
    Arc, Mutex,
};

use tokio::sync::watch;

/// Requests one lane carries at once: the least a server should allow one HTTP/2
/// connection (RFC 9113 § 6.5.2).
pub(crate) const STREAMS_PER_LANE: usize = 100;

/// The TLS configuration of the provider clients: the system's roots (or the built-in
/// Mozilla roots when it has none), HTTP/2 then HTTP/1.1 offered by ALPN.
/// Errors: the crypto provider refuses its default protocol versions (never in practice).
pub(crate) fn provider_tls() -> anyhow::Result<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    let system = rustls_native_certs::load_native_certs();
    let (added, _ignored) = roots.add_parsable_certificates(system.certs);
    if added == 0 {
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    }
    tls_with_roots(roots)
}

/// [`provider_tls`] with `roots` as the only trusted roots.
pub(crate) fn tls_with_roots(roots: rustls::RootCertStore) -> anyhow::Result<rustls::ClientConfig> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

/// An HTTP client over `tls` (the client of one lane). Errors: the client cannot be built.
pub(crate) fn client(
    tls: &rustls::ClientConfig,
) -> Result<genai_reqwest::Client, genai_reqwest::Error> {
    genai_reqwest::Client::builder()
        .tls_backend_preconfigured(tls.clone())
        .build()
}

/// A set of lanes ([module docs](self)), used from one thread.
pub(crate) struct Lanes {
    lanes: Mutex<Vec<Lane>>,
    tls: rustls::ClientConfig,
    per_lane: usize,
    /// Whether the protocol is negotiated (TLS): else every connection speaks HTTP/1.1, and
    /// one lane without a cap serves all requests, none waiting for another.
    negotiated: bool,
}

struct Lane {
    client: genai_reqwest::Client,
    in_flight: Arc<AtomicUsize>,
    /// Turns true once the lane's first request has its answer's headers (or failed).
    opened: watch::Receiver<bool>,
}

/// Where a request stands in opening its lane's connection ([module docs](self)).
pub(crate) enum Opening {
    /// The lane's connection is open: go.
    Open,
    /// The lane's first request: drop this once its answer's headers are in (or it failed);
    /// dropping it lets the lane's other requests go.
    First(watch::Sender<bool>),
    /// Wait with [`Opening::ready`] until the lane's first request has its headers.
    Wait(watch::Receiver<bool>),
}

impl Opening {
    /// Waits until the lane's connection is open, if this request is not the first.
    pub(crate) async fn ready(&mut self) {
        if let Opening::Wait(opened) = self {
            // An error means the first request is gone: its connection may be there or not.
            let _ = opened.wait_for(|open| *open).await;
        }
    }
}

impl Drop for Opening {
    fn drop(&mut self) {
        if let Opening::First(opened) = self {
            opened.send_replace(true);
        }
    }
}

/// A request's place in its lane, given back when dropped: keep it as long as the
/// response is read.
pub(crate) struct Seat(Arc<AtomicUsize>);

impl Drop for Seat {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Lanes {
    /// No lane yet; each will carry at most `per_lane` requests over `tls` when `negotiated`
    /// (`https://`), and there is one lane for all when not (`http://`).
    pub(crate) fn new(tls: rustls::ClientConfig, per_lane: usize, negotiated: bool) -> Self {
        Self {
            lanes: Mutex::new(Vec::new()),
            tls,
            per_lane: if negotiated {
                per_lane.max(1)
            } else {
                usize::MAX
            },
            negotiated,
        }
    }

    /// The client of the first lane with room, a seat in it, and whether the request must
    /// wait for the lane's connection ([`Opening`]); a new lane when all are full.
    /// Errors: a new lane's client cannot be built.
    pub(crate) fn take(
        &self,
    ) -> Result<(genai_reqwest::Client, Seat, Opening), genai_reqwest::Error> {
        let mut lanes = self.lanes.lock().unwrap_or_else(|e| e.into_inner());
        let seat = |lane: &Lane| {
            lane.in_flight.fetch_add(1, Ordering::AcqRel);
            let opening = match *lane.opened.borrow() {
                true => Opening::Open,
                false => Opening::Wait(lane.opened.clone()),
            };
            (
                lane.client.clone(),
                Seat(Arc::clone(&lane.in_flight)),
                opening,
            )
        };
        if let Some(lane) = lanes
            .iter()
            .find(|lane| lane.in_flight.load(Ordering::Acquire) < self.per_lane)
        {
            return Ok(seat(lane));
        }
        let client = client(&self.tls)?;
        let (first, opened) = watch::channel(!self.negotiated);
        let lane = Lane {
            client,
            in_flight: Arc::new(AtomicUsize::new(1)),
            opened,
        };
        let opening = match self.negotiated {
            true => Opening::First(first),
            false => Opening::Open,
        };
        let taken = (
            lane.client.clone(),
            Seat(Arc::clone(&lane.in_flight)),
            opening,
        );
        lanes.push(lane);
        Ok(taken)
    }

    /// Lanes opened so far.
    #[cfg(test)]
    pub(crate) fn count(&self) -> usize {
        self.lanes.lock().unwrap().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lane_takes_its_share_then_the_next_one_opens_and_freed_seats_are_reused() {
        let lanes = Lanes::new(provider_tls().unwrap(), 2, true);
        let seat = || {
            let (_, seat, _opening) = lanes.take().unwrap();
            seat
        };
        let first: Vec<Seat> = (0..2).map(|_| seat()).collect();
        assert_eq!(lanes.count(), 1);
        let third = seat();
        assert_eq!(lanes.count(), 2, "a full lane opens the next");
        drop(first);
        let again: Vec<Seat> = (0..2).map(|_| seat()).collect();
        assert_eq!(
            lanes.count(),
            2,
            "the first lane's freed seats are taken first"
        );
        let fifth = seat();
        assert_eq!(lanes.count(), 2, "the second lane still had room");
        drop((third, again, fifth));
    }

    #[tokio::test]
    async fn a_lanes_requests_wait_for_its_first_to_open_the_connection() {
        let lanes = Lanes::new(provider_tls().unwrap(), 10, true);
        let (_, _a, first) = lanes.take().unwrap();
        assert!(matches!(first, Opening::First(_)));
        let (_, _b, mut second) = lanes.take().unwrap();
        let waited = tokio::time::timeout(std::time::Duration::from_millis(50), second.ready());
        assert!(
            waited.await.is_err(),
            "the second went before the first's headers"
        );
        drop(first);
        tokio::time::timeout(std::time::Duration::from_secs(5), second.ready())
            .await
            .expect("the second goes once the first is through");
        let (_, _c, third) = lanes.take().unwrap();
        assert!(matches!(third, Opening::Open), "later requests go at once");
    }

    #[test]
    fn plain_http_takes_one_lane_and_nobody_waits() {
        let lanes = Lanes::new(provider_tls().unwrap(), 2, false);
        let taken: Vec<_> = (0..5).map(|_| lanes.take().unwrap()).collect();
        assert_eq!(
            lanes.count(),
            1,
            "HTTP/1.1 connections are per request anyway"
        );
        assert!(taken
            .iter()
            .all(|(_, _, opening)| matches!(opening, Opening::Open)));
    }
}
