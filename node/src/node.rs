//! The shared state of a running node ([`Node`]) and how it is opened from a validated
//! configuration. `server.rs` only wires the services onto it and serves.

use crate::clock::Clock;
use crate::config::Config;
use crate::error::Error;
use crate::ledger::Ledger;
use crate::projection::{Projection, WorkMachine};
use accord_proto::note::{Signer, Verifier};
use std::collections::HashMap;
use std::sync::{Arc, RwLock};

/// Shared state of a running node, handed to every service.
#[derive(Debug)]
pub struct Node {
    /// The validated configuration.
    pub config: Config,
    /// The node key (key name = log origin).
    pub signer: Signer,
    /// Its public half.
    pub node_key: Verifier,
    /// Record keys of this organisation's parties, by party name.
    pub party_keys: HashMap<String, Vec<Verifier>>,
    /// Bearer tokens.
    pub tokens: crate::auth::Tokens,
    /// The ledger.
    pub ledger: Ledger<accord_kernel::Record>,
    /// Derived Work state.
    pub projection: Arc<RwLock<Projection>>,
    /// The latest and the latest witnessed checkpoint.
    pub log: Arc<crate::log::LogState>,
    /// Peers, outbox, inbox, quarantine and receipts.
    pub federation: Arc<crate::federation::Federation>,
    /// Refused envelopes and calls: a bounded, rate-limited ring.
    pub refusals: Arc<crate::federation::refusals::Refusals>,
    /// The narrow handles federation's admission side works with (issue 10, item 1).
    pub fed: crate::federation::FedContext,
    /// The listener's counters (refused handshakes and connections, timeouts).
    pub listener_stats: Arc<crate::tls::ListenerStats>,
    /// Prometheus metrics (served on `metrics_listen`).
    pub metrics: crate::metrics::Metrics,
    /// The node's one clock.
    pub clock: Clock,
    /// Records past the door, waiting for their synced write (`received`, never stored).
    pub received: Arc<crate::received::Received>,
}

impl Node {
    /// The envelope driver's handles (seed 003; `envelope_driver`).
    pub(crate) fn envelope_driver(&self) -> crate::envelope_driver::Driver {
        crate::envelope_driver::Driver {
            name: self.config.name.clone(),
            clock: self.clock.clone(),
            signer: self.signer.clone(),
            ledger: self.ledger.clone(),
            projection: self.projection.clone(),
            config: self.config.envelopes.clone(),
            keys: crate::envelope_driver::Keys {
                node: self.node_key.clone(),
                parties: self.party_keys.clone(),
            },
        }
    }

    /// This organisation's name.
    pub fn name(&self) -> &str {
        &self.config.name
    }
}

fn load_signer(config: &Config) -> Result<Signer, Error> {
    let text = std::fs::read_to_string(&config.keys.node)
        .map_err(|e| Error::invalid("keys.node", format!("{}: {e}", config.keys.node.display())))?;
    let signer =
        Signer::from_skey(text.trim()).map_err(|e| Error::invalid("keys.node", e.to_string()))?;
    if signer.name() != config.origin() {
        return Err(Error::invalid(
            "keys.node",
            format!(
                "key name {:?} must equal the log origin {:?}",
                signer.name(),
                config.origin()
            ),
        ));
    }
    Ok(signer)
}

fn party_keys(config: &Config) -> Result<HashMap<String, Vec<Verifier>>, Error> {
    let mut m = HashMap::new();
    for (i, p) in config.parties.iter().enumerate() {
        let keys = p
            .vkeys
            .iter()
            .map(|v| {
                Verifier::from_vkey(v)
                    .map_err(|e| Error::invalid(format!("parties[{i}].vkeys"), e.to_string()))
            })
            .collect::<Result<Vec<_>, _>>()?;
        m.insert(p.name.clone(), keys);
    }
    Ok(m)
}

/// What [`open`] hands the server: the node, the ledger writer thread (joined at shutdown) and
/// the witness client for the checkpointer.
pub(crate) struct Opened {
    pub node: Arc<Node>,
    pub writer: std::thread::JoinHandle<()>,
    pub witnesses: Arc<crate::log::WitnessClient>,
}

/// How a node reaches its peers and witnesses: `None` is the daemon's gRPC over TLS; the
/// simulation (`accord-sim`) passes its in-memory network.
#[derive(Default)]
pub(crate) struct Transports {
    pub peers: Option<Arc<dyn crate::federation::transport::PeerTransport>>,
    pub witnesses: Option<Vec<crate::log::WitnessEndpoint>>,
    /// The server's TLS, when the server built it before opening (to answer as a standby
    /// while it waits for the writer's lease; [`server_tls`]).
    pub tls: Option<ServerTls>,
    /// What a standby reports and obeys while it waits for the lease.
    pub waiting: crate::ledger::Waiting,
    /// This instance's name in the lease row (default: organisation@pid).
    pub holder: Option<String>,
    /// The listener's counters, when the server made them before opening.
    pub listener_stats: Option<Arc<crate::tls::ListenerStats>>,
    /// Open a standby's read-only node following the writer, without the lease (PostgreSQL
    /// only; issue 31): its ledger refuses appends and nothing in it writes.
    pub follow: bool,
}

/// The server's TLS configuration and its client verifier (which federation feeds peers' CAs).
pub(crate) type ServerTls = (
    Arc<rustls::ServerConfig>,
    Arc<crate::tls::DynamicClientVerifier>,
);

/// The server's TLS from `config`: its certificate and key, and the client CAs it trusts
/// before federation adds its peers'.
pub(crate) fn server_tls(config: &Config) -> Result<ServerTls, Error> {
    let mut client_cas = Vec::new();
    for p in &config.tls.client_ca {
        client_cas.extend(crate::tls::load_certs(p)?);
    }
    // Peers' CAs are added by the federation's peer registry (and follow peer changes).
    crate::tls::server_config(
        &config.tls.cert,
        &config.tls.key,
        &client_cas,
        config.tls.require_client_cert,
    )
}

/// Opens everything a node needs from `config`: keys, TLS, the ledger (opening the persisted
/// projection and replaying only the records after its watermark), the log state, the witness
/// client and federation. Nothing is served yet.
pub(crate) async fn open(config: Config, clock: Clock) -> Result<Opened, Error> {
    open_with(config, clock, Transports::default()).await
}

/// [`open`] over given transports.
pub(crate) async fn open_with(
    config: Config,
    clock: Clock,
    transports: Transports,
) -> Result<Opened, Error> {
    let signer = load_signer(&config)?;
    let party_keys = party_keys(&config)?;
    let (_, client_verifier) = match transports.tls {
        Some(t) => t,
        None => server_tls(&config)?,
    };

    let projection = Arc::new(RwLock::new(Projection::with_view_access(
        crate::projection::access_from_config(&config)?,
    )));
    let machine = WorkMachine::new(
        projection.clone(),
        crate::projection::access_from_config(&config)?,
    )
    .with_envelopes(crate::envelopes::Envelopes::new(
        &config.name,
        crate::envelopes::types::all(&config),
    ))
    .with_cache(config.projection.cache_commitments)
    .with_run_cache(config.projection.cache_runs);
    // Standbys follow the writer through its change journal (projection::journal).
    let machine = match config.storage.backend {
        crate::config::Backend::Postgres => machine.with_journal(),
        crate::config::Backend::Rocksdb => machine,
    };
    let follow = transports.follow;
    let access = machine.access_handle();
    let data_dir = config.data_dir.clone();
    let max_batch = config.ledger.max_batch;
    let writer_clock = clock.clone();
    let storage = config.storage.clone();
    let holder = transports
        .holder
        .clone()
        .unwrap_or_else(|| format!("{}@{}", config.name, std::process::id()));
    let waiting = transports.waiting.clone();
    let (ledger, writer) = tokio::task::spawn_blocking(move || {
        // Federation declares its own column families (the projection's come with its
        // machine); the ledger's store creates them.
        let extra = crate::federation::db::CFS;
        match storage.backend {
            crate::config::Backend::Rocksdb => Ledger::open_tuned(
                &data_dir,
                extra,
                storage.block_cache_mib,
                machine,
                max_batch,
                writer_clock,
            ),
            crate::config::Backend::Postgres => {
                let options = crate::ledger::PgOptions {
                    url: storage.url.clone().unwrap_or_default(),
                    password: storage
                        .password()
                        .map_err(|e| Error::Storage(format!("storage.password_file: {e}")))?,
                    lease_ms: storage.lease_ms,
                    holder,
                    waiting,
                };
                if follow {
                    let every = std::time::Duration::from_millis(storage.follow_ms);
                    return Ledger::follow_postgres(&options, extra, machine, every);
                }
                Ledger::open_postgres(&options, extra, machine, max_batch, writer_clock)
            }
        }
    })
    .await
    .map_err(|e| Error::Internal(e.to_string()))??;
    check_identity(
        ledger.store(),
        &config.origin(),
        &signer.verifier().to_vkey(),
        follow,
    )?;
    let metrics = crate::metrics::Metrics::new();
    ledger.observe(metrics.clone());
    let tokens = crate::auth::Tokens::from_config(&config);
    let log = Arc::new(crate::log::LogState::load(ledger.store())?);
    let witnesses = match transports.witnesses {
        None => crate::log::WitnessClient::new(&config, ledger.store())?,
        Some(list) => {
            crate::log::WitnessClient::with_transports(config.witnesses.k, list, ledger.store())?
        }
    };
    let witnesses = Arc::new(witnesses.with_metrics(metrics.clone()));
    let federation = Arc::new(crate::federation::Federation::open(
        &config,
        ledger.store().clone(),
        Some(client_verifier),
        access,
    )?);
    let checkpoints = crate::log::LogContext {
        origin: config.origin(),
        signer: signer.clone(),
        ledger: ledger.clone(),
        log: log.clone(),
        clock: clock.clone(),
        metrics: metrics.clone(),
        config: config.log.clone(),
    };
    let peers_transport = transports.peers.unwrap_or_else(|| {
        Arc::new(crate::federation::transport::GrpcPeers::new(
            config.tls.cert.clone(),
            config.tls.key.clone(),
            std::time::Duration::from_millis(config.federation.request_timeout_ms),
        ))
    });
    let node_key = signer.verifier();
    let refusals = Arc::new(crate::federation::refusals::Refusals::new(&config.limits));
    let fed = crate::federation::FedContext {
        name: config.name.clone(),
        signer: signer.clone(),
        ledger: ledger.clone(),
        federation: federation.clone(),
        refusals: refusals.clone(),
        log: log.clone(),
        clock: clock.clone(),
        metrics: metrics.clone(),
        config: config.federation.clone(),
        tls: (config.tls.cert.clone(), config.tls.key.clone()),
        projection: projection.clone(),
        checkpoints,
        transport: peers_transport,
        refusals_prune_interval_ms: config.limits.refusals_prune_interval_ms,
    };
    let node = Arc::new(Node {
        refusals,
        fed,
        listener_stats: transports.listener_stats.unwrap_or_default(),
        config,
        signer,
        node_key,
        party_keys,
        tokens,
        ledger,
        projection,
        log,
        federation,
        metrics,
        clock,
        received: Default::default(),
    });
    Ok(Opened {
        node,
        writer,
        witnesses,
    })
}

/// The `meta` key naming the log a store holds: `origin\nnode vkey`.
const IDENTITY: &str = "node/identity";

/// A store holds one node's log. Its origin and node key are written at the first open and
/// checked at every later one, so that a node pointed at another node's data — a database URL
/// copied from another organisation's config, a restored directory of the wrong node — refuses
/// to start (`config`) instead of serving and signing that log's records as its own.
/// A follower (a standby) only checks: it writes nothing, and waits for the writer to have
/// written it.
fn check_identity(
    store: &crate::ledger::Store,
    origin: &str,
    vkey: &str,
    follow: bool,
) -> Result<(), Error> {
    let want = format!("{origin}\n{vkey}");
    match store.meta(IDENTITY)? {
        Some(v) if v == want.as_bytes() => Ok(()),
        Some(v) => {
            let held = String::from_utf8_lossy(&v).replace('\n', " signed by ");
            Err(Error::Config(crate::config::ConfigError {
                field: "storage".into(),
                reason: format!(
                    "holds the log of another node ({held}), not {origin}: check [storage] url \
                     or data_dir"
                ),
            }))
        }
        None if follow => Err(Error::Unavailable(
            "the writer has not yet written this store's identity".into(),
        )),
        None => store.put_meta(IDENTITY, want.as_bytes()),
    }
}
