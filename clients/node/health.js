#!/usr/bin/env node
// Checks an Accord node's (or witness's) gRPC health over TLS with @grpc/grpc-js (Node's
// OpenSSL). Give it the CA that `accord-node init` (or `accord-witness init`) wrote:
//
//   node health.js --target 127.0.0.1:7443 --ca /path/to/node/tls/ca.pem
//
// Prints the serving status; exits 0 when it is SERVING, 1 otherwise (the error on stderr).
'use strict';

const fs = require('fs');
const path = require('path');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

function arg(name) {
  const i = process.argv.indexOf(`--${name}`);
  if (i < 0 || i + 1 >= process.argv.length) {
    console.error(`usage: health.js --target host:port --ca ca.pem`);
    process.exit(2);
  }
  return process.argv[i + 1];
}

const target = arg('target');
const ca = fs.readFileSync(arg('ca'));
const def = protoLoader.loadSync(path.join(__dirname, 'health.proto'), { enums: String });
const { Health } = grpc.loadPackageDefinition(def).grpc.health.v1;
const client = new Health(target, grpc.credentials.createSsl(ca));
const deadline = new Date(Date.now() + 30_000);

client.Check({ service: '' }, { deadline }, (err, reply) => {
  client.close();
  if (err) {
    console.error(`health check failed: ${grpc.status[err.code]}: ${err.details}`);
    process.exit(1);
  }
  console.log(reply.status);
  process.exit(reply.status === 'SERVING' ? 0 : 1);
});
