//! Every end-to-end scenario of Accord, over real node and witness processes and in-process
//! nodes on ephemeral ports, in one test binary: one link of RocksDB and the node instead of one
//! per file, which kept a clean build of the suite from fitting in CI's disk and time. Each module
//! is one file of this folder, named for what it tests; run one with
//! `cargo test -p accord-tests --test e2e convergence::`.

mod bounds_common;
mod federation_common;
mod runs_common;
mod storage_common;

mod access_reads;
mod bench_quick;
mod bench_remote;
mod bounds_connections;
mod bounds_federation;
mod bounds_input;
mod bounds_witness;
mod cli_declare;
mod cli_output;
mod cli_run;
mod commitment_view;
mod convergence;
mod crash_loop;
mod deploy_manifests;
mod durability_states;
mod ensure_deps;
mod envelope_delegate;
mod envelope_hostile;
mod envelope_rules;
mod envelopes;
mod federation_backfill;
mod federation_backpressure;
mod federation_crash;
mod federation_dedup;
mod federation_forgery;
mod federation_lifecycle;
mod federation_outage;
mod federation_peers;
mod federation_quarantine;
mod federation_refusals;
mod ledger_fault;
mod ledger_verify;
mod metrics;
mod module_cycles;
mod node_basics;
mod offline_cli;
mod offline_deps;
mod operator_alerts;
mod peer_tls_refused;
mod readme_codes;
mod reflection;
mod runs;
mod runs_access;
mod runs_bounds;
mod runs_liveness;
mod scale_restart;
mod storage_failover;
mod storage_postgres;
mod storage_promotion;
mod storage_standby_reads;
mod submit_batch;
mod tls_reissue;
mod watch_bounds;
mod watch_feed;
mod witness_mldsa;
mod witnessing;
mod work_attention;
mod work_lifecycle;
mod work_two_orgs;
