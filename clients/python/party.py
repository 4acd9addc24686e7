#!/usr/bin/env python3
"""A party's client of an Accord node, with grpcio: health, reflection, Declare, GetCommitment,
WatchCommitments, and a refused call whose `accord-reason` it reads.

The stubs are generated from the node's proto/ with grpcio-tools (scripts/clients.sh does this):

    python3 -m grpc_tools.protoc -I proto --python_out=stubs --grpc_python_out=stubs \\
        $(find proto/accord -name '*.proto')
    PYTHONPATH=stubs python3 party.py --target 127.0.0.1:7443 --ca acme/tls/ca.pem \\
        --token-file acme/parties/alice.token --candidate acme/bob

It trusts only the CA `accord-node init` wrote (tls/ca.pem) and presents the party's bearer token
(parties/<party>.token). The party declares a request to the candidate, reads it back, watches
it, releases it and sees the change in the watch. Exits 0 when every step went as expected.
"""

import argparse
import sys
import time

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)

from accord.record.v1 import record_pb2
from accord.work.v1 import work_pb2, work_pb2_grpc


def party_ref(text: str) -> record_pb2.PartyRef:
    org, _, name = text.partition("/")
    return record_pb2.PartyRef(organisation=org, name=name)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", required=True, help="host:port of the node's gRPC listener")
    ap.add_argument("--ca", required=True, help="the node's tls/ca.pem")
    ap.add_argument("--token-file", required=True, help="the party's parties/<party>.token")
    ap.add_argument("--candidate", required=True, help="org/party the request is addressed to")
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds per call")
    args = ap.parse_args()

    with open(args.ca, "rb") as f:
        creds = grpc.ssl_channel_credentials(root_certificates=f.read())
    with open(args.token_file) as f:
        auth = [("authorization", "Bearer " + f.read().strip())]
    t = args.timeout

    with grpc.secure_channel(args.target, creds) as channel:
        # 1. Health: open to anyone.
        health = health_pb2_grpc.HealthStub(channel)
        status = health.Check(health_pb2.HealthCheckRequest(), timeout=t).status
        expect(status == health_pb2.HealthCheckResponse.SERVING, f"health: {status}")
        print("health: SERVING")

        # 2. Reflection: the services the node serves.
        services = ProtoReflectionDescriptorDatabase(channel).get_services()
        expect("accord.work.v1.WorkService" in services, f"reflection: {services}")
        print("reflection:", " ".join(sorted(services)))

        work = work_pb2_grpc.WorkServiceStub(channel)
        # 3. Declare a request: the node signs it for the party whose token is presented (the
        #    author and declared_at may be left out; the node fills them in).
        commitment = f"py-{time.time_ns()}"
        request = record_pb2.Record(
            commitment_id=commitment,
            request=record_pb2.Request(
                candidate=party_ref(args.candidate),
                terms=record_pb2.Terms(title="Quarterly report", description="From Python"),
            ),
        )
        r = work.Declare(work_pb2.DeclareRequest(record=request), metadata=auth, timeout=t)
        expect(r.outcome.applied, f"declare: rejected {r.outcome.rejection_code}")
        print(f"declare: {commitment} recorded at sequence {r.sequence}, id {r.record_id.hex()}")

        # 4. GetCommitment as that party.
        c = work.GetCommitment(
            work_pb2.GetCommitmentRequest(commitment_id=commitment), metadata=auth, timeout=t
        )
        expect(c.state == "requested", f"get: state {c.state}")
        print(f"get: {commitment} is {c.state} ({c.category})")

        # 5. WatchCommitments: each commitment as it is now ("initial"), then every change.
        watch = work.WatchCommitments(work_pb2.WatchCommitmentsRequest(), metadata=auth, timeout=t)
        first = next((s for s in watch if s.commitment_id == commitment), None)
        expect(first is not None, "watch: the stream ended")
        print(f"watch: {commitment} {first.change} {first.state}")
        release = record_pb2.Record(commitment_id=commitment, release=record_pb2.Release())
        work.Declare(work_pb2.DeclareRequest(record=release), metadata=auth, timeout=t)
        changed = next((s for s in watch if s.commitment_id == commitment), None)
        watch.cancel()
        expect(changed is not None, "watch: the stream ended")
        expect(
            (changed.change, changed.state) == ("changed", "released"),
            f"watch: {changed.change} {changed.state}",
        )
        print(f"watch: {commitment} {changed.change} {changed.state}")

        # 6. A refused call: a read without a credential. The reason is machine-readable in the
        #    `accord-reason` trailing metadata entry.
        try:
            work.GetCommitment(work_pb2.GetCommitmentRequest(commitment_id=commitment), timeout=t)
            expect(False, "an unauthenticated read was answered")
        except grpc.RpcError as e:
            reason = dict(e.trailing_metadata() or ()).get("accord-reason")
            expect(
                (e.code(), reason) == (grpc.StatusCode.UNAUTHENTICATED, "unauthenticated"),
                f"refused: {e.code().name} accord-reason={reason}",
            )
            print(f"refused: {e.code().name}, accord-reason: {reason}")
    return 0


def expect(ok: bool, what: str) -> None:
    if not ok:
        raise SystemExit(f"unexpected {what}")


if __name__ == "__main__":
    try:
        sys.exit(main())
    except grpc.RpcError as e:
        sys.exit(f"call failed: {e.code().name}: {e.details()}")
