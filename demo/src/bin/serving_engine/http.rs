//! The demo's `/metrics` server: hyper's HTTP/1 connection builder with a
//! timer, under the limits of [`HttpLimits`], serving an axum router.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, header};
use axum::response::IntoResponse;
use axum::routing::get;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use prometheus_client::registry::Registry;
use specdec_demo::engine_metrics::{TextFormat, encode_registry};

/// Binds `addr` and serves `registry` on it (`/metrics`, and an index at
/// `/`) from `runtime`, within `limits`; returns the address bound (port 0
/// picks a free one).
pub(crate) fn start(
    runtime: &tokio::runtime::Runtime,
    addr: SocketAddr,
    registry: Registry,
    limits: HttpLimits,
) -> Result<SocketAddr, String> {
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind(addr))
        .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
    let bound = listener
        .local_addr()
        .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
    let app = Router::new()
        .route("/metrics", get(metrics))
        .route("/", get(index))
        .with_state(Arc::new(registry));
    runtime.spawn(serve_http(listener, app, limits));
    Ok(bound)
}

/// What the `/metrics` server allows a client.
#[derive(Clone, Copy, Debug)]
pub(crate) struct HttpLimits {
    /// From the start of reading a request head to its end.
    pub(crate) header_read_timeout: Duration,
    /// From accepting a connection to its graceful shutdown, and from
    /// there to its close.
    pub(crate) connection_timeout: Duration,
    /// Connections served at once.
    pub(crate) max_connections: usize,
}

/// Serves `app` on every connection `listener` accepts, over HTTP/1,
/// within `limits`.
///
/// `axum::serve` would do the same but gives hyper no timer, and without
/// one hyper cannot time out anything: a client that sends a request line
/// and then one header byte every few seconds would hold its connection
/// (and a task) for ever. hyper's own connection builder takes the timer
/// and closes a connection whose request head has not arrived in full
/// within `header_read_timeout` of the start of its reading, however slowly
/// the bytes trickle in (the deadline is not reset by each byte). The same
/// deadline applies to a keep-alive connection waiting for its next
/// request; a scraper simply reconnects.
///
/// hyper has no write timeout: a client that sends requests and never
/// reads the responses blocks the connection's writes for good once the
/// socket buffers are full. So every connection has a lifetime:
/// `connection_timeout` after it was accepted it is shut down gracefully
/// (no new request; a response in flight may finish), and as long again
/// later it is dropped, whatever it is doing. And at most
/// `max_connections` are served at once: at the cap, the next one is
/// accepted only when one ends (clients wait in the kernel's backlog), so
/// the tasks and buffers a crowd of clients can hold are bounded.
async fn serve_http(mut listener: tokio::net::TcpListener, app: Router, limits: HttpLimits) {
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    let slots = Arc::new(tokio::sync::Semaphore::new(limits.max_connections));
    loop {
        // The semaphore is never closed: `acquire_owned` cannot fail.
        let Ok(slot) = Arc::clone(&slots).acquire_owned().await else {
            return;
        };
        // axum's `accept` retries failed accepts (backing off when out of
        // file descriptors), as `axum::serve` does.
        let (stream, _peer) = axum::serve::Listener::accept(&mut listener).await;
        let connection =
            http.serve_connection(TokioIo::new(stream), TowerToHyperService::new(app.clone()));
        tokio::spawn(async move {
            // Held until the connection ends (dropped with the task).
            let _slot = slot;
            let mut connection = std::pin::pin!(connection);
            // A client's error (malformed request, header timeout, reset)
            // ends that client's connection only; nothing to log.
            if tokio::time::timeout(limits.connection_timeout, connection.as_mut())
                .await
                .is_ok()
            {
                return;
            }
            connection.as_mut().graceful_shutdown();
            let _ = tokio::time::timeout(limits.connection_timeout, connection).await;
        });
    }
}

/// `GET /metrics`: one snapshot, in the format the scraper asked for.
async fn metrics(State(registry): State<Arc<Registry>>, headers: HeaderMap) -> impl IntoResponse {
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let format = TextFormat::from_accept(accept);
    let body = encode_registry(&registry, format);
    ([(header::CONTENT_TYPE, format.content_type())], body)
}

async fn index() -> &'static str {
    "specdec-metrics serving_engine demo: the metrics are at /metrics\n"
}
