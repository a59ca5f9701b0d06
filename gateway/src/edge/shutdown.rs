//! Listening and graceful shutdown.
//!
//! On the shutdown signal `/readyz` starts failing but the server keeps
//! accepting and serving for the drain delay, so the
//! load balancers in front (kube-proxy, the ingress), which learn of the
//! terminating pod only after the kubelet has signalled it, stop sending
//! it requests before it stops taking them; a second signal ends the
//! delay early. Then the listener stops accepting, running tool calls get
//! up to the grace period to finish, then the MCP sessions and streams are
//! cancelled (an open SSE stream would otherwise keep a connection, and
//! the process, alive) and the server exits.

use std::sync::atomic::Ordering;
use std::time::Duration;

use futures::{Stream, StreamExt};
use tokio_util::sync::CancellationToken;

use super::router::app;
use super::state::AppState;

/// Backlog of the listening socket. `TcpListener::bind` asks for 128,
/// which a burst of new connections (an ingress opening many at once, a
/// client fleet reconnecting after a rollout) overflows: the kernel then
/// drops SYNs and clients wait a second or more to retry. 4096 is Linux's
/// `SOMAXCONN` since 5.4; the kernel caps it at `net.core.somaxconn`.
pub(crate) const LISTEN_BACKLOG: u32 = 4096;

/// Binds `addr` with [`LISTEN_BACKLOG`] (and `SO_REUSEADDR`, as
/// `TcpListener::bind` sets it, so a restart need not wait out TIME_WAIT).
pub fn bind(addr: std::net::SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    #[cfg(unix)]
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}

/// How [`serve`] stops after the shutdown signal.
#[derive(Debug, Clone, Copy, Default)]
pub struct ShutdownTiming {
    /// Keeps serving this long, with `/readyz` failing, before it stops
    /// accepting (a second signal ends it early).
    pub drain_delay: Duration,
    /// Then in-flight tool calls get this long to finish.
    pub grace: Duration,
}

/// Serves `state` on `listener` until the first item of `signals`, then
/// drains as described in the module docs; a second item during the drain
/// delay ends it.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AppState,
    cancel: CancellationToken,
    signals: impl Stream<Item = ()> + Send,
    timing: ShutdownTiming,
) -> std::io::Result<()> {
    let shared = state.shared.clone();
    let draining = state.draining.clone();
    let stop_accepting = CancellationToken::new();
    let stop = stop_accepting.clone();
    // Nagle's algorithm holds a response's second small write (rmcp sends
    // the SSE headers and the JSON-RPC message separately) until the
    // client ACKs the first, and clients delay that ACK by 40 ms: every
    // call on a kept-alive connection would stall. MCP messages are small
    // and latency-bound, so send every write at once.
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "cannot set TCP_NODELAY");
        }
    });
    // The peer address reaches handlers as `ConnectInfo` (per-caller
    // limits of unauthenticated callers).
    let make = app(state).into_make_service_with_connect_info::<std::net::SocketAddr>();
    let server = axum::serve(listener, make).with_graceful_shutdown(async move {
        stop.cancelled().await;
    });
    let mut server = tokio::spawn(async move { server.await });
    let mut signals = std::pin::pin!(signals);
    // A stream that ends without a signal stops the server too.
    let _ = signals.next().await;
    draining.store(true, Ordering::Relaxed);
    if !timing.drain_delay.is_zero() {
        tracing::info!(
            drain_delay_seconds = timing.drain_delay.as_secs_f64(),
            in_flight = shared.in_flight(),
            "shutting down: /readyz fails from now on; still serving until load balancers \
             stop sending requests here (signal again to skip the wait)"
        );
        tokio::select! {
            _ = tokio::time::sleep(timing.drain_delay) => {}
            Some(()) = signals.next() => {
                tracing::info!("second shutdown signal: not waiting out the drain delay");
            }
        }
    }
    let grace = timing.grace;
    tracing::info!(
        in_flight = shared.in_flight(),
        "shutting down: no new connections; draining tool calls"
    );
    stop_accepting.cancel();
    let started = tokio::time::Instant::now();
    if tokio::time::timeout(grace, shared.drained()).await.is_err() {
        tracing::warn!(
            in_flight = shared.in_flight(),
            "grace period over; cancelling remaining calls"
        );
    }
    // NB: a finished call's result still has to travel through its
    // response stream; cancelling right away could cut it off. Connections
    // without a long-lived stream close by themselves within this window.
    let flush = FLUSH.min(grace.saturating_sub(started.elapsed()));
    if let Ok(done) = tokio::time::timeout(flush, &mut server).await {
        cancel.cancel();
        return done.map_err(std::io::Error::other)?;
    }
    cancel.cancel();
    match tokio::time::timeout(Duration::from_secs(2), server).await {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => Err(std::io::Error::other(e)),
        Err(_) => {
            tracing::warn!("connections still open after shutdown; exiting anyway");
            Ok(())
        }
    }
}

/// Time given to results of drained calls to reach their clients.
pub(crate) const FLUSH: Duration = Duration::from_millis(500);

/// One item per SIGTERM or SIGINT (Ctrl-C), for [`serve`]: the first
/// starts the shutdown, a second one skips the drain delay.
pub fn shutdown_signals() -> impl Stream<Item = ()> + Send {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, Signal, SignalKind};
        // NB: a signal whose handler cannot be installed never arrives;
        // the process then stops on the other one, or by the default
        // action.
        fn each(kind: SignalKind) -> impl Stream<Item = ()> + Send {
            futures::stream::unfold(signal(kind).ok(), |s: Option<Signal>| async move {
                match s {
                    Some(mut s) => s.recv().await.map(|()| ((), Some(s))),
                    None => std::future::pending().await,
                }
            })
        }
        futures::stream::select(each(SignalKind::terminate()), each(SignalKind::interrupt()))
    }
    #[cfg(not(unix))]
    futures::stream::unfold((), |()| async {
        tokio::signal::ctrl_c().await.ok().map(|()| ((), ()))
    })
}
