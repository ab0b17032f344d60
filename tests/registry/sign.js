// Keyless Sigstore signing by a signer no one here wrote: sigstore-js
// (@sigstore/sign) against a mocked Fulcio, Rekor and CT log (@sigstore/mock,
// in-process through nock), then the bundle attached to the artifact as an OCI
// referrer by @sigstore/oci (referrers API, else the sha256-<hex> tag index),
// as cosign 3 does (specs/BUNDLE_SPEC.md in sigstore/cosign).
//
// What is signed is what `cosign sign` signs: a DSSE envelope of an in-toto
// Statement whose subject is the manifest digest, predicate type
// https://sigstore.dev/cosign/sign/v1 (a JOB may name another predicate type,
// to make an attestation that is not a signature). The Rekor entry is of kind
// `intoto`: the mock's `dsse` entries lack the envelopeHash real Rekor writes,
// which sigstore-rust requires.
//
// Usage: node sign.js OUTDIR JOB...   JOB = IDENTITY|HOST:PORT/REPO|sha256:HEX[|PREDICATE]
// Env: REG_USER, REG_PASS (the registry's basic credential: @sigstore/oci needs
// an auth challenge). Writes OUTDIR/trusted_root.json (the mock's CA, CT log and
// Rekor keys) and prints one line per job: the identity and the attached digest.
const fs = require('fs');
const path = require('path');
const crypto = require('crypto');
const nock = require('nock');
const mock = require('@sigstore/mock');
const { DSSEBundleBuilder, FulcioSigner, RekorWitness } = require('@sigstore/sign');
const { bundleToJSON } = require('@sigstore/bundle');
const { attachArtifactToImage } = require('@sigstore/oci');

const [outDir, ...jobs] = process.argv.slice(2);
const ISSUER = 'https://issuer.example.test';
const FULCIO = 'https://fulcio.sigstore.dev';
const REKOR = 'https://rekor.sigstore.dev';

function persist(base, handler) {
  nock(base).persist().post(handler.path).reply(async (_uri, body) => {
    const r = await handler.fn(typeof body === 'string' ? body : JSON.stringify(body));
    return [r.statusCode, r.response, { 'Content-Type': r.contentType || 'text/plain' }];
  });
}
const b64 = (b) => Buffer.from(b).toString('base64');
const b64url = (o) => Buffer.from(JSON.stringify(o)).toString('base64url');
const keyPair = () => crypto.generateKeyPairSync('ec', { namedCurve: 'prime256v1' });

(async () => {
  const start = new Date(Date.now() - 60_000).toISOString();
  const ctlog = await mock.initializeCTLog(keyPair());
  const ca = await mock.initializeCA(keyPair(), ctlog);
  const tlog = await mock.initializeTLog(REKOR, keyPair());
  persist(FULCIO, mock.fulcioHandler(ca, { strict: true }));
  persist(REKOR, mock.rekorHandler(tlog, { strict: true }));
  nock.enableNetConnect(/127\.0\.0\.1|localhost/);
  const keyId = (spki) => b64(crypto.createHash('sha256').update(spki).digest());
  const trustedRoot = {
    mediaType: 'application/vnd.dev.sigstore.trustedroot+json;version=0.1',
    tlogs: [{ baseUrl: REKOR, hashAlgorithm: 'SHA2_256',
      publicKey: { rawBytes: b64(tlog.publicKey), keyDetails: 'PKIX_ECDSA_P256_SHA_256', validFor: { start } },
      logId: { keyId: keyId(tlog.publicKey) } }],
    certificateAuthorities: [{ subject: { organization: 'sigstore.mock', commonName: 'sigstore' }, uri: FULCIO,
      certChain: { certificates: [{ rawBytes: b64(ca.rootCertificate) }] }, validFor: { start } }],
    ctlogs: [{ baseUrl: 'https://ctfe.sigstore.dev', hashAlgorithm: 'SHA2_256',
      publicKey: { rawBytes: b64(ctlog.publicKey), keyDetails: 'PKIX_ECDSA_P256_SHA_256', validFor: { start } },
      logId: { keyId: b64(ctlog.logID) } }],
    timestampAuthorities: [],
  };
  fs.mkdirSync(outDir, { recursive: true });
  fs.writeFileSync(path.join(outDir, 'trusted_root.json'), JSON.stringify(trustedRoot, null, 2));

  for (const job of jobs) {
    const [identity, image, digest, predicateType = 'https://sigstore.dev/cosign/sign/v1'] = job.split('|');
    const token = `${b64url({ alg: 'none' })}.${b64url({ iss: ISSUER, sub: identity, email: identity,
      email_verified: true, aud: 'sigstore' })}.sig`;
    const signer = new FulcioSigner({ identityProvider: { getToken: async () => token }, fulcioBaseURL: FULCIO });
    const statement = { _type: 'https://in-toto.io/Statement/v1',
      subject: [{ digest: { sha256: digest.replace(/^sha256:/, '') } }], predicateType, predicate: {} };
    const bundle = await new DSSEBundleBuilder({ signer, witnesses: [new RekorWitness({ rekorBaseURL: REKOR, entryType: 'intoto' })] })
      .create({ data: Buffer.from(JSON.stringify(statement)), type: 'application/vnd.in-toto+json' });
    const json = JSON.stringify(bundleToJSON(bundle));
    const attached = await attachArtifactToImage({ imageName: image, imageDigest: digest, artifact: Buffer.from(json),
      mediaType: 'application/vnd.dev.sigstore.bundle.v0.3+json',
      annotations: { 'dev.sigstore.bundle.content': 'dsse-envelope', 'dev.sigstore.bundle.predicateType': predicateType },
      credentials: { username: process.env.REG_USER || '', password: process.env.REG_PASS || '' } });
    console.log(`${identity} ${attached.digest}`);
  }
})().catch((e) => { console.error(e); process.exit(1); });
