// Key-based Sigstore signing by a signer no one here wrote: what `cosign sign
// --key` makes, a message-signature bundle over the manifest bytes whose
// verification material is a public-key hint, witnessed by a Rekor entry
// (sigstore-js MessageSignatureBundleBuilder with a Signer over a P-256 key
// that pyca/cryptography made, a mocked Rekor through nock), attached to the
// artifact as an OCI referrer by @sigstore/oci.
//
// Usage: node keysign.js OUTDIR KEY.pem MANIFEST-FILE HOST:PORT/REPO sha256:HEX
// Env: REG_USER, REG_PASS. Writes OUTDIR/rekor_root.json (a trusted root with
// only the mock Rekor's key) and prints the attached digest.
const fs = require('fs');
const path = require('path');
const crypto = require('crypto');
const nock = require('nock');
const mock = require('@sigstore/mock');
const { MessageSignatureBundleBuilder, RekorWitness } = require('@sigstore/sign');
const { bundleToJSON } = require('@sigstore/bundle');
const { attachArtifactToImage } = require('@sigstore/oci');

const [outDir, keyFile, manifestFile, image, digest] = process.argv.slice(2);
const REKOR = 'https://rekor.sigstore.dev';

(async () => {
  const start = new Date(Date.now() - 60_000).toISOString();
  const tlog = await mock.initializeTLog(REKOR, crypto.generateKeyPairSync('ec', { namedCurve: 'prime256v1' }));
  const handler = mock.rekorHandler(tlog, { strict: true });
  nock(REKOR).persist().post(handler.path).reply(async (_uri, body) => {
    const r = await handler.fn(typeof body === 'string' ? body : JSON.stringify(body));
    return [r.statusCode, r.response, { 'Content-Type': r.contentType || 'text/plain' }];
  });
  nock.enableNetConnect(/127\.0\.0\.1|localhost/);
  fs.mkdirSync(outDir, { recursive: true });
  fs.writeFileSync(path.join(outDir, 'rekor_root.json'), JSON.stringify({
    mediaType: 'application/vnd.dev.sigstore.trustedroot+json;version=0.1',
    tlogs: [{ baseUrl: REKOR, hashAlgorithm: 'SHA2_256',
      publicKey: { rawBytes: tlog.publicKey.toString('base64'), keyDetails: 'PKIX_ECDSA_P256_SHA_256', validFor: { start } },
      logId: { keyId: crypto.createHash('sha256').update(tlog.publicKey).digest('base64') } }],
    certificateAuthorities: [], ctlogs: [], timestampAuthorities: [] }));
  const priv = crypto.createPrivateKey(fs.readFileSync(keyFile));
  const pub = crypto.createPublicKey(priv).export({ type: 'spki', format: 'pem' });
  const signer = { sign: async (data) => ({ signature: crypto.sign('sha256', data, priv),
    key: { $case: 'publicKey', publicKey: pub, hint: '' } }) };
  const bundle = await new MessageSignatureBundleBuilder({ signer, witnesses: [new RekorWitness({ rekorBaseURL: REKOR })] })
    .create({ data: fs.readFileSync(manifestFile) });
  const json = JSON.stringify(bundleToJSON(bundle));
  const attached = await attachArtifactToImage({ imageName: image, imageDigest: digest, artifact: Buffer.from(json),
    mediaType: 'application/vnd.dev.sigstore.bundle.v0.3+json', annotations: { 'dev.sigstore.bundle.content': 'message-signature' },
    credentials: { username: process.env.REG_USER || '', password: process.env.REG_PASS || '' } });
  console.log(attached.digest);
})().catch((e) => { console.error(e); process.exit(1); });
