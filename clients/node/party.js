#!/usr/bin/env node
// A party's client of an Accord node, with @grpc/grpc-js and @grpc/proto-loader: health,
// reflection, Declare, GetCommitment, WatchCommitments, and a refused call whose `accord-reason`
// it reads. The Accord schema is loaded from the node's proto/ at run time (no generated code):
//
//   node party.js --target localhost:7443 --ca acme/tls/ca.pem \
//       --token-file acme/parties/alice.token --candidate acme/bob [--proto ../../proto]
//
// It trusts only the CA `accord-node init` wrote (tls/ca.pem) and presents the party's bearer
// token (parties/<party>.token). The party declares a request to the candidate, reads it back,
// watches it, releases it and sees the change in the watch. Exits 0 when every step went as
// expected.
'use strict';

const fs = require('fs');
const path = require('path');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

function arg(name, fallback) {
  const i = process.argv.indexOf(`--${name}`);
  if (i >= 0 && i + 1 < process.argv.length) return process.argv[i + 1];
  if (fallback !== undefined) return fallback;
  console.error('usage: party.js --target host:port --ca ca.pem --token-file party.token --candidate org/party [--proto dir]');
  process.exit(2);
}

function expect(ok, what) {
  if (!ok) throw new Error(`unexpected ${what}`);
}

async function main() {
  const target = arg('target');
  const ca = fs.readFileSync(arg('ca'));
  const token = fs.readFileSync(arg('token-file'), 'utf8').trim();
  const [organisation, name] = arg('candidate').split('/');
  const protoDir = arg('proto', path.join(__dirname, '..', '..', 'proto'));

  const options = { keepCase: true, longs: String, enums: String, defaults: true, oneofs: true };
  const load = (file, dir) =>
    grpc.loadPackageDefinition(protoLoader.loadSync(file, { ...options, includeDirs: [dir] }));
  const { Health } = load('health.proto', __dirname).grpc.health.v1;
  const { ServerReflection } = load('reflection.proto', __dirname).grpc.reflection.v1;
  const { WorkService } = load('accord/work/v1/work.proto', protoDir).accord.work.v1;

  const creds = grpc.credentials.createSsl(ca);
  const deadline = () => ({ deadline: new Date(Date.now() + 30_000) });
  const auth = new grpc.Metadata();
  auth.set('authorization', `Bearer ${token}`);
  // A unary call as a promise.
  const unary = (client, method, request, metadata = new grpc.Metadata()) =>
    new Promise((resolve, reject) =>
      client[method](request, metadata, deadline(), (err, reply) => (err ? reject(err) : resolve(reply))),
    );

  // 1. Health: open to anyone.
  const health = new Health(target, creds);
  const { status } = await unary(health, 'Check', { service: '' });
  expect(status === 'SERVING', `health: ${status}`);
  console.log('health: SERVING');
  health.close();

  // 2. Reflection (grpc.reflection.v1): the services the node serves.
  const reflection = new ServerReflection(target, creds);
  const services = await new Promise((resolve, reject) => {
    const call = reflection.ServerReflectionInfo(deadline());
    call.on('data', (r) => {
      resolve(r.list_services_response.service.map((s) => s.name));
      call.end();
    });
    call.on('error', reject);
    call.write({ list_services: '' });
  });
  expect(services.includes('accord.work.v1.WorkService'), `reflection: ${services}`);
  console.log(`reflection: ${services.sort().join(' ')}`);
  reflection.close();

  const work = new WorkService(target, creds);
  // 3. Declare a request: the node signs it for the party whose token is presented (the author
  //    and declared_at may be left out; the node fills them in).
  const commitment = `js-${process.hrtime.bigint()}`;
  const request = {
    commitment_id: commitment,
    request: {
      candidate: { organisation, name },
      terms: { title: 'Quarterly report', description: 'From Node.js' },
    },
  };
  const declared = await unary(work, 'Declare', { record: request }, auth);
  expect(declared.outcome.applied, `declare: rejected ${declared.outcome.rejection_code}`);
  console.log(`declare: ${commitment} recorded at sequence ${declared.sequence}, id ${declared.record_id.toString('hex')}`);

  // 4. GetCommitment as that party.
  const c = await unary(work, 'GetCommitment', { commitment_id: commitment }, auth);
  expect(c.state === 'requested', `get: state ${c.state}`);
  console.log(`get: ${commitment} is ${c.state} (${c.category})`);

  // 5. WatchCommitments: each commitment as it is now ("initial"), then every change.
  const watch = work.WatchCommitments({}, auth, deadline());
  const updates = watch[Symbol.asyncIterator]();
  const nextFor = async (id) => {
    for (;;) {
      const { value, done } = await updates.next();
      expect(!done, 'watch: the stream ended');
      if (value.commitment_id === id) return value;
    }
  };
  const first = await nextFor(commitment);
  console.log(`watch: ${commitment} ${first.change} ${first.state}`);
  await unary(work, 'Declare', { record: { commitment_id: commitment, release: {} } }, auth);
  const changed = await nextFor(commitment);
  watch.on('error', () => {}); // the CANCELLED that cancel() causes
  watch.cancel();
  expect(changed.change === 'changed' && changed.state === 'released', `watch: ${changed.change} ${changed.state}`);
  console.log(`watch: ${commitment} ${changed.change} ${changed.state}`);

  // 6. A refused call: a read without a credential. The reason is machine-readable in the
  //    `accord-reason` metadata entry.
  const refused = await unary(work, 'GetCommitment', { commitment_id: commitment }).then(
    () => { throw new Error('unexpected: an unauthenticated read was answered'); },
    (err) => err,
  );
  const [reason] = refused.metadata.get('accord-reason');
  expect(refused.code === grpc.status.UNAUTHENTICATED && reason === 'unauthenticated',
    `refused: ${grpc.status[refused.code]} accord-reason=${reason}`);
  console.log(`refused: ${grpc.status[refused.code]}, accord-reason: ${reason}`);
  work.close();
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err.code !== undefined ? `call failed: ${grpc.status[err.code]}: ${err.details}` : err.message);
    process.exit(1);
  },
);
