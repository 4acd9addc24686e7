#!/usr/bin/env python3
"""Checks an Accord node's (or witness's) gRPC health over TLS with grpcio.

grpcio verifies the server with BoringSSL inside gRPC's C core, the TLS stack of the Python,
C++, Ruby, PHP and C# clients. Give it the CA that `accord-node init` (or `accord-witness init`)
wrote, tls/ca.pem:

    python3 health.py --target 127.0.0.1:7443 --ca /path/to/node/tls/ca.pem

Prints the serving status; exits 0 when it is SERVING, 1 otherwise (the error on stderr).
"""

import argparse
import sys

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", required=True, help="host:port of the gRPC listener")
    ap.add_argument("--ca", required=True, help="PEM CA the server's certificate chains to")
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds")
    args = ap.parse_args()

    with open(args.ca, "rb") as f:
        creds = grpc.ssl_channel_credentials(root_certificates=f.read())
    with grpc.secure_channel(args.target, creds) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        try:
            reply = health.Check(health_pb2.HealthCheckRequest(service=""), timeout=args.timeout)
        except grpc.RpcError as e:
            print(f"health check failed: {e.code().name}: {e.details()}", file=sys.stderr)
            return 1
    status = health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)
    print(status)
    return 0 if reply.status == health_pb2.HealthCheckResponse.SERVING else 1


if __name__ == "__main__":
    sys.exit(main())
