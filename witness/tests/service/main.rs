//! In-process witness servers on 127.0.0.1:0, exercised over the C2SP HTTP interface and gRPC.

mod common;
mod concurrency;
mod grpc;
mod http;
mod pq;
